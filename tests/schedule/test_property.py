"""Property test: random sequences of schedule primitives on registry workloads at small odd
sizes keep the numerics (interpreter, and compiled C for a subset, against numpy) and replay
from their trace (JSON and Python) to the same IR.

Each step picks a primitive and arguments that are plausible for the current IR (loops of one
block, a block's buffers, ...). A primitive may still refuse with a ScheduleError (a reduction
loop cannot be parallel, a loop chain may have siblings, ...): a refusal must leave the schedule
exactly as it was, and the sequence goes on. Anything else that is raised is a bug.

`make test` runs a fixed, derandomized set of examples; `SCHEDLAB_SOAK=1` (`make soak`) runs
many more, freshly random each time (failures are saved in .hypothesis/ and replayed first).
"""

from __future__ import annotations

import functools
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedlab
from schedlab import workloads
from schedlab.ir.functor import uses_var
from schedlab.ir.stmt import Block, IterType
from schedlab.schedule import Schedule, ScheduleError
from schedlab.schedule.index_map import IndexMap

from .helpers import assert_trace_roundtrip

SOAK = os.environ.get("SCHEDLAB_SOAK", "") not in ("", "0")
EXAMPLES = 3000 if SOAK else 400
COMPILED_EXAMPLES = 300 if SOAK else 24

# registry workloads at small odd sizes (non-divisible extents everywhere)
SIZES = {
    "gemm": {"M": 7, "N": 9, "K": 5},
    "matmul_bias_relu": {"M": 5, "N": 7, "K": 3},
    "batch_matmul": {"batch": 3, "M": 5, "N": 3, "K": 7},
    "gemv": {"M": 9, "K": 7},
    "softmax": {"M": 5, "N": 7},
    "layer_norm": {"M": 3, "N": 7},
    "reduce_sum": {"M": 5, "N": 9},
    "transpose": {"M": 5, "N": 7},
    "conv2d_nchw": {"N": 1, "CI": 3, "H": 7, "W": 5, "CO": 3, "kernel": 3},
    "depthwise_conv2d_nchw": {"N": 1, "C": 3, "H": 5, "W": 7, "kernel": 3},
    "max_pool2d_nchw": {"N": 1, "C": 3, "H": 7, "W": 5, "kernel": 2, "stride": 2},
}
SCOPES = ("global", "local")
ANNOTATIONS = (
    ("pragma_auto_unroll_max_step", 16), ("pragma_unroll_explicit", 1), ("schedlab.note", "x"),
)  # fmt: skip


@functools.cache
def workload(name: str):
    """The function (one object per name, so the interpreter's translation cache works)."""
    return workloads.get(name, **SIZES[name])


class Skip(Exception):
    """The current IR offers no plausible arguments for this move (e.g. a block without loops)."""


# -- picking arguments -------------------------------------------------------------------------
def _block_names(sch: Schedule, reduction: bool | None = None) -> list[str]:
    """Names of the blocks (only reduction blocks, or only the others, when asked)."""
    state = sch.state
    found = [state.node(uid) for uid in state.uids()]
    blocks = [n for n in found if isinstance(n, Block) and n.name_hint != "root"]
    if reduction is not None:
        blocks = [b for b in blocks if (b.init is not None) == reduction]
    return sorted({b.name_hint for b in blocks})


def pick_block(sch: Schedule, draw, reduction: bool | None = None):
    names = _block_names(sch, reduction)
    if not names:
        raise Skip
    return sch.get_block(draw(st.sampled_from(names)))  # a name used twice: a refusal


def pick_loops(sch: Schedule, draw, block=None) -> list:
    block = block if block is not None else pick_block(sch, draw)
    return sch.get_loops(block)


def pick_loop(sch: Schedule, draw, block=None):
    loops = pick_loops(sch, draw, block)
    if not loops:
        raise Skip
    return loops[draw(st.integers(0, len(loops) - 1))]


def _extent(sch: Schedule, loop) -> int | None:
    extent = sch.get(loop).extent
    return getattr(extent, "value", None)


# -- moves: one primitive each, with arguments drawn for the current IR ------------------------
def move_split(sch, draw):
    loop = pick_loop(sch, draw)
    extent = _extent(sch, loop)
    if extent is not None and draw(st.booleans()):
        n = draw(st.integers(2, 3))
        factors = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=draw(st.integers(1, 8)))
    else:
        factor = draw(st.integers(1, 6))
        factors = draw(st.sampled_from([[None, factor], [factor, None], [2, None, factor]]))
    sch.split(loop, factors)


def move_fuse(sch, draw):
    loops = pick_loops(sch, draw)
    if len(loops) < 2:
        raise Skip
    start = draw(st.integers(0, len(loops) - 2))
    count = draw(st.integers(2, len(loops) - start))
    sch.fuse(*loops[start : start + count])


def move_reorder(sch, draw):
    loops = pick_loops(sch, draw)
    if len(loops) < 2:
        raise Skip
    chosen = draw(st.lists(st.integers(0, len(loops) - 1), min_size=2, max_size=4, unique=True))
    sch.reorder(*(loops[i] for i in chosen))


def move_kind(sch, draw):
    loop = pick_loop(sch, draw)
    method = draw(st.sampled_from(["parallel", "vectorize", "unroll"]))
    getattr(sch, method)(loop)


def move_annotate(sch, draw):
    key, value = draw(st.sampled_from(ANNOTATIONS))
    target = pick_loop(sch, draw) if draw(st.booleans()) else pick_block(sch, draw)
    sch.annotate(target, key, value)


def move_cache(sch, draw):
    block = pick_block(sch, draw)
    node = sch.get(block)
    reads = draw(st.booleans())
    regions = node.reads if reads else node.writes
    if not regions:
        raise Skip
    index = draw(st.integers(0, len(regions) - 1))
    scope = draw(st.sampled_from(SCOPES))
    (sch.cache_read if reads else sch.cache_write)(block, index, scope)


def move_compute_at(sch, draw):
    """A producer under a loop of one of its consumers, or a consumer under a producer's loop."""
    block = pick_block(sch, draw)
    reverse = draw(st.booleans())
    others = sch.get_producers(block) if reverse else sch.get_consumers(block)
    if not others:
        raise Skip
    loop = pick_loop(sch, draw, others[draw(st.integers(0, len(others) - 1))])
    preserve = draw(st.booleans())
    (sch.reverse_compute_at if reverse else sch.compute_at)(block, loop, preserve)


def move_inline(sch, draw):
    block = pick_block(sch, draw, reduction=False)
    (sch.reverse_compute_inline if draw(st.booleans()) else sch.compute_inline)(block)


def move_decompose_reduction(sch, draw):
    block = pick_block(sch, draw, reduction=True)
    sch.decompose_reduction(block, pick_loop(sch, draw, block))


def move_rfactor(sch, draw):
    """A loop that only reduction iter vars of a reduction block use."""
    block = pick_block(sch, draw, reduction=True)
    loops = [loop for loop in sch.get_loops(block) if _reduces_only(sch, block, loop)]
    if not loops:
        raise Skip
    sch.rfactor(loops[draw(st.integers(0, len(loops) - 1))], draw(st.integers(0, 1)))


def _reduces_only(sch: Schedule, block, loop) -> bool:
    node, var = sch.get(block), sch.get(loop).loop_var
    realize = sch.state.realize_of(node)
    users = [
        iv
        for iv, value in zip(node.iter_vars, realize.iter_values)
        if uses_var(value, lambda v: v is var)
    ]
    return bool(users) and all(iv.iter_type == IterType.REDUCE for iv in users)


def move_add_unit_loop(sch, draw):
    target = pick_loop(sch, draw) if draw(st.booleans()) else pick_block(sch, draw)
    sch.add_unit_loop(target)


def move_loop_partition(sch, draw):
    loop = pick_loop(sch, draw)
    cut = draw(st.integers(1, 4))
    sch.loop_partition(loop, draw(st.sampled_from([[cut], [cut, None], [None, cut]])))


def move_merge(sch, draw):
    """The outermost loops of two blocks (siblings with equal extents merge)."""
    first, second = pick_loops(sch, draw), pick_loops(sch, draw)
    if not first or not second:
        raise Skip
    sch.merge(first[0], second[0])


def move_unannotate(sch, draw):
    """Remove an annotation a previous step set (skip when there is none)."""
    annotated = [inst for inst in sch.trace.insts if inst.kind == "Annotate"]
    if not annotated:
        raise Skip
    inst = annotated[draw(st.integers(0, len(annotated) - 1))]
    target = inst.inputs[0]
    sch.get(target)  # a handle whose node is gone: a refusal
    sch.unannotate(target, inst.attrs[0])


def _intermediate(sch, block, draw, side: str | None = None):
    """(side, index, buffer) of one buffer the block accesses that the function allocates
    (re-laying out or re-scoping a parameter would change the function's signature)."""
    node = sch.get(block)
    params = set(map(id, sch.func.buffer_map.values()))
    options = [(kind, i, region.buffer)
               for kind, regions in (("read", node.reads), ("write", node.writes))
               for i, region in enumerate(regions)
               if id(region.buffer) not in params and kind == (side or kind)]  # fmt: skip
    if not options:
        raise Skip
    return options[draw(st.integers(0, len(options) - 1))]


def move_buffer(sch, draw):
    """reindex, set_scope or storage_align of one intermediate buffer."""
    block = pick_block(sch, draw)
    which = draw(st.sampled_from(["reindex", "set_scope", "storage_align"]))
    if which == "reindex":
        side, index, _ = _intermediate(sch, block, draw)
        sch.reindex(block, (side, index))
        return
    _, _, buffer = _intermediate(sch, block, draw, "write")
    if which == "set_scope":
        sch.set_scope(block, buffer.name, draw(st.sampled_from(SCOPES)))
    else:
        axis = draw(st.integers(-len(buffer.shape), len(buffer.shape) - 1))
        sch.storage_align(
            block, buffer.name, axis, draw(st.integers(1, 8)), draw(st.integers(0, 3))
        )


def move_layout(sch, draw):
    """transform_layout of an intermediate buffer (axes reversed, or the last one split with
    padding), transform_block_layout (iter vars reversed) or pad_einsum."""
    block = pick_block(sch, draw)
    which = draw(st.sampled_from(["buffer", "block", "pad_einsum"]))
    if which == "block":
        ndim = len(sch.get(block).iter_vars)
        if not ndim:
            raise Skip
        sch.transform_block_layout(block, IndexMap.from_func(_reversed, ndim=ndim))
    elif which == "pad_einsum":
        padding = draw(st.lists(st.integers(1, 4), min_size=len(sch.get(block).iter_vars),
                                max_size=len(sch.get(block).iter_vars)))  # fmt: skip
        sch.pad_einsum(block, padding)
    else:
        side, index, buffer = _intermediate(sch, block, draw)
        if not buffer.shape:
            raise Skip
        factor = draw(st.integers(2, 4))
        fn = (
            _reversed
            if draw(st.booleans())
            else lambda *ix: (*ix[:-1], ix[-1] // factor, ix[-1] % factor)
        )
        index_map = IndexMap.from_func(fn, ndim=len(buffer.shape))
        sch.transform_layout(
            block, (side, index), index_map, pad_value=draw(st.sampled_from([None, 0.0]))
        )


def _reversed(*indices):
    return tuple(reversed(indices))


def move_blockize(sch, draw):
    sch.blockize(pick_loop(sch, draw))


def move_sampled_compute_at(sch, draw):
    block = pick_block(sch, draw)
    sch.compute_at(block, sch.sample_compute_location(block))


# each move and the primitives it uses
MOVES = {
    move_split: ("split", "sample_perfect_tile"),
    move_fuse: ("fuse",),
    move_reorder: ("reorder",),
    move_kind: ("parallel", "vectorize", "unroll"),
    move_annotate: ("annotate",),
    move_cache: ("cache_read", "cache_write"),
    move_compute_at: ("compute_at", "reverse_compute_at"),
    move_inline: ("compute_inline", "reverse_compute_inline"),
    move_decompose_reduction: ("decompose_reduction",),
    move_rfactor: ("rfactor",),
    move_add_unit_loop: ("add_unit_loop",),
    move_loop_partition: ("loop_partition",),
    move_merge: ("merge",),
    move_unannotate: ("unannotate",),
    move_buffer: ("reindex", "set_scope", "storage_align"),
    move_layout: ("transform_layout", "transform_block_layout", "pad_einsum"),
    move_blockize: ("blockize",),
    move_sampled_compute_at: ("sample_compute_location", "compute_at"),
}


def available_moves() -> list:
    """Moves whose primitives are registered (the families land one by one)."""
    return [move for move, methods in MOVES.items() if all(hasattr(Schedule, m) for m in methods)]


# -- the property ------------------------------------------------------------------------------
def apply_random_moves(data, name: str) -> Schedule:
    func, _ = workload(name)
    sch = Schedule(func, seed=data.draw(st.integers(0, 2**16), label="seed"), debug=True)
    for _ in range(data.draw(st.integers(1, 6), label="steps")):
        move = data.draw(st.sampled_from(available_moves()), label="move")
        mod = sch.mod
        try:
            move(sch, data.draw)
        except Skip:
            pass
        except ScheduleError:
            assert sch.mod is mod, f"{move.__name__}: a refused primitive changed the IR"
        except Exception as err:  # a bug: say what led to it
            err.add_note(f"{move.__name__} failed on {name} {SIZES[name]} after:\n{sch.trace}")
            raise
    return sch


def check_numerics(sch: Schedule, name: str, compiled: bool) -> None:
    func, reference = workload(name)
    args = workloads.make_args(func, seed=1)
    num_outputs = workloads.spec(name).num_outputs
    inputs = [a.copy() for a in args[: len(args) - num_outputs]]
    expected = reference(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    runs = {"interpreter": lambda a: schedlab.interpret(sch.func, *a)}
    if compiled:
        kernel = schedlab.build(sch.func, target="cpu")
        runs["compiled C"] = lambda a: kernel(*a)
    for how, run in runs.items():
        got = [a.copy() for a in args]
        run(got)
        for out, want in zip(got[len(args) - num_outputs :], expected):
            np.testing.assert_allclose(
                out, want, rtol=1e-4, atol=1e-4,
                err_msg=f"{how} differs from numpy after:\n{sch.trace}",
            )  # fmt: skip


def _settings(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=not SOAK,
        database=None if not SOAK else settings.default.database,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )


def check(sch: Schedule, name: str, compiled: bool) -> None:
    """Numerics (and, without compiling, the trace round trip); a failure shows the trace."""
    try:
        check_numerics(sch, name, compiled)
        if not compiled:
            assert_trace_roundtrip(sch, workload(name)[0])
    except BaseException as err:
        err.add_note(f"workload {name} {SIZES[name]}, schedule:\n{sch.trace}")
        raise


@_settings(EXAMPLES)
@given(data=st.data(), name=st.sampled_from(sorted(SIZES)))
def test_random_schedules_keep_numerics_and_replay(data, name):
    check(apply_random_moves(data, name), name, compiled=False)


@_settings(COMPILED_EXAMPLES)
@given(data=st.data(), name=st.sampled_from(sorted(SIZES)))
def test_random_schedules_compile_to_the_same_numerics(data, name):
    check(apply_random_moves(data, name), name, compiled=True)


def test_the_moves_cover_the_primitives():
    """Each move's primitives exist: a family that disappears must not go unnoticed."""
    missing = [m for methods in MOVES.values() for m in methods if not hasattr(Schedule, m)]
    assert not missing, f"primitives used by the property test are missing: {missing}"
