"""The tuning database: measured schedules as JSON lines in a folder, resumable, queryable.

    db = Database("tune_gemm")                      # creates the folder, or resumes it
    key = db.commit_workload(func, "gemm")
    db.commit_record(TuningRecord.new(task, sch.trace, run_secs=(1.2e-5, 1.1e-5)))
    db.query_best(func, "cpu")                       # the fastest TuningRecord, or None
    db.query_schedule(func, "cpu")                   # its trace replayed on a fresh Schedule

The folder holds up to three files, each one JSON object per line:
  workloads.jsonl  {"key": workload key, "name": ..., "func": the function's script text}
  records.jsonl    TuningRecord.to_json() (schema below)
  selections.jsonl {"workload", "target", "candidate": candidate_key | null, "records": int,
                    "in_model_secs": [...], "context": str, "timestamp"}: a candidate chosen
                   by its time inside a compiled model (`schedlab.tune.in_model`), which
                   `query_best` returns instead of the fastest alone while the workload has no
                   records newer than the choice ("records" counts them then); the latest line
                   of a workload and target wins, and a null candidate undoes the choice
A line is appended with one write() to a file opened O_APPEND, then fsync'ed, so concurrent
writers never interleave and a crash loses at most the line being written. Loading skips a
damaged line (a write cut short) with a warning; the next append starts on a fresh line.

Record schema (TVM's TuningRecord, plus what a reader needs to trust a number):
  {"workload": key, "task_name": str, "target": str(Target), "trace": Trace.as_json(),
   "run_secs": [seconds per repeat] | null, "error": str | null, "candidate": candidate_key,
   "versions": {"schedlab", "python", "numpy", "compiler"}, "timestamp": unix seconds}

Records are matched on the exact target string, which includes the host description
(`str(Target("cpu"))`): a record measured on another machine is not this machine's best.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import statistics
import time
import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from schedlab.errors import SchedlabError
from schedlab.ir.function import PrimFunc
from schedlab.schedule.trace import Trace
from schedlab.target import Target

from .task import TuneTask, workload_key

WORKLOADS_FILE = "workloads.jsonl"
RECORDS_FILE = "records.jsonl"
SELECTIONS_FILE = "selections.jsonl"
_RECORD_FIELDS = ("workload", "task_name", "target", "trace", "run_secs", "error", "candidate",
                  "versions", "timestamp")  # fmt: skip


class DatabaseError(SchedlabError, ValueError):
    """A database folder or file that cannot be used, or a record it cannot hold."""


def candidate_key(trace: Trace | dict) -> str:
    """A stable key of a candidate: sha256 of the canonical JSON of its instructions and
    decisions (not its workload or target, which the record keeps beside it)."""
    data = trace.as_json() if isinstance(trace, Trace) else trace
    if not isinstance(data, dict) or "insts" not in data:
        raise TypeError(
            f"candidate_key: expected a Trace or its as_json() dict, got {type(trace).__name__}"
        )
    canonical = {"insts": data["insts"], "decisions": data.get("decisions", [])}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@cache
def current_versions() -> dict[str, str]:
    """The versions a measurement depends on: schedlab, Python, numpy, the C compiler."""
    import numpy

    import schedlab
    from schedlab.backend.cpu.compiler import compiler_command, compiler_version

    try:
        compiler = compiler_version(compiler_command()).splitlines()[1]
    except (SchedlabError, OSError, IndexError):  # no compiler: records still say what ran
        compiler = "unavailable"
    return {"schedlab": schedlab.__version__, "python": platform.python_version(),
            "numpy": numpy.__version__, "compiler": compiler}  # fmt: skip


@dataclass(frozen=True)
class TuningRecord:
    """One measured candidate: its trace, and its seconds per repeat (None when it failed,
    with `error` saying why: "build: ...", "run: timed out after 10 s", ...)."""

    workload: str
    task_name: str
    target: str
    trace: dict
    run_secs: tuple[float, ...] | None
    error: str | None = None
    candidate: str = ""
    versions: dict = field(default_factory=dict)
    timestamp: float = 0.0

    def __post_init__(self) -> None:
        if self.run_secs is not None:
            object.__setattr__(self, "run_secs", tuple(float(s) for s in self.run_secs))
        if not self.candidate:
            object.__setattr__(self, "candidate", candidate_key(self.trace))

    @staticmethod
    def new(
        task: TuneTask,
        trace: Trace | dict,
        run_secs: tuple[float, ...] | None = None,
        error: str | None = None,
    ) -> TuningRecord:
        """A record of `task` measured now (versions and timestamp filled in)."""
        data = trace.as_json() if isinstance(trace, Trace) else trace
        return TuningRecord(task.workload, task.name, str(task.target), data, run_secs, error,
                            candidate_key(data), current_versions(), time.time())  # fmt: skip

    @property
    def ok(self) -> bool:
        """Whether it built and ran."""
        return self.error is None and bool(self.run_secs)

    @property
    def median_secs(self) -> float:
        """Median seconds per call; inf for a failed candidate (so it sorts last)."""
        return statistics.median(self.run_secs) if self.ok else math.inf

    def to_json(self) -> dict:
        data = {name: getattr(self, name) for name in _RECORD_FIELDS}
        data["run_secs"] = None if self.run_secs is None else list(self.run_secs)
        return data

    @staticmethod
    def from_json(data: dict) -> TuningRecord:
        """Read a record; a missing or mistyped field raises DatabaseError naming it."""
        if not isinstance(data, dict):
            raise DatabaseError(f"a tuning record must be a JSON object, got {type(data).__name__}")
        missing = [name for name in ("workload", "target", "trace", "run_secs") if name not in data]
        if missing:
            raise DatabaseError(f"tuning record: missing field(s) {', '.join(missing)}")
        _check_type(data, "workload", str)
        _check_type(data, "target", str)
        _check_type(data, "trace", dict)
        _check_type(data, "run_secs", (list, type(None)))
        _check_type(data, "error", (str, type(None)))
        return TuningRecord(
            data["workload"], str(data.get("task_name", "")), data["target"], data["trace"],
            data["run_secs"], data.get("error"), str(data.get("candidate") or ""),
            dict(data.get("versions") or {}), float(data.get("timestamp", 0.0)),
        )  # fmt: skip


def _check_type(data: dict, name: str, types) -> None:
    value = data.get(name)
    if not isinstance(value, types):
        raise DatabaseError(f"tuning record: field {name!r} has the wrong type: {value!r}")


@dataclass(frozen=True)
class WorkloadEntry:
    """A tuned function: its key, its name, its script text (`func` parses it back)."""

    key: str
    name: str
    text: str

    @property
    def func(self) -> PrimFunc:
        from schedlab.script import from_source

        return from_source(self.text)


class Database:
    """Tuning records in `work_dir` (created when missing). Constructing one on a folder that
    already holds records resumes it: everything stored is loaded."""

    def __init__(self, work_dir: str | os.PathLike):
        self.work_dir = Path(work_dir)
        if self.work_dir.exists() and not self.work_dir.is_dir():
            raise DatabaseError(f"Database: work_dir {str(self.work_dir)!r} is not a folder")
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise DatabaseError(
                f"Database: cannot create work_dir {str(work_dir)!r}: {err}"
            ) from None
        self._workloads: dict[str, WorkloadEntry] = {}
        self._records: list[TuningRecord] = []
        self._candidates: set[tuple[str, str, str]] = set()
        self._counts: dict[tuple[str, str], int] = {}  # (workload, target) -> records
        self._selections: dict[tuple[str, str], dict] = {}  # (workload, target) -> latest line
        for line, data in _read_lines(self.work_dir / WORKLOADS_FILE):
            self._load_workload(line, data)
        for line, data in _read_lines(self.work_dir / RECORDS_FILE):
            self._load_record(line, data)
        for line, data in _read_lines(self.work_dir / SELECTIONS_FILE):
            self._load_selection(line, data)

    def __repr__(self) -> str:
        counts = f"{len(self._workloads)} workloads, {len(self)} records"
        return f"Database({str(self.work_dir)!r}: {counts})"

    def __len__(self) -> int:
        return len(self._records)

    # -- writing --------------------------------------------------------------------------------
    def commit_workload(self, func: PrimFunc, name: str | None = None) -> str:
        """Store `func` (once) and return its workload key."""
        if not isinstance(func, PrimFunc):
            raise TypeError(f"commit_workload: func must be a PrimFunc, got {type(func).__name__}")
        key = workload_key(func)
        if key not in self._workloads:
            entry = WorkloadEntry(key, name or func.name, func.script())
            _append(self.work_dir / WORKLOADS_FILE,
                    {"key": key, "name": entry.name, "func": entry.text})  # fmt: skip
            self._workloads[key] = entry
        return key

    def commit_record(self, record: TuningRecord) -> None:
        """Append `record`; its workload must have been committed first."""
        if not isinstance(record, TuningRecord):
            raise TypeError(f"commit_record: expected a TuningRecord, got {type(record).__name__}")
        if record.workload not in self._workloads:
            raise DatabaseError(
                f"commit_record: workload {record.workload[:16]}... is not in {self.work_dir} "
                "(commit_workload(func) first)"
            )
        _append(self.work_dir / RECORDS_FILE, record.to_json())
        self._add(record)

    def commit_selection(self, workload: str | PrimFunc, target, candidate: str | None,
                         in_model_secs=(), context: str = "") -> None:  # fmt: skip
        """Choose the record `candidate` (a candidate_key of a successful record) as the best
        of `workload` on `target`, for its time inside a model (`in_model_secs`, measured in
        `context`: the model's name); None undoes a choice. The choice holds until a record
        of the workload is added."""
        key, target = _key(workload), _target_str(target)
        if candidate is not None and not any(
            r.ok and r.candidate == candidate for r in self.records(key, target)
        ):
            raise DatabaseError(
                f"commit_selection: workload {key[:16]}... has no successful record of "
                f"candidate {candidate!r} on this target"
            )
        data = {"workload": key, "target": target, "candidate": candidate,
                "records": self._counts.get((key, target), 0),
                "in_model_secs": [float(s) for s in in_model_secs], "context": str(context),
                "timestamp": time.time()}  # fmt: skip
        _append(self.work_dir / SELECTIONS_FILE, data)
        self._selections[(key, target)] = data

    # -- reading --------------------------------------------------------------------------------
    def workloads(self) -> list[WorkloadEntry]:
        return list(self._workloads.values())

    def records(self, workload: str | None = None, target=None) -> list[TuningRecord]:
        """Records in commit order, optionally of one workload key and/or one target."""
        target = None if target is None else _target_str(target)
        return [r for r in self._records
                if (workload is None or r.workload == workload)
                and (target is None or r.target == target)]  # fmt: skip

    def get_top_k(self, workload: str | PrimFunc, target, k: int) -> list[TuningRecord]:
        """The `k` fastest successful records of `workload` on `target`, fastest first."""
        if not isinstance(k, int) or k < 0:
            raise ValueError(f"get_top_k: k must be an int >= 0, got {k!r}")
        ok = [r for r in self.records(_key(workload), target) if r.ok]
        return sorted(ok, key=lambda r: r.median_secs)[:k]

    def query_best(self, workload: str | PrimFunc, target) -> TuningRecord | None:
        """The record chosen for `workload` (a PrimFunc or its key) on `target` by its time in
        a model (`selected`), else its fastest successful record."""
        chosen = self.selected(workload, target)
        if chosen is not None:
            return chosen
        best = self.get_top_k(workload, target, 1)
        return best[0] if best else None

    def selected(self, workload: str | PrimFunc, target) -> TuningRecord | None:
        """The record `commit_selection` chose for `workload` on `target`, while it holds
        (no record of the workload added since); else None."""
        key, target = _key(workload), _target_str(target)
        choice = self._selections.get((key, target))
        if choice is None or choice["candidate"] is None:
            return None
        if choice["records"] != self._counts.get((key, target), 0):
            return None  # tuned again since: the choice was among fewer candidates
        return next((r for r in self.records(key, target)
                     if r.ok and r.candidate == choice["candidate"]), None)  # fmt: skip

    def query_schedule(self, func: PrimFunc, target):
        """The best trace replayed on a fresh `Schedule(func, target=target)`, or None."""
        best = self.query_best(func, target)
        return None if best is None else replay(best, func, target)

    def has_candidate(self, workload: str | PrimFunc, target, candidate: str) -> bool:
        """Whether this candidate (a `candidate_key`) was measured already, failed or not."""
        return (_key(workload), _target_str(target), candidate) in self._candidates

    # -- loading --------------------------------------------------------------------------------
    def _load_workload(self, where: str, data) -> None:
        if not isinstance(data, dict) or not all(
            isinstance(data.get(name), str) for name in ("key", "name", "func")
        ):
            raise DatabaseError(
                f"{where}: expected a workload {{key, name, func}}, got {data!r:.80}"
            )
        self._workloads.setdefault(
            data["key"], WorkloadEntry(data["key"], data["name"], data["func"])
        )

    def _load_record(self, where: str, data) -> None:
        try:
            record = TuningRecord.from_json(data)
        except DatabaseError as err:
            raise DatabaseError(f"{where}: {err}") from None
        if record.workload not in self._workloads:
            raise DatabaseError(
                f"{where}: record of workload {record.workload[:16]}..., which is not in "
                f"{self.work_dir / WORKLOADS_FILE}"
            )
        self._add(record)

    def _load_selection(self, where: str, data) -> None:
        valid = (
            isinstance(data, dict)
            and all(isinstance(data.get(name), str) for name in ("workload", "target"))
            and isinstance(data.get("records"), int)
            and isinstance(data.get("candidate", 0), (str, type(None)))
        )
        if not valid:
            raise DatabaseError(
                f"{where}: expected a selection {{workload, target, candidate, records}}, "
                f"got {data!r:.80}"
            )
        self._selections[(data["workload"], data["target"])] = data

    def _add(self, record: TuningRecord) -> None:
        self._records.append(record)
        self._candidates.add((record.workload, record.target, record.candidate))
        where = (record.workload, record.target)
        self._counts[where] = self._counts.get(where, 0) + 1


def replay(record: TuningRecord, func: PrimFunc, target):
    """`record`'s trace replayed on a fresh `Schedule(func, target=target)`."""
    from schedlab.schedule.schedule import Schedule

    sch = Schedule(func, target=Target(target), debug=False)
    Trace.from_json(record.trace).apply_to_schedule(sch)
    return sch


def _key(workload: str | PrimFunc) -> str:
    if isinstance(workload, PrimFunc):
        return workload_key(workload)
    if not isinstance(workload, str):
        raise TypeError(
            f"workload: expected a PrimFunc or a workload key, got {type(workload).__name__}"
        )
    return workload


def _target_str(target) -> str:
    return str(Target(target))


def _read_lines(path: Path) -> list[tuple[str, Any]]:
    """(`path:line`, parsed JSON) for each intact line; a damaged one is skipped with a warning."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        raise DatabaseError(f"Database: cannot read {path}: {err.strerror or err}") from None
    parsed = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            parsed.append((f"{path}:{number}", json.loads(line)))
        except (ValueError, RecursionError):  # JSONDecodeError and bad UTF-8 are ValueErrors
            warnings.warn(
                f"{path}:{number}: skipped a damaged line (a write cut short?)", stacklevel=3
            )
    return parsed


def _append(path: Path, data: dict) -> None:
    """Append one JSON line with a single write (O_APPEND), then fsync. When the file ends in a
    torn line (a writer killed mid-write), a newline first ends it, so this line stays whole."""
    line = (json.dumps(data, separators=(",", ":")) + "\n").encode()
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as err:
        raise DatabaseError(f"Database: cannot write {path}: {err.strerror or err}") from None
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        written = os.write(fd, line)
        while written < len(line):  # only on a full disk or a signal; finish the line
            written += os.write(fd, line[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["Database", "DatabaseError", "TuningRecord", "WorkloadEntry", "candidate_key", "replay"]
