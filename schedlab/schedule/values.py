"""Plain values in traces (attributes, decisions, annotation values): how they are written to
JSON and to Python and read back. Extension types (e.g. IndexMap) register a codec; reading
never executes code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import TraceError

_TYPE_KEY = "__type__"


@dataclass(frozen=True)
class ValueCodec:
    name: str
    cls: type
    to_json: Callable[[Any], Any]
    from_json: Callable[[Any], Any]
    to_python: Callable[[Any], str]


_CODECS: dict[str, ValueCodec] = {}


def register_value_type(name: str, cls: type, to_json, from_json, to_python) -> None:
    """Let values of `cls` appear in traces: `to_json(v)` gives JSON data, `from_json(data)`
    rebuilds the value (as data only), `to_python(v)` the Python expression text."""
    _CODECS[name] = ValueCodec(name, cls, to_json, from_json, to_python)


def _codec_for(value) -> ValueCodec | None:
    for codec in _CODECS.values():
        if isinstance(value, codec.cls):
            return codec
    return None


def encode_value(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TraceError(f"trace values: dict keys must be strings, got {list(value)}")
        return {k: encode_value(v) for k, v in value.items()}
    if hasattr(value, "item") and hasattr(value, "dtype"):  # numpy scalar
        return value.item()
    codec = _codec_for(value)
    if codec is None:
        raise TraceError(f"trace values: cannot record a {type(value).__name__} ({value!r})")
    return {_TYPE_KEY: codec.name, "value": codec.to_json(value)}


def decode_value(data):
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode_value(v) for v in data]
    if isinstance(data, dict):
        if _TYPE_KEY in data:
            codec = _CODECS.get(data[_TYPE_KEY])
            if codec is None:
                raise TraceError(f"trace values: unknown value type {data[_TYPE_KEY]!r}")
            try:
                return codec.from_json(data.get("value"))
            except TraceError:
                raise
            except Exception as err:  # a codec reading malformed data: say which value
                raise TraceError(
                    f"trace values: malformed {data[_TYPE_KEY]} value {data.get('value')!r} ({err})"
                ) from None
        return {k: decode_value(v) for k, v in data.items()}
    raise TraceError(f"trace values: unexpected JSON value {data!r}")


def python_value(value) -> str:
    codec = _codec_for(value)
    if codec is not None:
        return codec.to_python(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(python_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {python_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _register_constant_codecs() -> None:
    """Constant expressions (annotation values such as T.int32(16)) travel as dtype + value."""
    from schedlab.ir.expr import FloatImm, IntImm

    for cls in (IntImm, FloatImm):
        register_value_type(
            cls.__name__, cls,
            lambda c: {"dtype": str(c.dtype), "value": c.value},
            lambda data, cls=cls: cls(data["dtype"], data["value"]),
            lambda c: f"T.{c.dtype}({c.value!r})",
        )  # fmt: skip


_register_constant_codecs()
