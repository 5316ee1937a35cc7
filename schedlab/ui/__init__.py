"""`schedlab.ui`: the explorer. `model` is its front-end-free state (no UI library imported
here); the Panel app and JupyterLab widgets render from it."""

from .model import MAIN_BRANCH, ExplorerModel
from .primitives import ArgSpec, PrimitiveSpec
from .results import (
    ApplyResult,
    Event,
    GeneratedCode,
    LatencyPoint,
    Measurement,
    PredictionResult,
    Selection,
    StepInfo,
)  # fmt: skip
from .worker import MeasureWorker, WorkerOutcome

__all__ = [
    "MAIN_BRANCH", "ApplyResult", "ArgSpec", "Event", "ExplorerModel", "GeneratedCode",
    "LatencyPoint", "Measurement", "MeasureWorker", "PredictionResult", "PrimitiveSpec",
    "Selection", "StepInfo", "WorkerOutcome",
]  # fmt: skip
