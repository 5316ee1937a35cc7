"""The opencl graph pipeline: the shared GPU pipeline (schedlab/backend/gpu/pipeline.py)."""

from ..gpu.pipeline import *  # noqa: F403 - the shared GPU pipeline, re-exported
from ..gpu.pipeline import __all__  # noqa: F401
