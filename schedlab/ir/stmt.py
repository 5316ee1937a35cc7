"""Statements of the loop IR (TensorIR style): loops, blocks, stores, control flow.

`For` and `Block` carry a stable `uid` that survives copies (`node.replace(...)`) and is ignored
by structural equality; schedule handles resolve through it.
"""

from __future__ import annotations

import enum
from typing import Any

from .buffer import Buffer, BufferRegion, MatchBufferRegion
from .dtype import DataType
from .expr import PrimExpr, Range, Var, _check_expr, _check_rank
from .node import Node, fresh_uid, ir_node, meta
from .op import const, convert


class Stmt(Node):
    """Base class of statements."""

    __slots__ = ()

    def __repr__(self) -> str:
        try:
            return self.script()
        except Exception:
            return object.__repr__(self)


class ForKind(str, enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"

    def __str__(self) -> str:
        return self.value


class IterType(str, enum.Enum):
    """The kind of a block iter var (TVM: DataPar, CommReduce, Ordered, Opaque)."""

    SPATIAL = "spatial"
    REDUCE = "reduce"
    SCAN = "scan"
    OPAQUE = "opaque"

    def __str__(self) -> str:
        return self.value


THREAD_TAGS = (
    "blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
    "vthread", "vthread.x", "vthread.y", "vthread.z",
)  # fmt: skip


def _freeze_annotations(annotations) -> dict[str, Any]:
    if annotations is None:
        return {}
    if not isinstance(annotations, dict):
        raise TypeError(f"annotations must be a dict, got {type(annotations).__name__}")
    return dict(annotations)


@ir_node
class BufferStore(Stmt):
    """`buffer[indices] = value`."""

    buffer: Buffer = meta(child=False)
    value: PrimExpr
    indices: tuple[PrimExpr, ...]

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(convert(i) for i in self.indices))
        _check_expr(self, "value", self.value)
        _check_rank(self, self.buffer, self.indices)
        element = self.buffer.dtype.element_of()
        if self.value.dtype.element_of() != element:
            raise TypeError(
                f"BufferStore: buffer {self.buffer.name} holds {self.buffer.dtype}, "
                f"the stored value is {self.value.dtype}"
            )


@ir_node
class For(Stmt):
    """`for loop_var in range(min, min + extent)` of a given kind (serial, parallel, ...)."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    thread_tag: str | None = None
    annotations: dict[str, Any] = meta(factory=dict)
    uid: int = meta(factory=fresh_uid, compare=False, child=False)

    def __post_init__(self):
        object.__setattr__(self, "min", convert(self.min))
        object.__setattr__(self, "extent", convert(self.extent))
        object.__setattr__(self, "kind", ForKind(self.kind))
        object.__setattr__(self, "annotations", _freeze_annotations(self.annotations))
        if not isinstance(self.loop_var, Var):
            raise TypeError(f"For.loop_var: expected a Var, got {self.loop_var!r}")
        if not isinstance(self.body, Stmt):
            raise TypeError(f"For.body: expected a Stmt, got {type(self.body).__name__}")
        if (self.kind == ForKind.THREAD_BINDING) != (self.thread_tag is not None):
            raise ValueError("For: a thread_binding loop needs a thread_tag, and only it has one")


@ir_node
class IterVar(Node):
    """A block iteration variable with its domain and kind."""

    var: Var
    dom: Range
    iter_type: IterType = IterType.SPATIAL

    def __post_init__(self):
        object.__setattr__(self, "iter_type", IterType(self.iter_type))
        if not isinstance(self.dom, Range):
            object.__setattr__(self, "dom", Range(const(0, self.var.dtype), convert(self.dom)))

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, [{self.dom.min}, {self.dom.extent}), {self.iter_type})"


@ir_node
class Block(Stmt):
    """A unit of computation with a declared signature: its iteration space (`iter_vars`), the
    regions it reads and writes, an optional reduction `init`, buffers it allocates and matches.
    Blocks appear in the IR wrapped in a `BlockRealize` that binds the iter vars."""

    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    name_hint: str
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = meta(default=(), child=False)
    match_buffers: tuple[MatchBufferRegion, ...] = ()
    annotations: dict[str, Any] = meta(factory=dict)
    uid: int = meta(factory=fresh_uid, compare=False, child=False)

    def __post_init__(self):
        for name in ("iter_vars", "reads", "writes", "alloc_buffers", "match_buffers"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "annotations", _freeze_annotations(self.annotations))
        if not isinstance(self.body, Stmt):
            raise TypeError(f"Block.body: expected a Stmt, got {type(self.body).__name__}")
        if self.init is not None and not isinstance(self.init, Stmt):
            raise TypeError(f"Block.init: expected a Stmt, got {type(self.init).__name__}")

    @property
    def is_reduction(self) -> bool:
        return any(iv.iter_type == IterType.REDUCE for iv in self.iter_vars)


@ir_node
class BlockRealize(Stmt):
    """Executes `block` with its iter vars bound to `iter_values`, when `predicate` holds."""

    iter_values: tuple[PrimExpr, ...]
    predicate: PrimExpr
    block: Block

    def __post_init__(self):
        object.__setattr__(self, "iter_values", tuple(convert(v) for v in self.iter_values))
        object.__setattr__(self, "predicate", convert(self.predicate))
        if len(self.iter_values) != len(self.block.iter_vars):
            raise ValueError(
                f"BlockRealize of {self.block.name_hint}: {len(self.block.iter_vars)} iter vars, "
                f"{len(self.iter_values)} values"
            )
        if not self.predicate.dtype.is_bool:
            raise TypeError(f"BlockRealize: predicate must be bool, got {self.predicate.dtype}")


@ir_node
class SeqStmt(Stmt):
    """Statements run in order."""

    seq: tuple[Stmt, ...]

    def __post_init__(self):
        object.__setattr__(self, "seq", tuple(self.seq))
        for stmt in self.seq:
            if not isinstance(stmt, Stmt):
                raise TypeError(f"SeqStmt: expected statements, got {type(stmt).__name__}")

    @staticmethod
    def flatten(*stmts) -> Stmt:
        """One statement from several: nested sequences are flattened, a single one is returned
        as is, and `Evaluate(0)` no-ops are dropped."""
        flat: list[Stmt] = []
        for stmt in stmts:
            if stmt is None:
                continue
            if isinstance(stmt, (list, tuple)):
                inner = SeqStmt.flatten(*stmt)
                flat.extend(inner.seq if isinstance(inner, SeqStmt) else [inner])
            elif isinstance(stmt, SeqStmt):
                inner = SeqStmt.flatten(*stmt.seq)  # one statement when the rest were no-ops
                if isinstance(inner, SeqStmt):
                    flat.extend(inner.seq)
                elif not is_no_op(inner):
                    flat.append(inner)
            elif not is_no_op(stmt):
                flat.append(stmt)
        if not flat:
            return Evaluate(const(0))
        return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


@ir_node
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None

    def __post_init__(self):
        object.__setattr__(self, "condition", convert(self.condition))
        if not self.condition.dtype.is_bool:
            raise TypeError(f"IfThenElse: condition must be bool, got {self.condition.dtype}")


@ir_node
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt

    def __post_init__(self):
        object.__setattr__(self, "value", convert(self.value))
        if self.var.dtype != self.value.dtype:
            raise TypeError(
                f"LetStmt: {self.var.name} has dtype {self.var.dtype}, value has {self.value.dtype}"
            )


@ir_node
class Allocate(Stmt):
    """Allocates `buffer` (in its scope) for the duration of `body`."""

    buffer: Buffer = meta(child=False)
    body: Stmt
    annotations: dict[str, Any] = meta(factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "annotations", _freeze_annotations(self.annotations))


@ir_node
class Evaluate(Stmt):
    """Evaluates an expression for its side effects (or does nothing: `Evaluate(0)`)."""

    value: PrimExpr

    def __post_init__(self):
        object.__setattr__(self, "value", convert(self.value))


def is_no_op(stmt: Stmt) -> bool:
    from .expr import IntImm

    return isinstance(stmt, Evaluate) and isinstance(stmt.value, IntImm)


def loop_range(stmt: For) -> Range:
    return Range(stmt.min, stmt.extent)


__all__ = [
    "Stmt", "ForKind", "IterType", "BufferStore", "For", "IterVar", "Block", "BlockRealize",
    "SeqStmt", "IfThenElse", "LetStmt", "Allocate", "Evaluate", "THREAD_TAGS", "DataType",
]  # fmt: skip
