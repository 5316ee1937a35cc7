import numpy as np
import pytest

from schedlab.ir.dtype import ALL_SCALAR_TYPES, DataType


def test_parse_and_intern():
    assert DataType("float32") is DataType("float32")
    assert DataType("int") is DataType("int32")
    vec = DataType("float32x8")
    assert (vec.kind, vec.bits, vec.lanes) == ("float", 32, 8)
    assert vec.element_of() is DataType("float32")
    assert vec == "float32x8" and str(vec) == "float32x8"
    assert DataType("bool").bits == 1 and DataType("bfloat16").is_float


@pytest.mark.parametrize("dtype", ALL_SCALAR_TYPES)
def test_numpy_mapping_roundtrip(dtype):
    np_dtype = dtype.numpy
    assert DataType(np_dtype) is dtype
    assert np_dtype.itemsize == max(1, dtype.bits // 8)


def test_bad_dtype_names_the_input():
    with pytest.raises(ValueError, match="float33"):
        DataType("float33")
    with pytest.raises(ValueError, match="expected a type"):
        DataType("tensor")


def test_limits():
    assert DataType("int8").min_value() == -128
    assert DataType("uint16").max_value() == 65535
    assert DataType("float32").max_value() == float("inf")
    assert np.dtype(DataType("float16").numpy) == np.float16
