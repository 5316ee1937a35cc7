"""Shared helpers of the space tests: small odd workloads, numeric checks of candidates."""

from __future__ import annotations

import numpy as np

import schedlab
from schedlab import workloads
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block, For

# Small, odd-ish sizes: fast to compile, not multiples of every tile or vector width.
SIZES = {
    "gemm": dict(M=48, N=40, K=36),
    "conv2d_nchw": dict(CI=5, H=13, W=11, CO=7),
    "softmax": dict(M=7, N=37),
    "layer_norm": dict(M=7, N=37),
    "matmul_bias_relu": dict(M=37, N=45, K=29),
    "reduce_sum": dict(M=13, N=37),
}


def workload(name: str):
    """(func, reference) of a workload at its test size."""
    return workloads.get(name, **SIZES[name])


def assert_correct(name: str, func, reference, mod) -> None:
    """Build `mod` for the CPU, run it on seeded inputs, compare with the numpy reference."""
    args = workloads.make_args(func, seed=3)
    schedlab.build(mod, target="cpu")(*args)
    outputs = workloads.spec(name).num_outputs
    expected = reference(*args[: len(args) - outputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(args[len(args) - outputs :], expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


def blocks(mod) -> dict[str, Block]:
    found: dict[str, Block] = {}
    for func in mod.functions().values():
        post_order_visit(func.body, lambda n: found.setdefault(n.name_hint, n)
                         if isinstance(n, Block) else None)  # fmt: skip
    return found


def loops(mod) -> list[For]:
    found: list[For] = []
    for func in mod.functions().values():
        post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, For) else None)
    return found


def kinds(trace) -> list[str]:
    return [inst.kind for inst in trace.insts]
