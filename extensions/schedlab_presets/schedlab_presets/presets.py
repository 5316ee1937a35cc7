"""Two AVX2 machines as target presets. Their cores run code built for the host's AVX-512 only
if the host has AVX2 (any x86 server since 2013), so kernels built for them run here too."""

from __future__ import annotations

from schedlab.target import register_preset

MARK = "(schedlab-presets)"  # ends every model name here: how the rule knows its targets

_AVX2_ISA = ("sse2", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c")

PRESETS = {
    "haswell": {
        "model": f"Intel Haswell-EP {MARK}", "arch": "x86_64", "isa": _AVX2_ISA,
        "simd_width": 256, "simd_datapath_bits": 256, "fma_units": 2, "l1d_bytes": 32 * 1024,
        "l2_bytes": 256 * 1024, "l3_bytes": 30 * 2**20, "cache_line_bytes": 64,
        "clock_ghz": 2.6, "march": "haswell", "cflags": [],
    },
    "zen2": {
        "model": f"AMD Zen 2 {MARK}", "arch": "x86_64", "isa": _AVX2_ISA,
        "simd_width": 256, "simd_datapath_bits": 256, "fma_units": 2, "l1d_bytes": 32 * 1024,
        "l2_bytes": 512 * 1024, "l3_bytes": 16 * 2**20, "cache_line_bytes": 64,
        "clock_ghz": 3.3, "march": "znver2", "cflags": [],
    },
}  # fmt: skip


def register() -> None:
    """Entry point of group `schedlab.targets`."""
    for name, attrs in PRESETS.items():
        register_preset(name, attrs)


def is_ours(target) -> bool:
    """Whether `target` was made from one of these presets (overrides kept)."""
    return target.kind == "cpu" and str(target.attrs.get("model", "")).endswith(MARK)
