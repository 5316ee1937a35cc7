"""Affine bindings: are a block's iter values an affine map of the loops above it?

TVM keeps this fact per block (`affine_binding`) and checks it before reorder, parallel,
vectorize, blockize, ... Here it is computed on demand from a ScheduleState with
`schedlab.arith.detect_iter_map`:

- surjective ("affine", TVM's IsAffineBlockBinding): every iter value is an affine combination of
  non-overlapping splits of the loops (`vi = i_0 * 16 + i_1`, `vj = f % 16`);
- bijective: besides, every loop of non-unit extent is used and exactly covered, so each block
  instance runs exactly once (`vi = i // 2` over a loop `i` of 8 is surjective, not bijective).

`top` restricts the loops to those from `top` down to the block (TVM's partial affine binding):
loops above `top` are treated as symbols.
"""

from __future__ import annotations

from schedlab.arith import IterMapResult, detect_iter_map
from schedlab.ir.expr import Range, Var
from schedlab.ir.stmt import Block, For

from ..errors import NonAffineBindingError
from ..state import ScheduleState


def loop_domains(state: ScheduleState, block: Block, top: For | None = None) -> dict[Var, Range]:
    """{loop var: range} of the loops between the block's scope (or `top`, included) and the
    block, outermost first."""
    loops = state.loops_above(block)
    if top is not None:
        uids = [loop.uid for loop in loops]
        if top.uid not in uids:
            raise ValueError(f"loop_domains: {top.loop_var.name} is not above {block.name_hint}")
        loops = loops[uids.index(top.uid) :]
    return {loop.loop_var: Range(loop.min, loop.extent) for loop in loops}


def binding_iter_map(state: ScheduleState, block: Block, check_level: str = "surjective",
                     top: For | None = None) -> IterMapResult:  # fmt: skip
    """The iter map detected for the block's iter values over the loops above it (falsy with
    `errors` saying why when they are not affine at `check_level`)."""
    realize = state.realize_of(block)
    if not realize.iter_values:
        return IterMapResult([], [])
    domains = loop_domains(state, block, top)
    return detect_iter_map(realize.iter_values, domains, realize.predicate, check_level)


def is_affine_binding(state: ScheduleState, block: Block, top: For | None = None) -> bool:
    """TVM's affine-binding flag: the iter values are a surjective affine map of the loops (with
    `top`: affine in the whole scope, or at least in the loops from `top` down)."""
    if binding_iter_map(state, block, "surjective"):
        return True
    return top is not None and bool(binding_iter_map(state, block, "surjective", top))


def is_bijective_binding(state: ScheduleState, block: Block, top: For | None = None) -> bool:
    """The iter values are a one-to-one affine map of the loops (with `top`: of all the loops in
    the scope, or at least of those from `top` down): every block instance runs exactly once."""
    if binding_iter_map(state, block, "bijective"):
        return True
    return top is not None and bool(binding_iter_map(state, block, "bijective", top))


def check_affine_binding(state: ScheduleState, block: Block, top: For | None = None,
                         bijective: bool = False, why: str = "") -> None:  # fmt: skip
    """Raise NonAffineBindingError naming the block and what is not affine about its iter
    values. `why` says which primitive needs it and why (added to the message)."""
    holds = is_bijective_binding if bijective else is_affine_binding
    if holds(state, block, top):
        return
    result = binding_iter_map(state, block, "bijective" if bijective else "surjective", top)
    kind = "a one-to-one affine" if bijective else "an affine"
    values = ", ".join(
        f"{iv.var.name} = {value}"
        for iv, value in zip(block.iter_vars, state.realize_of(block).iter_values)
    )
    detail = "; ".join(result.errors) or "no iter map was found"
    raise NonAffineBindingError(
        f"block {block.name_hint!r} must have {kind} binding of the loops above it{why}, but its "
        f"iter values ({values}) are not: {detail}",
        [block],
    )
