"""Element-wise operators: inference matches legalization, results match numpy at odd sizes."""

import math

import numpy as np
import pytest

from schedlab.ir.expr import SizeVar
from schedlab.relax.op import OpTypeError, TensorInfo, get_op

from ._run import rand, run_op

_erf = np.vectorize(math.erf)

BINARY = {
    "relax.add": np.add,
    "relax.subtract": np.subtract,
    "relax.multiply": np.multiply,
    "relax.divide": np.divide,
    "relax.maximum": np.maximum,
    "relax.minimum": np.minimum,
    "relax.equal": np.equal,
    "relax.less": np.less,
    "relax.greater_equal": np.greater_equal,
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((3, 5), (3, 5)), ((4, 1, 7), (5, 1)), ((3,), (2, 1, 3))])
def test_binary_broadcast(name, shapes):
    a, b = rand(*shapes[0]), rand(*shapes[1], seed=1)
    if BINARY[name](1.0, 1.0).dtype == bool:  # comparisons: whole numbers so some are equal
        a, b = np.round(a), np.round(b)
    out = run_op(name, [a, b])
    np.testing.assert_allclose(out, BINARY[name](a, b), rtol=1e-5)


def test_power_positive_base():
    a, b = rand(3, 5, low=0.5, high=2.0), rand(5, seed=3)
    np.testing.assert_allclose(run_op("relax.power", [a, b]), np.power(a, b), rtol=1e-5)


def test_integer_add_and_floor_divide():
    a = np.arange(-7, 8, dtype="int32").reshape(3, 5)
    b = np.array([2, 3, -4, 5, 7], dtype="int32")
    np.testing.assert_array_equal(run_op("relax.add", [a, b]), a + b)
    np.testing.assert_array_equal(run_op("relax.floor_divide", [a, b]), a // b)


def _selu(x):
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    return scale * np.where(x > 0, x, alpha * (np.exp(x) - 1))


UNARY = {
    "relax.exp": (np.exp, {}),
    "relax.tanh": (np.tanh, {}),
    "relax.sigmoid": (lambda x: 1 / (1 + np.exp(-x)), {}),
    "relax.erf": (_erf, {}),
    "relax.negative": (np.negative, {}),
    "relax.abs": (np.abs, {}),
    "relax.sign": (np.sign, {}),
    "relax.nn.relu": (lambda x: np.maximum(x, 0), {}),
    "relax.nn.leakyrelu": (lambda x: np.where(x > 0, x, 0.2 * x), {"alpha": 0.2}),
    "relax.nn.elu": (lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1)), {"alpha": 0.7}),
    "relax.nn.selu": (_selu, {}),
    "relax.nn.gelu": (lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))), {}),
    "relax.nn.gelu_tanh": (
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        {},
    ),
    "relax.nn.silu": (lambda x: x / (1 + np.exp(-x)), {}),
    "relax.nn.softplus": (lambda x: np.log1p(np.exp(x)), {}),
    "relax.clip": (lambda x: np.clip(x, -0.5, 1.25), {"min": -0.5, "max": 1.25}),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    ref, attrs = UNARY[name]
    x = rand(3, 7, 5)
    np.testing.assert_allclose(run_op(name, [x], attrs), ref(x.astype("float64")), rtol=1e-5,
                               atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("name,ref", [("relax.log", np.log), ("relax.sqrt", np.sqrt),
                                      ("relax.rsqrt", lambda x: 1 / np.sqrt(x))])  # fmt: skip
def test_unary_positive_domain(name, ref):
    x = rand(5, 3, low=0.1, high=3.0)
    np.testing.assert_allclose(run_op(name, [x]), ref(x.astype("float64")), rtol=1e-5)


def test_softplus_threshold_is_linear():
    x = np.array([-3.0, 0.5, 25.0, 40.0], dtype="float32")
    out = run_op("relax.nn.softplus", [x], {"beta": 2.0, "threshold": 20.0})
    ref = np.where(2 * x > 20, x, np.log1p(np.exp(2 * x)) / 2)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-7)  # log(1 + e^x) loses ~1e-8


@pytest.mark.parametrize("alpha_len", [5, 1])
def test_prelu(alpha_len):
    x, alpha = rand(3, 5, 7), rand(alpha_len, seed=4, low=0, high=1)
    out = run_op("relax.nn.prelu", [x, alpha], {"axis": 1})
    ref = np.where(x > 0, x, x * alpha.reshape(1, -1, 1))
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_where_broadcasts_three_ways():
    cond = rand(3, 1, 5) > 0
    x, y = rand(4, 1), rand(3, 4, 5, seed=2)
    np.testing.assert_array_equal(run_op("relax.where", [cond, x, y]), np.where(cond, x, y))


def test_astype():
    x = rand(3, 5) * 10
    np.testing.assert_array_equal(
        run_op("relax.astype", [x], {"dtype": "int32"}), x.astype("int32")
    )
    out = run_op("relax.astype", [x], {"dtype": "float64"})
    assert out.dtype == np.float64


def test_compiled_add_and_gelu():
    a, b = rand(5, 7), rand(7, seed=9)
    np.testing.assert_allclose(run_op("relax.add", [a, b], compiled=True), a + b, rtol=1e-5)
    ref = 0.5 * a * (1 + _erf(a / np.sqrt(2)))
    np.testing.assert_allclose(run_op("relax.nn.gelu", [a], compiled=True), ref, rtol=1e-5,
                               atol=1e-6)  # fmt: skip


def test_symbolic_broadcast_shape():
    n = SizeVar("n", "int64")
    out = get_op("relax.add").infer_info([TensorInfo((n, 1), "float32"), TensorInfo((4,))], {})
    assert out.shape[0] is n and out.shape[1].value == 4
    same = get_op("relax.multiply").infer_info([TensorInfo((n, 3)), TensorInfo((n, 3))], {})
    assert same.shape[0] is n


def test_zero_dim_tensors():
    x = np.array(-1.5, dtype="float32")
    np.testing.assert_array_equal(run_op("relax.nn.relu", [x]), np.float32(0))
    np.testing.assert_array_equal(run_op("relax.add", [x, rand(3)]), x + rand(3))


def test_pattern_names():
    assert get_op("relax.add").pattern == "broadcast"
    assert get_op("relax.nn.relu").pattern == "elemwise"


@pytest.mark.parametrize(
    "name,inputs,attrs,words",
    [
        (
            "relax.add",
            [TensorInfo((4, 2)), TensorInfo((3,))],
            {},
            ["relax.add", "(4, 2)", "2 with 3"],
        ),
        ("relax.add", [TensorInfo((3,)), TensorInfo((3,), "int32")], {}, ["same dtype", "int32"]),
        ("relax.exp", [TensorInfo((3,), "int32")], {}, ["relax.exp", "float", "int32"]),
        ("relax.power", [TensorInfo((3,), "int32")] * 2, {}, ["relax.power", "float"]),
        ("relax.nn.prelu", [TensorInfo((2, 3)), TensorInfo((4,))], {}, ["4 elements", "(2, 3)"]),
        ("relax.nn.prelu", [TensorInfo((2, 3)), TensorInfo((3,))], {"axis": 2}, ["axis 2"]),
        ("relax.where", [TensorInfo((3,)), TensorInfo((3,)), TensorInfo((3,))], {}, ["bool"]),
        ("relax.clip", [TensorInfo((3,))], {"min": 2, "max": 1}, ["min 2", "(3)"]),
        ("relax.astype", [TensorInfo((3,))], {"dtype": "floaty"}, ["floaty"]),
        ("relax.nn.relu", [TensorInfo((3,))], {"alpha": 1}, ["unknown attribute", "alpha"]),
    ],
)
def test_errors(name, inputs, attrs, words):
    with pytest.raises(OpTypeError) as info:
        get_op(name).infer_info(inputs, attrs)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
