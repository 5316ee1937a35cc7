"""schedlab.cost: the analytical latency model (`predict`) and its benchmark against
measurements (`benchmark.run_cost_bench`, the `schedlab bench-cost` command).

`predict` reads the scheduled TensorIR form (blocks under loops, before lowering): block
indices are still multi-dimensional, so footprints are per-dimension boxes, and no lowering
pass runs (a prediction takes well under a millisecond for gemm 1024)."""

from .predict import NestPrediction, Prediction, predict
from .spearman import spearman

__all__ = ["predict", "Prediction", "NestPrediction", "spearman"]
