"""`python -m schedlab.examples`: re-record the shipped traces."""

from pathlib import Path

from .gemm_cpu import record_gemm_cpu, trace_text

HERE = Path(__file__).resolve().parent


def main() -> None:
    path = HERE / "gemm_1024_cpu.json"
    path.write_text(trace_text(record_gemm_cpu(1024)))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
