"""Shared driver for the operator tests: infer, legalize, check that the shapes agree, turn the
TE tensors into a PrimFunc and run it (interpreter or compiled kernel)."""

from __future__ import annotations

import numpy as np

import schedlab
from schedlab import te
from schedlab.relax.op import TensorInfo, get_op


def static(shape) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


def run_op(name: str, arrays, attrs=None, compiled: bool = False):
    """Run operator `name` on numpy `arrays`; returns its output array (a tuple for several)."""
    spec = get_op(name)
    attrs = spec.resolve_attrs(attrs or {})
    infos = [TensorInfo(a.shape, str(a.dtype)) for a in arrays]
    inferred = spec.infer_info(infos, attrs)
    placeholders = [
        te.placeholder(a.shape, str(a.dtype), name=f"x{k}") for k, a in enumerate(arrays)
    ]
    legal = spec.legalize(placeholders, attrs)
    many = isinstance(legal, tuple)
    outs_te = legal if many else (legal,)
    infos_out = inferred if many else (inferred,)
    assert len(outs_te) == len(infos_out)
    for tensor, info in zip(outs_te, infos_out):
        assert static(tensor.shape) == info.static_shape(), (tensor.shape, info)
        assert tensor.dtype == info.dtype
    func = te.create_prim_func([*placeholders, *outs_te])
    outs = [np.zeros(static(t.shape), str(t.dtype)) for t in outs_te]
    run = schedlab.build(func) if compiled else (lambda *args: schedlab.interpret(func, *args))
    run(*[np.array(a, order="C") for a in arrays], *outs)
    return tuple(outs) if many else outs[0]


def rand(*shape, dtype="float32", seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed + sum(shape))
    return rng.uniform(low, high, size=shape).astype(dtype)


def run_symbolic(name: str, arrays, shapes, out_shape, attrs=None):
    """Legalize with placeholders of `shapes` (may hold SizeVars) and run on `arrays`; the
    output array has `out_shape`. Symbolic dims are bound from the arrays at call time."""
    spec = get_op(name)
    attrs = spec.resolve_attrs(attrs or {})
    placeholders = [te.placeholder(s, str(a.dtype), name=f"x{k}")
                    for k, (a, s) in enumerate(zip(arrays, shapes))]  # fmt: skip
    out_te = spec.legalize(placeholders, attrs)
    func = te.create_prim_func([*placeholders, out_te])
    out = np.zeros(out_shape, str(out_te.dtype))
    schedlab.interpret(func, *arrays, out)
    return out
