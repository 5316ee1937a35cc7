"""Schedule bundles: one kernel's schedule as a self-contained JSON file a production build
rebuilds from, checking as it goes that it rebuilds what was exported (docs/bundle.md).

    bundle = export_bundle(sch, measurements=[1.2e-4])   # from a Schedule (explorer, tuner)
    bundle.save("gemm.bundle.json")
    bundle = load_bundle("gemm.bundle.json")             # validated: hashes, trace, target
    kernel = bundle.build()                              # the scheduled kernel, compiled
    exe = schedlab.compile(mod, "cpu", database=[bundle, ...])   # or database="gemm.bundle.json"

A bundle carries the unscheduled function as printed text, its structural hash, the target,
the trace (`Trace.as_json()`, as tuning records keep it), the structural hash of the function
the trace made, and measurements. Loading parses the text (never executes it), checks both
hashes, and replays the trace: a bundle that does not match raises BundleError naming what
differs, expected against actual. `schedlab apply BUNDLE` does this in a fresh process.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from schedlab.errors import SchedlabError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.target import Target

SCHEMA = "schedlab.bundle"
VERSION = 1
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")  # the kernel's symbol and file name
_FIELDS = ("schema", "versions", "name", "workload", "target", "trace", "scheduled",
           "measurements")  # fmt: skip
_MEASUREMENT_FIELDS = {"median_secs": "a number > 0", "min_secs": "a number > 0",
                       "std_secs": "a number >= 0", "run_secs": "a list of numbers > 0",
                       "source": "a string", "versions": "an object of strings",
                       "timestamp": "a number"}  # fmt: skip


class BundleError(SchedlabError, ValueError):
    """A bundle that cannot be read, or that does not rebuild what it says it holds."""


@dataclass(frozen=True, eq=False)
class Bundle:
    """A validated bundle: `func` (parsed from `func_text`) hashes to `workload`, `trace`
    replays on it for `target`, and `scheduled` is what it made (hashing to `scheduled_hash`).
    """

    name: str
    func: PrimFunc
    func_text: str
    workload: str
    target: Target
    trace: dict
    scheduled: PrimFunc
    scheduled_hash: str
    measurements: tuple[dict, ...] = ()
    versions: dict | None = None

    def __repr__(self) -> str:
        return f"<Bundle {self.name} for {self.target.kind}, workload {self.workload[:12]}...>"

    # -- writing ----------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The bundle as JSON data (schema in docs/bundle.md)."""
        return {
            "schema": SCHEMA,
            "versions": dict(self.versions or _versions()),
            "name": self.name,
            "workload": {"structural_hash": self.workload, "func": self.func_text},
            "target": self.target.as_dict(),
            "trace": copy.deepcopy(self.trace),
            "scheduled": {"structural_hash": self.scheduled_hash},
            "measurements": [dict(m) for m in self.measurements],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.write_text(self.dumps())
        return path

    @staticmethod
    def from_json(data) -> Bundle:
        """Read and validate a bundle (a dict, or its JSON text). See `load_bundle`."""
        return _read(data)

    # -- using ------------------------------------------------------------------------------------
    @cached_property
    def key(self) -> str:
        """The workload key a graph module's kernel must have to take this schedule: the
        function's structural hash without its name (`tune.relax_integration.workload_func`)."""
        from schedlab.tune.relax_integration import workload_func
        from schedlab.tune.task import workload_key

        return workload_key(workload_func(self.func))

    def schedule(self):
        """A fresh Schedule of `func` for `target` with the trace replayed (BundleError when
        it fails to replay)."""
        from schedlab.schedule import Schedule
        from schedlab.schedule.trace import Trace

        sch = Schedule(IRModule({self.name: self.func}), target=self.target, debug=False)
        try:
            Trace.from_json(self.trace).apply_to_schedule(sch)
        except SchedlabError as err:
            raise BundleError(
                f"bundle {self.name!r}: the trace does not replay on the bundle's function: {err}"
            ) from None
        return sch

    def build(self):
        """The scheduled kernel compiled for `target` (a `schedlab.Kernel`)."""
        from schedlab.backend.build import build

        return build(self.scheduled, self.target, name=self.name)


def export_bundle(sch, measurements=(), name: str | None = None) -> Bundle:
    """A bundle of `sch`'s current schedule: its unscheduled function, trace and target, and
    `measurements` (seconds per call as numbers, dicts of the documented fields, or tuning
    records). `name` defaults to the function's name in the schedule's module."""
    from schedlab.tune.task import workload_key

    original = sch.history[0].mod
    prims = [key for key, func in original.items() if isinstance(func, PrimFunc)]
    if len(prims) != 1:
        raise BundleError(f"export_bundle: a bundle holds one kernel; the module has {prims}")
    func, name = original[prims[0]], name or prims[0]
    if not _NAME.fullmatch(name):
        raise BundleError(f"export_bundle: the name must be a C identifier, got {name!r}")
    return Bundle(name, func, _printed(func), sch.workload_fingerprint,
                  Target(sch.target), sch.trace.as_json(), sch.func, workload_key(sch.func),
                  tuple(_measurement(m) for m in measurements), _versions())  # fmt: skip


def _printed(func: PrimFunc) -> str:
    """`func`'s script text, checked to parse back to `func` (else the bundle could not be
    loaded); cached, as the explorer exports the same function at every step."""
    from schedlab.script import from_source
    from schedlab.tune.task import workload_key

    cached = _PRINTED.get(id(func))
    if cached is not None and cached[0] is func:
        return cached[1]
    text = func.script()
    expected, actual = workload_key(func), workload_key(from_source(text))
    if actual != expected:
        raise BundleError(
            f"export_bundle: the function does not parse back from its printed text (structural "
            f"hash {expected} printed, {actual} parsed back), so it cannot travel as a bundle"
        )
    with _PRINTED_LOCK:  # explorer sessions export from several threads
        if len(_PRINTED) >= 16:
            _PRINTED.pop(next(iter(_PRINTED)))
        _PRINTED[id(func)] = (func, text)
    return text


_PRINTED: dict[int, tuple[PrimFunc, str]] = {}
_PRINTED_LOCK = threading.Lock()


def load_bundle(path: str | os.PathLike) -> Bundle:
    """Read and validate the bundle file at `path`: the printed function parses and hashes to
    the recorded structural hash, the trace is for that workload and target kind and replays,
    and what it makes hashes to the recorded scheduled hash. Raises BundleError naming what
    differs (expected against actual)."""
    try:
        text = Path(path).read_bytes()
    except IsADirectoryError:
        raise BundleError(f"{os.fspath(path)!r} is a directory, not a bundle file") from None
    except OSError as err:
        raise BundleError(f"cannot read bundle {os.fspath(path)!r}: {err.strerror}") from None
    try:
        return _read(text)
    except BundleError as err:
        raise BundleError(f"{os.fspath(path)}: {err}") from None


def _versions() -> dict:
    import schedlab

    return {"schema": VERSION, "schedlab": schedlab.__version__}


# -- reading ---------------------------------------------------------------------------------------
def _read(data) -> Bundle:
    from schedlab.schedule.trace import Trace

    data = _parse(data)
    name = data["name"]
    func, text = _read_func(data["workload"], name)
    workload = data["workload"]["structural_hash"]
    target = _read_target(data["target"])
    try:
        trace = Trace.from_json(data["trace"])
    except SchedlabError as err:
        raise BundleError(f"the bundle's trace is malformed: {err}") from None
    _check_trace(trace, workload, target)
    scheduled_hash = _field(data["scheduled"], "structural_hash", str, "scheduled.")
    bundle = Bundle(name, func, text, workload, target, data["trace"], func, scheduled_hash,
                    _read_measurements(data["measurements"]), dict(data["versions"]))  # fmt: skip
    return _replayed(bundle)


def _parse(data) -> dict:
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as err:
            raise BundleError(f"not a bundle: the JSON is malformed ({err})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise BundleError(f"not a bundle: expected a JSON object with schema {SCHEMA!r}")
    versions = _field(data, "versions", dict)
    if versions.get("schema") != VERSION:
        raise BundleError(
            f"unsupported bundle schema version {versions.get('schema')!r} (this schedlab "
            f"reads version {VERSION})"
        )
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise BundleError(f"unknown bundle field(s) {unknown}; a version 1 bundle has {_FIELDS}")
    for key, types in (("name", str), ("workload", dict), ("target", (dict, str)),
                       ("trace", dict), ("scheduled", dict), ("measurements", list)):  # fmt: skip
        _field(data, key, types)
    if not _NAME.fullmatch(data["name"]):
        raise BundleError(f"bundle field 'name' must be a C identifier, got {data['name']!r:.60}")
    return data


def _field(data: dict, key: str, types, prefix: str = ""):
    if key not in data:
        raise BundleError(f"bundle field {prefix}{key!r} is missing")
    value = data[key]
    if not isinstance(value, types) or isinstance(value, bool):
        names = types if isinstance(types, tuple) else (types,)
        expected = " or ".join({dict: "an object", list: "a list", str: "a string"}[t]
                               for t in names)  # fmt: skip
        raise BundleError(f"bundle field {prefix}{key!r} must be {expected}, got {value!r:.60}")
    return value


def _read_func(workload, name: str) -> tuple[PrimFunc, str]:
    """The printed function, parsed (as data: never executed), checked against its hash."""
    from schedlab.script import from_source
    from schedlab.tune.task import workload_key

    expected = _field(workload, "structural_hash", str, "workload.")
    text = _field(workload, "func", str, "workload.")
    try:
        func = from_source(text)
    except SchedlabError as err:
        raise BundleError(f"the bundle's printed function does not parse: {err}") from None
    if not isinstance(func, PrimFunc):
        raise BundleError(f"the bundle's printed function must be one @T.prim_func ({name!r})")
    actual = workload_key(func)
    if actual != expected:
        raise BundleError(
            f"structural hash mismatch: the bundle records workload {expected}, its printed "
            f"function hashes to {actual} (the function or the hash was changed after export; "
            "re-export the bundle)"
        )
    return func, text


def _read_target(value) -> Target:
    try:
        return Target(value)
    except (ValueError, TypeError) as err:
        raise BundleError(f"bundle field 'target' is not a target: {err}") from None


def _check_trace(trace, workload: str, target: Target) -> None:
    """The trace's own workload and target (when it names them) are the bundle's."""
    if trace.workload is not None and trace.workload != workload:
        raise BundleError(
            f"workload mismatch: the trace was recorded on workload {trace.workload!r:.80}, "
            f"the bundle's function is {workload}"
        )
    if trace.fits_target(target):
        return
    try:
        recorded = Target(trace.target)
    except ValueError:
        recorded = None
    if recorded is None or recorded.kind != target.kind:
        kind = trace.target if recorded is None else recorded.kind
        raise BundleError(
            f"target mismatch: the trace was recorded for target kind {kind!r:.80}, the "
            f"bundle is for {target.kind!r}"
        )
    raise BundleError(
        f"target mismatch: the trace was recorded for {recorded.describe()!r}, the bundle's "
        f"target is {target.describe()!r}"
    )


def _replayed(bundle: Bundle) -> Bundle:
    from schedlab.tune.task import workload_key

    sch = bundle.schedule()
    actual = workload_key(sch.func)
    if actual != bundle.scheduled_hash:
        made = (bundle.versions or {}).get("schedlab", "?")
        raise BundleError(
            f"scheduled kernel mismatch: the trace should make a function with structural hash "
            f"{bundle.scheduled_hash}, replaying it here made {actual} (exported by schedlab "
            f"{made}, replayed by {_versions()['schedlab']}; the trace was changed, or a "
            "primitive now rewrites differently)"
        )
    return Bundle(bundle.name, bundle.func, bundle.func_text, bundle.workload, bundle.target,
                  bundle.trace, sch.func, actual, bundle.measurements,
                  bundle.versions)  # fmt: skip


def _read_measurements(items: list) -> tuple[dict, ...]:
    out = []
    for index, item in enumerate(items):
        try:
            out.append(_measurement(item, strict=True))
        except BundleError as err:
            raise BundleError(f"measurements[{index}]: {err}") from None
    return tuple(out)


def _measurement(value, strict: bool = False) -> dict:
    """One measurement as the documented dict: from a number (median seconds), a dict, or a
    TuningRecord (its run_secs, versions and timestamp)."""
    if not strict and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = {"median_secs": float(value)}
    elif not strict and hasattr(value, "run_secs") and hasattr(value, "median_secs"):
        if not value.ok:
            raise BundleError(f"export_bundle: a failed tuning record ({value.error}) is no "
                              "measurement")  # fmt: skip
        value = {"median_secs": value.median_secs, "run_secs": list(value.run_secs),
                 "source": "tuner", "versions": dict(value.versions),
                 "timestamp": value.timestamp}  # fmt: skip
    if not isinstance(value, dict):
        raise BundleError(f"a measurement must be an object, got {value!r:.60}")
    unknown = sorted(set(value) - set(_MEASUREMENT_FIELDS))
    if unknown or "median_secs" not in value:
        raise BundleError(
            f"a measurement has the fields {sorted(_MEASUREMENT_FIELDS)} ('median_secs' "
            f"required); got {sorted(value)}"
        )
    for key, item in value.items():
        if not _measurement_value_ok(key, item):
            raise BundleError(f"measurement field {key!r} must be {_MEASUREMENT_FIELDS[key]}, "
                              f"got {item!r:.60}")  # fmt: skip
    return dict(value)


def _measurement_value_ok(key: str, value) -> bool:
    def number(x, low=0.0, strict=True) -> bool:
        ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
        return ok and (x > low if strict else x >= low)

    if key in ("median_secs", "min_secs"):
        return number(value)
    if key == "std_secs":
        return number(value, strict=False)
    if key == "run_secs":
        return isinstance(value, list) and all(number(x) for x in value)
    if key == "source":
        return isinstance(value, str)
    if key == "versions":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return number(value, -math.inf)


# -- bundles as a tuning database ------------------------------------------------------------------
class BundleDatabase:
    """Bundles in the role of a tuning Database, for `ApplyDatabase` / `schedlab.compile(...,
    database=...)`: a kernel whose workload key (name left out) is a bundle's takes its
    schedule. Strict where a Database is lenient: `check_module` refuses a bundle for another
    target kind and a bundle that matches no kernel of the module."""

    def __init__(self, bundles):
        self.bundles: list[Bundle] = [as_bundle(b) for b in bundles]
        self._by_key: dict[str, Bundle] = {}
        for bundle in self.bundles:
            other = self._by_key.setdefault(bundle.key, bundle)
            if other is not bundle and other.scheduled_hash != bundle.scheduled_hash:
                raise BundleError(
                    f"bundles {other.name!r} and {bundle.name!r} schedule the same kernel "
                    f"(workload {bundle.key[:16]}...) differently: give one of them"
                )

    def __repr__(self) -> str:
        return f"BundleDatabase({', '.join(b.name for b in self.bundles)})"

    def query_schedule(self, func: PrimFunc, target):
        """The matching bundle's schedule of `func`, or None."""
        from schedlab.tune.task import workload_key

        bundle = self._by_key.get(workload_key(func))
        if bundle is None:
            return None
        _check_kind(bundle, Target(target))
        return bundle.schedule()

    def check_module(self, mod: IRModule, target) -> None:
        """Every bundle is for `target`'s kind and matches an unscheduled kernel of `mod`
        (ApplyDatabase calls this first); BundleError names the bundle and the kernels."""
        from schedlab.dlight.base import is_scheduled
        from schedlab.tune.relax_integration import workload_func
        from schedlab.tune.task import workload_key

        target = Target(target)
        kernels = {name: workload_key(workload_func(func)) for name, func in mod.items()
                   if isinstance(func, PrimFunc) and not is_scheduled(func)}  # fmt: skip
        for bundle in self.bundles:
            _check_kind(bundle, target)
            if bundle.key not in kernels.values():
                listed = ", ".join(f"{n} ({k[:12]}...)" for n, k in kernels.items()) or "none"
                raise BundleError(
                    f"bundle {bundle.name!r} matches no kernel of the module: it is for "
                    f"workload {bundle.key[:12]}..., the unscheduled kernels are {listed} (a "
                    "bundle applies only to the kernel it was exported from)"
                )


def _check_kind(bundle: Bundle, target: Target) -> None:
    if bundle.target.kind != target.kind:
        raise BundleError(
            f"target mismatch: bundle {bundle.name!r} is for target kind "
            f"{bundle.target.kind!r}, compiling for {target.kind!r}"
        )


def as_bundle(value) -> Bundle:
    """A Bundle from a Bundle, its JSON dict, or the path of a bundle file."""
    if isinstance(value, Bundle):
        return value
    if isinstance(value, dict):
        return Bundle.from_json(value)
    if isinstance(value, (str, os.PathLike)):
        return load_bundle(value)
    raise TypeError(
        f"expected a Bundle, its JSON or a bundle file path, got {type(value).__name__}"
    )


def bundle_database(value) -> BundleDatabase | None:
    """`value` as a BundleDatabase when it is bundles (a Bundle, a list of them or of their
    paths, the path of a bundle file, a BundleDatabase); None for anything else."""
    if isinstance(value, BundleDatabase):
        return value
    if isinstance(value, Bundle):
        return BundleDatabase([value])
    if isinstance(value, (list, tuple)):
        return BundleDatabase(value)
    if isinstance(value, (str, os.PathLike)) and os.path.isfile(value):
        return BundleDatabase([load_bundle(value)])
    return None


__all__ = ["Bundle", "BundleDatabase", "BundleError", "as_bundle", "bundle_database",
           "export_bundle", "load_bundle"]  # fmt: skip
