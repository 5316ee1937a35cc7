"""Hand-built TensorIR functions for the lowering tests (the shapes te and schedules produce),
each with a numpy reference. Sizes are odd on purpose."""

from __future__ import annotations

import numpy as np

from schedlab.arith import block_access_regions
from schedlab.ir import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Var,
    const,
    decl_buffer,
    op,
)  # fmt: skip

S, R = IterType.SPATIAL, IterType.REDUCE


def realize(name, iters, values, body, init=None, predicate=True, allocs=()):
    """A BlockRealize of a block over `iters` = [(var, extent, kind)], regions inferred."""
    iter_vars = tuple(IterVar(var, Range(0, extent), kind) for var, extent, kind in iters)
    block = Block(iter_vars, (), (), name, body, init, alloc_buffers=tuple(allocs))
    reads, writes = block_access_regions(block)
    block = block.replace(reads=tuple(reads), writes=tuple(writes))
    return BlockRealize(tuple(values), const(True) if predicate is True else predicate, block)


def nest(loops, body):
    """For loops around `body`: loops = [(var, extent)] or [(var, extent, kind, annotations)]."""
    for spec in reversed(loops):
        var, extent = spec[0], spec[1]
        kind = spec[2] if len(spec) > 2 else "serial"
        annotations = spec[3] if len(spec) > 3 else None
        body = For(var, 0, extent, kind, body, annotations=annotations)
    return body


def plain_func(buffers, body):
    """A PrimFunc `f` over `buffers` with `body` as it is (no root block): the lowered form the
    passes after LowerOpaqueBlock take."""
    params = [Var(b.name, "handle") for b in buffers]
    return PrimFunc(params, body, dict(zip(params, buffers)), {"global_symbol": "f"})


def prim_func(name, buffers, body, allocs=()):
    """A PrimFunc in the TensorIR form: handle params and an implicit root block."""
    params = [Var(b.name, "handle") for b in buffers]
    root = BlockRealize((), const(True), Block((), (), (), "root", body, alloc_buffers=allocs))
    attrs = {"global_symbol": name, "tir.noalias": True}
    return PrimFunc(params, root, dict(zip(params, buffers)), attrs)


def _vars(*names):
    return [Var(n) for n in names]


# ---------------------------------------------------------------------------------------------
def gemm(m=17, n=23, k=29):
    """C = A @ B as te.create_prim_func writes it: loops i, j, k around block C with an init."""
    A, B, C = (
        decl_buffer(s, "float32", x) for s, x in (((m, k), "A"), ((k, n), "B"), ((m, n), "C"))
    )
    i, j, kk, vi, vj, vk = _vars("i", "j", "k", "vi", "vj", "vk")
    body = BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj))
    init = BufferStore(C, const(0.0, "float32"), (vi, vj))
    block = realize("C", [(vi, m, S), (vj, n, S), (vk, k, R)], (i, j, kk), body, init)
    func = prim_func("gemm", [A, B, C], nest([(i, m), (j, n), (kk, k)], block))
    return func, lambda a, b: a @ b, [(m, k), (k, n)], (m, n)


def gemm_split_rows(m=17, n=23, k=29, factor=5):
    """gemm with i split by a factor that does not divide m: a spatial predicate."""
    A, B, C = (
        decl_buffer(s, "float32", x) for s, x in (((m, k), "A"), ((k, n), "B"), ((m, n), "C"))
    )
    io, ii, j, kk, vi, vj, vk = _vars("io", "ii", "j", "k", "vi", "vj", "vk")
    body = BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj))
    init = BufferStore(C, const(0.0, "float32"), (vi, vj))
    row = io * factor + ii
    block = realize(
        "C", [(vi, m, S), (vj, n, S), (vk, k, R)], (row, j, kk), body, init, predicate=row < m
    )
    loops = [(io, -(-m // factor)), (ii, factor), (j, n), (kk, k)]
    func = prim_func("gemm_split_rows", [A, B, C], nest(loops, block))
    return func, lambda a, b: a @ b, [(m, k), (k, n)], (m, n)


def row_sum_split(m=7, k=29, factor=4):
    """S[i] = sum_k A[i, k] with k split by a non-dividing factor: predicate on the reduction."""
    A, Sb = decl_buffer((m, k), "float32", "A"), decl_buffer((m,), "float32", "S")
    i, ko, ki, vi, vk = _vars("i", "ko", "ki", "vi", "vk")
    red = ko * factor + ki
    body = BufferStore(Sb, Sb[vi] + A[vi, vk], (vi,))
    init = BufferStore(Sb, const(0.0, "float32"), (vi,))
    block = realize("S", [(vi, m, S), (vk, k, R)], (i, red), body, init, predicate=red < k)
    loops = [(i, m), (ko, -(-k // factor)), (ki, factor)]
    func = prim_func("row_sum_split", [A, Sb], nest(loops, block))
    return func, lambda a: a.sum(axis=1), [(m, k)], (m,)


def two_stage(m=9, n=13, fused=False):
    """B = A * 2 (intermediate), C = B + 1. `fused`: B computed under C's row loop (as
    compute_at leaves it), so its allocation can move into that loop and shrink to one row."""
    A, C = decl_buffer((m, n), "float32", "A"), decl_buffer((m, n), "float32", "C")
    Bb = decl_buffer((m, n), "float32", "B")
    i, j, i2, j2, vi, vj, wi, wj = _vars("i", "j", "i2", "j2", "vi", "vj", "wi", "wj")
    b_body = BufferStore(Bb, A[vi, vj] * const(2.0, "float32"), (vi, vj))
    c_body = BufferStore(C, Bb[wi, wj] + const(1.0, "float32"), (wi, wj))
    if fused:
        b_block = realize("B", [(vi, m, S), (vj, n, S)], (i, j), b_body)
        c_block = realize("C", [(wi, m, S), (wj, n, S)], (i, j2), c_body)
        row = op_seq(nest([(j, n)], b_block), nest([(j2, n)], c_block))
        body = For(i, 0, m, "serial", row)
    else:
        b_block = realize("B", [(vi, m, S), (vj, n, S)], (i, j), b_body)
        c_block = realize("C", [(wi, m, S), (wj, n, S)], (i2, j2), c_body)
        body = op_seq(nest([(i, m), (j, n)], b_block), nest([(i2, m), (j2, n)], c_block))
    func = prim_func("two_stage", [A, C], body, allocs=(Bb,))
    return func, lambda a: a * 2 + 1, [(m, n)], (m, n)


def op_seq(*stmts):
    return SeqStmt(stmts)


def gemm_local_tile(m=17, n=23, k=29, tm=4, tn=8):
    """gemm after cache_write(C, "local") + reverse_compute_at: a tm x tn accumulator tile
    per (io, jo), reduction loop k outside the tile loops, ragged edges (predicates)."""
    A, B, C = (
        decl_buffer(s, "float32", x) for s, x in (((m, k), "A"), ((k, n), "B"), ((m, n), "C"))
    )
    L = decl_buffer((m, n), "float32", "C_local", scope="local")
    io, jo, kk, ii, ji, ii2, ji2 = _vars("io", "jo", "k", "ii", "ji", "ii2", "ji2")
    vi, vj, vk, wi, wj = _vars("vi", "vj", "vk", "wi", "wj")
    row, col = io * tm + ii, jo * tn + ji
    update = BufferStore(L, L[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj))
    init = BufferStore(L, const(0.0, "float32"), (vi, vj))
    acc = realize(
        "C_local", [(vi, m, S), (vj, n, S), (vk, k, R)], (row, col, kk), update, init,
        predicate=op.logical_and(row < m, col < n),
    )  # fmt: skip
    row2, col2 = io * tm + ii2, jo * tn + ji2
    copy = realize(
        "C", [(wi, m, S), (wj, n, S)], (row2, col2), BufferStore(C, L[wi, wj], (wi, wj)),
        predicate=op.logical_and(row2 < m, col2 < n),
    )  # fmt: skip
    tile = op_seq(nest([(kk, k), (ii, tm), (ji, tn)], acc), nest([(ii2, tm), (ji2, tn)], copy))
    body = nest([(io, -(-m // tm)), (jo, -(-n // tn))], tile)
    func = prim_func("gemm_local_tile", [A, B, C], body, allocs=(L,))
    return func, lambda a, b: a @ b, [(m, k), (k, n)], (m, n)


def scale_add(m=5, n=24, lanes=8, kind="vectorized", annotations=None):
    """C[i, j] = A[i, j] * 2 + B[j] with j split (jo, ji) and ji of the given loop kind; when
    lanes does not divide n the block gets a predicate."""
    A, B = decl_buffer((m, n), "float32", "A"), decl_buffer((n,), "float32", "B")
    C = decl_buffer((m, n), "float32", "C")
    i, jo, ji, vi, vj = _vars("i", "jo", "ji", "vi", "vj")
    col = jo * lanes + ji
    body = BufferStore(C, A[vi, vj] * const(2.0, "float32") + B[vj], (vi, vj))
    predicate = True if n % lanes == 0 else col < n
    block = realize("C", [(vi, m, S), (vj, n, S)], (i, col), body, predicate=predicate)
    loops = [(i, m, "serial", annotations), (jo, -(-n // lanes)), (ji, lanes, kind)]
    func = prim_func("scale_add", [A, B, C], nest(loops, block))
    return func, lambda a, b: a * 2 + b, [(m, n), (n,)], (m, n)


def random_inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def run(func, inputs, out_shape, seed=1):
    """Run `func` in the interpreter on `inputs` and a garbage-filled output; return it."""
    from schedlab import interpret

    out = np.random.default_rng(seed).standard_normal(out_shape).astype("float32")
    interpret(func, *inputs, out)  # lowered functions take the logical (N-d) arrays too
    return out


def check_numerics(func, reference, in_shapes, out_shape, seed=0):
    """`func` computes `reference` (float32 tolerance) at the sample's sizes."""
    inputs = random_inputs(in_shapes, seed)
    expected = reference(*inputs)
    np.testing.assert_allclose(run(func, inputs, out_shape), expected, rtol=1e-4, atol=1e-4)
