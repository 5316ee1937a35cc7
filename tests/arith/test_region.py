"""Region inference on hand-built blocks: gemm update, conv with offsets, nested blocks."""

from schedlab.arith import (
    Analyzer,
    block_access_regions,
    region_covers,
    region_union,
    relax_region,
)
from schedlab.ir import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IterType,
    IterVar,
    Range,
    SeqStmt,
    Var,
    const,
    decl_buffer,
)

from .arith_text import region_text, text


def _texts(regions):
    return [region_text(r) for r in regions]


def _gemm_block(m=8, n=6, k=5):
    A = decl_buffer((m, k), "float32", "A")
    B = decl_buffer((k, n), "float32", "B")
    C = decl_buffer((m, n), "float32", "C")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    block = Block(
        iter_vars=(
            IterVar(vi, Range(0, m)),
            IterVar(vj, Range(0, n)),
            IterVar(vk, Range(0, k), IterType.REDUCE),
        ),
        reads=(),
        writes=(),
        name_hint="C",
        body=BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(C, const(0.0, "float32"), (vi, vj)),
    )
    return block, (A, B, C), (vi, vj, vk)


def test_gemm_update_block():
    block, _, _ = _gemm_block()
    reads, writes = block_access_regions(block)
    assert _texts(reads) == ["C[vi+1, vj+1]", "A[vi+1, vk+1]", "B[vk+1, vj+1]"]
    assert _texts(writes) == ["C[vi+1, vj+1]"]


def test_offset_accesses_fold_into_a_box():
    # conv1d-like: B[v] = A[v] + A[v + 1] + A[v + 2] * W[0]
    A = decl_buffer((18,), "float32", "A")
    W = decl_buffer((3,), "float32", "W")
    B = decl_buffer((16,), "float32", "B")
    v = Var("v")
    body = BufferStore(B, A[v] + A[v + 1] + A[v + 2] * W[0], (v,))
    block = Block((IterVar(v, Range(0, 16)),), (), (), "conv", body)
    reads, writes = block_access_regions(block)
    assert _texts(reads) == ["A[v+3]", "W[0+1]"]
    assert _texts(writes) == ["B[v+1]"]


def test_conv2d_with_reduction_loops_inside_block():
    # the block computes one output; loops over the window run inside it
    A = decl_buffer((10, 12), "float32", "A")
    B = decl_buffer((8, 10), "float32", "B")
    vi, vj, r, s = Var("vi"), Var("vj"), Var("r"), Var("s")
    store = BufferStore(B, B[vi, vj] + A[vi + r, vj + s + 0], (vi, vj))
    body = For(r, 0, 3, "serial", For(s, 0, 3, "serial", store))
    block = Block((IterVar(vi, Range(0, 8)), IterVar(vj, Range(0, 10))), (), (), "conv", body)
    reads, writes = block_access_regions(block)
    assert _texts(reads) == ["B[vi+1, vj+1]", "A[vi+3, vj+3]"]
    assert _texts(writes) == ["B[vi+1, vj+1]"]


def test_nested_block_and_alloc_buffers():
    # root-like outer block: allocates T, loops over i, nested block reads A[i*4 + vj] ...
    A = decl_buffer((32,), "float32", "A")
    T = decl_buffer((32,), "float32", "T")
    C = decl_buffer((32,), "float32", "C")
    vo, i = Var("vo"), Var("i")
    w = Var("w")
    inner = Block(
        (IterVar(w, Range(0, 32)),),
        (A.region((w, 1)),),
        (T.region((w, 1)),),
        "inner",
        BufferStore(T, A[w] * 2.0, (w,)),
    )
    realize = BlockRealize((vo * 4 + i,), const(True), inner)
    copy = BufferStore(C, T[vo * 4 + i], (vo * 4 + i,))
    body = For(i, 0, 4, "serial", SeqStmt((realize, copy)))
    outer = Block((IterVar(vo, Range(0, 8)),), (), (), "outer", body, alloc_buffers=(T,))
    reads, writes = block_access_regions(outer)
    assert _texts(reads) == ["A[vo*4+4]"]
    assert _texts(writes) == ["C[vo*4+4]"]


def test_relax_region_and_union_and_cover():
    A = decl_buffer((64, 64), "float32", "A")
    i, j = Var("i"), Var("j")
    region = A.region((i * 16 + j, 1), (0, 64))
    relaxed = relax_region(region, {j: Range(0, 16)})
    assert region_text(relaxed) == "A[i*16+16, 0+64]"
    whole = relax_region(region, {i: Range(0, 4), j: Range(0, 16)})
    assert region_text(whole) == "A[0+64, 0+64]"
    u = region_union(A.region((i, 1), (0, 4)), A.region((i + 1, 2), (2, 4)))
    assert region_text(u) == "A[i+3, 0+6]"
    assert not region_covers(whole, relaxed, Analyzer())  # i unbounded: not provable
    ana = Analyzer()
    ana.bind(i, Range(0, 4))
    assert region_covers(whole, relaxed, ana)
    assert not region_covers(relaxed, whole, ana)


def test_simplified_indices():
    A = decl_buffer((8,), "float32", "A")
    B = decl_buffer((8,), "float32", "B")
    v = Var("v")
    block = Block((IterVar(v, Range(0, 8)),), (), (), "b", BufferStore(B, A[v + 0 * v], (v + 0,)))
    reads, _ = block_access_regions(block)
    assert text(reads[0].region[0].min) == "v"


def test_vector_access_and_match_buffer():
    from schedlab.ir import MatchBufferRegion, Ramp

    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((64,), "float32", "B")
    v = Var("v")
    vector = BufferStore(B, A[Ramp(v * 8, const(1), 8)], (Ramp(v * 8, const(1), 8),))
    block = Block((IterVar(v, Range(0, 8)),), (), (), "vec", vector)
    reads, writes = block_access_regions(block)
    assert _texts(reads) == ["A[v*8+8]"] and _texts(writes) == ["B[v*8+8]"]
    # accesses through a matched buffer count as accesses of its source region
    sub = decl_buffer((4,), "float32", "sub")
    match = MatchBufferRegion(sub, A.region((v * 4, 4)))
    body = BufferStore(B, sub[1], (v,))
    block = Block((IterVar(v, Range(0, 16)),), (), (), "m", body, match_buffers=(match,))
    reads, _ = block_access_regions(block)
    assert _texts(reads) == ["A[v*4+4]"]


def test_extent_one_iter_vars_stay_symbolic():
    A = decl_buffer((1, 8), "float32", "A")
    B = decl_buffer((1, 8), "float32", "B")
    v0, v1 = Var("v0"), Var("v1")
    block = Block(
        (IterVar(v0, Range(0, 1)), IterVar(v1, Range(0, 8))),
        (),
        (),
        "copy",
        BufferStore(B, A[v0, v1], (v0, v1)),
    )
    reads, writes = block_access_regions(block)
    assert _texts(reads) == ["A[v0+1, v1+1]"]
    assert _texts(writes) == ["B[v0+1, v1+1]"]


def test_loop_with_symbolic_extent_inside_block():
    from schedlab.ir import SizeVar

    n = SizeVar("n")
    A = decl_buffer((n,), "float32", "A")
    B = decl_buffer((1,), "float32", "B")
    r = Var("r")
    body = For(r, 0, n, "serial", BufferStore(B, B[0] + A[r], (0,)))
    block = Block((), (), (), "sum", body)
    reads, writes = block_access_regions(block)
    assert _texts(reads) == ["B[0+1]", "A[0+n]"]
    assert _texts(writes) == ["B[0+1]"]
