"""cache_read / cache_write / reindex on unusual IR: blocks inside another block's init (what
blockize of a reduction makes), blocks under an `if`, nested blocks, loops inside a block,
predicates. Each case is either supported (expected IR, numerics, trace round trip) or refused
with a ScheduleError that leaves the schedule as it was; none may crash or miscompile."""

import pytest

from schedlab import workloads
from schedlab.ir.stmt import Block
from schedlab.schedule import Schedule, ScheduleError
from schedlab.schedule.analysis.buffers import BlockInInitError
from schedlab.schedule.primitives.cache import CacheLocationError, CacheWriteError
from schedlab.schedule.primitives.cache_reindex import ReindexError
from schedlab.script import from_source

from .helpers import (
    assert_error_keeps_state,
    assert_same_numerics,
    assert_script_equal,
    assert_trace_roundtrip,
)


def _func(text: str):
    func = from_source(text)
    return func if not hasattr(func, "functions") else func[next(iter(func))]


def _batch_matmul():
    return workloads.get("batch_matmul", batch=3, M=5, N=3, K=7)[0]


def _blockized(sch: Schedule, loop_index: int = 1):
    """blockize batch_matmul's C at its loop `loop_index`: the init's loop nest becomes a block
    C_init inside the init of the new outer block C_o."""
    return sch.blockize(sch.get_loops(sch.get_block("C"))[loop_index])


# -- blocks inside an init ------------------------------------------------------------------
def test_cache_write_of_a_block_in_an_init_is_refused():
    """The property test's find: this used to raise StopIteration."""
    sch = Schedule(_batch_matmul())
    _blockized(sch)
    init = sch.get_block("C_init")
    err = assert_error_keeps_state(sch, lambda: sch.cache_write(init, 0, "local"), BlockInInitError)
    assert "'C_init'" in err.reason and "'C_o'" in err.reason
    assert "decompose_reduction" in err.reason


INIT_NEST = """
@T.prim_func
def main(A: T.Buffer((4, 5), "float32"), D: T.Buffer((4,), "float32"),
         C: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 5):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                with T.block("C_init"):
                    C[vi] = D[vi]
            C[vi] = C[vi] + A[vi, vk]
"""

IN_INIT_CALLS = {
    "cache_read": lambda sch, b: sch.cache_read(b, "D", "local"),
    "cache_write": lambda sch, b: sch.cache_write(b, "C", "local"),
    "reindex read": lambda sch, b: sch.reindex(b, "D"),
    "reindex write": lambda sch, b: sch.reindex(b, ("write", 0)),
}


@pytest.mark.parametrize("name", IN_INIT_CALLS)
def test_stages_for_a_block_in_an_init_are_refused(name):
    sch = Schedule(_func(INIT_NEST))
    block = sch.get_block("C_init")
    call = IN_INIT_CALLS[name]
    assert_error_keeps_state(sch, lambda: call(sch, block), BlockInInitError)


def test_cache_write_of_the_init_after_decompose_reduction():
    """The way the refusal points to: decompose_reduction moves the init into a block of its
    own, whose scope is that block; the cache then holds one batch."""
    func = _batch_matmul()
    sch = Schedule(func, debug=True)
    outer = _blockized(sch)
    sch.decompose_reduction(outer, sch.get_loops(outer)[0])
    sch.cache_write(sch.get_block("C_init"), 0, "local")
    init_block = sch.get(sch.get_block("C_o_init"))
    assert [int(s) for s in init_block.alloc_buffers[0].shape] == [1, 5, 3]
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


CACHE_MOVES = {
    "cache_read": lambda sch, b, i: sch.cache_read(b, i, "local"),
    "cache_write": lambda sch, b, i: sch.cache_write(b, i, "local"),
    "reindex read": lambda sch, b, i: sch.reindex(b, ("read", i)),
    "reindex write": lambda sch, b, i: sch.reindex(b, ("write", i)),
}


def _moves(sch: Schedule):
    nodes = [sch.state.node(uid) for uid in sch.state.uids()]
    blocks = [n for n in nodes if isinstance(n, Block) and n.name_hint != "root"]
    for block in sorted(blocks, key=lambda b: b.name_hint):
        for name, move in CACHE_MOVES.items():
            regions = block.writes if name.endswith("write") else block.reads
            for index in range(len(regions)):
                yield block.name_hint, name, index, move


PREPARE = {
    "blockize": lambda sch: _blockized(sch, 1),
    "blockize at k": lambda sch: _blockized(sch, 3),
    "decompose": lambda sch: sch.decompose_reduction(
        _blockized(sch, 1), sch.get_loops(sch.get_block("C_o"))[0]
    ),
}


@pytest.mark.parametrize("prepare", PREPARE)
def test_every_cache_move_on_a_blockized_reduction_is_right_or_refused(prepare):
    func = _batch_matmul()
    base = Schedule(func)
    PREPARE[prepare](base)
    done = 0
    for block_name, name, index, move in list(_moves(base)):
        sch = base.copy()
        block = sch.get_block(block_name)
        mod = sch.mod
        try:
            move(sch, block, index)
        except ScheduleError:
            assert sch.mod is mod, f"{name} of {block_name} changed the IR and failed"
            continue
        assert_same_numerics(func, sch.func, compiled=False)
        done += 1
    assert done > 0


# -- blocks under a condition -----------------------------------------------------------------
UNDER_IF = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        if i > 2:
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + T.float32(1)
"""


def test_cache_write_refuses_a_writer_under_an_if():
    """The copy back would run for every i and overwrite C[0:3] with garbage."""
    sch = Schedule(_func(UNDER_IF))
    block = sch.get_block("C")
    err = assert_error_keeps_state(sch, lambda: sch.cache_write(block, 0, "local"), CacheWriteError)
    assert "condition" in err.reason and "i > 2" in err.reason


def test_cache_read_for_a_reader_under_an_if():
    func = _func(UNDER_IF)
    sch = Schedule(func)
    sch.cache_read(sch.get_block("C"), 0, "local")
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


SHARED_IF = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        if i < 5:
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + T.float32(1)
"""


def test_no_cache_stage_between_blocks_sharing_a_condition():
    sch = Schedule(_func(SHARED_IF))
    block = sch.get_block("C")
    err = assert_error_keeps_state(
        sch, lambda: sch.cache_read(block, 0, "local"), CacheLocationError
    )
    assert "share a condition" in err.reason


BODY_IF = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            if vi % 2 == 0:
                B[vi] = A[vi] * T.float32(2)
"""


def test_conditional_stores_cannot_be_copied_back():
    sch = Schedule(_func(BODY_IF))
    block = sch.get_block("B")
    err = assert_error_keeps_state(sch, lambda: sch.cache_write(block, 0, "local"), CacheWriteError)
    assert "conditional" in err.reason
    err = assert_error_keeps_state(sch, lambda: sch.reindex(block, ("write", 0)), ReindexError)
    assert "condition" in err.reason


SCOPE_IF = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    if A[0] > T.float32(0):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] + T.float32(1)
"""


def test_reindex_puts_the_stage_under_the_same_condition():
    func = _func(SCOPE_IF)
    sch = Schedule(func)
    sch.reindex(sch.get_block("C"), ("read", 0))
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    B_reindex = T.alloc_buffer((8,), "float32")
    if A[0] > T.float32(0):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
        for ax0 in range(8):
            with T.block("B_reindex"):
                v0 = T.axis.spatial(8, ax0)
                B_reindex[v0] = B[v0]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B_reindex[vi] + T.float32(1)
""",
    )
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)
    sch = Schedule(func)
    sch.reindex(sch.get_block("C"), ("write", 0))
    assert_same_numerics(func, sch.func)


# -- which elements a writer really writes ----------------------------------------------------
OVER_DECLARED = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            T.reads(A[vi])
            T.writes(C[vi:vi + 2])
            C[vi] = A[vi] * T.float32(2)
"""

SHORT_PREDICATE = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            T.where(i < 5)
            vi = T.axis.spatial(8, i)
            C[vi] = A[vi] * T.float32(2)
"""

OUTER_PREDICATE = """
@T.prim_func
def main(A: T.Buffer((6,), "float32"), B: T.Buffer((6,), "float32"),
         C: T.Buffer((6,), "float32")):
    for i0 in range(3):
        for i1 in range(2):
            with T.block("B"):
                T.where(i0 < 2)
                vi = T.axis.spatial(6, i0 * 2 + i1)
                B[vi] = A[vi] * T.float32(2)
        for i2 in range(2):
            with T.block("C"):
                vi = T.axis.spatial(6, i0 * 2 + i2)
                C[vi] = B[vi] + T.float32(1)
"""

NESTED_STRIDED = """
@T.prim_func
def main(A: T.Buffer((2, 8), "float32"), C: T.Buffer((2, 8), "float32")):
    for b in range(2):
        with T.block("outer"):
            vb = T.axis.spatial(2, b)
            T.reads(A[vb, 0:8])
            T.writes(C[vb, 0:8])
            for i in range(4):
                with T.block("B"):
                    vi = T.axis.spatial(8, i * 2)
                    C[vb, vi] = A[vb, vi] * T.float32(2)
"""


@pytest.mark.parametrize(
    "text, block",
    [(OVER_DECLARED, "B"), (SHORT_PREDICATE, "B"), (OUTER_PREDICATE, "B"),
     (NESTED_STRIDED, "outer")],
    ids=["over-declared region", "predicate inside the buffer", "predicate on outer loops",
         "strided nested block"],
)  # fmt: skip
def test_cache_write_refuses_writes_that_leave_holes(text, block):
    """Each writer skips elements of the region the copy back would copy."""
    sch = Schedule(_func(text))
    handle = sch.get_block(block)
    err = assert_error_keeps_state(
        sch, lambda: sch.cache_write(handle, 0, "local"), CacheWriteError
    )
    assert "every element" in err.reason


REDUCTION_TAIL = """
@T.prim_func
def main(A: T.Buffer((5, 7), "float32"), C: T.Buffer((5,), "float32")):
    for i, k0, k1 in T.grid(5, 2, 4):
        with T.block("C"):
            T.where(k0 * 4 + k1 < 7)
            vi = T.axis.spatial(5, i)
            vk = T.axis.reduce(7, k0 * 4 + k1)
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
"""

INNER_LOOP = """
@T.prim_func
def main(A: T.Buffer((12,), "float32"), C: T.Buffer((12,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            T.reads(A[vi * 3:vi * 3 + 3])
            T.writes(C[vi * 3:vi * 3 + 3])
            for t in range(3):
                C[vi * 3 + t] = A[vi * 3 + t] * T.float32(2)
"""

NESTED_DENSE = """
@T.prim_func
def main(A: T.Buffer((2, 8), "float32"), C: T.Buffer((2, 8), "float32")):
    for b in range(2):
        with T.block("outer"):
            vb = T.axis.spatial(2, b)
            T.reads(A[vb, 0:8])
            T.writes(C[vb, 0:8])
            for i in range(8):
                with T.block("B"):
                    vi = T.axis.spatial(8, i)
                    C[vb, vi] = A[vb, vi] * T.float32(2)
"""


@pytest.mark.parametrize(
    "text, block",
    [(REDUCTION_TAIL, "C"), (INNER_LOOP, "B"), (NESTED_DENSE, "outer")],
    ids=["reduction tail predicate", "loop inside the block", "nested block"],
)
def test_cache_write_of_writes_that_fill_the_region(text, block):
    func = _func(text)
    sch = Schedule(func, debug=True)
    sch.cache_write(sch.get_block(block), 0, "local")
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_cache_write_of_a_block_with_nested_blocks():
    sch = Schedule(_func(NESTED_DENSE))
    sch.cache_write(sch.get_block("outer"), 0, "local")
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def main(A: T.Buffer((2, 8), "float32"), C: T.Buffer((2, 8), "float32")):
    C_local = T.alloc_buffer((2, 8), "float32", scope="local")
    for b in range(2):
        with T.block("outer"):
            vb = T.axis.spatial(2, b)
            T.reads(A[vb, 0:8])
            T.writes(C_local[vb, 0:8])
            for i in range(8):
                with T.block("B"):
                    vi = T.axis.spatial(8, i)
                    C_local[vb, vi] = A[vb, vi] * T.float32(2)
    for ax0, ax1 in T.grid(2, 8):
        with T.block("C_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            C[v0, v1] = C_local[v0, v1]
""",
    )


STRIDED_BINDING = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(8, i * 2)
            B[vi] = A[vi] * T.float32(2)
"""


@pytest.mark.parametrize(
    "text", [STRIDED_BINDING, SHORT_PREDICATE], ids=["strided binding", "short predicate"]
)
def test_reindex_write_needs_the_whole_domain(text):
    """The copy back runs over the iter vars' whole domains."""
    sch = Schedule(_func(text))
    block = sch.get_block("B")
    err = assert_error_keeps_state(sch, lambda: sch.reindex(block, ("write", 0)), ReindexError)
    assert "whole domains" in err.reason


def test_reindex_needs_indices_in_the_block_iter_vars():
    sch = Schedule(_func(INNER_LOOP))
    block = sch.get_block("B")
    err = assert_error_keeps_state(sch, lambda: sch.reindex(block, ("read", 0)), ReindexError)
    assert "loop variable defined inside the block" in err.reason


# -- nested blocks ----------------------------------------------------------------------------
NESTED = """
@T.prim_func
def main(A: T.Buffer((6, 4), "float32"), C: T.Buffer((6, 4), "float32")):
    for i in range(6):
        with T.block("outer"):
            vi = T.axis.spatial(6, i)
            B = T.alloc_buffer((6, 4), "float32")
            for j in range(4):
                with T.block("B"):
                    vj = T.axis.spatial(4, j)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for j in range(4):
                with T.block("C"):
                    vj = T.axis.spatial(4, j)
                    C[vi, vj] = B[vi, vj] + T.float32(1)
"""


def test_cache_read_inside_a_block_holds_one_row():
    """The outer block's iter var stays in its domain, so the cache is one row of B."""
    func = _func(NESTED)
    sch = Schedule(func, debug=True)
    sch.cache_read(sch.get_block("C"), 0, "local")
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def main(A: T.Buffer((6, 4), "float32"), C: T.Buffer((6, 4), "float32")):
    for i in range(6):
        with T.block("outer"):
            vi = T.axis.spatial(6, i)
            T.reads(A[vi, 0:4])
            T.writes(C[vi, 0:4])
            B = T.alloc_buffer((6, 4), "float32")
            B_local = T.alloc_buffer((1, 4), "float32", scope="local")
            for j in range(4):
                with T.block("B"):
                    vj = T.axis.spatial(4, j)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
            for ax0, ax1 in T.grid(1, 4):
                with T.block("B_local"):
                    v0, v1 = T.axis.remap("SS", [ax0, ax1])
                    B_local[v0, v1] = B[vi + v0, v1]
            for j in range(4):
                with T.block("C"):
                    vj = T.axis.spatial(4, j)
                    C[vi, vj] = B_local[0, vj] + T.float32(1)
""",
    )
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)
    sch = Schedule(func, debug=True)
    sch.cache_write(sch.get_block("B"), 0, "local")
    assert_same_numerics(func, sch.func)


@pytest.mark.parametrize("kind", ["read", "write"])
def test_reindex_inside_a_block_uses_the_outer_iter_var(kind):
    """C indexes B and C with the outer block's `vi`, which stays in [0, 6): the copy is
    in bounds and goes inside the outer block."""
    func = _func(NESTED)
    sch = Schedule(func, debug=True)
    copy = sch.reindex(sch.get_block("C"), (kind, 0))
    assert sch.get(sch.get_block("outer")).alloc_buffers[-1].name.endswith("_reindex")
    assert sch.state.scope_block(sch.get(copy)).name_hint == "outer"
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)
