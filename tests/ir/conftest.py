"""Small hand-built IR shared by the IR tests (no te / parser needed)."""

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
    const,
    decl_buffer,
)  # fmt: skip


def make_gemm(m=8, n=6, k=5, names=("i", "j", "k")):
    """The TensorIR form of C = A @ B built by hand."""
    A = decl_buffer((m, k), "float32", "A")
    B = decl_buffer((k, n), "float32", "B")
    C = decl_buffer((m, n), "float32", "C")
    i, j, kk = (Var(name) for name in names)
    vi, vj, vk = Var("v" + names[0]), Var("v" + names[1]), Var("v" + names[2])
    update = BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj))
    init = BufferStore(C, const(0.0, "float32"), (vi, vj))
    block = Block(
        iter_vars=(
            IterVar(vi, Range(0, m)),
            IterVar(vj, Range(0, n)),
            IterVar(vk, Range(0, k), IterType.REDUCE),
        ),
        reads=(C.region((vi, 1), (vj, 1)), A.region((vi, 1), (vk, 1)), B.region((vk, 1), (vj, 1))),
        writes=(C.region((vi, 1), (vj, 1)),),
        name_hint="C",
        body=update,
        init=init,
    )
    realize = BlockRealize((i, j, kk), const(True), block)
    nest = For(i, 0, m, "serial", For(j, 0, n, "serial", For(kk, 0, k, "serial", realize)))
    root = BlockRealize((), const(True), Block((), (), (), "root", nest))
    params = tuple(Var(name, "handle") for name in "ABC")
    return PrimFunc(params, root, dict(zip(params, (A, B, C))), {"global_symbol": "gemm"})
