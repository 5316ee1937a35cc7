"""`Target`: what a kernel is compiled for, and a description of that hardware.

`Target("cpu")` (aliases "c", "llvm") describes the HOST, read from the operating system: usable
cores, SIMD width, caches, clock and rough peak FLOP/s and memory bandwidth, which schedule rules
and cost models read. `Target("zen3")` (AVX2), `"zen4"`, `"zen5"`, `"skylake-avx512"`,
`"neoverse-v2"` are CPU presets: that machine's ISA, vector width and caches (`CPU_PRESETS`),
the host's core count.
GPU kinds ("cuda", "rocm", "opencl", "adreno") describe a typical device of that kind with
documented defaults; GPU presets describe one device from its data sheet (`GPU_PRESETS`):
"sm_90"/"h100", "h200", "sm_80"/"a100" (cuda), "gfx942"/"mi300x", "gfx90a"/"mi250" (rocm),
"adreno740", "adreno750" (adreno: OpenCL on a Qualcomm GPU). Their `peak_gflops` is the vendor's
dense figure per dtype (tensor/matrix cores included), not derived from the other attributes.
Any attribute can be overridden: `Target("cpu", num_cores=4)`. Installed extensions add presets
(`register_preset`, entry-point group `schedlab.targets`; `presets()` lists them all).

A target is immutable, hashable, and round-trips through JSON: `Target(str(t)) == t`.
"""

from __future__ import annotations

import json
import os
import platform
import threading
from functools import cache
from pathlib import Path
from typing import Any

ALIASES = {"cpu": "cpu", "c": "cpu", "llvm": "cpu", "cuda": "cuda", "rocm": "rocm",
           "opencl": "opencl", "adreno": "adreno"}  # fmt: skip
KINDS = ("cpu", "cuda", "rocm", "opencl", "adreno")
KEYS = {"cpu": ("cpu",), "cuda": ("cuda", "gpu"), "rocm": ("rocm", "gpu"),
        "opencl": ("opencl", "gpu"), "adreno": ("adreno", "opencl", "gpu")}  # fmt: skip

# Attributes derived from others: recomputed after overrides unless overridden themselves.
_DERIVED = ("peak_gflops",)

_GPU_DEFAULTS: dict[str, dict[str, Any]] = {
    # An A100-class device: the figures rules use until the CUDA backend queries the real one.
    "cuda": {
        "model": "generic CUDA device (A100-class defaults)",
        "arch": "sm_80", "num_sms": 108, "warp_size": 32, "max_threads_per_block": 1024,
        "max_shared_memory_per_block": 49152, "registers_per_sm": 65536,
        "max_registers_per_thread": 255,
        "l2_bytes": 40 * 2**20, "clock_ghz": 1.41, "mem_bandwidth_gbs": 1555.0,
        "fp32_units_per_sm": 64, "max_vector_bytes": 16,
    },
    # An MI210-class device (CDNA2): wave64.
    "rocm": {
        "model": "generic ROCm device (MI210-class defaults)",
        "arch": "gfx90a", "num_sms": 104, "warp_size": 64, "max_threads_per_block": 1024,
        "max_shared_memory_per_block": 65536, "registers_per_sm": 131072,
        "max_registers_per_thread": 512,
        "l2_bytes": 8 * 2**20, "clock_ghz": 1.7, "mem_bandwidth_gbs": 1638.0,
        "fp32_units_per_sm": 128, "max_vector_bytes": 16,
    },
    # A generic OpenCL device (PoCL on a CPU is the usual test driver).
    "opencl": {
        "model": "generic OpenCL device",
        "arch": "generic", "num_sms": 8, "warp_size": 1, "max_threads_per_block": 256,
        "max_shared_memory_per_block": 32768, "registers_per_sm": 32768,
        "max_registers_per_thread": 128,
        "l2_bytes": 2**20, "clock_ghz": 1.0, "mem_bandwidth_gbs": 50.0,
        "fp32_units_per_sm": 16, "max_vector_bytes": 16,
    },
    # A Qualcomm Adreno 7xx-class GPU, programmed through OpenCL with texture memory.
    "adreno": {
        "model": "generic Adreno 7xx device",
        "arch": "adreno7xx", "num_sms": 6, "warp_size": 64, "max_threads_per_block": 256,
        "max_shared_memory_per_block": 32768, "registers_per_sm": 32768,
        "max_registers_per_thread": 64,
        "l2_bytes": 2**20, "clock_ghz": 0.9, "mem_bandwidth_gbs": 60.0,
        "fp32_units_per_sm": 256, "max_vector_bytes": 16, "texture_spatial_limit": 16384,
        "image_base_address_alignment": 64,
    },
}  # fmt: skip

# blocked_layout: convolution networks run in NCHW{b}c (relax.transform.ConvertToBlockedLayout)
_CPU_COMMON = {"march": "native", "fast_math": False, "openmp": True, "cflags": (),
               "blocked_layout": True}  # fmt: skip

# AVX-512 subsets for cores gcc 12 has no -march name for (znver4, znver5 came with gcc 13/14):
# -march=znver3 plus these runs on, and vectorizes for, Zen 4 and Zen 5.
_ZEN_AVX512 = ("-mavx512f", "-mavx512cd", "-mavx512bw", "-mavx512dq", "-mavx512vl",
               "-mavx512vnni", "-mavx512bf16", "-mavx512ifma", "-mavx512vbmi", "-mavx512vbmi2",
               "-mavx512bitalg", "-mavx512vpopcntdq", "-mprefer-vector-width=512")  # fmt: skip
_X86_AVX512_ISA = ("sse2", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f",
                   "avx512bw", "avx512vl", "avx512_vnni")  # fmt: skip

# Named CPU presets: `Target("zen5")` describes that machine (ISA, vector width, caches, clock)
# instead of the host, so schedules and cost models can be made for it from any machine; the
# core count stays the host's unless given (`Target("zen5", num_cores=8)`). Building runs the
# code here, so the host must execute the preset's ISA (an x86 host cannot run neoverse-v2).
CPU_PRESETS: dict[str, dict[str, Any]] = {
    "zen3": {
        "model": "AMD Zen 3 (preset)", "arch": "x86_64",
        "isa": ("sse2", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c"), "simd_width": 256,
        "simd_datapath_bits": 256, "fma_units": 2, "l1d_bytes": 32 * 1024,
        "l2_bytes": 512 * 1024, "l3_bytes": 32 * 2**20, "cache_line_bytes": 64,
        "clock_ghz": 3.5, "march": "znver3", "cflags": (),
    },
    "zen4": {
        "model": "AMD Zen 4 (preset)", "arch": "x86_64",
        "isa": _X86_AVX512_ISA + ("avx512_bf16",), "simd_width": 512,
        "simd_datapath_bits": 256, "fma_units": 2, "l1d_bytes": 32 * 1024,
        "l2_bytes": 1024 * 1024, "l3_bytes": 32 * 2**20, "cache_line_bytes": 64,
        "clock_ghz": 3.7, "march": "znver3", "cflags": _ZEN_AVX512,
    },
    "zen5": {
        "model": "AMD Zen 5 (preset)", "arch": "x86_64",
        "isa": _X86_AVX512_ISA + ("avx512_bf16",), "simd_width": 512,
        "simd_datapath_bits": 512, "fma_units": 2, "l1d_bytes": 48 * 1024,
        "l2_bytes": 1024 * 1024, "l3_bytes": 32 * 2**20, "cache_line_bytes": 64,
        "clock_ghz": 4.2, "march": "znver3", "cflags": _ZEN_AVX512,
    },
    "skylake-avx512": {
        "model": "Intel Skylake-SP (preset)", "arch": "x86_64", "isa": _X86_AVX512_ISA,
        "simd_width": 512, "simd_datapath_bits": 512, "fma_units": 2, "l1d_bytes": 32 * 1024,
        "l2_bytes": 1024 * 1024, "l3_bytes": 22 * 2**20, "cache_line_bytes": 64,
        "clock_ghz": 2.5, "march": "skylake-avx512", "cflags": (),
    },
    "neoverse-v2": {
        "model": "Arm Neoverse V2 (preset)", "arch": "aarch64",
        "isa": ("asimd", "asimdhp", "asimddp", "sve", "sve2"), "simd_width": 128,
        "simd_datapath_bits": 128, "fma_units": 4, "l1d_bytes": 64 * 1024,
        "l2_bytes": 1024 * 1024, "l3_bytes": 114 * 2**20, "cache_line_bytes": 64,
        "clock_ghz": 3.1, "march": "armv9-a", "cflags": (),
    },
}  # fmt: skip


# Named GPU presets: one device each, from its vendor's data sheet (SXM/OAM boards; dense peak
# rates, no sparsity; tensor/matrix cores counted for the dtypes they take). `num_sms` counts
# SMs (NVIDIA), CUs (AMD) or shader processors (Adreno). Adreno figures are public estimates
# (Qualcomm publishes few): good enough for tile sizes and cost models, not for a spec sheet.
_H100 = {
    "model": "NVIDIA H100 SXM5 80GB (preset)",
    "arch": "sm_90",
    "num_sms": 132,
    "warp_size": 32,
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 49152,
    "registers_per_sm": 65536,
    "max_registers_per_thread": 255,
    "l2_bytes": 50 * 2**20,
    "clock_ghz": 1.98,
    "mem_bandwidth_gbs": 3350.0,
    "fp32_units_per_sm": 128,
    "max_vector_bytes": 16,
    "peak_gflops": {
        "float64": 66900.0,
        "float32": 66900.0,
        "float16": 989400.0,
        "bfloat16": 989400.0,
        "int32": 33450.0,
        "int8": 1978900.0,
    },
}
_A100 = {
    "model": "NVIDIA A100 SXM4 80GB (preset)",
    "arch": "sm_80",
    "num_sms": 108,
    "warp_size": 32,
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 49152,
    "registers_per_sm": 65536,
    "max_registers_per_thread": 255,
    "l2_bytes": 40 * 2**20,
    "clock_ghz": 1.41,
    "mem_bandwidth_gbs": 2039.0,
    "fp32_units_per_sm": 64,
    "max_vector_bytes": 16,
    "peak_gflops": {
        "float64": 19500.0,
        "float32": 19500.0,
        "float16": 312000.0,
        "bfloat16": 312000.0,
        "int32": 19500.0,
        "int8": 624000.0,
    },
}
_MI300X = {
    "model": "AMD Instinct MI300X (preset)",
    "arch": "gfx942",
    "num_sms": 304,
    "warp_size": 64,
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 65536,
    "registers_per_sm": 131072,
    "max_registers_per_thread": 512,
    "l2_bytes": 32 * 2**20,
    "clock_ghz": 2.1,
    "mem_bandwidth_gbs": 5300.0,
    "fp32_units_per_sm": 128,
    "max_vector_bytes": 16,
    "peak_gflops": {
        "float64": 163400.0,
        "float32": 163400.0,
        "float16": 1307400.0,
        "bfloat16": 1307400.0,
        "int32": 81700.0,
        "int8": 2614900.0,
    },
}
_MI250 = {
    "model": "AMD Instinct MI250 (preset)",
    "arch": "gfx90a",
    "num_sms": 208,
    "warp_size": 64,
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 65536,
    "registers_per_sm": 131072,
    "max_registers_per_thread": 512,
    "l2_bytes": 16 * 2**20,
    "clock_ghz": 1.7,
    "mem_bandwidth_gbs": 3277.0,
    "fp32_units_per_sm": 64,
    "max_vector_bytes": 16,
    "peak_gflops": {
        "float64": 90500.0,
        "float32": 90500.0,
        "float16": 362100.0,
        "bfloat16": 362100.0,
        "int32": 45300.0,
        "int8": 362100.0,
    },
}
_ADRENO = {
    "warp_size": 64,
    "max_threads_per_block": 1024,
    "max_shared_memory_per_block": 32768,
    "registers_per_sm": 65536,
    "max_registers_per_thread": 64,
    "max_vector_bytes": 16,
    "texture_spatial_limit": 16384,
    "image_base_address_alignment": 64,
}
GPU_PRESETS: dict[str, dict[str, Any]] = {
    "sm_90": {"kind": "cuda", **_H100},
    "h100": {"kind": "cuda", **_H100},
    "h200": {"kind": "cuda", **_H100, "model": "NVIDIA H200 SXM 141GB (preset)",
             "mem_bandwidth_gbs": 4800.0},
    "sm_80": {"kind": "cuda", **_A100},
    "a100": {"kind": "cuda", **_A100},
    "gfx942": {"kind": "rocm", **_MI300X},
    "mi300x": {"kind": "rocm", **_MI300X},
    "gfx90a": {"kind": "rocm", **_MI250},
    "mi250": {"kind": "rocm", **_MI250},
    "adreno740": {
        "kind": "adreno", **_ADRENO, "model": "Qualcomm Adreno 740 (preset)",
        "arch": "adreno740", "num_sms": 6, "l2_bytes": 2**20, "clock_ghz": 0.68,
        "mem_bandwidth_gbs": 67.0, "fp32_units_per_sm": 256,
        "peak_gflops": {"float64": 0.0, "float32": 2089.0, "float16": 4178.0,
                        "bfloat16": 2089.0, "int32": 1044.0, "int8": 4178.0},
    },
    "adreno750": {
        "kind": "adreno", **_ADRENO, "model": "Qualcomm Adreno 750 (preset)",
        "arch": "adreno750", "num_sms": 6, "l2_bytes": 2**20, "clock_ghz": 0.903,
        "mem_bandwidth_gbs": 77.0, "fp32_units_per_sm": 256,
        "peak_gflops": {"float64": 0.0, "float32": 2774.0, "float16": 5548.0,
                        "bfloat16": 2774.0, "int32": 1387.0, "int8": 5548.0},
    },
}  # fmt: skip


_BUILTIN_PRESETS = frozenset(CPU_PRESETS) | frozenset(GPU_PRESETS)


class Target:
    """A compilation target: `kind` plus a dict of hardware attributes (`attrs`).

    Construct from a kind name (`"cpu"`, `"llvm"`, `"cuda"`, ...), a dict
    (`{"kind": "cpu", "num_cores": 4}`), a JSON string of that dict, or another Target; keyword
    arguments override attributes. Unknown kinds or attribute names raise ValueError.
    """

    __slots__ = ("kind", "attrs")
    _local = threading.local()

    def __init__(self, kind: str | dict | Target = "cpu", **overrides: Any):
        spec = _as_spec(kind)
        canonical = _canonical_kind(overrides.pop("kind", spec.pop("kind", "cpu")))
        spec.pop("keys", None)
        # a derived attribute (peak_gflops) read back from a Target or JSON is an override only
        # if it differs from what its source computes; otherwise it follows the new overrides
        given = {name: spec.pop(name) for name in _DERIVED if name in spec}
        source = _resolve_attrs(canonical, spec)
        kept = {name: value for name, value in given.items() if value != source[name]}
        object.__setattr__(self, "kind", canonical)
        object.__setattr__(self, "attrs", _resolve_attrs(canonical, {**spec, **kept, **overrides}))

    def __setattr__(self, name, value):
        raise AttributeError("Target is immutable; build a new one: Target(t, attr=value)")

    # -- access ----------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        attrs = object.__getattribute__(self, "attrs")
        if name in attrs:
            return attrs[name]
        raise AttributeError(f"Target({self.kind!r}) has no attribute {name!r}")

    @property
    def keys(self) -> tuple[str, ...]:
        """Kind keys, TVM style: rules for "gpu" apply to every GPU kind."""
        return KEYS[self.kind]

    @property
    def is_gpu(self) -> bool:
        return "gpu" in self.keys

    def peak_flops(self, dtype: str = "float32") -> float:
        """Rough peak FLOP/s for arithmetic in `dtype` (see `peak_gflops`)."""
        table = self.attrs["peak_gflops"]
        if str(dtype) not in table:
            raise ValueError(f"peak_flops: no estimate for dtype {dtype!r}; known: {list(table)}")
        return table[str(dtype)] * 1e9

    def describe(self) -> str:
        """One line for reports: `cpu: AMD EPYC x86_64, 2 cores, 512-bit SIMD (avx512f), ...`;
        `cuda: NVIDIA H100 SXM5 80GB (preset) sm_90, 132 SMs, warp 32, ...` for a GPU."""
        attrs = self.attrs
        if self.kind != "cpu":
            return _describe_gpu(self.kind, attrs)
        names = {"avx512f": "avx512f", "avx2": "avx2", "sve": "sve", "asimd": "neon"}
        isa = [name for flag, name in names.items() if flag in (attrs.get("isa") or ())]
        vector = isa[0] if isa else "scalar"
        return (
            f"cpu: {attrs.get('model', '?')} {attrs.get('arch', '')}, {attrs.get('num_cores')} "
            f"cores, {attrs.get('simd_width')}-bit SIMD ({vector}), "
            f"L2 {attrs.get('l2_bytes', 0) // 1024} KiB"
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict: {"kind": ..., **attrs}."""
        return {"kind": self.kind, **_jsonable(self.attrs)}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Target:
        return Target(json.loads(text))

    def with_attrs(self, **overrides: Any) -> Target:
        return Target(self, **overrides)

    # -- identity --------------------------------------------------------------------------------
    def __str__(self) -> str:
        return self.to_json()

    def __repr__(self) -> str:
        shown = ("arch", "num_cores", "simd_width")
        parts = [f"{k}={self.attrs[k]!r}" for k in shown if k in self.attrs]
        return f"Target({self.kind!r}{''.join(', ' + p for p in parts)})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Target(other)
            except ValueError:
                return False
        return isinstance(other, Target) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __reduce__(self):
        return (Target.from_json, (self.to_json(),))

    # -- current target (`with Target(...):`) ----------------------------------------------------
    def __enter__(self) -> Target:
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        self._local.stack.pop()

    @classmethod
    def current(cls, allow_none: bool = True) -> Target | None:
        """The innermost target of a `with Target(...):` block."""
        stack = cls._local.__dict__.get("stack")
        if stack:
            return stack[-1]
        if allow_none:
            return None
        raise ValueError("no current Target: use `with Target(...):`")


def register_preset(name: str, attrs: dict[str, Any], override: bool = False) -> None:
    """Add a named target preset, as extensions do (entry-point group `schedlab.targets`):
    `Target(name)` then describes that machine. `attrs` holds "kind" ("cpu" when absent, or a
    GPU kind) and hardware attributes; a CPU preset keeps the host's values for the attributes
    it leaves out (the core count, ...), a GPU preset the kind's defaults. Checked now: an
    unknown attribute or kind is a ValueError. A built-in kind or preset cannot be replaced;
    another extension's preset only with `override=True`."""
    key = name.lower() if isinstance(name, str) else None
    if not key or " " in key or key.startswith("{"):
        raise ValueError(f"register_preset: the name must be a word, got {name!r}")
    if key in ALIASES or key in _BUILTIN_PRESETS:
        raise ValueError(f"register_preset: {name!r} is a built-in target kind or preset")
    if (key in CPU_PRESETS or key in GPU_PRESETS) and not override:
        raise ValueError(f"register_preset: {name!r} is registered already (override=True)")
    spec = _copied(dict(attrs))
    kind = _canonical_kind(spec.pop("kind", "cpu"))
    try:
        Target({"kind": kind, **spec})
    except ValueError as err:  # a bad attribute, named now rather than at first use
        raise ValueError(f"register_preset({name!r}): {err}") from None
    CPU_PRESETS.pop(key, None)
    GPU_PRESETS.pop(key, None)
    if kind == "cpu":
        CPU_PRESETS[key] = spec
    else:
        GPU_PRESETS[key] = {"kind": kind, **spec}


def presets() -> list[str]:
    """Every preset name: the built-in ones, then those installed extensions register."""
    _load_plugins()
    return [*CPU_PRESETS, *GPU_PRESETS]


def _load_plugins() -> None:
    from schedlab import plugins

    plugins.load("schedlab.targets")


def _canonical_kind(kind) -> str:
    canonical = ALIASES.get(kind.lower()) if isinstance(kind, str) else None
    if canonical is None:
        raise ValueError(
            f"Target: unknown kind {kind!r}; valid kinds: {', '.join(sorted(ALIASES))}; "
            f"CPU presets: {', '.join(CPU_PRESETS)}; GPU presets: {', '.join(GPU_PRESETS)}"
        )
    return canonical


def _as_spec(kind) -> dict[str, Any]:
    if isinstance(kind, Target):
        return kind.as_dict()
    if isinstance(kind, dict):
        return dict(kind)
    if isinstance(kind, str):
        text = kind.strip()
        if text.startswith("{"):
            try:
                return dict(json.loads(text))
            except json.JSONDecodeError as err:
                raise ValueError(f"Target: invalid JSON {text!r}: {err}") from None
        if " " in text:
            raise ValueError(
                f"Target: expected a kind name, a dict or JSON, got {kind!r}; pass attributes "
                f"as keywords: Target('cpu', num_cores=4)"
            )
        if text.lower() not in ALIASES and text.lower() not in _BUILTIN_PRESETS:
            _load_plugins()  # an extension's preset (a no-op once loaded)
        preset = CPU_PRESETS.get(text.lower())
        if preset is not None:
            return {"kind": "cpu", **preset}
        gpu = GPU_PRESETS.get(text.lower())
        return _copied(gpu) if gpu is not None else {"kind": text}
    raise ValueError(f"Target: expected a kind name, dict, JSON or Target, got {kind!r}")


def _copied(preset: dict[str, Any]) -> dict[str, Any]:
    return {k: dict(v) if isinstance(v, dict) else v for k, v in preset.items()}


def _describe_gpu(kind: str, attrs: dict[str, Any]) -> str:
    """`cuda: <model> sm_90, 132 SMs, warp 32, 1024 threads/block, 48 KiB shared/block, ...`."""
    units = {"cuda": "SMs", "rocm": "CUs"}.get(kind, "compute units")
    peaks = attrs.get("peak_gflops", {})
    rates = ", ".join(
        f"{dt} {peaks[dt] / 1000:.1f} TFLOP/s" for dt in ("float32", "float16") if peaks.get(dt)
    )
    return (
        f"{kind}: {attrs.get('model', '?')} {attrs.get('arch', '')}, {attrs.get('num_sms')} "
        f"{units}, warp {attrs.get('warp_size')}, {attrs.get('max_threads_per_block')} "
        f"threads/block, {attrs.get('max_shared_memory_per_block', 0) // 1024} KiB shared/block, "
        f"{attrs.get('registers_per_sm')} registers/{units[:-1] if units.endswith('s') else units}"
        f", {attrs.get('clock_ghz')} GHz, {attrs.get('mem_bandwidth_gbs'):g} GB/s"
        + (f", {rates}" if rates else "")
    )


def _resolve_attrs(kind: str, overrides: dict[str, Any]) -> dict[str, Any]:
    defaults = _cpu_defaults() if kind == "cpu" else dict(_GPU_DEFAULTS[kind])
    known = set(defaults) | set(_DERIVED)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(
            f"Target({kind!r}): unknown attribute(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    attrs = {**defaults, **overrides}
    if "cflags" in attrs:
        attrs["cflags"] = tuple(str(flag) for flag in attrs["cflags"])
    if "isa" in attrs:
        attrs["isa"] = tuple(attrs["isa"])
    for name in _DERIVED:
        if name not in overrides:
            attrs[name] = _peak_gflops(kind, attrs)
    return attrs


def _jsonable(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


# ---------------------------------------------------------------------------------------------
# peak estimates
# ---------------------------------------------------------------------------------------------
_DTYPE_BITS = {"float64": 64, "float32": 32, "float16": 32, "bfloat16": 32, "int32": 32,
               "int8": 8}  # fmt: skip


def _peak_gflops(kind: str, attrs: dict[str, Any]) -> dict[str, float]:
    """Rough peak GFLOP/s per dtype. CPU: cores x GHz x FMA units x 2 x the lanes the datapath
    executes at once; float16 and bfloat16 count float32 lanes because the C backend computes
    them in float."""
    if kind == "cpu":
        per_lane = attrs["num_cores"] * attrs["clock_ghz"] * attrs["fma_units"] * 2
        width = min(attrs["simd_width"], attrs.get("simd_datapath_bits") or attrs["simd_width"])
        return {dt: round(per_lane * max(1, width // bits), 1) for dt, bits in _DTYPE_BITS.items()}
    fp32 = attrs["num_sms"] * attrs["fp32_units_per_sm"] * attrs["clock_ghz"] * 2
    return {"float64": round(fp32 / 2, 1), "float32": round(fp32, 1),
            "float16": round(fp32 * 2, 1), "bfloat16": round(fp32 * 2, 1),
            "int32": round(fp32 / 2, 1), "int8": round(fp32 * 2, 1)}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# host detection (Linux /proc and /sys; safe fallbacks elsewhere)
# ---------------------------------------------------------------------------------------------
_ISA_FLAGS = ("sse2", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
              "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "asimd",
              "asimdhp", "asimddp", "sve", "sve2")  # fmt: skip


def _cpu_defaults() -> dict[str, Any]:
    return dict(_host_cpu())


@cache
def _host_cpu() -> tuple[tuple[str, Any], ...]:
    info = _read_cpuinfo()
    flags = set(info.get("flags", info.get("Features", "")).split())
    logical = len(_usable_cpus())
    machine = platform.machine() or "unknown"
    width = _simd_width(machine, flags)
    caches = _cache_sizes()
    attrs = {
        "arch": machine,
        "model": info.get("model name", info.get("CPU part", "unknown")),
        "num_cores": logical,
        "physical_cores": _physical_cores(logical),
        "isa": tuple(flag for flag in _ISA_FLAGS if flag in flags),
        "simd_width": width,
        "simd_datapath_bits": _simd_datapath_bits(info, width),
        "fma_units": _fma_units(machine, flags),
        "l1d_bytes": caches.get("l1d", 32 * 1024),
        "l2_bytes": caches.get("l2", 1024 * 1024),
        "l3_bytes": caches.get("l3", 8 * 1024 * 1024),
        "cache_line_bytes": _cache_line(),
        "clock_ghz": _clock_ghz(info),
        "mem_bandwidth_gbs": _bandwidth_guess(logical),
        **_CPU_COMMON,
    }
    return tuple(attrs.items())


def _read_cpuinfo() -> dict[str, str]:
    """The first processor's entries of /proc/cpuinfo (empty off Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break
            continue
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    return info


def _usable_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def _physical_cores(logical: int) -> int:
    """Usable logical CPUs divided by SMT siblings (from /sys topology)."""
    siblings = set()
    for cpu in _usable_cpus():
        path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            siblings.add(path.read_text().strip())
        except OSError:
            return logical
    return max(1, len(siblings))


def _simd_width(machine: str, flags: set[str]) -> int:
    for flag, bits in (("avx512f", 512), ("avx2", 256), ("avx", 256), ("sse2", 128)):
        if flag in flags:
            return bits
    if machine in ("aarch64", "arm64") or "asimd" in flags:
        return 128  # NEON; SVE widths vary by part and need a runtime query
    return 128 if machine in ("x86_64", "AMD64") else 64


def _simd_datapath_bits(info: dict[str, str], width: int) -> int:
    """Bits the core's vector units execute at once: AMD's Zen 4 (family 25 with AVX-512)
    runs a 512-bit instruction as two 256-bit halves; other cores run their full width."""
    amd = info.get("vendor_id") == "AuthenticAMD"
    if amd and info.get("cpu family") == "25" and width > 256:
        return 256
    return width


def _fma_units(machine: str, flags: set[str]) -> int:
    """Assumed FMA pipes per core: 2 on x86 parts with FMA3 and on aarch64 (most server cores
    since Haswell/Zen/Neoverse), else 1. An assumption, overridable."""
    if "fma" in flags or machine in ("aarch64", "arm64"):
        return 2
    return 1


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text.rstrip("KMGB")
    return int(digits) * scale if digits.isdigit() else 0


def _cache_sizes() -> dict[str, int]:
    sizes: dict[str, int] = {}
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _parse_size((index / "size").read_text())
        except OSError:
            continue
        if kind == "Instruction" or not size:
            continue
        sizes[f"l{level}d" if level == "1" else f"l{level}"] = size
    return sizes


def _cache_line() -> int:
    path = Path("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 64


def _clock_ghz(info: dict[str, str]) -> float:
    """Max frequency from cpufreq when present, else the current "cpu MHz", else 2 GHz."""
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        return round(int(path.read_text().strip()) / 1e6, 3)
    except (OSError, ValueError):
        pass
    try:
        return round(float(info["cpu MHz"]) / 1000, 3)
    except (KeyError, ValueError):
        return 2.0


def _bandwidth_guess(cores: int) -> float:
    """DRAM bandwidth guess in GB/s: about 12 GB/s per core, between 20 and 200 (one socket).
    A guess, not a measurement; override with `mem_bandwidth_gbs=`."""
    return float(min(200, max(20, 12 * cores)))


__all__ = ["Target", "KINDS", "ALIASES", "CPU_PRESETS", "GPU_PRESETS", "register_preset", "presets"]
