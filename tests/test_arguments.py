"""`schedlab.arguments.bind_arguments`: checks against the signature and symbolic size binding."""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import pytest

from schedlab.arguments import ArgumentError, BoundArguments, bind_arguments
from schedlab.ir import (
    Block,
    BlockRealize,
    Buffer,
    Evaluate,
    PrimFunc,
    SizeVar,
    Var,
    const,
    decl_buffer,
)


def make(buffers, scalars=(), attrs=None):
    params = [Var(b.name, "handle") for b in buffers] + list(scalars)
    body = BlockRealize((), const(True), Block((), (), (), "root", Evaluate(const(0))))
    attrs = {"global_symbol": "f", **(attrs or {})}
    return PrimFunc(params, body, dict(zip(params, buffers)), attrs)


def test_binds_arrays_scalars_and_symbolic_sizes():
    n, m = SizeVar("n"), SizeVar("m")
    a = decl_buffer((n, m), "float32", "A")
    b = decl_buffer((m,), "int8", "B")
    alpha, count = Var("alpha", "float32"), Var("count", "int64")
    f = make([a, b], [alpha, count])
    x, y = np.zeros((3, 5), "float32"), np.zeros(5, "int8")
    bound = bind_arguments(f, [x, y, 2.5, 7])
    assert isinstance(bound, BoundArguments)
    assert bound.values[0] is x and bound.values[1] is y
    assert bound.values[2] == np.float32(2.5) and isinstance(bound.values[2], np.float32)
    assert bound.values[3] == 7
    assert bound.value_of(n) == 3 and bound.value_of(m) == 5
    assert bound.arrays == (x, y)
    assert bound.values_by_id()[id(m)] == 5


def test_wrong_number_of_arguments():
    f = make([decl_buffer((2,), "float32", "A"), decl_buffer((2,), "float32", "B")])
    with pytest.raises(ValueError, match=r"expected 2 argument\(s\) \(A, B\), got 1"):
        bind_arguments(f, [np.zeros(2, "float32")])


def test_wrong_dtype_names_parameter_expected_and_actual():
    f = make([decl_buffer((4,), "float32", "A")])
    with pytest.raises(ValueError, match="argument A dtype: expected float32, got float64"):
        bind_arguments(f, [np.zeros(4)])
    g = make([decl_buffer((4,), "bfloat16", "H")])
    bind_arguments(g, [np.zeros(4, ml_dtypes.bfloat16)])
    with pytest.raises(ValueError, match="expected bfloat16, got float16"):
        bind_arguments(g, [np.zeros(4, "float16")])


def test_wrong_byte_order_is_named():
    f = make([decl_buffer((4,), "float32", "A")])
    other = ">f4" if sys.byteorder == "little" else "<f4"
    order = "big" if other == ">f4" else "little"
    with pytest.raises(ValueError) as info:
        bind_arguments(f, [np.zeros(4, "float32").astype(other)])
    assert str(info.value) == (
        f"f: argument A dtype: expected float32 in this machine's byte order "
        f"({sys.byteorder}-endian), got float32 ({order}-endian, '{other}'); convert it with "
        ".astype('float32')"
    )
    with pytest.raises(ValueError, match=rf"expected float32, got float64 \({order}-endian"):
        bind_arguments(f, [np.zeros(4, "float64").astype(other.replace("4", "8"))])


def test_wrong_rank_and_shape():
    f = make([decl_buffer((4, 3), "float32", "A")])
    with pytest.raises(
        ValueError,
        match=r"argument A rank: expected 2 dimension\(s\), shape \(4, 3\), "
        r"got 1 dimension\(s\), shape \(12,\)",
    ):
        bind_arguments(f, [np.zeros(12, "float32")])
    with pytest.raises(ValueError, match=r"argument A shape\[1\].*expected 3, got 5"):
        bind_arguments(f, [np.zeros((4, 5), "float32")])


def test_not_an_array():
    f = make([decl_buffer((2,), "float32", "A")])
    with pytest.raises(
        ValueError,
        match=r"argument A: expected a numpy array of float32 with shape "
        r"\(2,\), got list",
    ):
        bind_arguments(f, [[1.0, 2.0]])


def test_non_contiguous_array_for_a_compact_buffer():
    f = make([decl_buffer((4, 3), "float32", "A")])
    view = np.zeros((4, 6), "float32")[:, ::2]
    with pytest.raises(ValueError, match="argument A layout: expected a C-contiguous array"):
        bind_arguments(f, [view])


def test_inconsistent_symbolic_sizes():
    n = SizeVar("n")
    f = make([decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")])
    with pytest.raises(
        ValueError,
        match=r"argument B shape\[0\].*expected n = 4 \(bound by argument "
        r"A shape\[0\].*\), got 5",
    ):
        bind_arguments(f, [np.zeros(4, "float32"), np.zeros(5, "float32")])


def test_scalar_parameter_that_is_also_a_size():
    n = Var("n")
    f = make([decl_buffer((n,), "float32", "A")], [n])
    bound = bind_arguments(f, [np.zeros(3, "float32"), 3])
    assert bound.value_of(n) == 3
    with pytest.raises(ValueError, match=r"argument n: expected n = 4 \(bound by argument A"):
        bind_arguments(f, [np.zeros(4, "float32"), 3])


def test_scalar_of_the_wrong_kind_or_range():
    k, x, flag = Var("k", "int8"), Var("x", "float32"), Var("flag", "bool")
    f = make([], [k, x, flag])
    bind_arguments(f, [5, 1, True])
    with pytest.raises(ValueError, match="argument k: expected a int8 scalar, got int 300"):
        bind_arguments(f, [300, 1.0, True])
    with pytest.raises(ValueError, match="argument k: expected a int8 scalar, got float 1.5"):
        bind_arguments(f, [1.5, 1.0, True])
    with pytest.raises(ValueError, match="argument x: expected a float32 scalar, got str"):
        bind_arguments(f, [1, "1.0", True])
    with pytest.raises(ValueError, match="argument flag: expected a bool scalar"):
        bind_arguments(f, [1, 1.0, 1])


def test_symbolic_strides_bind_and_constant_strides_are_checked():
    n, m, s0 = SizeVar("n"), SizeVar("m"), Var("s0")
    a = Buffer(Var("A", "handle"), "float32", (n, m), "A", strides=(s0, const(1)))
    f = make([a])
    view = np.zeros((6, 10), "float32")[::2, 1:8]
    bound = bind_arguments(f, [view])
    assert bound.value_of(s0) == 20 and bound.value_of(m) == 7
    with pytest.raises(
        ValueError, match=r"argument A strides\[1\] \(in elements\): expected 1, got 2"
    ):
        bind_arguments(f, [np.zeros((6, 10), "float32")[:, ::2]])


def test_size_expressions_are_checked_after_binding():
    n = SizeVar("n")
    f = make([decl_buffer((n,), "float32", "A"), decl_buffer((n * 2,), "float32", "B")])
    bind_arguments(f, [np.zeros(3, "float32"), np.zeros(6, "float32")])
    with pytest.raises(ValueError, match=r"argument B shape\[0\].*expected n \* 2 = 6, got 7"):
        bind_arguments(f, [np.zeros(3, "float32"), np.zeros(7, "float32")])
    g = make([decl_buffer((n * 2,), "float32", "B")])
    with pytest.raises(ValueError, match="not determined by any argument"):
        bind_arguments(g, [np.zeros(6, "float32")])


def test_flattened_parameter_takes_its_logical_array():
    n = SizeVar("n")
    flat = decl_buffer((n * 3,), "float32", "A")
    f = make([flat], attrs={"param_shapes": {"A": (n, 3)}})
    x = np.arange(12, dtype="float32").reshape(4, 3)
    bound = bind_arguments(f, [x])
    assert bound.values[0].shape == (12,) and np.shares_memory(bound.values[0], x)
    assert bound.value_of(n) == 4
    with pytest.raises(ValueError, match=r"argument A shape\[1\].*expected 3, got 4"):
        bind_arguments(f, [np.zeros((3, 4), "float32")])
    with pytest.raises(ValueError, match="C-contiguous"):
        bind_arguments(f, [np.zeros((4, 6), "float32")[:, ::2]])


def test_size_out_of_the_variable_dtype_range():
    n = Var("n", "int8")
    f = make([decl_buffer((n,), "int8", "A")])
    with pytest.raises(ValueError, match="fits n's dtype int8"):
        bind_arguments(f, [np.zeros(300, "int8")])


def test_not_a_primfunc():
    with pytest.raises(TypeError, match="expected a PrimFunc"):
        bind_arguments("f", [])


def test_errors_are_argument_errors():
    f = make([decl_buffer((2,), "float32", "A")])
    with pytest.raises(ArgumentError):
        bind_arguments(f, [np.zeros(3, "float32")])
