"""Default CPU schedule rules, tried in this order by `default_rules()`:
`Matmul` (GEMM-like reductions), `BlockedConv` (convolutions in NCHW{b}c), `Conv` (direct
convolutions), `Reduction` (other reductions), `Elementwise` (injective blocks), `Fallback`
(parallel outer spatial loop)."""

from ..registry import with_registered
from .conv import Conv
from .conv_blocked import BlockedConv
from .elementwise import Elementwise
from .fallback import Fallback
from .matmul import Matmul
from .reduction import Reduction


def default_rules() -> tuple:
    """Fresh instances of the CPU rules in first-match order, the fallback last; rules that
    installed extensions register (`dlight.register_rule`) come before the rule they name."""
    rules = (Matmul(), BlockedConv(), Conv(), Reduction(), Elementwise(), Fallback())
    return with_registered("cpu", rules)


__all__ = ["BlockedConv", "Conv", "Elementwise", "Fallback", "Matmul", "Reduction", "default_rules"]
