"""The primitive palette: which schedule primitives fit a selection, and their argument forms.

A `PrimitiveSpec` names a Schedule method, the selection kind it acts on ("loop" or "block"),
the parameter the selection fills, and the other arguments (`ArgSpec`), so a view can draw a
small form. Argument values use UI terms: loops and blocks are given by uid (blocks also by
name); `resolve_args` turns them into schedule handles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from schedlab.ir.stmt import Block, For, ForKind, IterType
from schedlab.schedule.errors import ScheduleError
from schedlab.schedule.handles import BlockRV, LoopRV
from schedlab.schedule.instruction import PrimitiveContext, kind_by_method

ARG_KINDS = ("loop", "loops", "block", "int", "ints", "str", "bool", "choice", "any")
SCOPES = ("global", "local", "shared")


@dataclass(frozen=True)
class ArgSpec:
    """One form field: `kind` is one of ARG_KINDS ("ints" accepts None for split factors)."""

    name: str
    kind: str
    default: Any = None
    choices: tuple = ()
    help: str = ""
    required: bool = True


@dataclass(frozen=True)
class PrimitiveSpec:
    name: str  # the Schedule method
    target: str  # "loop" or "block": what the selection must be
    param: str  # the method parameter the selection fills
    args: tuple[ArgSpec, ...] = field(default_factory=tuple)
    doc: str = ""


def _a(name, kind, default=None, choices=(), help="", required=True) -> ArgSpec:
    return ArgSpec(name, kind, default, tuple(choices), help, required)


_FACTORS = _a("factors", "ints", help="split factors; one may be None (inferred)")
_ANNOTATE = (_a("ann_key", "str"), _a("ann_val", "any"))
_LOOP_SPECS = (
    ("split", "loop", (_FACTORS, _a("preserve_unit_iters", "bool", True, required=False))),
    (
        "fuse",
        "loops",
        (
            _a(
                "loops",
                "loops",
                required=False,
                help="the loops after the selected one (default: its child loop)",
            ),
        ),
    ),
    ("reorder", "loops", (_a("loops", "loops", help="the new order, selected loop included"),)),
    ("parallel", "loop", ()),
    ("vectorize", "loop", ()),
    ("unroll", "loop", ()),
    ("loop_partition", "loop", (_FACTORS,)),
    ("add_unit_loop", "block_or_loop", ()),
    ("rfactor", "loop", (_a("factor_axis", "int", 0),)),
    ("annotate", "block_or_loop", _ANNOTATE),
)
_BLOCK_SPECS = (
    ("compute_inline", "block", ()),
    ("reverse_compute_inline", "block", ()),
    ("compute_at", "block", (_a("loop", "loop"),
                             _a("preserve_unit_loops", "bool", False, required=False))),
    ("reverse_compute_at", "block", (_a("loop", "loop"),
                                     _a("preserve_unit_loops", "bool", False, required=False))),
    ("cache_read", "block", (_a("read_buffer_index", "int", 0),
                             _a("storage_scope", "choice", "local", SCOPES))),
    ("cache_write", "block", (_a("write_buffer_index", "int", 0),
                              _a("storage_scope", "choice", "local", SCOPES))),
    ("decompose_reduction", "block", (_a("loop", "loop"),)),
    ("set_scope", "block", (_a("buffer_index", "int", 0),
                            _a("storage_scope", "choice", "local", SCOPES))),
    ("add_unit_loop", "block_or_loop", ()),
    ("annotate", "block_or_loop", _ANNOTATE),
)  # fmt: skip
# no-argument primitives are tried on the immutable state (no side effect) to filter the palette
_DRY_RUN = {"parallel", "vectorize", "unroll", "compute_inline", "reverse_compute_inline"}


def _spec(name: str, target: str, param: str, args) -> PrimitiveSpec:
    kind = kind_by_method(name)
    return PrimitiveSpec(name, target, param, tuple(args), summary(kind.doc if kind else ""))


def summary(doc: str) -> str:
    """The first paragraph of a docstring as one line: what the primitive does, whole (its
    first line alone stops mid-sentence)."""
    paragraph = (doc or "").strip().split("\n\n")[0]
    return " ".join(paragraph.split())


def all_specs() -> list[PrimitiveSpec]:
    """Every palette entry, loop ones first."""
    return list(_all_specs())


@cache
def _all_specs() -> tuple[PrimitiveSpec, ...]:
    # built once: the entries are frozen, and each reads its docstring (inspect) for the help
    loops = [_spec(n, "loop", p, a) for n, p, a in _LOOP_SPECS]
    return tuple(loops + [_spec(n, "block", p, a) for n, p, a in _BLOCK_SPECS])


def applicable(state, node) -> list[PrimitiveSpec]:
    """The palette entries that may apply to `node` (a For or Block of `state`): cheap
    structural checks, and a dry run for primitives without arguments."""
    target = "loop" if isinstance(node, For) else "block"
    if isinstance(node, Block) and state.sref_parent(node) is None:
        return []  # the root block: nothing to schedule on it
    return [s for s in all_specs() if s.target == target and _fits(s, state, node)]


def _fits(spec: PrimitiveSpec, state, node) -> bool:
    if spec.name in _DRY_RUN:
        return _dry_run(spec, state, node)
    if spec.name == "fuse":
        return isinstance(node.body, For)
    if spec.name == "rfactor":
        return any(_is_reduction(b) for b in state.child_blocks(node))
    if spec.name == "decompose_reduction":
        return _is_reduction(node) and bool(state.loops_above(node))
    if spec.name in ("compute_at", "reverse_compute_at"):
        return bool(_other_loops(state, node))
    if spec.name == "cache_read":
        return bool(node.reads)
    if spec.name in ("cache_write", "set_scope"):
        return bool(node.writes)
    if spec.name in ("vectorize", "parallel", "unroll"):
        return node.kind is ForKind.SERIAL
    return True


def _dry_run(spec: PrimitiveSpec, state, node) -> bool:
    kind = kind_by_method(spec.name)
    try:
        kind.call(PrimitiveContext(state), {spec.param: node})
    except ScheduleError:
        return False
    except Exception:  # a primitive bug must not break the palette; offer it, apply will tell
        return True
    return True


def _is_reduction(block: Block) -> bool:
    return block.init is not None or any(iv.iter_type is IterType.REDUCE for iv in block.iter_vars)


def _other_loops(state, block: Block) -> list[For]:
    above = {id(loop) for loop in state.loops_above(block)}
    func = state.func_of(block.uid)
    found: list[For] = []
    _collect_loops(func.body, found)
    return [loop for loop in found if id(loop) not in above]


def _collect_loops(stmt, found: list) -> None:
    from schedlab.ir.functor import pre_order_visit

    def visit(node):
        if isinstance(node, For):
            found.append(node)
        return True

    pre_order_visit(stmt, visit)


# -- turning UI arguments into handles -----------------------------------------------------------
class HandleResolver:
    """Schedule handles for loops/blocks given by uid or name: a handle the schedule already
    has for that loop/block (a split's output, an earlier look-up), else a new one via
    get_block/get_loops. So the trace fetches each handle once, as a person writes it."""

    def __init__(self, sch):
        self.sch = sch

    def block(self, value):
        state = self.sch.state
        if isinstance(value, str):
            found = state.blocks_named(value)
            if len(found) != 1:
                return self.sch.get_block(value)  # its error says what is wrong
            value = found[0].uid
        node = self._node(value, Block, "block")
        existing = self._existing(node.uid)
        if existing is not None:
            return existing
        return self.sch.get_block(node.name_hint, func_name=state.func_name_of(node.uid))

    def loop(self, value):
        node = self._node(value, For, "loop")
        existing = self._existing(node.uid)
        if existing is not None:
            return existing
        blocks = self.sch.state.child_blocks(node)
        if not blocks:
            raise ValueError(f"loop uid {value} has no block inside it to reach it by")
        for handle in self.sch.get_loops(self.block(blocks[0].uid)):
            if self.sch.get(handle).uid == node.uid:
                return handle
        raise ValueError(f"loop uid {value} was not found above block {blocks[0].name_hint!r}")

    def _existing(self, uid: int):
        """The newest handle of the trace that still points at loop/block `uid`, or None."""
        for inst in reversed(self.sch.trace.insts):
            for handle in reversed(inst.outputs):
                if not isinstance(handle, (LoopRV, BlockRV)):
                    continue
                try:
                    node = self.sch.get(handle)
                except ScheduleError:  # HandleError: its loop/block was rewritten away
                    continue
                if node.uid == uid:
                    return handle
        return None

    def _node(self, value, cls, what: str):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"a {what} is given by its uid (an int), got {value!r}")
        state = self.sch.state
        if not state.has(value) or not isinstance(state.node(value), cls):
            raise ValueError(f"no {what} with uid {value} in the current schedule")
        return state.node(value)

    def value(self, arg: ArgSpec, value):
        if arg.kind == "loop":
            return self.loop(value)
        if arg.kind == "block":
            return self.block(value)
        if arg.kind == "loops":
            return [self.loop(v) for v in value]
        if arg.kind == "choice" and value not in arg.choices:
            raise ValueError(f"{arg.name} must be one of {arg.choices}, got {value!r}")
        return value


def resolve_args(sch, spec: PrimitiveSpec, selected_uid: int, args: dict) -> tuple[list, dict]:
    """The (positional, keyword) arguments of `sch.<spec.name>` for a selection and form values."""
    unknown = set(args) - {a.name for a in spec.args}
    if unknown:
        known = ", ".join(a.name for a in spec.args) or "none"
        raise TypeError(f"{spec.name}: unknown argument(s) {sorted(unknown)}; it takes {known}")
    resolver = HandleResolver(sch)
    is_loop = spec.target == "loop"
    selected = resolver.loop(selected_uid) if is_loop else resolver.block(selected_uid)
    kwargs = {}
    for arg in spec.args:
        if arg.name in args:
            kwargs[arg.name] = resolver.value(arg, args[arg.name])
        elif arg.required and arg.default is None:
            raise TypeError(f"{spec.name}: missing argument {arg.name!r} ({arg.kind})")
        elif arg.default is not None:
            kwargs[arg.name] = arg.default
    if spec.param == "loops":  # *loops primitives: the selection is the first loop
        loops = kwargs.pop("loops", [])
        if spec.name == "fuse" and not loops:
            loops = [resolver.loop(_child_loop_uid(sch.get(selected)))]
        if spec.name == "reorder":
            return loops or [selected], kwargs
        return [selected, *loops], kwargs
    return [selected], kwargs


def _child_loop_uid(loop: For) -> int:
    if not isinstance(loop.body, For):
        raise ScheduleError("fuse needs a loop whose body is a single loop", [loop], "fuse")
    return loop.body.uid
