"""The helper definitions generated C code may need, emitted only when used.

Every helper is `static inline` and named `sl_*` (a prefix user names never get), so the source
stays short and gcc inlines them away. float16/bfloat16 values are carried as `float` and stored
as `uint16_t`; the conversion helpers round to nearest even exactly as numpy/ml_dtypes do.
"""

from __future__ import annotations

_F16 = """\
// float16 <-> float (round to nearest even); values are computed in float, stored as uint16_t
#if defined(__FLT16_MANT_DIG__) && !defined(SL_SOFT_F16)
static inline float sl_f16_to_f32(uint16_t h) { _Float16 v; memcpy(&v, &h, 2); return (float)v; }
static inline uint16_t sl_f32_to_f16(float f) {
  _Float16 v = (_Float16)f; uint16_t h; memcpy(&h, &v, 2); return h;
}
#else
static inline float sl_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, bits;
  if (em >= 0x7c00u) {
    bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
  } else if (em >= 0x0400u) {
    bits = sign | ((em << 13) + 0x38000000u);
  } else {
    float sub = (float)em * 5.9604644775390625e-08f;
    memcpy(&bits, &sub, 4);
    bits |= sign;
  }
  float f; memcpy(&f, &bits, 4); return f;
}
static inline uint16_t sl_f32_to_f16(float f) {
  uint32_t x; memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, o;
  x &= 0x7fffffffu;
  if (x >= 0x47800000u) {
    o = x > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (x < 0x38800000u) {
    float t; memcpy(&t, &x, 4);
    t += 0.5f;
    uint32_t u; memcpy(&u, &t, 4);
    o = u - 0x3f000000u;
  } else {
    x += 0xc8000fffu + ((x >> 13) & 1u);
    o = x >> 13;
  }
  return (uint16_t)(o | sign);
}
#endif
static inline float sl_round_f16(float f) { return sl_f16_to_f32(sl_f32_to_f16(f)); }
"""

_BF16 = """\
// bfloat16 <-> float (round to nearest even, NaN stays NaN)
static inline float sl_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16; float f; memcpy(&f, &bits, 4); return f;
}
static inline uint16_t sl_f32_to_bf16(float f) {
  uint32_t b; memcpy(&b, &f, 4);
  if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);
  b += 0x7fffu + ((b >> 16) & 1u);
  return (uint16_t)(b >> 16);
}
static inline float sl_round_bf16(float f) { return sl_bf16_to_f32(sl_f32_to_bf16(f)); }
"""

_ALLOC = """\
// scratch buffers too big for the stack: 64-byte aligned heap blocks
static inline void* sl_alloc(size_t bytes) {
  return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64 * (bytes == 0));
}
"""

_FIXED = {"f16": _F16, "bf16": _BF16, "alloc": _ALLOC}


def _floordiv(tag: str, ctype: str) -> str:
    return (
        f"static inline {ctype} sl_floordiv_{tag}({ctype} a, {ctype} b) {{\n"
        f"  {ctype} q = ({ctype})(a / b);\n"
        f"  return (q * b != a && ((a < 0) != (b < 0))) ? ({ctype})(q - 1) : q;\n}}\n"
    )


def _floormod_int(tag: str, ctype: str) -> str:
    return (
        f"static inline {ctype} sl_floormod_{tag}({ctype} a, {ctype} b) {{\n"
        f"  {ctype} r = ({ctype})(a % b);\n"
        f"  return (r != 0 && ((r < 0) != (b < 0))) ? ({ctype})(r + b) : r;\n}}\n"
    )


def _floormod_float(tag: str, ctype: str) -> str:
    fmod = "fmodf" if ctype == "float" else "fmod"
    return (
        f"static inline {ctype} sl_floormod_{tag}({ctype} a, {ctype} b) {{\n"
        f"  {ctype} r = {fmod}(a, b);\n"
        f"  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n}}\n"
    )


def _minmax(tag: str, ctype: str) -> str:
    # NaN propagates (as numpy's minimum/maximum and the interpreter): `a != a` holds only for a
    # NaN `a`; when `b` is NaN the comparison fails and `b` is returned. Integers lose nothing.
    # Written as two selects, not `(a > b || a != a) ? a : b`: gcc 12 turns the `||` into
    # branches in scalar loop tails, which mispredict on real data (a 3x3/2 max pool of
    # 64x111x111 on Zen 5, one thread: 467 -> ~110 us).
    return (
        f"static inline {ctype} sl_min_{tag}({ctype} a, {ctype} b) "
        f"{{ {ctype} m = a < b ? a : b; return a != a ? a : m; }}\n"
        f"static inline {ctype} sl_max_{tag}({ctype} a, {ctype} b) "
        f"{{ {ctype} m = a > b ? a : b; return a != a ? a : m; }}\n"
    )


def _vector_minmax(name: str) -> str:
    # lane-wise, with the scalar helpers' NaN rule: compare, then blend the bits through the
    # integer mask vector a comparison gives (a C cast between equal-size vectors is a bitcast)
    parts = []
    for which, test in (("min", "(a < b) | (a != a)"), ("max", "(a > b) | (a != a)")):
        parts.append(
            f"static inline {name} sl_{which}_{name[3:]}({name} a, {name} b) {{\n"
            f"  __typeof__(a < b) m = {test};\n"
            f"  return ({name})((m & (__typeof__(m))a) | (~m & (__typeof__(m))b));\n}}\n"
        )
    return "".join(parts)


def _abs(tag: str, ctype: str) -> str:
    return f"static inline {ctype} sl_abs_{tag}({ctype} a) {{ return a < 0 ? ({ctype})-a : a; }}\n"


def _sigmoid(tag: str, ctype: str) -> str:
    one, exp = ("1.0f", "expf") if ctype == "float" else ("1.0", "exp")
    return (
        f"static inline {ctype} sl_sigmoid_{tag}({ctype} x) "
        f"{{ return {one} / ({one} + {exp}(-x)); }}\n"
    )


_TYPED = {
    "floordiv": _floordiv,
    "floormod": _floormod_int,
    "floormod_float": _floormod_float,
    "minmax": _minmax,
    "abs": _abs,
    "sigmoid": _sigmoid,
}


def _vector(name: str, elem: str, lanes: int, padded: int) -> str:
    """typedef + load/store/broadcast/ramp helpers of one GCC vector type. Types whose lanes are
    not a power of two are padded (vector sizes must be powers of two); loads and stores move
    only the real lanes."""
    size = f"{lanes} * sizeof({elem})"
    splat = ", ".join(["x"] * padded)
    ramp = ", ".join(["b"] + [f"b + {k} * s" if k > 1 else "b + s" for k in range(1, padded)])
    vector_bytes = f"{padded} * sizeof({elem})"
    if lanes == padded:
        # through an element-aligned, may_alias twin type (GCC's own __m512_u): one unaligned
        # vector move. The memcpy form made gcc 12 keep loaded vectors in stack slots and
        # re-read them inside register-tiled loops (a 3x3 conv layer: 248 -> 147 GFLOP/s
        # depending on the epilogue).
        unaligned = f"{name}_u"
        access = (
            f"typedef {elem} {unaligned} __attribute__((vector_size({vector_bytes}), "
            f"aligned(sizeof({elem})), may_alias));\n"
            f"static inline {name} sl_load_{name[3:]}(const {elem}* p) "
            f"{{ return *(const {unaligned}*)p; }}\n"
            f"static inline void sl_store_{name[3:]}({elem}* p, {name} v) "
            f"{{ *({unaligned}*)p = v; }}\n"
        )
    else:
        access = (
            f"static inline {name} sl_load_{name[3:]}(const {elem}* p) "
            f"{{ {name} v = {{0}}; memcpy(&v, p, {size}); return v; }}\n"
            f"static inline void sl_store_{name[3:]}({elem}* p, {name} v) "
            f"{{ memcpy(p, &v, {size}); }}\n"
        )
    return (
        f"typedef {elem} {name} __attribute__((vector_size({vector_bytes})));\n"
        f"{access}"
        f"static inline {name} sl_broadcast_{name[3:]}({elem} x) "
        f"{{ return ({name}){{{splat}}}; }}\n"
        f"static inline {name} sl_ramp_{name[3:]}({elem} b, {elem} s) "
        f"{{ return ({name}){{{ramp}}}; }}\n"
    )


_VECTOR_HELPERS = {"minmax": _vector_minmax}


class Prelude:
    """Collects the helpers a translation unit uses and renders them in a stable order."""

    def __init__(
        self,
        headers: tuple[str, ...],
        defines: tuple[str, ...] = (),
        preamble: str = "",
        overrides: dict[str, str] | None = None,
    ):
        self.headers = headers
        self.defines = defines
        self.preamble = preamble
        self.overrides = dict(overrides or {})  # fixed helper group -> a dialect's text
        self._fixed: dict[str, None] = {}
        self._typed: dict[tuple[str, str, str], None] = {}
        self._vectors: dict[str, tuple[str, int, int]] = {}
        self._vector_helpers: dict[tuple[str, str], None] = {}

    def use(self, name: str) -> None:
        """A fixed helper group: "f16", "bf16", "alloc"."""
        self._fixed.setdefault(name)

    def use_typed(self, kind: str, tag: str, ctype: str) -> None:
        """A helper family instantiated for one type (e.g. floordiv for int32_t)."""
        self._typed.setdefault((kind, tag, ctype))

    def use_vector(self, name: str, elem: str, lanes: int) -> None:
        padded = 1 << (lanes - 1).bit_length()
        self._vectors.setdefault(name, (elem, lanes, padded))

    def use_vector_helper(self, kind: str, name: str) -> None:
        """A helper over one vector type (rendered after the vector typedefs): "minmax"."""
        self._vector_helpers.setdefault((kind, name))

    def render(self) -> str:
        parts = [f"#define {d}" for d in self.defines]
        parts += [f"#include {h}" for h in self.headers]
        text = "\n".join(parts) + "\n"
        if self.preamble:
            text += "\n" + self.preamble.rstrip("\n") + "\n"
        chunks = [self.overrides.get(name, _FIXED[name]) for name in ("f16", "bf16", "alloc")
                  if name in self._fixed]  # fmt: skip
        chunks += [_TYPED[kind](tag, ctype) for kind, tag, ctype in self._typed]
        chunks += [_vector(name, *spec) for name, spec in self._vectors.items()]
        chunks += [_VECTOR_HELPERS[kind](name) for kind, name in self._vector_helpers]
        if chunks:
            text += "\n" + "\n".join(chunks)
        return text
