"""Data types of the loop IR: scalar kinds, bit widths and vector lanes.

A `DataType` is immutable and interned by its text form ("float32", "int8x16", "bool", "handle"),
so comparing two dtypes is cheap and `DataType("float32") is DataType("float32")`.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np

_KINDS = ("int", "uint", "float", "bfloat", "bool", "handle", "void")
_PATTERN = re.compile(r"^(int|uint|float|bfloat|bool|handle|void)(\d*)(?:x(\d+))?$")


class DataType:
    """A scalar or vector data type: `kind` ("int", "uint", "float", "bfloat", "bool", "handle",
    "void"), `bits` and `lanes`. Construct from text: `DataType("float32x4")`."""

    __slots__ = ("kind", "bits", "lanes", "_text")
    _interned: dict[str, DataType] = {}

    def __new__(cls, text: str | DataType | np.dtype | type) -> DataType:
        if isinstance(text, DataType):
            return text
        if not isinstance(text, str):
            text = _from_numpy(text)
        found = cls._interned.get(text)
        if found is not None:
            return found
        kind, bits, lanes = _parse(text)
        self = object.__new__(cls)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "lanes", lanes)
        canonical = _format(kind, bits, lanes)
        object.__setattr__(self, "_text", canonical)
        interned = cls._interned.setdefault(canonical, self)
        cls._interned[text] = interned
        return interned

    def __setattr__(self, name, value):
        raise AttributeError("DataType is immutable")

    def __reduce__(self):
        return (DataType, (self._text,))

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"DataType({self._text!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = DataType(other)
            except ValueError:
                return False
        return self is other

    def __hash__(self) -> int:
        return hash(self._text)

    # -- properties -----------------------------------------------------------------------------
    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_uint(self) -> bool:
        return self.kind == "uint"

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_float(self) -> bool:
        """IEEE float or bfloat16."""
        return self.kind in ("float", "bfloat")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_handle(self) -> bool:
        return self.kind == "handle"

    @property
    def is_void(self) -> bool:
        return self.kind == "void"

    @property
    def is_scalar(self) -> bool:
        return self.lanes == 1

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def bytes(self) -> int:
        """Storage size of one element (all lanes), in bytes."""
        return max(1, self.bits // 8) * self.lanes

    def element_of(self) -> DataType:
        """The scalar type of one lane."""
        return self.with_lanes(1)

    def with_lanes(self, lanes: int) -> DataType:
        return DataType(_format(self.kind, self.bits, lanes))

    def with_bits(self, bits: int) -> DataType:
        return DataType(_format(self.kind, bits, self.lanes))

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of one lane (bfloat16 through ml_dtypes)."""
        return _to_numpy(self.element_of()._text)

    def min_value(self):
        """Smallest representable value of one lane (a Python int or float)."""
        if self.is_bool:
            return False
        if self.is_integer:
            return _integer_range(self.kind, self.bits)[0]
        return -float("inf")

    def max_value(self):
        """Largest representable value of one lane (a Python int or float)."""
        if self.is_bool:
            return True
        if self.is_integer:
            return _integer_range(self.kind, self.bits)[1]
        return float("inf")


@cache
def _integer_range(kind: str, bits: int) -> tuple[int, int]:
    """(min, max) of an integer type; cached because every IntImm checks its value with it."""
    if kind == "uint":
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _parse(text: str) -> tuple[str, int, int]:
    match = _PATTERN.match(text)
    if not match:
        raise ValueError(
            f"dtype: expected a type such as 'float32', 'int8', 'bool' or 'float32x4', got {text!r}"
        )
    kind, bits_text, lanes_text = match.groups()
    defaults = {
        "bool": 1,
        "handle": 64,
        "void": 0,
        "int": 32,
        "uint": 32,
        "float": 32,
        "bfloat": 16,
    }
    bits = int(bits_text) if bits_text else defaults[kind]
    lanes = int(lanes_text) if lanes_text else 1
    allowed = {
        "int": (8, 16, 32, 64),
        "uint": (8, 16, 32, 64),
        "float": (16, 32, 64),
        "bfloat": (16,),
        "bool": (1,),
        "handle": (64,),
        "void": (0,),
    }
    if bits not in allowed[kind]:
        raise ValueError(f"dtype: {kind} supports {allowed[kind]} bits, got {text!r}")
    if lanes < 1:
        raise ValueError(f"dtype: lanes must be >= 1, got {text!r}")
    return kind, bits, lanes


def _format(kind: str, bits: int, lanes: int) -> str:
    base = kind if kind in ("bool", "handle", "void") else f"{kind}{bits}"
    return base if lanes == 1 else f"{base}x{lanes}"


@cache
def _to_numpy(text: str) -> np.dtype:
    if text == "bfloat16":
        try:
            import ml_dtypes
        except ImportError as err:  # pragma: no cover - ml_dtypes is a dependency
            raise ImportError(
                "bfloat16 needs the ml_dtypes package: pip install ml_dtypes"
            ) from err
        return np.dtype(ml_dtypes.bfloat16)
    if text in ("handle", "void"):
        raise TypeError(f"dtype {text!r} has no numpy equivalent")
    return np.dtype(text)


def _from_numpy(value) -> str:
    try:
        dt = np.dtype(value)
    except TypeError as err:
        raise ValueError(f"dtype: expected a dtype name or numpy dtype, got {value!r}") from err
    if dt.name == "bfloat16":
        return "bfloat16"
    if dt == np.bool_:
        return "bool"
    return dt.name


def as_dtype(value) -> DataType:
    """Coerce a string, numpy dtype or DataType to a DataType."""
    return DataType(value)


bool_ = DataType("bool")
int8, int16, int32, int64 = (DataType(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (DataType(f"uint{b}") for b in (8, 16, 32, 64))
float16, float32, float64 = (DataType(f"float{b}") for b in (16, 32, 64))
bfloat16 = DataType("bfloat16")
handle = DataType("handle")
void = DataType("void")

ALL_SCALAR_TYPES = (
    bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float16, bfloat16, float32, float64,
)  # fmt: skip
