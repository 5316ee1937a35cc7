"""Simplify (TVM: `tir.transform.Simplify`, StmtSimplify): schedlab.arith's statement simplifier
over the whole function.

Flattening leaves index arithmetic like `(i * 23 + j) - (i * 23)`, compaction leaves
`k - k`, lowered inits leave `if vk == 0` where the binding made it `0 == 0`. The simplifier
binds each loop var to its range while descending, so it folds constants, canonicalises affine
index expressions and removes branches whose condition it can prove (`if True`, `if False`).
"""

from __future__ import annotations

from schedlab.arith import simplify_prim_func
from schedlab.ir.function import PrimFunc
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import with_doc


def simplify(func: PrimFunc) -> PrimFunc:
    """`func` with every expression simplified (loop ranges known while descending)."""
    return simplify_prim_func(func)


def Simplify() -> Pass:  # noqa: N802 - TVM's name
    """The pass form of `simplify`."""
    return with_doc(prim_func_pass(simplify, name="Simplify"), __doc__)
