"""ConvTiling: the default Conv rule's structure in the design space, sizes sampled. Every
candidate is correct at odd sizes, replays from its trace, mutates, and the block is left to
MultiLevelTiling in the other designs."""

from __future__ import annotations

import random

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.relax.transform.fold_layout_rewrite import split_layout_rewrite
from schedlab.target import Target
from schedlab.tune.space import MutateTileSize, PostOrderApply
from schedlab.tune.space.conv_tiling import ConvTiling
from schedlab.tune.space.multi_level_tiling import TILING_STRUCTURE

TARGET = Target("cpu", simd_width=256)


def _structures(designs) -> list[str]:
    found = []
    for design in designs:
        marks = [inst.inputs[1] for inst in design.trace.insts
                 if inst.kind == "Annotate" and inst.attrs[0] == TILING_STRUCTURE]  # fmt: skip
        found.append(str(marks[0]) if marks else "none")
    return found


@pytest.mark.parametrize(
    "sizes",
    [dict(CI=5, H=13, W=11, CO=32), dict(CI=3, H=15, W=17, CO=16, stride=2, padding=0),
     dict(N=2, CI=4, H=7, W=9, CO=24, kernel=1, padding=0),
     dict(CI=6, H=9, W=7, CO=20, kernel=1, padding=0)],  # 20 channels: padded to 24
)  # fmt: skip
def test_conv_designs_sample_correct_candidates(sizes):
    func, reference = workloads.get("conv2d_nchw", **sizes)
    space = PostOrderApply()
    designs = space.generate_design_space(func, TARGET)
    structures = _structures(designs)
    assert {"conv-rows", "conv-channels"} <= set(structures) and "SSRSRS" in structures
    args = workloads.make_args(func, seed=2)
    for design in [d for d, s in zip(designs, structures) if s.startswith("conv")]:
        for seed in (1, 2, 3):
            sch = space.sample_candidate(func, TARGET, design.trace, seed)
            assert sch is not None
            replayed = space.apply_trace(func, TARGET, sch.trace)
            assert replayed is not None
            # one weight copy, padded or not, that FoldLayoutRewrite can run at compile time
            assert split_layout_rewrite(replayed.func) is not None
            schedlab.build(replayed.mod, target=TARGET)(*args)
            np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-4, atol=1e-4)


def test_mutated_conv_tiles_replay_and_stay_correct():
    func, reference = workloads.get("conv2d_nchw", CI=4, H=12, W=12, CO=32)
    space = PostOrderApply()
    designs = space.generate_design_space(func, TARGET)
    design = next(d for d, s in zip(designs, _structures(designs)) if s.startswith("conv"))
    sch = space.sample_candidate(func, TARGET, design.trace, 5)
    rng = random.Random(0)
    args = workloads.make_args(func, seed=3)
    mutated = 0
    for _ in range(6):
        trace = MutateTileSize().apply(sch.trace, rng)
        if trace is None:
            continue
        new = space.apply_trace(func, TARGET, trace)
        assert new is not None
        schedlab.build(new.mod, target=TARGET)(*args)
        np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-4, atol=1e-4)
        mutated += 1
    assert mutated > 0


def test_non_convolutions_and_too_few_channels_are_left_alone():
    space = PostOrderApply(rules=[ConvTiling()])
    for name, sizes in (("gemm", dict(M=16, N=16, K=16)), ("conv2d_nchw", dict(CO=7))):
        func, _ = workloads.get(name, **sizes)
        assert _structures(space.generate_design_space(func, TARGET)) == ["none"]
    with pytest.raises(ValueError, match="orders must be among"):
        ConvTiling(orders=("diagonal",))
