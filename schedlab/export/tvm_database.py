"""MetaSchedule's JSON database (TVM 0.27), read as data: its records' traces become schedlab
traces.

A `JSONDatabase(work_dir=...)` holds two JSON-lines files:

    database_workload.json       ["<structural hash>", "<base64: 8-byte length + module graph>"]
    database_tuning_record.json  [workload_index, [trace_json, run_secs, target, args_info]]

`trace_json` is TVM's `[insts, decisions]` (postprocessing included, after `EnterPostproc`),
`run_secs` the measured seconds, `target` the target's JSON, `args_info` the arguments
(`[["TENSOR", "float32", [64, 64]], ...]`). A record's workload is not rebuilt (it is TVM's
IR); its function names are read from the graph, and `TVMRecord.matches(func)` compares the
arguments with a schedlab function's buffers.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field

from schedlab.schedule.trace import Trace

from .errors import TVMImportError
from .tvm_json_graph import function_names
from .tvm_trace import trace_from_tvm_json

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"


@dataclass(frozen=True)
class TVMRecord:
    """One tuning record. `trace` imports its trace (TVMImportError names the first
    instruction schedlab has no counterpart for)."""

    trace_json: list
    run_secs: tuple[float, ...] | None = None
    target: dict | None = None
    args_info: list | None = None
    workload_index: int = 0
    workload_hash: str | None = None
    function_names: tuple[str, ...] = field(default=())

    @property
    def trace(self) -> Trace:
        return trace_from_tvm_json(self.trace_json)

    @property
    def mean_run_secs(self) -> float:
        """The mean measured time; inf when the record has none (a failed build or run
        records 1e10 s, which stays as it is)."""
        if not self.run_secs:
            return math.inf
        return sum(self.run_secs) / len(self.run_secs)

    def matches(self, func) -> bool:
        """Whether the record's arguments are `func`'s buffer parameters (same order, dtypes
        and constant shapes)."""
        if self.args_info is None:
            return False
        return self.args_info == _args_info(func)


def _args_info(func) -> list:
    from schedlab.ir import expr as E

    info = []
    for buffer in func.buffers:
        shape = [int(d.value) if isinstance(d, E.IntImm) else None for d in buffer.shape]
        info.append(["TENSOR", str(buffer.dtype), shape])
    return info


def read_tvm_record(line, workloads: list[tuple[str, tuple[str, ...]]] | None = None,
                    where: str = "tuning record") -> TVMRecord:  # fmt: skip
    """One `database_tuning_record.json` line (text or parsed). `workloads` lists the
    workload file's (hash, function names) by line, to name the record's workload."""
    try:
        data = json.loads(line) if isinstance(line, (str, bytes)) else line
        index, body = data
        if type(index) is not int or not isinstance(body, list) or not body:
            raise ValueError("expected [workload_index, [trace, run_secs, target, args_info]]")
        trace_json, run_secs, target, args_info = (body + [None] * 4)[:4]
        if not isinstance(trace_json, list):
            raise ValueError("the trace must be [insts, decisions]")
    except (ValueError, TypeError) as err:
        raise TVMImportError(f"{where}: not a MetaSchedule tuning record ({err})") from None
    workload_hash, names = None, ()
    if workloads is not None:
        if not 0 <= index < len(workloads):
            raise TVMImportError(
                f"{where}: workload {index} is not in the workload file ({len(workloads)} lines)"
            )
        workload_hash, names = workloads[index]
    secs = tuple(float(s) for s in run_secs) if isinstance(run_secs, list) else None
    return TVMRecord(trace_json, secs, target, args_info, index, workload_hash, tuple(names))


def read_tvm_database(work_dir: str | os.PathLike, func=None, *,
                      workload_file: str = WORKLOAD_FILE,
                      record_file: str = RECORD_FILE) -> list[TVMRecord]:  # fmt: skip
    """The records of a MetaSchedule JSON database in `work_dir`, fastest first. With `func`
    (a schedlab PrimFunc), only the records whose arguments match its buffers (`matches`).

    Reading is data only; a malformed line raises TVMImportError naming the file and line.
    Traces are imported when a record's `trace` is read."""
    workloads = []
    for where, data in _lines(os.path.join(work_dir, workload_file)):
        if not (isinstance(data, list) and len(data) == 2 and isinstance(data[1], str)):
            raise TVMImportError(f"{where}: expected [structural hash, base64 module]")
        try:
            names = tuple(function_names(data[1]))
        except TVMImportError as err:
            raise TVMImportError(f"{where}: {err}") from None
        workloads.append((str(data[0]), names))
    records = [
        read_tvm_record(data, workloads, where)
        for where, data in _lines(os.path.join(work_dir, record_file))
    ]
    if func is not None:
        records = [r for r in records if r.matches(func)]
    return sorted(records, key=lambda r: r.mean_run_secs)


def _lines(path: str):
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as err:
        raise TVMImportError(f"cannot read {path}: {err.strerror}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{os.path.basename(path)}, line {number}"
        try:
            yield where, json.loads(line)
        except ValueError as err:
            raise TVMImportError(f"{where}: malformed JSON ({err})") from None
