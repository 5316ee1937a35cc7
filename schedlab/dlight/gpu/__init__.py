"""Default GPU schedule rules (TVM's dlight.gpu), tried in this order by `default_rules()`:
`Matmul` (GEMM-like reductions: shared-memory tiles), `Elementwise` (injective blocks),
`Fallback` (every other block: spatial loops fused and bound to blocks and threads)."""

from .elementwise import Elementwise
from .fallback import Fallback
from .matmul import Matmul


def default_rules() -> tuple:
    """Fresh instances of the GPU rules in first-match order, the fallback last."""
    return (Matmul(), Elementwise(), Fallback())


__all__ = ["Elementwise", "Fallback", "Matmul", "default_rules"]
