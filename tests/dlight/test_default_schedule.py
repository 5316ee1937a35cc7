"""The default CPU schedule (schedlab.dlight): every workload at odd sizes, scheduled by the
rules, matches its numpy reference interpreted and compiled; the rule per block is reported."""

from __future__ import annotations

import numpy as np
import pytest

import schedlab
from schedlab import dlight, workloads
from schedlab.ir.function import IRModule
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import For, ForKind
from schedlab.script import from_source

# Odd, non-divisible sizes (not multiples of any vector width or register tile).
ODD_SIZES = {
    "gemm": dict(M=37, N=45, K=29),
    "batch_matmul": dict(batch=3, M=19, N=21, K=13),
    "gemv": dict(M=37, K=29),
    "matmul_bias_relu": dict(M=37, N=45, K=29),
    "conv1d_ncw": dict(CI=5, L=23, CO=7),
    "conv2d_nchw": dict(CI=5, H=13, W=11, CO=7),
    "dilated_conv2d_nchw": dict(CI=3, H=13, W=11, CO=5),
    "group_conv2d_nchw": dict(CI=6, H=9, W=11, CO=9, groups=3),
    "conv3d_ncdhw": dict(CI=3, D=5, H=7, W=9, CO=5),
    "conv2d_nhwc": dict(CI=5, H=9, W=11, CO=19),
    "depthwise_conv2d_nchw": dict(C=7, H=13, W=11),
    "conv2d_transpose_nchw": dict(CI=5, H=7, W=9, CO=3),
    "capsule_conv2d": dict(H=5, W=7, CI=3, CO=5),
    "softmax": dict(M=7, N=37),
    "layer_norm": dict(M=7, N=37),
    "rms_norm": dict(M=7, N=37),
    "reduce_sum": dict(M=13, N=37),
    "reduce_max": dict(M=13, N=37),
    "norm": dict(M=13, N=37),
    "transpose": dict(M=13, N=37),
    "max_pool2d_nchw": dict(C=5, H=13, W=15),
    "avg_pool2d_nchw": dict(C=5, H=13, W=15),
}

# The rule each block must get (blocks not listed: any rule, or none).
EXPECTED_RULES = {
    "gemm": {"C": "Matmul"},
    "batch_matmul": {"C": "Matmul"},
    "gemv": {"y": "Reduction"},
    "matmul_bias_relu": {"matmul": "Matmul", "T_relu": "Matmul"},  # epilogue folded in
    "conv2d_nchw": {"pad_temp": "Elementwise", "conv2d_nchw": "Reduction"},
    "softmax": {
        "T_softmax_maxelem": "Reduction", "T_softmax_exp": "Elementwise",
        "T_softmax_expsum": "Reduction", "T_softmax_norm": "Elementwise",
    },
    "layer_norm": {"T_sum": "Reduction", "T_layer_norm": "Elementwise"},
    "transpose": {"T_transpose": "Elementwise"},
    "max_pool2d_nchw": {"pool_max": "Reduction"},
    "norm": {},  # a 0-d reduction too small for threads: left as it is
}  # fmt: skip


def default_schedule(func):
    """The function after ApplyDefaultSchedule with the CPU rules."""
    mod = IRModule.from_expr(func, "main")
    return dlight.ApplyDefaultSchedule(*dlight.cpu.default_rules())(mod)["main"]


def check_numerics(func, reference, num_outputs: int, compiled: bool) -> None:
    args = workloads.make_args(func, seed=3)
    if compiled:
        schedlab.build(func)(*args)
    else:
        schedlab.interpret(func, *args)
    expected = reference(*args[: len(args) - num_outputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(args[len(args) - num_outputs :], expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def loop_kinds(func) -> set[ForKind]:
    kinds = set()
    post_order_visit(func.body, lambda n: kinds.add(n.kind) if isinstance(n, For) else None)
    return kinds


def test_every_workload_has_odd_sizes_here():
    assert set(workloads.names()) <= set(ODD_SIZES)


@pytest.mark.parametrize("name", sorted(ODD_SIZES))
def test_workload_default_schedule_matches_reference(name):
    func, reference = workloads.get(name, **ODD_SIZES[name])
    scheduled = default_schedule(func)
    assert dlight.is_scheduled(scheduled)
    fired = dlight.rules_of(scheduled)
    for block, rule in EXPECTED_RULES.get(name, {}).items():
        assert fired.get(block) == rule, (name, fired)
    if EXPECTED_RULES.get(name) == {}:
        assert fired == {}
    num_outputs = workloads.spec(name).num_outputs
    check_numerics(scheduled, reference, num_outputs, compiled=False)
    check_numerics(scheduled, reference, num_outputs, compiled=True)


# Odd sizes large enough for threads (at least MIN_PARALLEL_WORK block instances).
PARALLEL_SIZES = {
    "gemm": dict(M=67, N=45, K=29),
    "conv2d_nchw": dict(CI=5, H=13, W=11, CO=7),
    "softmax": dict(M=129, N=257),
    "transpose": dict(M=181, N=183),
}


@pytest.mark.parametrize("name", sorted(PARALLEL_SIZES))
def test_default_schedule_parallelizes_and_vectorizes(name):
    func, _ = workloads.get(name, **PARALLEL_SIZES[name])
    kinds = loop_kinds(default_schedule(func))
    assert {ForKind.PARALLEL, ForKind.VECTORIZED} <= kinds


def test_small_blocks_stay_single_threaded():
    func, _ = workloads.get("softmax", M=7, N=37)
    kinds = loop_kinds(default_schedule(func))
    assert ForKind.VECTORIZED in kinds and ForKind.PARALLEL not in kinds


def test_gemm_gets_register_tile_at_divisible_sizes():
    func, reference = workloads.get("gemm", M=64, N=64, K=32)
    scheduled = default_schedule(func)
    text = scheduled.script()
    assert 'scope="local"' in text and "C_init" in text
    assert {ForKind.UNROLLED, ForKind.VECTORIZED, ForKind.PARALLEL} <= loop_kinds(scheduled)
    check_numerics(scheduled, reference, 1, compiled=True)


def test_scheduled_function_is_left_alone():
    func, _ = workloads.get("gemm", M=8, N=8, K=8)
    marked = func.with_attr(dlight.SCHEDULED_ATTR, True)
    mod = IRModule.from_expr(marked, "main")
    result = dlight.ApplyDefaultSchedule(*dlight.cpu.default_rules())(mod)
    assert result["main"] is marked


def test_pass_on_a_bare_prim_func_returns_a_prim_func():
    func, reference = workloads.get("reduce_sum", M=5, N=9)
    result = dlight.ApplyDefaultSchedule(dlight.cpu.Reduction())(func)
    assert dlight.rules_of(result) == {"A_red": "Reduction"}
    check_numerics(result, reference, 1, compiled=False)


def test_apply_default_schedule_checks_its_rules():
    with pytest.raises(ValueError, match="at least one rule"):
        dlight.ApplyDefaultSchedule()
    with pytest.raises(TypeError, match="expected ScheduleRule"):
        dlight.ApplyDefaultSchedule("Matmul")


@pytest.mark.parametrize(
    "name, sizes",
    [("conv2d_nchw", dict(CI=5, H=9, W=13, CO=11)), ("conv2d_nhwc", dict(CI=5, H=7, W=11, CO=19))],
)
def test_convolution_gets_register_rows(name, sizes):
    """Predicated rows (11 output channels, 11 columns: no divisor fits the 8-row tile)."""
    func, reference = workloads.get(name, **sizes)
    scheduled = default_schedule(func)
    assert 'scope="local"' in scheduled.script()
    assert {ForKind.UNROLLED, ForKind.VECTORIZED, ForKind.PARALLEL} <= loop_kinds(scheduled)
    check_numerics(scheduled, reference, 1, compiled=False)
    check_numerics(scheduled, reference, 1, compiled=True)


def test_pass_reads_the_target_from_the_context():
    """A 128-bit target (4 float lanes) entered with `with` shapes the vector loops."""
    func, reference = workloads.get("transpose", M=8, N=12)
    with schedlab.Target("cpu", simd_width=128):
        scheduled = dlight.ApplyDefaultSchedule(dlight.cpu.Elementwise())(func)
    assert "T.vectorized(4)" in scheduled.script()
    check_numerics(scheduled, reference, 1, compiled=False)


@pytest.mark.parametrize("name", sorted(ODD_SIZES))
def test_every_step_keeps_the_ir_well_formed(name):
    """The same schedules with the IR verified after every primitive."""
    func, _ = workloads.get(name, **ODD_SIZES[name])
    _, fired = dlight.schedule_func(func, dlight.cpu.default_rules(), debug=True)
    assert fired == dlight.rules_of(default_schedule(func))


def test_function_without_blocks_is_left_alone():
    func = from_source(
        "@T.prim_func\n"
        'def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):\n'
        "    for i in range(8):\n"
        "        B[i] = A[i] + T.float32(1)\n"
    )
    mod = IRModule.from_expr(func, "main")
    assert dlight.ApplyDefaultSchedule(*dlight.cpu.default_rules())(mod)["main"] is func
    assert dlight.cpu.Fallback().apply(func, "cpu") is None


@pytest.mark.parametrize(
    "name, dtype, tol",
    [("softmax", "float16", 2e-2), ("layer_norm", "float64", 1e-9), ("rms_norm", "float16", 2e-2)],
)
def test_other_dtypes(name, dtype, tol):
    """Vector lengths follow the dtype (32 float16 or 8 float64 lanes in 512 bits)."""
    func, reference = workloads.get(name, dtype=dtype, M=7, N=37)
    scheduled = default_schedule(func)
    args = workloads.make_args(scheduled, seed=3)
    schedlab.build(scheduled)(*args)
    want = np.asarray(reference(*args[:-1])).astype("float64")
    np.testing.assert_allclose(args[-1].astype("float64"), want, rtol=tol, atol=tol)
