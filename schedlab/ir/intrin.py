"""The registry of intrinsic calls (`Call.op`): arity, argument and result types.

Back ends map these names to their own functions (C's `expf`, numpy's `np.exp`, ...); the IR only
knows their signatures.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtype import DataType, bool_


@dataclass(frozen=True)
class IntrinsicSpec:
    name: str
    arity: int | None  # None: variadic
    float_only: bool  # integer arguments are cast to float32
    result: str  # "same": dtype of the first value argument; "bool": a bool with its lanes
    pure: bool = True

    def result_dtype(self, args) -> DataType:
        if self.result == "bool":
            return bool_.with_lanes(args[0].dtype.lanes)
        if self.result == "second":
            return args[1].dtype
        return args[0].dtype


INTRINSICS: dict[str, IntrinsicSpec] = {}


def register_intrinsic(
    name: str, arity: int | None, float_only: bool = False, result="same", pure: bool = True
) -> IntrinsicSpec:
    """Add an intrinsic to the registry (extensions may register their own)."""
    spec = IntrinsicSpec(name, arity, float_only, result, pure)
    INTRINSICS[name] = spec
    return spec


for _name in (
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid",
    "erf", "floor", "ceil", "round", "trunc", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh",
):  # fmt: skip
    register_intrinsic(_name, 1, float_only=True)
for _name in ("isnan", "isinf", "isfinite"):
    register_intrinsic(_name, 1, float_only=True, result="bool")
register_intrinsic("abs", 1)
register_intrinsic("pow", 2, float_only=True)
register_intrinsic("fmod", 2, float_only=True)
register_intrinsic("atan2", 2, float_only=True)
register_intrinsic("likely", 1, result="bool")
# lazy conditional: (condition, then, else); only the taken branch is evaluated
register_intrinsic("if_then_else", 3, result="second")
