"""Default GPU schedule rules (TVM's dlight.gpu), tried in this order by `default_rules()`:
`GEMV` (matrix-vector and low-batch GEMM: a tile of outputs per block, threads split K),
`MatmulTensorization` (fp16 GEMM / batch matmul in whole tiles on CUDA sm_80+: ldmatrix and
mma.sync tensor cores; declines everything else), `Matmul` (GEMM-like reductions:
shared-memory tiles), `GeneralReduction` (a chain of row reductions and elementwise stages,
softmax, layer_norm, rms_norm, fused into one kernel with one thread block per row),
`Reduction` (one thread block per output, threads cooperating: a lone row sum or max),
`Transpose` (shared-memory tile), `Elementwise` (injective blocks),
`Fallback` (every other block: spatial loops fused and bound to blocks and threads).

Rules whose threads split a reduction leave the combining of the threads' parts to the GPU
lowering (schedlab.transform.cross_thread_reduction): warp shuffles on CUDA/HIP, a
shared-memory tree on OpenCL."""

from ..registry import with_registered
from .elementwise import Elementwise
from .fallback import Fallback
from .general_reduction import GeneralReduction
from .matmul import Matmul
from .matmul_tensorization import MatmulTensorization
from .reduction import GEMV, Reduction
from .transpose import Transpose

LowBatchGEMV = GEMV  # TVM has two classes; here one rule takes batches of 1 to 4 rows


def default_rules() -> tuple:
    """Fresh instances of the GPU rules in first-match order, the fallback last; rules that
    installed extensions register (`dlight.register_rule`) come before the rule they name."""
    return with_registered(
        "gpu",
        (
            GEMV(),
            MatmulTensorization(),
            Matmul(),
            GeneralReduction(),
            Reduction(),
            Transpose(),
            Elementwise(),
            Fallback(),
        ),
    )


__all__ = ["Elementwise", "Fallback", "GEMV", "GeneralReduction", "LowBatchGEMV", "Matmul",
           "MatmulTensorization", "Reduction", "Transpose", "default_rules"]  # fmt: skip
