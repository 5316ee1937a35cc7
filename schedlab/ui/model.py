"""`ExplorerModel`: the explorer's state, with no UI library imported (views render from it).

    model = ExplorerModel(target="cpu")
    model.load_workload("gemm", M=64, N=64, K=64)
    model.select_block("C"); loop = model.loops()[0]; model.select_loop(loop)
    model.applicable_primitives()                 # [PrimitiveSpec(...), ...] for forms
    result = model.apply("split", factors=[None, 16])   # ApplyResult; illegal -> ok False
    model.code().source, model.prediction(), model.measure()   # measure: in a worker process
    model.undo(); model.fork("tiled"); model.diff(0)
    model.export_trace_json(); model.import_trace(text); model.export_bundle()
    model.subscribe(lambda event: ...)

One model per session: it holds no globals, so sessions are isolated. Each opened function has
its own branches (named Schedules); a "step" is a user-visible version of the current branch
(handle look-ups the model makes, get_block/get_loops, are not steps of their own).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from schedlab.errors import SchedlabError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.stmt import Block, For
from schedlab.schedule import Schedule
from schedlab.schedule.errors import ScheduleError, TraceError
from schedlab.schedule.instruction import get_kind
from schedlab.schedule.trace import Trace
from schedlab.target import Target

from . import primitives as P
from .derive import diff_text, generate_code, predict, target_mismatch
from .results import (
    ApplyResult,
    Event,
    GeneratedCode,
    LatencyPoint,
    Measurement,
    PredictionResult,
    Selection,
    StepInfo,
)  # fmt: skip
from .worker import MeasureWorker, measure_func

MAIN_BRANCH = "main"


@dataclass
class _FunctionSession:
    """The schedules of one opened PrimFunc: its branches and which one is current."""

    original: PrimFunc
    branches: dict[str, Schedule] = field(default_factory=dict)
    branch: str = MAIN_BRANCH

    @property
    def schedule(self) -> Schedule:
        return self.branches[self.branch]


class ExplorerModel:
    """The state of one explorer session (see the module doc)."""

    def __init__(self, target: str | Target = "cpu", worker: MeasureWorker | None = None,
                 measure_timeout: float = 60.0):  # fmt: skip
        self.target = Target(target)
        self.measure_timeout = measure_timeout
        self._worker = worker
        self._owns_worker = worker is None
        self.module: IRModule | None = None
        self.graph_module: IRModule | None = None  # the imported graph (ONNX) before lowering
        self.source: str = ""  # what was loaded, in words
        self._sessions: dict[str, _FunctionSession] = {}
        self._func_name: str | None = None
        self._selection = Selection()
        self._observers: list[tuple[Callable, frozenset | None]] = []
        self.observer_errors: list[Exception] = []
        self._predictions: dict = {}  # (id(mod), target) -> (mod, PredictionResult)
        self._measurements: dict = {}  # (id(mod), target) -> (mod, Measurement)
        self._executor: ThreadPoolExecutor | None = None
        self._code: dict = {}  # (id(mod), target) -> (mod, GeneratedCode)
        self._labels: dict = {}  # id(step's trace) -> (trace, label): every state lists them

    # -- events ---------------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[Event], None], kinds: Iterable[str] | None = None):
        """Call `callback(event)` on every change (or only on `kinds`); returns an unsubscribe
        function. An observer that raises is kept out of the model's way (see observer_errors)."""
        entry = (callback, None if kinds is None else frozenset(kinds))
        self._observers.append(entry)
        return lambda: self._observers.remove(entry) if entry in self._observers else None

    def _emit(self, kind: str, **data) -> None:
        event = Event(kind, data)
        for callback, kinds in list(self._observers):
            if kinds is None or kind in kinds:
                try:
                    callback(event)
                except Exception as err:  # a broken view must not break the session
                    self.observer_errors.append(err)

    # -- loading --------------------------------------------------------------------------------
    def load_workload(self, name: str, **sizes) -> None:
        """Open a registry workload (e.g. "gemm", M=64, N=64, K=64)."""
        from schedlab import workloads

        func, _reference = workloads.get(name, **sizes)
        args = ", ".join(f"{k}={v}" for k, v in sizes.items())
        self._load(IRModule({name: func}), f"workload {name}({args})")

    def load_func(self, func: PrimFunc, name: str | None = None) -> None:
        """Open a hand-written PrimFunc."""
        if not isinstance(func, PrimFunc):
            raise TypeError(f"load_func: expected a PrimFunc, got {type(func).__name__}")
        name = name or func.attrs.get("global_symbol") or "main"
        self._load(IRModule({name: func}), f"function {name}")

    def load_module(self, mod: IRModule, source: str = "module") -> None:
        """Open an IRModule: its PrimFuncs are listed; the first one is opened."""
        if not isinstance(mod, IRModule):
            raise TypeError(f"load_module: expected an IRModule, got {type(mod).__name__}")
        self._load(mod, source)

    def load_onnx(self, model_or_path, shape_dict: dict | None = None) -> None:
        """Import an ONNX model (ModelProto, path or bytes), legalize and fuse it (the "zero"
        pipeline) and list its PrimFuncs; the graph stays available for the pipeline view."""
        from schedlab.relax.frontend.onnx import from_onnx

        self.load_graph(from_onnx(model_or_path, shape_dict), "ONNX model")

    def load_graph(self, graph: IRModule, source: str = "graph module") -> None:
        """Open a graph-level (Relax) module: legalize and fuse it (the "zero" pipeline) and
        list its PrimFuncs; the graph stays available for the pipeline view."""
        from schedlab import relax

        if not isinstance(graph, IRModule):
            raise TypeError(f"load_graph: expected an IRModule, got {type(graph).__name__}")
        lowered = relax.get_pipeline("zero")(graph)
        self._load(lowered, source)
        self.graph_module = graph

    def _load(self, mod: IRModule, source: str) -> None:
        self.module, self.graph_module, self.source = mod, None, source
        self._sessions, self._func_name = {}, None
        self._selection = Selection()
        self._emit("module", source=source, functions=self.functions())
        prims = [name for name, kind in self.functions() if kind == "PrimFunc"]
        if prims:
            self.open_function(prims[0])

    def functions(self) -> list[tuple[str, str]]:
        """(name, kind) of every function of the loaded module, kind "PrimFunc" or the class."""
        if self.module is None:
            return []
        return [(name, type(f).__name__) for name, f in self.module.items()]

    def open_function(self, name: str) -> None:
        """Make PrimFunc `name` the one being scheduled (its branches are kept when leaving)."""
        func = self.module[name] if self.module is not None and name in self.module else None
        if not isinstance(func, PrimFunc):
            known = [n for n, kind in self.functions() if kind == "PrimFunc"]
            raise ValueError(f"open_function: no PrimFunc named {name!r}; the module has {known}")
        if name not in self._sessions:
            session = _FunctionSession(func)
            session.branches[MAIN_BRANCH] = self._new_schedule(name, func)
            self._sessions[name] = session
        self._func_name = name
        self._set_selection(Selection(func=name))
        self._emit("step", step=self.current_step)

    def _new_schedule(self, name: str, func: PrimFunc) -> Schedule:
        return Schedule(IRModule({name: func}), target=self.target)

    def set_target(self, target: str | Target) -> None:
        """Change the target code, predictions and measurements are made for (traces recorded
        from now on name it; existing schedules keep theirs)."""
        self.target = Target(target)
        self._emit("target", target=str(self.target))

    # -- current state ---------------------------------------------------------------------------
    @property
    def _session(self) -> _FunctionSession:
        if self._func_name is None:
            raise SchedlabError("nothing is open: load a workload, function or model first")
        return self._sessions[self._func_name]

    @property
    def func_name(self) -> str | None:
        return self._func_name

    @property
    def schedule(self) -> Schedule:
        """The current branch's Schedule (views read it; change it through the model)."""
        return self._session.schedule

    @property
    def func(self) -> PrimFunc:
        """The function as scheduled at the current step."""
        return self.schedule.func

    # -- selection -------------------------------------------------------------------------------
    @property
    def selection(self) -> Selection:
        return self._selection

    def _set_selection(self, selection: Selection) -> None:
        if selection != self._selection:
            self._selection = selection
            self._emit("selection", selection=selection)

    def select_function(self, name: str) -> None:
        self.open_function(name)

    def select_block(self, block: int | str | None) -> None:
        """Select a block by uid or name (None clears the block and loop selection)."""
        if block is None:
            return self._set_selection(Selection(func=self._func_name))
        node = self._block_node(block)
        self._set_selection(Selection(self._func_name, node.uid, None))

    def select_loop(self, uid: int | None) -> None:
        """Select a loop by uid; the block selection becomes the first block inside it."""
        if uid is None:
            return self._set_selection(Selection(self._func_name, self._selection.block, None))
        state = self.schedule.state
        if not state.has(uid) or not isinstance(state.node(uid), For):
            raise ValueError(f"select_loop: no loop with uid {uid} in the current step")
        blocks = state.child_blocks(state.node(uid))
        block = blocks[0].uid if blocks else None
        self._set_selection(Selection(self._func_name, block, uid))

    def _block_node(self, block: int | str) -> Block:
        state = self.schedule.state
        if isinstance(block, str):
            found = state.blocks_named(block)
            if len(found) != 1:
                raise ValueError(f"select_block: {len(found)} blocks are named {block!r}")
            return found[0]
        if not state.has(block) or not isinstance(state.node(block), Block):
            raise ValueError(f"select_block: no block with uid {block} in the current step")
        return state.node(block)

    def loops(self, block: int | str | None = None) -> list[int]:
        """Uids of the loops above a block (the selected one by default), outermost first."""
        target = block if block is not None else self._selection.block
        if target is None:
            raise ValueError("loops: no block given and none selected")
        node = self._block_node(target)
        return [loop.uid for loop in self.schedule.state.loops_above(node)]

    def _revalidate_selection(self) -> None:
        """After the IR changed: keep what still exists, drop what does not."""
        state, sel = self.schedule.state, self._selection
        block = sel.block if sel.block is not None and state.has(sel.block) else None
        loop = sel.loop if sel.loop is not None and state.has(sel.loop) else None
        self._set_selection(Selection(self._func_name, block, loop))

    # -- primitives ------------------------------------------------------------------------------
    def applicable_primitives(self, selection: Selection | None = None) -> list[P.PrimitiveSpec]:
        """The primitives that fit the selection (a loop if one is selected, else a block)."""
        sel = selection or self._selection
        uid = sel.loop if sel.loop is not None else sel.block
        state = self.schedule.state
        if uid is None or not state.has(uid):
            return []
        return P.applicable(state, state.node(uid))

    def apply(self, name: str, selection: Selection | None = None, **args) -> ApplyResult:
        """Apply primitive `name` to the selection with form values `args` (loops/blocks by
        uid). An illegal request gives ok=False with the error's message and offending uids;
        then nothing changes."""
        sel = selection or self._selection
        spec, target_uid = self._spec_for(name, sel)
        if spec is None:
            return ApplyResult(False, name, target_uid)
        trial = self.schedule.copy()  # failures leave the branch's schedule untouched
        try:
            positional, kwargs = P.resolve_args(trial, spec, target_uid, args)
            outputs = getattr(trial, name)(*positional, **kwargs)
        except ScheduleError as err:
            uids = tuple(n.uid for n in err.nodes if isinstance(n, (For, Block)))
            cause, detail = _cause_and_function(err)
            return ApplyResult(False, name, cause, uids, error=err, detail=detail)
        except (TypeError, ValueError, SchedlabError) as err:
            return ApplyResult(False, name, f"{name}: {err}", error=err)
        session = self._session
        session.branches[session.branch] = trial
        self._revalidate_selection()
        self._emit("step", step=self.current_step, primitive=name)
        return ApplyResult(True, name, outputs=_output_uids(trial, outputs))

    def _spec_for(self, name: str, sel: Selection):
        """(spec, uid) for primitive `name` on the selection, or (None, message)."""
        on_loop = sel.loop is not None
        uid = sel.loop if on_loop else sel.block
        if uid is None:
            return None, f"{name}: select a loop or block first"
        kind = "loop" if on_loop else "block"
        for spec in P.all_specs():
            if spec.name == name and spec.target == kind:
                return spec, uid
        offered = sorted({s.name for s in P.all_specs() if s.target == kind})
        return None, f"{name} does not apply to a {kind}; for a {kind}: {', '.join(offered)}"

    # -- steps, undo/redo ------------------------------------------------------------------------
    def steps(self) -> list[StepInfo]:
        """The user-visible steps of the current branch up to the current one."""
        return [StepInfo(n, self._label(step), step.mod)
                for n, step in enumerate(self._user_steps())]  # fmt: skip

    def _label(self, step) -> str:
        """`_label(step)`, once per version (a step's trace is that version's own object)."""
        entry = self._labels.get(id(step.trace))
        if entry is None or entry[0] is not step.trace:
            if len(self._labels) > 4096:  # undone and abandoned versions: start afresh
                self._labels.clear()
            entry = self._labels[id(step.trace)] = (step.trace, _label(step))
        return entry[1]

    def _user_steps(self) -> list:
        """The schedule's versions that are steps: the start and each non-look-up primitive."""
        return [s for s in self.schedule.history if s.instruction is None or not _is_pure_step(s)]

    @property
    def current_step(self) -> int:
        return len(self._user_steps()) - 1

    def undo(self) -> bool:
        """Go back one step; False at the start."""
        user = self._user_steps()
        if len(user) < 2:
            return False
        sch = self.schedule
        while len(sch.history) - 1 > user[-2].index:
            sch.undo()
        self._changed()
        return True

    def redo(self) -> bool:
        """Re-apply the step undone last; False when there is none."""
        sch = self.schedule
        start = len(sch.history)
        while sch.redo():
            if not _is_pure_step(sch.history[-1]):
                self._changed()
                return True
        while len(sch.history) > start:  # only look-ups were left: stay where we were
            sch.undo()
        return False

    @property
    def can_redo(self) -> bool:
        """Whether `redo` has a step (not only look-ups) to bring back."""
        return any(not _is_pure_step(step) for step in self.schedule.undone)

    def _changed(self) -> None:
        self._revalidate_selection()
        self._emit("step", step=self.current_step)

    def _step_mod(self, step: int | None) -> IRModule:
        steps = self.steps()
        index = len(steps) - 1 if step is None else step
        if not -len(steps) <= index < len(steps):
            raise IndexError(f"step must be in 0..{len(steps) - 1}, got {step}")
        return steps[index].mod

    def _step_func(self, step: int | None) -> PrimFunc:
        return self._step_mod(step)[self._func_name]

    # -- branches --------------------------------------------------------------------------------
    def branches(self) -> list[str]:
        return list(self._session.branches)

    @property
    def branch(self) -> str:
        return self._session.branch

    def fork(self, name: str, switch: bool = True) -> None:
        """Copy the current schedule into a new branch `name` (and make it current)."""
        session = self._session
        if not name or name in session.branches:
            raise ValueError(f"fork: branch name {name!r} is empty or already used")
        session.branches[name] = session.schedule.copy()
        self._emit("branch", branches=self.branches(), created=name)
        if switch:
            self.switch(name)

    def switch(self, name: str) -> None:
        """Make branch `name` the current one."""
        session = self._session
        if name not in session.branches:
            raise ValueError(f"switch: no branch {name!r}; branches: {self.branches()}")
        session.branch = name
        self._emit("branch", branches=self.branches(), current=name)
        self._changed()

    def compare(self, a: str, b: str) -> dict:
        """Two branches side by side: their scripts' diff, traces and latencies."""
        session = self._session
        for name in (a, b):
            if name not in session.branches:
                raise ValueError(f"compare: no branch {name!r}; branches: {self.branches()}")
        funcs = {n: session.branches[n].func for n in (a, b)}
        texts = {n: f.script() for n, f in funcs.items()}
        return {
            "diff": diff_text(texts[a], texts[b], a, b),
            "scripts": texts,
            "traces": {n: session.branches[n].trace.as_python(named=True) for n in (a, b)},
            "predicted": {n: self._predict_mod(session.branches[n].mod) for n in (a, b)},
            "measured": {n: self.known_measurement(session.branches[n].mod) for n in (a, b)},
        }

    # -- views of a step -------------------------------------------------------------------------
    def script(self, step: int | None = None) -> str:
        """The TVMScript text of the function at `step` (current by default)."""
        return self._step_func(step).script()

    def diff(self, step: int, other: int | None = None) -> str:
        """Unified diff of the script at `step` against `other` (the current step by default)."""
        current = self.current_step if other is None else other
        return diff_text(self.script(step), self.script(current), f"step {step}", f"step {current}")

    def code(self, target: str | Target | None = None, step: int | None = None) -> GeneratedCode:
        """Generated source for `step` and `target`, with loop uid -> source lines."""
        target = self.target if target is None else Target(target)
        mod = self._step_mod(step)
        key = (id(mod), str(target))
        if key not in self._code:
            self._code[key] = (mod, generate_code(mod[self._func_name], self._func_name, target))
        return self._code[key][1]

    def prediction(self, step: int | None = None) -> PredictionResult:
        """Predicted latency of `step` from schedlab.cost (unavailable when that is missing)."""
        return self._predict_mod(self._step_mod(step))

    def _predict_mod(self, mod: IRModule) -> PredictionResult:
        key = (id(mod), str(self.target))
        if key not in self._predictions:
            self._predictions[key] = (mod, predict(mod[self._func_name], self.target))
        return self._predictions[key][1]

    def measure(self, step: int | None = None, timeout: float | None = None) -> Measurement:
        """Measure `step` in the worker process (blocking; see measure_in_background). A crash
        or a timeout gives a failed Measurement; the model keeps working."""
        return self._measure(*self._measure_job(step), timeout)

    def measure_in_background(self, step: int | None = None, timeout: float | None = None):
        """`measure` on a background thread (one at a time per model); returns a Future of the
        Measurement. What to measure is fixed now, in the caller's thread, so later clicks do
        not change it; the "measurement" event fires from that thread when it is done."""
        job = self._measure_job(step)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="schedlab-measure")
        return self._executor.submit(self._measure, *job, timeout)

    def _measure_job(self, step: int | None) -> tuple:
        mod = self._step_mod(step)
        index = self.current_step if step is None else step
        return mod, self._func_name, index, Target(self.target)

    def _measure(self, mod, func_name, index, target, timeout) -> Measurement:
        if self._worker is None:
            self._worker = MeasureWorker()
        timeout = self.measure_timeout if timeout is None else timeout
        outcome = self._worker.run(measure_func, mod[func_name], str(target), timeout=timeout)
        if outcome.ok:
            result = Measurement(True, outcome.value["median"], stats=dict(outcome.value))
        else:
            result = Measurement(False, reason=outcome.reason)
        self._measurements[(id(mod), str(target))] = (mod, result)
        self._emit("measurement", step=index, result=result)
        return result

    def known_measurement(self, mod: IRModule) -> Measurement | None:
        """The measurement taken of `mod` (a step's module) for the current target, if any."""
        entry = self._measurements.get((id(mod), str(self.target)))
        return None if entry is None else entry[1]

    def latency_history(self) -> list[LatencyPoint]:
        """Predicted and measured latency of every step of the current branch (for a chart)."""
        points = []
        for info in self.steps():
            predicted = self._predict_mod(info.mod)
            measured = self.known_measurement(info.mod)
            points.append(LatencyPoint(
                info.index, info.label, predicted.seconds,
                measured.seconds if measured is not None and measured.ok else None,
                measured.reason if measured is not None and not measured.ok else "",
            ))  # fmt: skip
        return points

    def pipeline_records(self, target: str | Target | None = None) -> list:
        """PassRecords (name, seconds, before, after, depth, changed) of the target's pipeline:
        the graph pipeline for an imported model, else the lowering of the current function."""
        from schedlab.ir.transform import PassContext, PassRecorder

        target = self.target if target is None else Target(target)
        recorder = PassRecorder()
        with PassContext(instruments=[recorder]):
            if self.graph_module is not None:
                from schedlab import relax

                relax.get_default_pipeline(target)(self.graph_module)
            else:
                from schedlab.transform import lower

                lower(IRModule({self._func_name: self.func}), target)
        return list(recorder.records)

    # -- traces ----------------------------------------------------------------------------------
    def export_trace_json(self) -> dict:
        """The current branch's trace as JSON data (versioned schema)."""
        return self.schedule.trace.as_json()

    def export_trace_python(self) -> str:
        """The current branch's trace as Python (`def apply_trace(sch): ...`), its variables
        named after the loops and blocks (`i_0, i_1 = sch.split(loop=i, ...)`)."""
        return self.schedule.trace.as_python(named=True)

    def export_bundle(self) -> dict:
        """The current branch's schedule as a bundle's JSON data (docs/bundle.md): the
        unscheduled function, its trace and target, and the current step's measurement when
        one was taken; `schedlab apply` rebuilds the kernel from it alone."""
        from schedlab.bundle import export_bundle

        sch = self.schedule
        known = self.known_measurement(sch.mod)
        measured = []
        if known is not None and known.ok:
            stats = {f"{k}_secs": v for k, v in known.stats.items()
                     if k in ("min", "std") and math.isfinite(v)}  # fmt: skip
            measured.append({"median_secs": known.seconds, **stats, "source": "explorer"})
        return export_bundle(sch, measured, name=self._func_name).to_json()

    def import_trace(self, data, branch: str | None = None, retarget: bool = False) -> None:
        """Replay a JSON trace (dict or text; read as data, never executed) on the unscheduled
        function into branch `branch` (the current one by default). Raises TraceError for a
        malformed trace, a different workload or a target the trace does not fit (unless
        `retarget=True`: replay it for the explorer's target); nothing changes then. A trace
        recorded for a bare kind ("cpu") fits every target of that kind."""
        trace = Trace.from_json(data)
        if not (retarget or trace.fits_target(self.target)):
            raise TraceError(target_mismatch(trace.target, str(self.target)))
        session = self._session
        sch = self._new_schedule(self._func_name, session.original)
        trace.apply_to_schedule(sch, retarget=retarget)
        name = branch or session.branch
        session.branches[name] = sch
        if name != session.branch:
            self._emit("branch", branches=self.branches(), created=name)
        session.branch = name
        self._changed()

    def close(self) -> None:
        """Stop the measurement thread, and the worker process if this model started it."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._worker is not None and self._owns_worker:
            self._worker.close()


# -- helpers ---------------------------------------------------------------------------------------
def _is_pure_step(step) -> bool:
    return get_kind(step.instruction.kind).is_pure


def _label(step) -> str:
    """The step's primitive call with the loop and block names the tree shows at that step:
    `split(loop=i, factors=[None, 16])`."""
    if step.instruction is None:
        return "start"
    lines = step.trace.as_python_lines(named=True)
    if not lines:
        return step.instruction.kind
    call = re.sub(r"^[\w, ]*=\s*", "", lines[-1].strip())  # the outputs: the tree shows them
    return call.removeprefix("sch.")


_FUNCTION_HEADER = re.compile(r"^The function, with what this is about marked \^+:\n")


def _cause_and_function(err: ScheduleError) -> tuple[str, str]:
    """A ScheduleError's cause (what broke) and, apart, the function printed with the
    offending loops/blocks marked ("" when the error has none): people read the cause first."""
    # not a copy with render_level "none": once distributed is imported (tblib), copy.copy of
    # an exception shares its __dict__, and the copy's level silenced the original's function
    cause, full = err.cause, str(err)
    if not full.startswith(cause):
        return full, ""
    return cause, _FUNCTION_HEADER.sub("", full[len(cause) :].lstrip("\n"))


def _output_uids(sch: Schedule, outputs) -> tuple:
    flat = outputs if isinstance(outputs, list) else [] if outputs is None else [outputs]
    found = []
    for handle in flat:
        value = sch.get(handle)
        found.append(value.uid if isinstance(value, (For, Block)) else value)
    return tuple(found)
