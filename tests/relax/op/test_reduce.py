"""Reductions: inference matches legalization and numpy at odd sizes; errors name the shapes."""

import numpy as np
import pytest

from schedlab.ir.expr import SizeVar
from schedlab.relax.op import OpTypeError, TensorInfo, get_op

from ._run import rand, run_op

REDUCE = {
    "relax.sum": np.sum,
    "relax.mean": np.mean,
    "relax.max": np.max,
    "relax.min": np.min,
    "relax.prod": np.prod,
}
AXES = [None, 1, -1, [0, 2], (2, 0)]


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce(name, axis, keepdims):
    x = rand(3, 5, 7, low=0.5, high=1.5)
    out = run_op(name, [x], {"axis": axis, "keepdims": keepdims})
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    ref = REDUCE[name](x.astype("float64"), axis=np_axis, keepdims=keepdims)
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_integer_sum_and_max():
    x = np.arange(-10, 25, dtype="int32").reshape(5, 7)
    np.testing.assert_array_equal(run_op("relax.sum", [x], {"axis": 0}), x.sum(0))
    np.testing.assert_array_equal(run_op("relax.max", [x], {"axis": [1]}), x.max(1))


@pytest.mark.parametrize("name,fn", [("relax.argmax", np.argmax), ("relax.argmin", np.argmin)])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_reduce(name, fn, axis, keepdims):
    x = np.round(rand(3, 5, 7) * 2)  # repeated values: numpy picks the first
    out = run_op(name, [x], {"axis": axis, "keepdims": keepdims})
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, fn(x, axis=axis, keepdims=keepdims))


def test_compiled_sum_and_argmax():
    x = rand(5, 9, 3)
    out = run_op("relax.sum", [x], {"axis": [1]}, compiled=True)
    np.testing.assert_allclose(out, x.sum(1), rtol=1e-5)
    out = run_op("relax.argmax", [x], {"axis": 1}, compiled=True)
    np.testing.assert_array_equal(out, x.argmax(1))


def test_symbolic_reduce_shape():
    n = SizeVar("n", "int64")
    info = get_op("relax.mean").infer_info([TensorInfo((n, 4, 3))], {"axis": [1], "keepdims": True})
    assert info.shape[0] is n and [d.value for d in info.shape[1:]] == [1, 3]
    assert get_op("relax.sum").pattern == "comm_reduce"


@pytest.mark.parametrize(
    "name,attrs,words",
    [
        ("relax.sum", {"axis": 3}, ["relax.sum", "axis 3", "rank 3", "(2, 3, 4)"]),
        ("relax.max", {"axis": [0, -3]}, ["repeated"]),
        ("relax.argmax", {"axis": [0, 1]}, ["must be an int"]),
        ("relax.mean", {"axis": 1.5}, ["must be an int"]),
    ],
)
def test_errors(name, attrs, words):
    with pytest.raises(OpTypeError) as info:
        get_op(name).infer_info([TensorInfo((2, 3, 4))], attrs)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_mean_needs_float():
    with pytest.raises(OpTypeError, match="float"):
        get_op("relax.mean").infer_info([TensorInfo((2, 3), "int32")], {})
