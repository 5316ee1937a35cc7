"""BlockedConvTiling: the BlockedConv rule's structure in the design space, sizes sampled, for
convolutions in NCHW{b}c. Every candidate is correct at odd sizes, replays from its trace and
mutates; other blocks are left alone."""

from __future__ import annotations

import random

import numpy as np
import pytest

import schedlab
from schedlab import te
from schedlab.relax.op import get_op
from schedlab.target import Target
from schedlab.tune.space import MutateTileSize, PostOrderApply
from schedlab.tune.space.blocked_conv_tiling import BlockedConvTiling

from .test_conv_tiling import _structures

TARGET = Target("cpu", simd_width=256)  # 8 float32 lanes: the block


def blocked_conv(cin_blocks, inner, cout_blocks, size, kernel, stride=1, pad=0, lanes=8):
    """A conv2d PrimFunc in NCHW{inner}c x OIHW{inner}i{lanes}o -> NCHW{lanes}c, and a numpy
    reference of it."""
    spec = get_op("relax.nn.conv2d")
    attrs = spec.resolve_attrs({
        "strides": stride, "padding": pad, "data_layout": f"NCHW{inner}c",
        "kernel_layout": f"OIHW{inner}i{lanes}o", "out_layout": f"NCHW{lanes}c"})  # fmt: skip
    data = te.placeholder((1, cin_blocks, *size, inner), "float32", name="data")
    weight = te.placeholder((cout_blocks, cin_blocks, kernel, kernel, inner, lanes), "float32",
                            name="weight")  # fmt: skip
    out = spec.legalize([data, weight], attrs)
    func = te.create_prim_func([data, weight, out])

    def reference(x, w):
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad), (0, 0)))
        oh, ow = (x.shape[2] - kernel) // stride + 1, (x.shape[3] - kernel) // stride + 1
        result = np.zeros((1, cout_blocks, oh, ow, lanes))
        for ry in range(kernel):
            for rx in range(kernel):
                window = x[:, :, ry : ry + stride * oh : stride, rx : rx + stride * ow : stride]
                result += np.einsum("ncyxi,ocil->noyxl", window, w[:, :, ry, rx])
        return result

    return func, reference


def _args(func, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal([int(d) for d in b.shape]).astype("float32")
            for b in func.buffer_map.values()]  # fmt: skip


@pytest.mark.parametrize(
    "sizes",
    [dict(cin_blocks=2, inner=8, cout_blocks=4, size=(7, 11), kernel=3, pad=1),
     dict(cin_blocks=1, inner=3, cout_blocks=2, size=(13, 9), kernel=3, stride=2),
     dict(cin_blocks=3, inner=8, cout_blocks=6, size=(5, 13), kernel=1)],
)  # fmt: skip
def test_blocked_conv_designs_sample_correct_candidates(sizes):
    func, reference = blocked_conv(**sizes)
    space = PostOrderApply()
    designs = space.generate_design_space(func, TARGET)
    structures = _structures(designs)
    assert {"blocked-conv-rows", "blocked-conv-channels"} <= set(structures), structures
    args = _args(func, seed=2)
    want = reference(*args[:2])
    for design in [d for d, s in zip(designs, structures) if s.startswith("blocked")]:
        for seed in (1, 2, 3):
            sch = space.sample_candidate(func, TARGET, design.trace, seed)
            assert sch is not None
            replayed = space.apply_trace(func, TARGET, sch.trace)
            assert replayed is not None
            args[-1][...] = 0
            schedlab.build(replayed.mod, target=TARGET)(*args)
            np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4)


def test_mutated_blocked_conv_tiles_replay_and_stay_correct():
    func, reference = blocked_conv(2, 8, 4, (12, 12), 3, pad=1)
    space = PostOrderApply()
    designs = space.generate_design_space(func, TARGET)
    design = next(d for d, s in zip(designs, _structures(designs)) if s.startswith("blocked"))
    sch = space.sample_candidate(func, TARGET, design.trace, 5)
    rng = random.Random(0)
    args = _args(func, seed=3)
    want = reference(*args[:2])
    mutated = 0
    for _ in range(6):
        trace = MutateTileSize().apply(sch.trace, rng)
        if trace is None:
            continue
        new = space.apply_trace(func, TARGET, trace)
        assert new is not None
        schedlab.build(new.mod, target=TARGET)(*args)
        np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4)
        mutated += 1
    assert mutated > 0


def test_nchw_convolutions_and_other_blocks_are_left_alone():
    from schedlab import workloads

    space = PostOrderApply(rules=[BlockedConvTiling()])
    for name, sizes in (("gemm", dict(M=16, N=16, K=16)), ("conv2d_nchw", dict(CO=16))):
        func, _ = workloads.get(name, **sizes)
        assert _structures(space.generate_design_space(func, TARGET)) == ["none"]
    func, _ = blocked_conv(1, 8, 1, (5, 5), 1, lanes=16)  # a block of two vectors
    assert _structures(space.generate_design_space(func, TARGET)) == ["none"]
    with pytest.raises(ValueError, match="orders must be among"):
        BlockedConvTiling(orders=("diagonal",))
