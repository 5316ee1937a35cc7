"""`schedlab.arith`: integer analysis of the loop IR (as `tvm.arith`): the canonical simplifier,
constant integer bounds, symbolic interval sets, affine iter-map detection and buffer region
inference."""

from .analyzer import Analyzer
from .bound import ConstIntBound, const_int_bound
from .evaluate import EvaluationError, evaluate
from .int_set import IntervalSet, eval_set
from .iter_map import IterMapResult, detect_iter_map, is_affine_binding, iter_map_simplify
from .iter_map_expr import IterMark, IterSplitExpr, IterSumExpr
from .region import (
    block_access_regions,
    get_block_read_write_region,
    region_covers,
    region_union,
    relax_region,
)
from .stmt_simplify import StmtSimplifier, simplify_prim_func, simplify_stmt

__all__ = [
    "Analyzer", "ConstIntBound", "const_int_bound", "EvaluationError", "evaluate", "IntervalSet",
    "eval_set", "block_access_regions", "get_block_read_write_region", "region_covers",
    "region_union", "relax_region", "IterMapResult", "detect_iter_map", "is_affine_binding",
    "iter_map_simplify", "IterMark", "IterSplitExpr", "IterSumExpr", "StmtSimplifier",
    "simplify_prim_func", "simplify_stmt",
]  # fmt: skip
