"""`RewriteParallelVectorizeUnroll`: turn the root block's `meta_schedule.parallel / vectorize /
unroll_*` marks into loop kinds, block by block (TVM's postprocessor).

For each child block of the marked root (program order):
- parallel: fuse the outer spatial loops while their product stays within the parallel
  extent (the loop that crosses it is included, as in TVM: at least enough jobs), stopping at
  a loop that already has a kind or annotation (a loop shared with an earlier block);
- vectorize: fuse the inner spatial loops whose accesses are contiguous in every buffer (the
  stride of each loop is the extent times the stride of the loop inside it) while the
  product stays within the vectorize extent; vectorization wins loops over parallelization;
- unroll: `pragma_auto_unroll_max_step` / `pragma_unroll_explicit` on the block's outermost
  loop when the block has a reduction and the sampled step is positive.
A parallel or vectorize that the primitive refuses is skipped: the candidate stays valid.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.arith.linear import linear_coefficient
from schedlab.ir import expr as E
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import substitute
from schedlab.ir.stmt import BlockRealize, For, ForKind, IterType
from schedlab.schedule import Schedule
from schedlab.schedule.errors import ScheduleError

from .analysis import const_extent, is_spatial, loop_iter_type
from .parallel_vectorize_unroll import PARALLEL, UNROLL_EXPLICIT, UNROLL_IMPLICIT, VECTORIZE
from .postproc import Postproc

AUTO_UNROLL = "pragma_auto_unroll_max_step"
UNROLL_EXPLICIT_PRAGMA = "pragma_unroll_explicit"
_KEYS = (PARALLEL, VECTORIZE, UNROLL_EXPLICIT, UNROLL_IMPLICIT)


@dataclass(frozen=True)
class _Marks:
    parallel: int = -1
    vectorize: int = -1
    unroll_explicit: int = -1
    unroll_implicit: int = -1


class RewriteParallelVectorizeUnroll(Postproc):
    name = "RewriteParallelVectorizeUnroll"

    def apply(self, sch: Schedule) -> bool:
        while (found := _take_marks(sch)) is not None:
            root, marks = found
            for block in sch.get_child_blocks(root):
                loops = sch.get_loops(block)
                if loops:
                    _rewrite_block(sch, block, loops, marks)
        return True


def _take_marks(sch: Schedule):
    """The first root block with marks, as (handle, marks), the marks removed; or None."""
    for name, func in sch.mod.items():
        if not isinstance(func, PrimFunc) or not isinstance(func.body, BlockRealize):
            continue
        root = func.body.block
        present = [key for key in _KEYS if key in root.annotations]
        if not present:
            continue
        values = {key: int(getattr(root.annotations[key], "value", root.annotations[key]))
                  for key in present}  # fmt: skip
        handle = sch.get_block(root.name_hint, name)
        for key in present:
            sch.unannotate(handle, key)
        return handle, _Marks(*(values.get(key, -1) for key in _KEYS))
    return None


def _rewrite_block(sch: Schedule, block, loops: list, marks: _Marks) -> None:
    n_parallel, n_vector = _plan(sch, block, loops, marks)
    if n_parallel == len(loops) and n_vector == len(loops):
        fused = _fuse(sch, loops)
        _try(sch.vectorize, fused)
        loops = [fused]
    else:
        if n_parallel > 0:
            fused = _fuse(sch, loops[:n_parallel])
            _try(sch.parallel, fused)
            loops = [fused, *loops[n_parallel:]]
        if n_vector > 0:
            fused = _fuse(sch, loops[len(loops) - n_vector :])
            _try(sch.vectorize, fused)
            loops = [*loops[: len(loops) - n_vector], fused]
    step = max(marks.unroll_explicit, marks.unroll_implicit)
    if step > 0 and not is_spatial(sch.get(block)):
        sch.annotate(loops[0], AUTO_UNROLL, step)
        sch.annotate(loops[0], UNROLL_EXPLICIT_PRAGMA, int(marks.unroll_explicit != -1))


def _fuse(sch: Schedule, loops: list):
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _try(primitive, loop) -> None:
    try:
        primitive(loop)
    except ScheduleError:
        pass


def _plan(sch: Schedule, block, loop_rvs: list, marks: _Marks) -> tuple[int, int]:
    """(number of outer loops to parallelize, number of inner loops to vectorize); -1: none."""
    loops = [sch.get(loop) for loop in loop_rvs]
    kinds = [loop_iter_type(loop) for loop in loops]
    n_parallel = n_vector = -1
    if marks.parallel != -1:
        n_parallel = outer_fusible_count(loops, kinds, marks.parallel)
    if marks.vectorize != -1:
        limit = _max_fusible(sch, sch.get(block), loops)
        n_vector = _inner_count(loops, kinds, marks.vectorize, limit)
    if n_parallel != -1 and n_vector != -1:
        n_parallel = min(n_parallel, len(loops) - n_vector)
    return n_parallel, n_vector


def _free(loop: For) -> bool:
    return loop.kind == ForKind.SERIAL and not loop.annotations and const_extent(loop) is not None


def _single_stmt(loop: For) -> bool:
    return isinstance(loop.body, (For, BlockRealize))


def outer_fusible_count(loops: list[For], kinds, max_extent: int) -> int:
    """How many outer loops the parallel rewrite fuses for `max_extent` (-1: none, their
    product is 1). MutateParallel uses it to tell extents that change the plan."""
    count, product = 0, 1
    for loop, kind in zip(loops, kinds):
        if kind != IterType.SPATIAL or not _free(loop):
            break
        count += 1
        product *= const_extent(loop)
        if product > max_extent or not _single_stmt(loop):
            break
    return -1 if product == 1 else count


def _inner_count(loops: list[For], kinds, max_extent: int, max_fusible: int) -> int:
    count, product = 0, 1
    for loop, kind in zip(reversed(loops), reversed(kinds)):
        if count >= max_fusible or kind != IterType.SPATIAL or not _free(loop):
            break
        if not _single_stmt(loop) or product * const_extent(loop) > max_extent:
            break
        product *= const_extent(loop)
        count += 1
    return -1 if product == 1 else count


def _max_fusible(sch: Schedule, block, loops: list[For]) -> int:
    """How many innermost loops every access of the block walks contiguously."""
    realize = sch.state.realize_of(block)
    binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    result = len(loops)
    for access in (*block.reads, *block.writes):
        strides = [_stride(access, loop.loop_var, binding) for loop in loops]
        result = min(result, _contiguous_suffix(strides, loops))
    return result


def _contiguous_suffix(strides: list, loops: list[For]) -> int:
    fusible, previous = 0, -1
    for i in reversed(range(len(strides))):
        if strides[i] == 0:
            fusible += 1
            continue
        if strides[i] is None:
            break
        if previous == -1:
            if strides[i] != 1 and fusible:
                break
        elif strides[i] != strides[previous] * const_extent(loops[previous]):
            break
        fusible += 1
        previous = i
    return fusible


def _stride(access, var: E.Var, binding: dict) -> int | None:
    """The element stride of `var` in the flattened access (0: unused; None: not affine)."""
    pitch = 1
    for dim in reversed(range(len(access.region))):
        index = substitute(access.region[dim].min, binding)
        coefficient = linear_coefficient(index, var)
        if coefficient != 0:
            return None if coefficient is None else coefficient * pitch
        extent = access.buffer.shape[dim]
        if not isinstance(extent, E.IntImm):
            return None
        pitch *= extent.value
    return 0
