"""Every registry workload (as schedlab.te builds it) lowers to the lowered form and computes
its numpy reference after every pass, at odd sizes."""

import numpy as np
import pytest

import schedlab
from schedlab import workloads
from schedlab.ir import For, IfThenElse, post_order_visit
from schedlab.ir.transform import PassContext, PassRecorder
from schedlab.transform import lower, verify_lowered

SIZES = {
    "gemm": dict(M=19, N=11, K=13),
    "batch_matmul": dict(batch=2, M=5, N=7, K=9),
    "gemv": dict(M=13, K=19),
    "matmul_bias_relu": dict(M=7, N=11, K=5),
    "conv1d_ncw": dict(N=1, CI=3, L=13, CO=5, kernel=3, stride=2, padding=1, dilation=1),
    "conv2d_nchw": dict(N=1, CI=3, H=7, W=9, CO=5, kernel=3, stride=1, padding=1),
    "dilated_conv2d_nchw": dict(N=1, CI=2, H=9, W=7, CO=3, kernel=3, padding=2, dilation=2),
    "group_conv2d_nchw": dict(N=1, CI=4, H=7, W=5, CO=6, kernel=3, padding=1, groups=2),
    "conv3d_ncdhw": dict(N=1, CI=2, D=5, H=5, W=7, CO=3, kernel=3, stride=1, padding=1),
    "conv2d_nhwc": dict(N=1, CI=3, H=7, W=5, CO=5, kernel=3, stride=2, padding=1),
    "depthwise_conv2d_nchw": dict(N=1, C=3, H=7, W=9, multiplier=2, kernel=3, padding=1),
    "conv2d_transpose_nchw": dict(N=1, CI=3, H=5, W=5, CO=3, kernel=3, stride=2, padding=1),
    "capsule_conv2d": dict(N=1, H=5, W=7, CI=3, CO=3, kernel=3, stride=1, padding=1, capsule=2),
    "softmax": dict(M=7, N=13),
    "layer_norm": dict(M=7, N=13),
    "rms_norm": dict(M=7, N=13),
    "reduce_sum": dict(M=7, N=13),
    "reduce_max": dict(M=7, N=13),
    "transpose": dict(M=7, N=13),
    "norm": dict(M=7, N=13),
}


def test_every_workload_is_covered():
    assert sorted(SIZES) == sorted(workloads.names(include_plugins=False))


def _check(func, args, expected, num_outputs, where):
    arrays = [a.copy() for a in args]
    schedlab.interpret(func, *arrays)
    for got, want in zip(arrays[-num_outputs:], expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=where)


@pytest.mark.parametrize("name", sorted(SIZES))
def test_numerics_after_every_pass(name):
    func, reference = workloads.get(name, **SIZES[name])
    args = workloads.make_args(func, seed=3)
    num_outputs = func.attrs["schedlab.num_outputs"]
    expected = reference(*args[:-num_outputs])
    expected = expected if isinstance(expected, tuple) else (expected,)
    recorder = PassRecorder()
    with PassContext(instruments=[recorder]):
        lowered = lower(func)
    verify_lowered(lowered)
    for record in recorder.records[:-1]:
        if record.changed:
            _check(record.after[name], args, expected, num_outputs, f"after {record.name}")


def test_unscheduled_gemm_reduction_loop_is_branch_free():
    lowered = lower(workloads.get("gemm", M=19, N=11, K=13)[0])["gemm"]
    loops = []
    post_order_visit(lowered.body, lambda n: loops.append(n) if isinstance(n, For) else None)
    (k_loop,) = [loop for loop in loops if loop.loop_var.name == "k"]
    branches = []
    post_order_visit(k_loop, lambda n: branches.append(n) if isinstance(n, IfThenElse) else None)
    assert not branches
