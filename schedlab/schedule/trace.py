"""Traces: the primitives applied to a schedule, as data.

A `Trace` is a tuple of `Instruction`s (kind, inputs, attrs, outputs) plus the decisions taken by
sampling instructions. It serializes to JSON (`as_json`, schema below) and to Python
(`as_python`, a runnable `def apply_trace(sch):`), and replays onto a fresh schedule
(`apply_to_schedule`). Reading a trace never executes code: JSON is parsed as data and every
instruction kind must be a registered primitive.

JSON schema (version 1):
    {"schema": "schedlab.trace", "version": 1,
     "workload": <structural fingerprint of the module it was recorded on, or null>,
     "target": <target string or null>,
     "insts": [[kind, inputs, attrs, outputs], ...],
     "decisions": [[instruction index, decision], ...]}
`insts` and `decisions` follow TVM's trace JSON: handles are named b<i> (blocks), l<i> (loops),
v<i> (sampled integers) with one counter; None is "None"; strings among inputs are JSON-quoted
('"C"'); attrs are plain JSON; a `*loops` parameter and split factors are written flat, as the
last inputs (["Split", ["l1", "None", 16], ...]). `Trace.from_json` also accepts TVM's bare
`[insts, decisions]` form (and its name GetSBlock for GetBlock).
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import TraceError
from .handles import BlockRV, ExprRV, LoopRV, is_handle
from .instruction import PrimitiveContext, get_kind, primitive

SCHEMA = "schedlab.trace"
VERSION = 1
POSTPROC_MARKER = "EnterPostproc"
_PREFIX = {BlockRV: "b", LoopRV: "l", ExprRV: "v"}


@dataclass(frozen=True, eq=False)
class Instruction:
    kind: str
    inputs: tuple
    attrs: tuple
    outputs: tuple

    def __repr__(self) -> str:
        return f"Instruction({self.kind}, inputs={self.inputs}, attrs={self.attrs})"


@dataclass(frozen=True, eq=False)
class Trace:
    """Instructions plus the decisions of sampling instructions (keyed by instruction)."""

    insts: tuple[Instruction, ...] = ()
    decisions: dict = field(default_factory=dict)
    workload: str | None = None
    target: str | None = None

    # -- editing ----------------------------------------------------------------------------
    def append(self, inst: Instruction, decision=None) -> Trace:
        decisions = dict(self.decisions)
        if decision is not None:
            decisions[inst] = decision
        return Trace(self.insts + (inst,), decisions, self.workload, self.target)

    def get_decision(self, inst: Instruction):
        return self.decisions.get(inst)

    def with_decision(self, inst: Instruction, decision, remove_postproc: bool = False) -> Trace:
        """A copy with one sampling instruction's decision replaced."""
        if not any(inst is i for i in self.insts):
            raise TraceError(f"with_decision: {inst} is not in this trace")
        if not get_kind(inst.kind).is_sampling:
            raise TraceError(f"with_decision: {inst.kind} is not a sampling instruction")
        trace = self._without_postproc() if remove_postproc else self
        if not any(inst is i for i in trace.insts):
            raise TraceError(f"with_decision: {inst} comes after EnterPostproc, which was removed")
        return Trace(trace.insts, {**trace.decisions, inst: decision}, self.workload, self.target)

    def simplified(self, remove_postproc: bool = False) -> Trace:
        """Dead-code elimination: drop pure instructions (retrieval, sampling) whose outputs
        nothing later uses."""
        trace = self._without_postproc() if remove_postproc else self
        used: set[int] = set()
        kept: list[Instruction] = []
        for inst in reversed(trace.insts):
            outputs = {id(o) for o in _handles_in(inst.outputs)}
            if get_kind(inst.kind).is_pure and not outputs & used:
                continue
            kept.append(inst)
            used |= {id(h) for h in _handles_in(inst.inputs)}
        kept.reverse()
        decisions = {i: d for i, d in trace.decisions.items() if any(i is k for k in kept)}
        return Trace(tuple(kept), decisions, self.workload, self.target)

    def _without_postproc(self) -> Trace:
        for index, inst in enumerate(self.insts):
            if inst.kind == POSTPROC_MARKER:
                kept = self.insts[:index]
                decisions = {i: d for i, d in self.decisions.items() if i in kept}
                return Trace(kept, decisions, self.workload, self.target)
        return self

    # -- replay -----------------------------------------------------------------------------
    def apply_to_schedule(self, sch, remove_postproc: bool = False,
                          decision_provider: Callable | None = None,
                          retarget: bool = False) -> None:  # fmt: skip
        """Replay onto `sch` (normally a fresh schedule of the same workload). Sampling
        instructions reuse their decisions; `decision_provider(inst, inputs, attrs, decision)`
        may return a different one.

        Raises TraceError for a different workload, for a target other than the recorded one
        (`retarget=True` replays it for the schedule's target anyway), and when an instruction
        fails (the message names its index and kind). The replay is all or nothing: after any
        error (the decision provider's own included) `sch` is exactly as it was (module, trace,
        handles, undo history)."""
        self._check_compatible(sch, retarget)
        trace = self._without_postproc() if remove_postproc else self
        mapping: dict[int, Any] = {}
        with sch._all_or_nothing():
            for index, inst in enumerate(trace.insts):
                inputs = _map_handles(inst.inputs, mapping)
                decision = trace.decisions.get(inst)
                if decision_provider is not None:  # the caller's code: its errors stay its own
                    decision = decision_provider(inst, inputs, inst.attrs, decision)
                try:
                    outputs = sch._apply_instruction(inst.kind, inputs, inst.attrs, decision)
                except Exception as err:
                    raise TraceError(
                        f"replaying instruction {index} ({inst.kind}) failed: {err}"
                    ) from err
                for old, new in zip(_handles_in(inst.outputs), _handles_in(outputs)):
                    mapping[id(old)] = new

    def fits_target(self, target) -> bool:
        """Whether this trace replays on a schedule for `target` without `retarget=True`: it
        names no target (TVM's form), or the same kind as a bare kind ("cpu" fits every CPU),
        or an equal Target."""
        return self.target is None or _same_target(self.target, target)

    def _check_compatible(self, sch, retarget: bool = False) -> None:
        if self.workload is not None and self.workload != sch.workload_fingerprint:
            raise TraceError(
                "this trace was recorded on a different workload: its fingerprint is "
                f"{self.workload[:16]}..., the schedule's is {sch.workload_fingerprint[:16]}... "
                "(a trace only replays on the function it was made for)"
            )
        if not (retarget or self.fits_target(sch.target)):
            raise TraceError(
                f"this trace was recorded for target {_describe(self.target)!r}, the schedule is "
                f"for {_describe(sch.target)!r} (pass retarget=True to replay it for the "
                "schedule's target anyway)"
            )

    # -- serialization ----------------------------------------------------------------------
    def as_json(self, remove_postproc: bool = False) -> dict:
        trace = self._without_postproc() if remove_postproc else self
        names = _Names()
        insts = []
        index_of = {}
        for index, inst in enumerate(trace.insts):
            index_of[id(inst)] = index
            insts.append([
                inst.kind,
                _encode_inputs(get_kind(inst.kind), inst.inputs, names),
                [_encode_attr(v) for v in inst.attrs],
                [names.define(h) for h in inst.outputs],
            ])  # fmt: skip
        decisions = [[index_of[id(i)], _encode_attr(d)] for i, d in trace.decisions.items()]
        decisions.sort()
        return {"schema": SCHEMA, "version": VERSION, "workload": self.workload,
                "target": self.target, "insts": insts, "decisions": decisions}  # fmt: skip

    def as_tvm_json(self, remove_postproc: bool = False) -> list:
        """TVM's bare `[insts, decisions]` form."""
        data = self.as_json(remove_postproc)
        return [data["insts"], data["decisions"]]

    @staticmethod
    def from_json(data) -> Trace:
        """Read a trace from its JSON form (a dict, TVM's [insts, decisions] list, or text).
        Only data is read; unknown instruction kinds and malformed entries raise TraceError."""
        return _read_json(data)

    def as_python_lines(self, remove_postproc: bool = False, named: bool = False) -> list[str]:
        """One line per instruction, as Python calls on `sch` (decisions inline): the body of
        `as_python` (TVM's `Trace.as_python` returns this list).

        Variables are TVM's b0, l1, v2 ...; with `named`, a handle's variable is the name of
        its loop or block when the handle was made (`i_0`, `C`; see `_PythonNames`) and
        keyword arguments left at their defaults are not written (what a person would type)."""
        trace = self._without_postproc() if remove_postproc else self
        names = _PythonNames(trace.insts) if named else _Names()
        lines = []
        for index, inst in enumerate(trace.insts):
            kind = get_kind(inst.kind)
            args = _python_args(kind, inst, names, omit_defaults=named)
            if inst in trace.decisions:
                args.append(f"decision={trace.decisions[inst]!r}")
            call = f"sch.{kind.method}({', '.join(args)})"
            outs = names.define_outputs(inst.outputs, index)
            many = kind.outputs in ("loops", "blocks", "exprs")
            target = ", ".join(outs) + ("," if many and len(outs) == 1 else "")
            target = f"{target} = " if outs else ""
            lines.append(f"{target}{call}")
        return lines

    def as_python(self, remove_postproc: bool = False, named: bool = False) -> str:
        """The trace as a runnable Python function `def apply_trace(sch):` (constants are written
        as `T.int32(...)`: run it with `T` from `schedlab.script.tir` in scope); `named` as in
        `as_python_lines`."""
        body = self.as_python_lines(remove_postproc, named) or ["pass"]
        return "def apply_trace(sch):\n" + "".join(f"    {line}\n" for line in body)

    def __str__(self) -> str:
        return self.as_python()

    def __len__(self) -> int:
        return len(self.insts)


def _python_args(kind, inst: Instruction, names: _Names, omit_defaults: bool = False) -> list[str]:
    """Arguments of the call: by keyword, except a `*loops` parameter and the ones before it,
    which are positional (a keyword may not precede a positional argument). `omit_defaults`
    leaves out keywords whose value is the parameter's default (the call means the same)."""
    params = kind.signature.parameters
    order = list(params)
    positional = order[: order.index(kind.varargs) + 1] if kind.varargs else []
    values = dict(zip(kind.inputs, inst.inputs))
    args = []
    for name in positional:
        if name == kind.varargs:
            args += [_py_value(x, names) for x in values.pop(name)]
        elif name in values:
            args.append(_py_value(values.pop(name), names))
    keywords = {**values, **dict(zip(kind.attrs, inst.attrs))}
    for p, v in keywords.items():
        if not (omit_defaults and p in params and _is_default(v, params[p].default)):
            args.append(f"{p}={_py_value(v, names)}")
    return args


def _is_default(value, default) -> bool:
    if default is inspect.Parameter.empty or is_handle(value) or type(value) is not type(default):
        return False
    return value == default


class _Names:
    """Trace names for handles: b0, l1, v2 ... with one counter, in order of definition."""

    def __init__(self):
        self.names: dict[int, str] = {}

    def define(self, handle) -> str:
        if id(handle) not in self.names:
            self.names[id(handle)] = f"{_PREFIX[type(handle)]}{len(self.names)}"
        return self.names[id(handle)]

    def get(self, handle) -> str:
        try:
            return self.names[id(handle)]
        except KeyError:
            raise TraceError(f"{handle!r} is used before any instruction defines it") from None

    def define_outputs(self, handles, index: int) -> list[str]:
        return [self.define(h) for h in handles]


class _PythonNames(_Names):
    """Python variables named after loops and blocks: a handle's hint (its loop or block name
    when it was made: `i_0`, `C`), made a valid identifier. A name is taken again only once
    the handle holding it is read no more (`C = sch.get_block("C")` after the old C's last
    use); otherwise the new one becomes `i__2`. Handles without a hint get `l3`, `v4` ..."""

    RESERVED = frozenset({"sch", "T", "apply_trace"})

    def __init__(self, insts):
        super().__init__()
        self.last_use: dict[int, int] = {}  # id(handle) -> index of its last reading instruction
        for index, inst in enumerate(insts):
            for handle in _handles_in(inst.inputs):
                self.last_use[id(handle)] = index
        self.holder: dict[str, int] = {}  # variable -> id(handle) it holds now
        self.count = 0

    def define_outputs(self, handles, index: int) -> list[str]:
        taken_here: set[str] = set()
        out = []
        for handle in handles:
            name = self._pick(handle, index, taken_here)
            taken_here.add(name)
            out.append(name)
        return out

    def _pick(self, handle, index: int, taken_here: set) -> str:
        if id(handle) in self.names:
            return self.names[id(handle)]
        self.count += 1
        base = _identifier(getattr(handle, "hint", ""))
        base = base if base else f"{_PREFIX[type(handle)]}{self.count - 1}"
        name, n = base, 1
        while name in taken_here or name in self.RESERVED or self._live(name, index):
            n += 1
            name = f"{base}__{n}"
        self.names[id(handle)] = name
        self.holder[name] = id(handle)
        return name

    def _live(self, name: str, index: int) -> bool:
        """Whether `name` holds a handle that an instruction after `index` still reads (one
        read by instruction `index` itself is read before its outputs are assigned)."""
        holder = self.holder.get(name)
        return holder is not None and self.last_use.get(holder, -1) > index


def _identifier(hint: str) -> str:
    """`hint` as a Python identifier ("" for none): other characters become `_`."""
    name = re.sub(r"\W", "_", hint or "", flags=re.ASCII)
    if name and name[0].isdigit():
        name = f"_{name}"
    return f"{name}_" if keyword.iskeyword(name) else name


def _handles_in(value) -> list:
    if is_handle(value):
        return [value]
    if isinstance(value, (list, tuple)):
        return [h for item in value for h in _handles_in(item)]
    return []


def _map_handles(value, mapping: dict[int, Any]):
    if is_handle(value):
        if id(value) not in mapping:
            raise TraceError(f"{value!r} is used before any instruction defines it")
        return mapping[id(value)]
    if isinstance(value, (list, tuple)):
        return type(value)(_map_handles(v, mapping) for v in value)
    return value


def _encode_inputs(kind, inputs: tuple, names: _Names) -> list:
    encoded = [_encode_input(v, names) for v in inputs]
    if kind.spreads_last_input and encoded and isinstance(encoded[-1], list):
        encoded = encoded[:-1] + encoded[-1]
    return encoded


def _encode_input(value, names: _Names):
    if is_handle(value):
        return names.get(value)
    if value is None:
        return "None"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return [_encode_input(v, names) for v in value]
    return _encode_attr(value)


def _encode_attr(value):
    from .values import encode_value

    return encode_value(value)


def _py_value(value, names: _Names) -> str:
    if is_handle(value):
        return names.get(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_py_value(v, names) for v in value)
        return f"[{inner}]"
    from .values import python_value

    return python_value(value)


def _read_json(data) -> Trace:
    from .json_reader import MAX_NESTING, check_nesting, nesting_position, read_instructions

    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as err:  # JSONDecodeError, bad UTF-8
            raise TraceError(f"trace JSON is malformed: {err}") from None
        except RecursionError:  # json's own message says neither where nor how deep
            text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
            line, column = nesting_position(text) or (1, 1)
            raise TraceError(
                f"trace JSON is malformed: line {line}, column {column}: nested more than "
                f"{MAX_NESTING} levels deep"
            ) from None
    if isinstance(data, list) and len(data) == 2:
        data = {"schema": SCHEMA, "version": VERSION, "insts": data[0], "decisions": data[1]}
    # before anything below recurses into (or prints) the values
    check_nesting(data)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise TraceError(f"not a schedlab trace: expected a dict with schema {SCHEMA!r}")
    if data.get("version") != VERSION:
        raise TraceError(
            f"unsupported trace version {data.get('version')!r} (this reads {VERSION})"
        )
    for key in ("workload", "target"):
        if not isinstance(data.get(key), (str, type(None))):
            raise TraceError(f"trace JSON: {key!r} must be a string or null, got {data[key]!r}")
    insts, decisions = read_instructions(data.get("insts"), data.get("decisions", []))
    return Trace(tuple(insts), decisions, data.get("workload"), data.get("target"))


def _same_target(recorded: str, target) -> bool:
    """Whether a trace recorded for `recorded` is for `target`: a bare kind ("cpu", "cuda")
    matches any target of that kind, a full Target (its JSON) only an equal one."""
    from schedlab.target import Target

    try:
        if not recorded.lstrip().startswith("{"):
            return Target(recorded).kind == Target(target).kind
        return Target(recorded) == Target(target)
    except ValueError:
        return recorded == str(target)


def _describe(target) -> str:
    from schedlab.target import Target

    try:
        return Target(target).describe()
    except ValueError:
        return str(target)


@primitive(POSTPROC_MARKER, inputs=())
def enter_postproc(ctx: PrimitiveContext):
    """Mark where post-processing starts: instructions after this marker are dropped by
    `remove_postproc=True` (in `apply_to_schedule`, `as_json`, `as_python`, `simplified`,
    `with_decision`). It does not change the IR.

    Preconditions: none.

    >>> sch = Schedule(workloads.get("gemm", M=4, N=4, K=4)[0])
    >>> block = sch.get_block("C")
    >>> sch.enter_postproc()
    >>> loops = sch.get_loops(block)
    >>> len(sch.trace), len(sch.trace.as_json(remove_postproc=True)["insts"])
    (3, 1)
    """
    return ctx.state, None
