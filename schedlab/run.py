"""`schedlab run model.onnx --target cpu [--profile] [--shape NAME=D0,D1,...]`: import an ONNX
model, compile it, run it on seeded random inputs and report each output's name, shape and
dtype, schedlab's latency and (when onnxruntime is installed) onnxruntime's latency beside it,
timed interleaved in one process, plus the largest absolute difference between the two.

    report = run_model("block.onnx", target="cpu", profile=True)
    print(format_report(report))
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import numpy as np

from schedlab.errors import SchedlabError
from schedlab.timing import Timings, time_side_by_side


class RunError(SchedlabError, ValueError):
    """The model cannot be run as asked (the message names the input or option)."""


@dataclass
class RunReport:
    """What `run_model` found: outputs as (name, shape, dtype), timings, differences."""

    model: str
    target: str
    outputs: list[tuple[str, tuple[int, ...], str]]
    schedlab: Timings
    onnxruntime: Timings | None = None
    max_abs_diff: float | None = None
    profile: object | None = None
    notes: list[str] = field(default_factory=list)


def parse_shapes(items) -> dict[str, tuple[int, ...]]:
    """`["x=1,3,32,32", ...]` -> {"x": (1, 3, 32, 32)}; a bad item raises RunError."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or ():
        name, sep, dims = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        except ValueError:
            raise RunError(f"--shape: expected NAME=D0,D1,... (integers), got {item!r}") from None
        if any(d < 0 for d in shape):
            raise RunError(f"--shape: dimensions must be >= 0, got {item!r}")
        shapes[name] = shape
    return shapes


def random_inputs(mod, seed: int = 0) -> list[np.ndarray]:
    """Seeded random arrays for the parameters of `mod["main"]` (shape and dtype from their
    struct info): floats from a normal distribution, integers in [0, 4), booleans at random."""
    rng = np.random.default_rng(seed)
    arrays = []
    for param in mod["main"].params:
        sinfo = param.struct_info_
        shape = sinfo.static_shape() if hasattr(sinfo, "static_shape") else None
        if shape is None:
            raise RunError(
                f"input {param.name_hint!r} has shape {sinfo}, not a static one; "
                f"give it with --shape {param.name_hint}=D0,D1,..."
            )
        arrays.append(_random_array(rng, shape, sinfo.dtype.numpy))
    return arrays


def _random_array(rng, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 4, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def load(path: str, shapes: dict | None = None):
    """(onnx ModelProto, IRModule) of the model file at `path` (OnnxImportError if unusable)."""
    from schedlab.relax.frontend.onnx import from_onnx
    from schedlab.relax.frontend.onnx.importer import _load

    model = _load(path)
    return model, from_onnx(model, shapes)


def compile_vm(mod, target: str = "cpu", database=None):
    """Compile `mod` for `target` (kernels the tuning `database` holds get their tuned
    schedules) and wrap it in a VirtualMachine."""
    from schedlab.relax.vm import VirtualMachine
    from schedlab.relax.vm import compile as compile_module

    return VirtualMachine(compile_module(mod, target=target, database=database))


def _as_tuple(result) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _ort_session(model):
    """An onnxruntime CPU session of `model`, or None when onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    # timed interleaved with schedlab: threads left spinning after a run would take the cores
    # the next schedlab call needs, so both runtimes let their threads sleep between calls
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _feeds(model, arrays) -> dict:
    """The onnxruntime feed dict: graph inputs that are not initializers, in order."""
    inits = {init.name for init in model.graph.initializer}
    names = [inp.name for inp in model.graph.input if inp.name not in inits]
    return dict(zip(names, arrays))


def _max_abs_diff(ours, theirs) -> float:
    worst = 0.0
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        if a.size:
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            diff[np.isnan(a) & np.isnan(b)] = 0.0  # NaN in both: equal
            worst = max(worst, float(np.max(np.nan_to_num(diff, nan=np.inf))))
    return worst


def run_model(
    path: str,
    target: str = "cpu",
    profile: bool = False,
    shapes: dict | None = None,
    seed: int = 0,
    repeat: int = 5,
    min_repeat_ms: float = 20.0,
    use_onnxruntime: bool = True,
    database=None,
) -> RunReport:
    """Import, compile and run the model at `path` (with the tuned schedules of `database`,
    a tuning Database or its work_dir, when given); time it next to onnxruntime."""
    model, mod = load(path, shapes)
    arrays = random_inputs(mod, seed)
    vm = compile_vm(mod, target, database)
    outputs = _as_tuple(vm["main"](*arrays))
    names = [out.name for out in model.graph.output]
    described = [(n, tuple(np.shape(o)), str(np.asarray(o).dtype)) for n, o in zip(names, outputs)]
    fns = {"schedlab": lambda: vm["main"](*arrays)}
    session = _ort_session(model) if use_onnxruntime else None
    diff = None
    if session is not None:
        feeds = _feeds(model, arrays)
        diff = _max_abs_diff(outputs, session.run(None, feeds))
        fns["onnxruntime"] = lambda: session.run(None, feeds)
    timings = time_side_by_side(fns, repeat=repeat, min_repeat_ms=min_repeat_ms)
    report = RunReport(path, target, described, timings["schedlab"], timings.get("onnxruntime"))
    report.max_abs_diff = diff
    report.notes.append(_thread_note())
    if session is None and use_onnxruntime:
        report.notes.append("onnxruntime is not installed: no reference latency")
    if profile:
        report.profile = vm.profile(*arrays)
    return report


def _thread_note() -> str:
    """The settings that change compiled kernels' parallel timing (worth printing: on a busy
    machine libgomp's default wait policy can make the median many times the minimum)."""
    settings = ", ".join(
        f"{key}={os.environ.get(key, 'unset')}" for key in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")
    )
    return f"{os.cpu_count()} CPUs; {settings}"


def _ms(t: Timings) -> str:
    return f"min {t.min * 1e3:.3f} ms  median {t.median * 1e3:.3f} ms"


def format_report(report: RunReport) -> str:
    """The report as the text `schedlab run` prints."""
    lines = [f"model: {report.model}  target: {report.target}", "outputs:"]
    for name, shape, dtype in report.outputs:
        lines.append(f"  {name}: shape {shape} dtype {dtype}")
    lines.append("latency (interleaved repeats):")
    lines.append(f"  schedlab     {_ms(report.schedlab)}")
    if report.onnxruntime is not None:
        ratio = report.schedlab.median / report.onnxruntime.median
        lines.append(f"  onnxruntime  {_ms(report.onnxruntime)}")
        lines.append(f"  schedlab / onnxruntime (median): {ratio:.2f}x")
        lines.append(f"max abs difference vs onnxruntime: {report.max_abs_diff:.3g}")
    lines.extend(f"note: {note}" for note in report.notes)
    if report.profile is not None:
        lines.extend(["profile:", str(report.profile)])
    return "\n".join(lines)


def run_command(path: str, target: str = "cpu", profile: bool = False, shape=None, **kw) -> int:
    """The `schedlab run` subcommand: run, print the report; returns the exit status."""
    report = run_model(path, target, profile=profile, shapes=parse_shapes(shape), **kw)
    sys.stdout.write(format_report(report) + "\n")
    return 0
