"""Example schedules shipped with schedlab, as traces (`*.json`, replayable with
`schedlab bench <workload> --trace <file>`) and as the Python that recorded them.

    python -m schedlab.examples      # re-record every shipped trace from the code below

`gemm_1024_cpu.json` is `schedule_gemm_cpu` applied to fp32 gemm 1024x1024x1024.
"""

from __future__ import annotations

from .gemm_cpu import record_gemm_cpu, schedule_gemm_cpu, trace_text

__all__ = ["record_gemm_cpu", "schedule_gemm_cpu", "trace_text"]
