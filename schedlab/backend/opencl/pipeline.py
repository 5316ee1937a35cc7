"""The opencl graph pipeline: the shared GPU pipeline (schedlab/backend/gpu/pipeline.py)."""

from ..gpu.pipeline import (
    dataflow_lower_passes,
    default_schedule,
    finalize_passes,
    legalize_passes,
    library_dispatch_passes,
)

__all__ = [
    "library_dispatch_passes", "legalize_passes", "default_schedule", "dataflow_lower_passes",
    "finalize_passes",
]  # fmt: skip
