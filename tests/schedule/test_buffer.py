"""Buffer primitives: set_scope, storage_align (and the lowering that honours it),
set_axis_separator.

Per primitive: the IR after it (expected TVMScript text), the trace round trip, numerics through
the interpreter and compiled C at odd sizes, and one test per precondition error (which must
leave the schedule as it was)."""

import pytest

import schedlab
from schedlab import transform, workloads
from schedlab.errors import LoweringError
from schedlab.ir import op
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Allocate
from schedlab.schedule import BufferIndexError, Schedule
from schedlab.schedule.analysis.buffers import NotAllocatedBufferError, StorageScopeError
from schedlab.schedule.primitives.buffer import AxisSeparatorError, StorageAlignError
from schedlab.script import from_source
from schedlab.transform.compact_buffer import aligned_strides

from .helpers import (
    assert_error_keeps_state,
    assert_same_numerics,
    assert_script_equal,
    assert_trace_roundtrip,
)

TWO_STAGES = """
@T.prim_func
def main(A: T.Buffer((9, 5), "float32"), C: T.Buffer((9, 5), "float32")):
    B = T.alloc_buffer((9, 5), "float32")
    for i, j in T.grid(9, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(9, 5):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
"""


def _func(text: str):
    func = from_source(text)
    return func if not hasattr(func, "functions") else func[next(iter(func))]


def _allocations(func) -> dict[str, Allocate]:
    found = {}

    def visit(node):
        if isinstance(node, Allocate):
            found[node.buffer.name] = node

    post_order_visit(func.body, visit)
    return found


# -- set_scope ------------------------------------------------------------------------------
def test_set_scope_renames_and_moves_the_buffer():
    func = _func(TWO_STAGES)
    sch = Schedule(func)
    block = sch.get_block("B")
    sch.set_scope(block, 0, "shared")
    assert sch.get(block).writes[0].buffer.scope == "shared"  # the handle survives
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def main(A: T.Buffer((9, 5), "float32"), C: T.Buffer((9, 5), "float32")):
    B_shared = T.alloc_buffer((9, 5), "float32", scope="shared")
    for i, j in T.grid(9, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B_shared[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(9, 5):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B_shared[vi, vj] + T.float32(1)
""",
    )
    assert sch.func.body.block.alloc_buffers[0].name == "B_shared"
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


@pytest.mark.parametrize(
    "name, sizes, block",
    [
        ("matmul_bias_relu", dict(M=5, N=7, K=3), "matmul"),
        ("softmax", dict(M=3, N=5), "T_softmax_exp"),
        ("conv2d_nchw", dict(N=1, CI=3, H=7, W=5, CO=2, kernel=3), "pad_temp"),
    ],
)
def test_set_scope_numerics(name, sizes, block):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    sch.set_scope(sch.get_block(block), 0, "local")
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_set_scope_to_the_same_scope_changes_nothing():
    sch = Schedule(_func(TWO_STAGES))
    mod = sch.mod
    sch.set_scope(sch.get_block("B"), "B", "global")
    assert sch.mod is mod


def test_set_scope_of_an_output_buffer():
    sch = Schedule(workloads.get("gemm", M=5, N=7, K=3)[0])
    block = sch.get_block("C")
    err = assert_error_keeps_state(
        sch, lambda: sch.set_scope(block, 0, "local"), NotAllocatedBufferError
    )
    assert "parameter of the function" in err.reason


def test_set_scope_bad_index_and_scope():
    sch = Schedule(_func(TWO_STAGES))
    block = sch.get_block("B")
    err = assert_error_keeps_state(sch, lambda: sch.set_scope(block, 1, "local"), BufferIndexError)
    assert "writes 0: B" in err.reason
    err = assert_error_keeps_state(
        sch, lambda: sch.set_scope(block, "A", "local"), BufferIndexError
    )
    assert "'A' is not a buffer" in err.reason
    assert_error_keeps_state(sch, lambda: sch.set_scope(block, 0, "registers"), StorageScopeError)


# -- storage_align --------------------------------------------------------------------------
def test_storage_align_records_the_block_annotation():
    func = _func(TWO_STAGES)
    sch = Schedule(func)
    block = sch.get_block("B")
    sch.storage_align(block, 0, axis=0, factor=16, offset=3)
    sch.storage_align(block, "B", axis=-1, factor=4, offset=1)
    sch.storage_align(block, 0, axis=0, factor=8, offset=1)  # replaces the first request
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def main(A: T.Buffer((9, 5), "float32"), C: T.Buffer((9, 5), "float32")):
    B = T.alloc_buffer((9, 5), "float32")
    for i, j in T.grid(9, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            T.block_attr({"buffer_dim_align": [[0, 1, 4, 1], [0, 0, 8, 1]]})
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(9, 5):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
""",
    )
    assert_trace_roundtrip(sch, func)


def test_storage_align_pads_the_lowered_strides():
    func = _func(TWO_STAGES)
    sch = Schedule(func)
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=8, offset=3)
    lowered = transform.lower(sch.func)["main"]
    alloc = _allocations(lowered)["B"]
    assert [int(s.value) for s in alloc.buffer.shape] == [8 * 11 + 5]  # rows at stride 11
    assert "B[i * 11 + j]" in lowered.script()
    assert_same_numerics(func, sch.func)


def test_storage_align_applies_after_compaction():
    """A shared tile from cache_read + compute_at: the stride is computed for the 4x4 tile."""
    func = workloads.get("gemm", M=37, N=29, K=19)[0]
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, k0, i1, j, k1)
    tile = sch.cache_read(block, 0, "shared")
    sch.compute_at(tile, k0)
    sch.storage_align(tile, 0, axis=0, factor=8, offset=2)
    lowered = transform.lower(sch.func)["gemm"]
    alloc = _allocations(lowered)["A_shared"]
    assert [int(s.value) for s in alloc.buffer.shape] == [3 * 10 + 4]  # 4 rows at stride 10
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_lowering_moves_the_request_to_the_allocation():
    sch = Schedule(_func(TWO_STAGES))
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=8, offset=3)
    func = sch.func
    for step in (
        transform.lower_init_block,
        transform.plan_and_update_buffer_allocation_location,
        transform.convert_blocks_to_opaque,
        transform.lower_opaque_block,
    ):
        func = step(func)
    assert _allocations(func)["B"].annotations == {"buffer_dim_align": [[0, 8, 3]]}
    compacted = transform.compact_buffer_allocation(func)
    alloc = _allocations(compacted)["B"]
    assert alloc.annotations == {}
    assert [int(s.value) for s in alloc.buffer.strides] == [11, 1]


def test_aligned_strides():
    shape = (op.const(4), op.const(6), op.const(5))
    values = [int(s.value) for s in aligned_strides(shape, [[1, 8, 1], [0, 16, 0]])]
    assert values == [64, 9, 1]  # 5 -> 9 (9 % 8 == 1); 6 * 9 = 54 -> 64 (64 % 16 == 0)
    assert aligned_strides(shape, []) == ()


@pytest.mark.parametrize(
    "name, sizes, block",
    [
        ("matmul_bias_relu", dict(M=5, N=7, K=3), "matmul"),
        ("conv2d_nchw", dict(N=1, CI=3, H=7, W=5, CO=2, kernel=3), "pad_temp"),
    ],
)
def test_storage_align_numerics(name, sizes, block):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    sch.storage_align(sch.get_block(block), 0, axis=-2, factor=8, offset=5)
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


def test_storage_align_errors():
    sch = Schedule(_func(TWO_STAGES))
    b, c = sch.get_block("B"), sch.get_block("C")
    err = assert_error_keeps_state(sch, lambda: sch.storage_align(b, 0, 2, 8, 0), StorageAlignError)
    assert "[-2, 2)" in err.reason
    assert_error_keeps_state(sch, lambda: sch.storage_align(b, 0, 0, 0, 0), StorageAlignError)
    assert_error_keeps_state(sch, lambda: sch.storage_align(b, 0, 0.5, 8, 0), StorageAlignError)
    assert_error_keeps_state(sch, lambda: sch.storage_align(c, 0, 0, 8, 0), NotAllocatedBufferError)
    assert_error_keeps_state(sch, lambda: sch.storage_align(b, 3, 0, 8, 0), BufferIndexError)


# -- set_axis_separator ---------------------------------------------------------------------
def test_set_axis_separator_on_an_intermediate():
    func = _func(TWO_STAGES)
    sch = Schedule(func)
    sch.set_axis_separator(sch.get_block("B"), ("write", 0), [1])
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def main(A: T.Buffer((9, 5), "float32"), C: T.Buffer((9, 5), "float32")):
    B = T.alloc_buffer((9, 5), "float32", axis_separators=[1])
    for i, j in T.grid(9, 5):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(9, 5):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
""",
    )
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func, compiled=False)
    lowered = transform.lower(sch.func)["main"]
    assert _allocations(lowered)["B"].buffer.axis_separators == (1,)  # two physical axes
    with pytest.raises(LoweringError, match="2 indices"):  # flat-memory CPU back end
        schedlab.build(sch.func, target="cpu")


def test_set_axis_separator_on_a_parameter():
    func = workloads.get("gemm", M=5, N=7, K=3)[0]
    sch = Schedule(func)
    sch.set_axis_separator(sch.get_block("C"), "A", [1])
    a = sch.func.buffer_map[sch.func.params[0]]
    assert a.name == "A" and a.axis_separators == (1,)
    assert sch.get(sch.get_block("C")).reads[0].buffer is a
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func, compiled=False)


def test_set_axis_separator_errors():
    sch = Schedule(workloads.get("gemm", M=5, N=7, K=3)[0])
    block = sch.get_block("C")
    for bad in ([0], [2], [1, 1], "1", [1.0]):
        assert_error_keeps_state(
            sch, lambda bad=bad: sch.set_axis_separator(block, "A", bad), AxisSeparatorError
        )
    err = assert_error_keeps_state(
        sch, lambda: sch.set_axis_separator(block, 0, [1]), BufferIndexError
    )
    assert "ambiguous" in err.reason
