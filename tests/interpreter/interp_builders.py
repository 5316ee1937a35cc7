"""Small helpers to build PrimFuncs by hand for the interpreter tests (no te / parser needed)."""

from __future__ import annotations

import numpy as np

from schedlab.interpreter import interpret, scalar_mode
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
)


def func(buffers, body, scalars=(), name="main"):
    """A PrimFunc whose params are `buffers` (then the scalar Vars `scalars`)."""
    params, buffer_map = [], {}
    for buffer in buffers:
        param = Var(buffer.name, "handle")
        params.append(param)
        buffer_map[param] = buffer
    params += list(scalars)
    return PrimFunc(params, body, buffer_map, {"global_symbol": name, "tir.noalias": True})


def loops(extents, body_fn, kind="serial", names=None):
    """A nest `for v0 in range(e0): for v1 ...: body_fn(v0, v1, ...)`."""
    names = names or [f"i{n}" for n in range(len(extents))]
    variables = [Var(n) for n in names]
    stmt = body_fn(*variables)
    for var, extent in reversed(list(zip(variables, extents))):
        stmt = For(var, const(0), extent, kind, stmt)
    return stmt


def root(body, alloc=()):
    return BlockRealize((), const(True), Block((), (), (), "root", body, alloc_buffers=alloc))


def block(name, values, doms, types, body, init=None, predicate=True, alloc=(), match=()):
    """A BlockRealize binding fresh iter vars `v<n>` to `values`; `body(*iter_vars)`."""
    iter_vars = [Var(f"v{name}{n}", getattr(v, "dtype", "int32")) for n, v in enumerate(values)]
    ivs = [
        IterVar(var, Range(0, dom), IterType.REDUCE if kind == "R" else IterType.SPATIAL)
        for var, dom, kind in zip(iter_vars, doms, types)
    ]
    made = Block(
        ivs,
        (),
        (),
        name,
        body(*iter_vars),
        init=None if init is None else init(*iter_vars),
        alloc_buffers=tuple(alloc),
        match_buffers=tuple(match(*iter_vars)) if callable(match) else tuple(match),
    )
    return BlockRealize(
        tuple(values), const(predicate) if isinstance(predicate, bool) else predicate, made
    )


def matmul(m, n, k, dtype="float32", order="ijk"):
    """C = A @ B in TensorIR form (loops in `order`)."""
    A = decl_buffer((m, k), dtype, "A")
    B = decl_buffer((k, n), dtype, "B")
    C = decl_buffer((m, n), dtype, "C")
    extents = {"i": m, "j": n, "k": k}

    def body(*loop_vars):
        by_name = dict(zip(order, loop_vars))
        return block(
            "C",
            [by_name["i"], by_name["j"], by_name["k"]],
            [m, n, k],
            "SSR",
            lambda vi, vj, vk: BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
            init=lambda vi, vj, vk: BufferStore(C, const(0, dtype), (vi, vj)),
        )

    nest = loops([extents[c] for c in order], body, names=list(order))
    return func([A, B, C], root(nest))


def seq(*stmts):
    return SeqStmt.flatten(*stmts)


def random_array(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape, dtype=dtype)
    return rng.standard_normal(shape).astype(dtype)


def run_both(f, *arrays):
    """Run vectorized and scalar; assert they agree; return the vectorized outputs."""
    vector = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in arrays]
    scalar = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in arrays]
    interpret(f, *vector)
    with scalar_mode():
        interpret(f, *scalar)
    for got, want in zip(vector, scalar):
        if isinstance(got, np.ndarray):
            if got.dtype.kind == "f" or got.dtype.name == "bfloat16":
                np.testing.assert_allclose(
                    got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-5
                )
            else:
                np.testing.assert_array_equal(got, want)
    return vector
