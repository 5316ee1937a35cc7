"""Design spaces: which rules fire on which workloads, and the forks they make (TVM's shapes)."""

from __future__ import annotations

import pytest

from schedlab import te, workloads
from schedlab.target import Target
from schedlab.tune.space import (
    AutoInline,
    MultiLevelTiling,
    PostOrderApply,
    generate_design_space,
    tvm_llvm_rules,
)  # fmt: skip

from .common import blocks, kinds, workload

CPU = Target("cpu", num_cores=2, simd_width=512)


def loops_above(sch, name: str) -> int:
    return len(sch.state.loops_above(sch.state.blocks_named(name)[0]))


def test_gemm_gives_tvms_three_spaces():
    func, _ = workload("gemm")
    spaces = generate_design_space(func, CPU, tvm_llvm_rules())
    # write cache under tile level 1 (i0, j0), level 2 (i0, j0, i1, j1), none
    assert [loops_above(s, "C_global") for s in spaces[:2]] == [2 + 2, 4 + 2]
    assert "C_global" not in blocks(spaces[2].mod)
    for sch in spaces:
        assert sch.get(sch.get_block("C")).annotations["meta_schedule.tiling_structure"] == "SSRSRS"
        assert kinds(sch.trace).count("SamplePerfectTile") == 3  # i, j in 4 tiles, k in 2


def test_cpu_space_adds_the_packed_vector_operand():
    func, _ = workload("gemm")
    spaces = PostOrderApply().generate_design_space(func, CPU)
    packed = ["B_global" in blocks(s.mod) for s in spaces]
    assert len(spaces) == 6 and packed == [True, False] * 3
    assert not any("A_global" in blocks(s.mod) for s in spaces)  # A is not the vector operand
    # the panel is computed at tile level 1: under i0 and j0
    assert loops_above(spaces[0], "B_global") == 2 + 2


@pytest.mark.parametrize("simd, lanes", [(512, 16), (256, 8)])
def test_innermost_tile_is_a_multiple_of_the_target_lanes(simd, lanes):
    func, _ = workloads.get("gemm", M=32, N=64, K=16)
    target = Target("cpu", num_cores=2, simd_width=simd)
    sch = generate_design_space(func, target)[0]
    splits = [i for i in sch.trace.as_json()["insts"] if i[0] == "Split"]
    assert ["l3", "None", lanes] in [s[1] for s in splits]  # j split by the lanes first
    tiles = [d for _, d in sch.trace.as_json()["decisions"]]
    assert sorted(int(x) for x in tiles[1]) and eval_product(tiles[1]) == 64 // lanes


def eval_product(values) -> int:
    result = 1
    for value in values:
        result *= value
    return result


def test_no_lane_split_when_the_lanes_do_not_divide():
    func, _ = workload("gemm")  # N = 40
    sch = generate_design_space(func, CPU)[0]
    assert not [i for i in sch.trace.as_json()["insts"] if i[0] == "Split" and "None" in i[1]]


def test_conv2d_tiles_the_conv_and_samples_the_padding_location():
    func, _ = workload("conv2d_nchw")
    spaces = generate_design_space(func, CPU)
    assert len(spaces) == 3  # the weight is not indexed by the output's innermost axis
    (inlined,) = generate_design_space(func, CPU, [AutoInline()])
    assert "pad_temp" in blocks(inlined.mod)  # if_then_else: AutoInline keeps it
    for sch in spaces:  # RandomComputeLocation samples where it goes (inline included)
        assert kinds(sch.trace).count("SamplePerfectTile") == 7
        assert "SampleComputeLocation" in kinds(sch.trace)


def test_softmax_keeps_exp_and_adds_rfactor_spaces():
    func, _ = workload("softmax")
    spaces = generate_design_space(func, CPU)
    assert len(spaces) == 9  # 3 per reduction: rfactor of the outer part, of the inner, none
    (kept,) = generate_design_space(func, CPU, [AutoInline()])
    assert "T_softmax_exp" in blocks(kept.mod)  # AutoInline does not inline exp
    rf = [sorted(n for n in blocks(s.mod) if n.endswith("_rf")) for s in spaces]
    assert rf[0] == ["T_softmax_expsum_rf", "T_softmax_maxelem_rf"] and rf[-1] == []


def test_layer_norm_spaces():
    func, _ = workload("layer_norm")
    spaces = generate_design_space(func, CPU)
    assert len(spaces) == 9
    assert {"T_sum", "T_var_sum", "T_layer_norm"} <= set(blocks(spaces[-1].mod))


def test_matmul_bias_relu_fuses_the_epilogue_into_the_tile_or_keeps_it():
    func, _ = workload("matmul_bias_relu")
    spaces = generate_design_space(func, CPU, tvm_llvm_rules())
    # the ReLU epilogue is a copy-like consumer: it is moved under tile level 1 or 2 itself
    assert [loops_above(s, "T_relu") for s in spaces] == [2 + 2, 4 + 2, 2]
    assert not any("matmul_global" in blocks(s.mod) for s in spaces)


def test_reduce_sum_rfactor_spaces():
    func, _ = workload("reduce_sum")
    spaces = generate_design_space(func, CPU)
    assert len(spaces) == 3
    assert ["A_red_rf" in blocks(s.mod) for s in spaces] == [True, True, False]


def test_design_spaces_are_seeded():
    func, _ = workload("gemm")
    first = [s.trace.as_json() for s in PostOrderApply(seed=3).generate_design_space(func, CPU)]
    again = [s.trace.as_json() for s in PostOrderApply(seed=3).generate_design_space(func, CPU)]
    assert first == again


def _chain(op: str, reduce: bool):
    a = te.placeholder((6, 10), name="A")
    if op == "exp":
        b = te.compute((6, 10), lambda i, j: te.exp(a[i, j]), name="B")
    else:
        b = te.compute((6, 10), lambda i, j: a[i, j] * 2.0, name="B")
    if reduce:
        k = te.reduce_axis((0, 10), name="k")
        c = te.compute((6,), lambda i: te.sum(b[i, k], axis=k), name="C")
    else:
        c = te.compute((6, 10), lambda i, j: b[i, j] + 1.0, name="C")
    return te.create_prim_func([a, c])


@pytest.mark.parametrize(
    "op, reduce, inlined", [("mul", True, True), ("exp", True, False), ("exp", False, True)]
)
def test_auto_inline(op, reduce, inlined):
    func = _chain(op, reduce)
    (sch,) = generate_design_space(func, CPU, [AutoInline()])
    assert ("B" not in blocks(sch.mod)) == inlined


def test_auto_inline_keeps_a_transpose_feeding_a_reduction():
    a = te.placeholder((6, 10), name="A")
    b = te.compute((10, 6), lambda i, j: a[j, i], name="B")
    k = te.reduce_axis((0, 6), name="k")
    c = te.compute((10,), lambda i: te.sum(b[i, k], axis=k), name="C")
    (sch,) = generate_design_space(te.create_prim_func([a, c]), CPU, [AutoInline()])
    assert "B" in blocks(sch.mod)  # not ordered: inlining would read A across rows


def test_multi_level_tiling_rejects_bad_configs():
    with pytest.raises(ValueError):
        MultiLevelTiling(structure="SXR")
    with pytest.raises(ValueError):
        MultiLevelTiling(reuse_write={"req": "always", "levels": [1]})
    with pytest.raises(ValueError):
        MultiLevelTiling(reuse_write={"req": "may"})


def test_symbolic_extents_leave_the_block_untiled():
    m = te.size_var("m")
    a, b = te.placeholder((m, 7), name="A"), te.placeholder((7, 9), name="B")
    r = te.reduce_axis((0, 7), name="r")
    c = te.compute((m, 9), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    spaces = generate_design_space(te.create_prim_func([a, b, c]), CPU)
    assert spaces and all("SamplePerfectTile" not in kinds(s.trace) for s in spaces)
