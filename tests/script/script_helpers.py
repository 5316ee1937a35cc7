"""Shared helpers of the script tests: hand-built functions and the round-trip check."""

from schedlab.ir import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    Var,
    assert_structural_equal,
    const,
    decl_buffer,
)  # fmt: skip
from schedlab.script import from_source, script

TRUE = const(True)


def roundtrip(node, map_free_vars: bool = False) -> str:
    """Print, parse back, compare structurally; printing the parsed IR gives the same text."""
    text = script(node)
    parsed = from_source(text)
    assert_structural_equal(node, parsed, map_free_vars=map_free_vars)
    assert script(parsed) == text, f"printing is not stable:\n{text}\n---\n{script(parsed)}"
    return text


def make_func(body, buffers=(), scalars=(), attrs=None, root_allocs=None) -> PrimFunc:
    """A PrimFunc over `buffers` (handle params) and scalar `scalars` params. With
    `root_allocs` (a tuple) the body is wrapped in the implicit root block."""
    handles = [Var(b.name, "handle") for b in buffers]
    if root_allocs is not None:
        body = BlockRealize((), TRUE, Block((), (), (), "root", body, alloc_buffers=root_allocs))
    return PrimFunc(
        (*handles, *scalars), body, dict(zip(handles, buffers)), attrs if attrs is not None else {}
    )


def gemm(m=64, n=48, k=80, name="gemm") -> PrimFunc:
    """The TensorIR gemm as te.create_prim_func makes it (noalias attrs, implicit root)."""
    A = decl_buffer((m, k), "float32", "A")
    B = decl_buffer((k, n), "float32", "B")
    C = decl_buffer((m, n), "float32", "C")
    i, j, kk = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    block = Block(
        iter_vars=(
            IterVar(vi, Range(0, m)),
            IterVar(vj, Range(0, n)),
            IterVar(vk, Range(0, k), IterType.REDUCE),
        ),
        reads=(A.region((vi, 1), (vk, 1)), B.region((vk, 1), (vj, 1))),
        writes=(C.region((vi, 1), (vj, 1)),),
        name_hint="C",
        body=BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(C, const(0.0, "float32"), (vi, vj)),
    )
    realize = BlockRealize((i, j, kk), TRUE, block)
    nest = For(i, 0, m, "serial", For(j, 0, n, "serial", For(kk, 0, k, "serial", realize)))
    attrs = {"global_symbol": name, "tir.noalias": True}
    return make_func(nest, (A, B, C), attrs=attrs, root_allocs=())
