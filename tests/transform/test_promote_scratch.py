"""PromoteInvariantScratch: scratch a loop touches only at invariant, provably distinct places
is held in a register tile around the loop; every case where that could change a result keeps
the buffer as it is. Numerics: the reference interpreter and the compiled kernel at odd sizes."""

import numpy as np

import schedlab
from schedlab import workloads
from schedlab.interpreter import interpret
from schedlab.ir import (
    Allocate,
    BufferStore,
    For,
    IfThenElse,
    SeqStmt,
    Var,
    const,
    decl_buffer,
    post_order_visit,
)  # fmt: skip
from schedlab.schedule import Schedule
from schedlab.transform import lower, lower_passes
from schedlab.transform.promote_scratch import MAX_SLOTS, promote_invariant_scratch

from .tir_samples import plain_func as _func

ONE = const(1.0, "float32")


def _tiles(stmt):
    found = []

    def visit(node):
        if isinstance(node, Allocate) and "_tile" in node.buffer.name:
            found.append(node)

    post_order_visit(stmt, visit)
    return found


def _accumulate(index_of, condition=None, extent=8):
    """`acc` (allocated) updated inside `for k` at `index_of(i, j, k)` for outer i, j; then
    copied to C."""
    B, C = decl_buffer((8,), "float32", "B"), decl_buffer((16,), "float32", "C")
    acc = decl_buffer((16,), "float32", "acc", scope="local")
    i, j, k, c = Var("i"), Var("j"), Var("k"), Var("c")
    index = index_of(i, j, k)
    update = BufferStore(acc, acc[index] + B[k], (index,))
    if condition is not None:
        update = IfThenElse(condition(k), update)
    zero = For(c, 0, 16, "serial", BufferStore(acc, const(0.0, "float32"), (c,)))
    copy = For(c, 0, 16, "serial", BufferStore(C, acc[c], (c,)))
    loop = For(k, 0, extent, "serial", update)
    outer = For(i, 0, 4, "serial", For(j, 0, 2, "serial", loop))
    return _func([B, C], Allocate(acc, SeqStmt.flatten(zero, outer, copy)))


def _check_same_numerics(before, after):
    b = np.arange(8, dtype="float32") + 0.5
    want, got = np.zeros(16, "float32"), np.zeros(16, "float32")
    interpret(before, b, want)
    interpret(after, b, got)
    np.testing.assert_array_equal(got, want)
    return got


def test_invariant_accumulator_is_held_in_a_tile_around_the_loop():
    func = _accumulate(lambda i, j, k: i * 2 + j)
    after = promote_invariant_scratch(func)
    [tile] = _tiles(after.body)
    assert tile.buffer.scope == "local" and tuple(d.value for d in tile.buffer.shape) == (1,)
    loads, loop, stores = tile.body.seq  # load, the loop on the tile, store back
    assert isinstance(loop, For) and loop.loop_var.name == "k"
    assert loads.buffer is tile.buffer and stores.indices[0] is not None
    got = _check_same_numerics(func, after)
    assert got[:8].tolist() == [np.sum(np.arange(8) + 0.5)] * 8


def test_places_that_vary_or_are_conditional_or_constant_stay_in_memory():
    kept = [
        _accumulate(lambda i, j, k: k + i),  # varies in the loop
        _accumulate(lambda i, j, k: i * 2 + j, condition=lambda k: k < 5),  # conditional
        _accumulate(lambda i, j, k: const(3)),  # a constant place: already a register
        _accumulate(lambda i, j, k: i * 2 + j, extent=1),  # nothing to hoist from
    ]
    for func in kept:
        after = promote_invariant_scratch(func)
        assert after is func and not _tiles(after.body)


def test_two_places_at_a_run_time_distance_are_not_promoted():
    B = decl_buffer((8,), "float32", "B")
    C = decl_buffer((16,), "float32", "C")
    acc = decl_buffer((16,), "float32", "acc", scope="local")
    i, j, k = Var("i"), Var("j"), Var("k")
    # acc[i] and acc[j] may be one element: holding them apart would lose an update
    body = For(k, 0, 4, "serial", SeqStmt.flatten(
        BufferStore(acc, acc[i] + B[k], (i,)), BufferStore(acc, acc[j] + ONE, (j,))))  # fmt: skip
    func = _func([B, C], Allocate(acc, For(i, 0, 4, "serial", For(j, 0, 4, "serial", body))))
    assert promote_invariant_scratch(func) is func


def test_parameters_are_never_promoted():
    B, C = decl_buffer((8,), "float32", "B"), decl_buffer((4,), "float32", "C")
    i, k = Var("i"), Var("k")
    body = For(i, 0, 4, "serial", For(k, 0, 8, "serial", BufferStore(C, C[i] + B[k], (i,))))
    func = _func([B, C], body)
    assert promote_invariant_scratch(func) is func


def test_more_places_than_a_register_file_stay_in_memory():
    B, C = decl_buffer((8,), "float32", "B"), decl_buffer((4,), "float32", "C")
    size = 2 * (MAX_SLOTS + 1)
    acc = decl_buffer((size,), "float32", "acc", scope="local")
    i, k = Var("i"), Var("k")
    stores = [BufferStore(acc, acc[i + s] + B[k], (i + s,)) for s in range(MAX_SLOTS + 1)]
    body = For(i, 0, 2, "serial", For(k, 0, 8, "serial", SeqStmt.flatten(*stores)))
    func = _func([B, C], Allocate(acc, body))
    assert promote_invariant_scratch(func) is func


def _gemm_rows_inside_reduction(m=7, n=48, k=40):
    """gemm with the reduction split and its outer part outside the tile's rows: the
    accumulator tile is indexed by the row loop inside the inner reduction loop."""
    func = workloads.get("gemm", M=m, N=n, K=k)[0]
    sch = Schedule(func, target="cpu")
    block = sch.get_block("C")
    i, j, kk = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(kk, [None, 8])
    sch.reorder(j0, k0, i, k1, j1)
    tile = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(tile, j0)
    sch.decompose_reduction(block, k0)
    sch.vectorize(sch.get_loops(block)[-1])
    return sch.mod["gemm"]


def test_compiled_kernel_with_a_promoted_accumulator_matches_numpy():
    func = _gemm_rows_inside_reduction()
    lowered = lower(func)["gemm"]
    assert _tiles(lowered.body), "the accumulator row is held in a tile around the k1 loop"
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype("float32") for s in ((7, 40), (40, 48)))
    c = np.zeros((7, 48), "float32")
    schedlab.build(func, target="cpu")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-4)


def test_the_pass_is_in_the_cpu_lowering_pipeline():
    names = [p.name for p in lower_passes("cpu")]
    assert names.index("PromoteInvariantScratch") == names.index("UnrollLoop") + 1
