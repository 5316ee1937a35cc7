"""`python -m schedlab.examples`: re-record the shipped traces."""

from pathlib import Path

from .gemm_cpu import record_gemm_cpu, trace_text

HERE = Path(__file__).resolve().parent


# name -> register tile: 8 x 32 (two 16-lane vectors) for AVX-512's 32 registers, 6 x 16 (two
# 8-lane vectors, the classic AVX2 kernel) for AVX2's 16 (`bench.find_trace` picks by target)
SHIPPED = {
    "gemm_1024_cpu.json": {"tile_i": 8, "tile_j": 32, "vector": 16},
    "gemm_1024_cpu_avx2.json": {"tile_i": 6, "tile_j": 16, "vector": 8},
}


def main() -> None:
    for name, tiles in SHIPPED.items():
        path = HERE / name
        path.write_text(trace_text(record_gemm_cpu(1024, **tiles)))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
