"""float16 in the GPU dialects (a mixin of `GpuRenderer`).

Two forms, chosen per renderer and target:

- **native**: float16 values and buffers have the device's half type (`__half` from
  <cuda_fp16.h> on CUDA, <hip/hip_fp16.h> on HIP, `half` under `cl_khr_fp16` on OpenCL) and
  + - * / are half arithmetic: IEEE-rounded once per operation, as numpy's float16 and the
  interpreter compute them. Everything else on float16 (math functions, min/max, floor
  division, modulo, shuffles, calls) is computed in float and rounded back once
  (`__float2half_rn(expf(__half2float(x)))`): numpy's float16 math does the same, and
  device half math (hexp, ...) is no more exact.
- **carried** (OpenCL without `cl_khr_fp16`, e.g. a generic OpenCL device): global buffers are
  `half*` read and written with the core `vload_half` / `vstore_half_rte`, values are `float`
  rounded to float16 after every operation (as the C backend does), scratch arrays are
  `float` (they only ever hold rounded values).

A function written with float32 accumulation over float16 inputs
(`sum(float32(A[i, k]) * float32(B[k, j]))`) keeps it: the casts become `__half2float` and
the accumulator a float, as the IR says.
"""

from __future__ import annotations

from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType, float16, float32
from schedlab.transform.cross_thread_reduction import SHUFFLE_DOWN
from schedlab.transform.thread_binding import BARRIER, THREAD_INDEX

from ..c_expr import ATOM, EQUAL, UNARY
from ..c_vector import LANE_OP

# calls whose float16 operands stay float16 (control, indexing, shuffles: CUDA's and HIP's
# have half overloads, OpenCL has none): everything else is widened
_KEPT_CALLS = frozenset({"if_then_else", "likely", LANE_OP, THREAD_INDEX, BARRIER, SHUFFLE_DOWN})
_WIDENED = (E.Min, E.Max, E.FloorDiv, E.FloorMod, E.Mod)


def is_f16(dtype: DataType) -> bool:
    return dtype.is_float and dtype.bits == 16 and dtype.kind == "float"


class HalfMixin:
    """float16 rendering for `GpuRenderer`; the dialects fill in the tokens below."""

    half_type = ""  # the device's native half type; "" when it has none
    half_headers: tuple[str, ...] = ()  # included once a native half is used
    half_pragma = ""  # a line before the preamble once a native half is used

    def setup_half(self, native: bool) -> None:
        self.native_half = bool(self.half_type) and native
        if self.native_half:
            self.scalar_types = {**self.scalar_types, "float16": self.half_type}
            self.storage_types = {k: v for k, v in self.storage_types.items() if k != "float16"}

    # -- tokens ---------------------------------------------------------------------------------
    def half_to_float(self, text: str) -> str:
        return f"(float)({text})"

    def float_to_half(self, text: str) -> str:
        return f"({self.half_type})({text})"

    # -- usage ----------------------------------------------------------------------------------
    def note_half(self) -> None:
        """Add the header/pragma the native half type needs (once per translation unit)."""
        prelude = self.prelude
        missing = tuple(h for h in self.half_headers if h not in prelude.headers)
        prelude.headers = prelude.headers + missing
        if self.half_pragma and self.half_pragma not in prelude.preamble:
            prelude.preamble = self.half_pragma + "\n" + prelude.preamble

    def value_ctype(self, dtype: DataType) -> str:
        if self.native_half and is_f16(dtype.element_of()):
            self.note_half()
        return super().value_ctype(dtype)

    def storage_ctype(self, dtype: DataType) -> str:
        if self.native_half and is_f16(dtype.element_of()):
            self.note_half()
        return super().storage_ctype(dtype)

    def _native(self, dtype: DataType) -> bool:
        return self.native_half and is_f16(dtype) and dtype.lanes == 1

    # -- expressions ----------------------------------------------------------------------------
    def _render(self, node):
        if self.native_half and node.dtype.lanes == 1:
            widened = _widen(node)
            if widened is not None:
                return super()._render(widened)
        return super()._render(node)

    def _arith(self, node, symbol: str, prec: int):
        if self._native(node.dtype):  # half arithmetic rounds each operation itself
            return f"{self._sub(node.a, prec)} {symbol} {self._sub(node.b, prec + 1)}", prec
        return super()._arith(node, symbol, prec)

    def _rounded(self, dtype: DataType, text: str, prec: int):
        if self._native(dtype):  # a float computation, rounded once into a half
            return self.float_to_half(text), ATOM
        return super()._rounded(dtype, text, prec)

    def float_literal(self, value: float, dtype: DataType):
        if self._native(dtype):
            text, _ = super().float_literal(value, dtype)  # its exactly rounded float value
            self.note_half()
            return self.float_to_half(text), ATOM
        return super().float_literal(value, dtype)

    def _e_Cast(self, node):
        source, target = node.value.dtype, node.dtype
        if not (self._native(source) or self._native(target)):
            return super()._e_Cast(node)
        if source == target:
            return self._render(node.value)
        if self._native(target):
            inner = self.expr(node.value)
            if not (source.is_float and source.bits == 32):
                inner = f"(float){self._sub(node.value, UNARY)}"
            return self.float_to_half(inner), ATOM
        value = self.half_to_float(self.expr(node.value))
        if target == float32:
            return value, ATOM
        if target.is_bool:
            return f"{value} != 0.0f", EQUAL
        return f"({self.value_ctype(target)}){value}", UNARY

    def _e_BufferLoad(self, node):
        if self._native(node.buffer.dtype):
            return f"{self.buffer_ref(node.buffer)}[{self.expr(self.buffer_index(node))}]", ATOM
        return super()._e_BufferLoad(node)

    def _stored(self, dtype: DataType, value) -> str:
        if self._native(dtype):
            return self.expr(value)
        return super()._stored(dtype, value)


def _widen(node: E.PrimExpr) -> E.PrimExpr | None:
    """`node` computed in float32 and cast back when it is a float16 operation the half type
    does not have (None when it is not one)."""
    if isinstance(node, _WIDENED) and is_f16(node.dtype):
        return E.Cast(float16, type(node)(_f32(node.a), _f32(node.b)))
    if isinstance(node, E.Call) and node.op not in _KEPT_CALLS:
        half_args = any(isinstance(a, E.PrimExpr) and is_f16(a.dtype) for a in node.args)
        if not (half_args or is_f16(node.dtype)):
            return None
        args = tuple(_f32(a) if isinstance(a, E.PrimExpr) else a for a in node.args)
        call = E.Call(float32 if is_f16(node.dtype) else node.dtype, node.op, args)
        return E.Cast(float16, call) if is_f16(node.dtype) else call
    return None


def _f32(value: E.PrimExpr) -> E.PrimExpr:
    return E.Cast(float32, value) if is_f16(value.dtype) else value


__all__ = ["HalfMixin", "is_f16"]
