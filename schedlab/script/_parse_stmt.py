"""Parsing statements: loops, blocks (with their frame statements), stores, control flow.

A statement list is read in order. `x: T.int32 = v` and `X = T.allocate(...)` bind the rest of
the list (their body), as in TVM. Statements that describe the enclosing construct rather than
run (`T.reads`, `T.axis.remap`, `T.alloc_buffer`, `T.func_attr`, ...) are collected into a
"frame" and only allowed directly inside the block or function they describe.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, MatchBufferRegion
from schedlab.ir.dtype import bool_, handle, int32
from schedlab.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterVar,
    LetStmt,
    SeqStmt,
    Stmt,
)  # fmt: skip

from . import names as N
from ._parse_expr import _BINOPS, ExprParser

_UNSUPPORTED = {
    "While": "a while loop", "Return": "return", "Try": "try", "Raise": "raise", "Delete": "del",
    "FunctionDef": "a nested function", "ClassDef": "a class", "Import": "import",
    "ImportFrom": "import", "Global": "global", "Nonlocal": "nonlocal", "Assert": "assert",
    "Break": "break", "Continue": "continue", "AsyncFor": "async for", "AsyncWith": "async with",
    "AsyncFunctionDef": "an async function", "Match": "match",
}  # fmt: skip
_BLOCK_ONLY = (N.READS, N.WRITES, N.WHERE, N.BLOCK_ATTR, N.AXIS, N.INIT)


@dataclass
class FuncFrame:
    params: list[E.Var]
    buffer_map: dict = field(default_factory=dict)
    attrs: dict | None = None
    allocs: list[Buffer] = field(default_factory=list)


@dataclass
class BlockFrame:
    name: str
    iter_vars: list[IterVar] = field(default_factory=list)
    values: list[E.PrimExpr] = field(default_factory=list)
    predicate: E.PrimExpr | None = None
    reads: list | None = None
    writes: list | None = None
    annotations: dict | None = None
    allocs: list[Buffer] = field(default_factory=list)
    matches: list[MatchBufferRegion] = field(default_factory=list)
    init: Stmt | None = None


def seq(items: list[Stmt]) -> Stmt:
    """The statement of a list: a no-op for none, the statement itself for one."""
    if not items:
        return Evaluate(E.IntImm(int32, 0))
    return items[0] if len(items) == 1 else SeqStmt(tuple(items))


class StmtParser(ExprParser):
    def __init__(self, source):
        super().__init__(source)
        self.loop_ranges: dict[int, tuple[E.PrimExpr, E.PrimExpr]] = {}

    # -- statement lists ----------------------------------------------------------------------
    def body(self, nodes: list[ast.stmt], frame=None) -> Stmt:
        out: list[Stmt] = []
        for k, node in enumerate(nodes):
            if isinstance(node, ast.Pass):
                continue
            kind = self.frame_kind(node)
            if kind is not None:
                self.frame_stmt(node, kind, frame)
            elif self.declaration(node):
                pass
            elif self.binds_rest(node):
                out.append(self.tail(node, nodes[k + 1 :], frame))
                break
            else:
                out.append(self.stmt(node))
        return seq(out)

    def scoped_body(self, nodes: list[ast.stmt], frame=None) -> Stmt:
        self.push()
        try:
            return self.body(nodes, frame)
        finally:
            self.pop()

    def stmt(self, node: ast.stmt) -> Stmt:
        method = getattr(self, f"_s_{type(node).__name__}", None)
        if method is None:
            what = _UNSUPPORTED.get(type(node).__name__, type(node).__name__)
            raise self.fail(node, f"unsupported statement: {what}")
        return method(node)

    def call_name(self, node: ast.AST | None) -> str | None:
        """`grid` for a call `T.grid(...)`, else None."""
        return self.tir_name(node.func) if isinstance(node, ast.Call) else None

    # -- frame statements -----------------------------------------------------------------------
    def frame_kind(self, node: ast.stmt) -> str | None:
        if isinstance(node, ast.Expr):
            name = self.call_name(node.value)
            frame_calls = (N.FUNC_ATTR, N.READS, N.WRITES, N.WHERE, N.BLOCK_ATTR)
            return name if name in frame_calls else None
        if isinstance(node, ast.Assign):
            name = self.call_name(node.value) or ""
            if name.startswith(f"{N.AXIS}.") or name == N.AXIS:
                return N.AXIS
            return name if name in (N.ALLOC_BUFFER, N.MATCH_BUFFER) else None
        if isinstance(node, ast.With) and len(node.items) == 1:
            return N.INIT if self.call_name(node.items[0].context_expr) == N.INIT else None
        return None

    def frame_stmt(self, node: ast.stmt, kind: str, frame) -> None:
        from . import _parse_frame as F

        if kind in _BLOCK_ONLY and not isinstance(frame, BlockFrame):
            raise self.fail(node, f"T.{kind}(...) must be directly inside a `with T.block(...):`")
        if kind == N.FUNC_ATTR and not isinstance(frame, FuncFrame):
            raise self.fail(node, "T.func_attr(...) must be at the top of the function body")
        if kind in (N.ALLOC_BUFFER, N.MATCH_BUFFER) and frame is None:
            raise self.fail(
                node, f"T.{kind}(...) must be directly inside a block or the function body"
            )
        F.frame_stmt(self, node, kind, frame)

    # -- declarations: `n = T.int32()`, `A_flat = T.Buffer(...)` ------------------------------
    def declaration(self, node: ast.stmt) -> bool:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            return False
        name = self.call_name(node.value)
        is_var = N.dtype_from_name(name or "") is not None and not node.value.args
        if not (is_var or name == N.BUFFER):
            return False
        target = self.single_target(node)
        if is_var:
            self.define(target, self.var_decl(node.value, target))
        else:
            from ._parse_frame import buffer_call

            self.define(target, buffer_call(self, node.value, target, N.BUFFER)[0])
        return True

    def single_target(self, node: ast.Assign) -> str:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            raise self.fail(node, "expected one name on the left of `=`")
        return node.targets[0].id

    def var_decl(self, call: ast.Call, name: str) -> E.Var:
        dtype = N.dtype_from_name(self.call_name(call))
        size_var = False
        for keyword in call.keywords:
            if keyword.arg != "is_size_var":
                raise self.fail(keyword, f"unexpected keyword argument {keyword.arg!r}")
            size_var = self.literal(keyword.value)
            if not isinstance(size_var, bool):
                raise self.fail(keyword.value, "is_size_var must be True or False")
        return (E.SizeVar if size_var else E.Var)(name, dtype)

    # -- bindings of the rest of the list: let and allocate -----------------------------------
    def binds_rest(self, node: ast.stmt) -> bool:
        if isinstance(node, ast.AnnAssign):
            return True
        if isinstance(node, ast.Assign):
            return not isinstance(node.targets[0], ast.Subscript) or len(node.targets) > 1
        return False

    def tail(self, node: ast.stmt, rest: list[ast.stmt], frame) -> Stmt:
        if isinstance(node, ast.AnnAssign):
            if node.value is None or not isinstance(node.target, ast.Name):
                raise self.fail(node, "a let binding is written `x: T.int32 = value`")
            var = self.annotated_var(node.annotation, node.target.id)
            value = self.typed(node.value, var.dtype)
        else:
            name = self.single_target(node)
            if self.call_name(node.value) == N.ALLOCATE:
                return self.allocate(node.value, name, lambda: self.body(rest, frame))
            value = self.expr(node.value)
            var = E.Var(name, value.dtype)
        self.define(var.name, var)
        return self.build(node, LetStmt, var, value, self.body(rest, frame))

    def annotated_var(self, annotation: ast.AST, name: str) -> E.Var:
        """A variable from a type annotation: `T.int32` or `T.int32(is_size_var=True)`."""
        if isinstance(annotation, ast.Call) and not annotation.args:
            if N.dtype_from_name(self.call_name(annotation) or "") is not None:
                return self.var_decl(annotation, name)
        dtype_name = self.tir_name(annotation)
        dtype = N.dtype_from_name(dtype_name or "")
        if dtype is None:
            raise self.fail(
                annotation, f"expected a type such as T.int32, got {ast.unparse(annotation)!r}"
            )
        return E.Var(name, dtype)

    def typed(self, node: ast.AST, dtype) -> E.PrimExpr:
        """An expression for a slot of `dtype` (a bare number takes that dtype)."""
        value = self.expr(node)
        if id(value) in self.weak and value.dtype != dtype:
            value = self.retype(node, value, dtype)
        return value

    def allocate(self, call: ast.Call, name: str, parse_body) -> Allocate:
        from ._parse_frame import buffer_call

        buffer, annotations = buffer_call(self, call, name, N.ALLOCATE)
        self.define(name, buffer)
        return self.build(call, Allocate, buffer, parse_body(), annotations or {})

    # -- simple statements ----------------------------------------------------------------------
    def _s_Assign(self, node: ast.Assign) -> Stmt:
        target = node.targets[0]
        buffer = self.buffer_ref(target.value)
        indices = []
        for item in self.index_items(target):
            if isinstance(item, ast.Slice):
                raise self.fail(item, "cannot store to a slice; store one element at a time")
            indices.append(self.expr(item))
        self.check_rank(target, buffer, len(indices))
        value = self.typed(node.value, buffer.dtype.element_of())
        return self.build(node, BufferStore, buffer, value, tuple(indices))

    def _s_AugAssign(self, node: ast.AugAssign) -> Stmt:
        cls = _BINOPS.get(type(node.op))
        if not isinstance(node.target, ast.Subscript) or cls is None:
            raise self.fail(node, "augmented assignment is only supported on buffer elements")
        load = self.expr(node.target)
        value = self.binary(node, cls, load, self.expr(node.value))
        return self.build(node, BufferStore, load.buffer, value, load.indices)

    def _s_Expr(self, node: ast.Expr) -> Stmt:
        if self.call_name(node.value) == N.EVALUATE:
            call = node.value
            if len(call.args) != 1 or call.keywords:
                raise self.fail(call, "T.evaluate takes one expression")
            return Evaluate(self.expr(call.args[0]))
        return Evaluate(self.expr(node.value))

    def _s_If(self, node: ast.If) -> Stmt:
        condition = self.expr(node.test)
        then_case = self.scoped_body(node.body)
        else_case = self.scoped_body(node.orelse) if node.orelse else None
        return self.build(node, IfThenElse, condition, then_case, else_case)

    # -- loops ------------------------------------------------------------------------------------
    def _s_For(self, node: ast.For) -> Stmt:
        if node.orelse:
            raise self.fail(node.orelse[0], "for ... else is not supported")
        loops = self.loop_headers(node.iter)
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if len(targets) != len(loops):
            raise self.fail(node.target, f"{len(loops)} loop(s) but {len(targets)} name(s)")
        self.push()
        variables = []
        for target, (start, extent, *_rest) in zip(targets, loops):
            if not isinstance(target, ast.Name):
                raise self.fail(target, "a loop variable must be a plain name")
            if not start.dtype.is_integer:
                raise self.fail(node.iter, f"loop bounds must be integers, got {start.dtype}")
            var = E.Var(target.id, start.dtype)
            self.define(target.id, var)
            self.loop_ranges[id(var)] = (start, extent)
            variables.append(var)
        body = self.body(node.body)
        self.pop()
        for var, (start, extent, kind, thread, notes) in reversed(list(zip(variables, loops))):
            body = self.build(node, For, var, start, extent, kind, body, thread, notes)
        return body

    def loop_headers(self, node: ast.AST) -> list[tuple]:
        """`(min, extent, kind, thread, annotations)` for each loop an iterator opens."""
        path = self.path(node.func) if isinstance(node, ast.Call) else None
        name = self.call_name(node)
        if path == "range":
            if node.keywords:
                raise self.fail(node, "range() takes no keyword arguments")
            return [(*self.loop_bounds(node), ForKind.SERIAL, None, {})]
        if name == N.GRID:
            if node.keywords or not node.args:
                raise self.fail(node, "T.grid takes one or more extents")
            extents = [self.expr(arg) for arg in node.args]
            return [(E.IntImm(e.dtype, 0), e, ForKind.SERIAL, None, {}) for e in extents]
        if name in N.LOOP_KIND_BY_NAME:
            return [self.kind_loop(node, N.LOOP_KIND_BY_NAME[name])]
        kinds = ", ".join(f"T.{k}" for k in N.LOOP_KIND_BY_NAME)
        raise self.fail(node, f"a loop iterates over range(...), T.grid(...) or one of {kinds}")

    def loop_bounds(self, node: ast.Call) -> tuple[E.PrimExpr, E.PrimExpr]:
        if len(node.args) == 1:
            extent = self.expr(node.args[0])
            return self.build(node, E.IntImm, extent.dtype, 0), extent
        if len(node.args) == 2:
            start, stop = self.expr(node.args[0]), self.expr(node.args[1])
            return self.bounds_to_range(node, start, stop)
        raise self.fail(node, f"expected (extent) or (start, stop), got {len(node.args)} arguments")

    def kind_loop(self, node: ast.Call, kind: ForKind) -> tuple:
        thread, annotations = None, {}
        for keyword in node.keywords:
            if keyword.arg == "thread" and kind == ForKind.THREAD_BINDING:
                thread = self.str_arg(keyword.value, "thread")
            elif keyword.arg == "annotations":
                annotations = self.literal(keyword.value)
                if not isinstance(annotations, dict):
                    raise self.fail(keyword.value, "annotations must be a dict")
            else:
                raise self.fail(keyword, f"unexpected keyword argument {keyword.arg!r}")
        if kind == ForKind.THREAD_BINDING and thread is None:
            raise self.fail(node, 'T.thread_binding needs thread="threadIdx.x" (or another tag)')
        return (*self.loop_bounds(node), kind, thread, annotations)

    # -- with: blocks, non-tail lets and allocations ----------------------------------------------
    def _s_With(self, node: ast.With) -> Stmt:
        if len(node.items) != 1:
            raise self.fail(node, "a with statement takes one T.block/T.LetStmt/T.allocate")
        item = node.items[0]
        call = item.context_expr
        name = self.call_name(call)
        target = item.optional_vars
        if name == N.BLOCK:
            if target is not None:
                raise self.fail(target, "`with T.block(...)` takes no `as` name")
            return self.block(node, call)
        if name in (N.LET_STMT, N.ALLOCATE):
            if not isinstance(target, ast.Name):
                raise self.fail(node, f"write `with T.{name}(...) as name:`")
            self.push()
            try:
                if name == N.ALLOCATE:
                    return self.allocate(call, target.id, lambda: self.body(node.body))
                return self.let_with(node, call, target.id)
            finally:
                self.pop()
        raise self.fail(call, f"unsupported with statement: {ast.unparse(call)}")

    def let_with(self, node: ast.With, call: ast.Call, name: str) -> Stmt:
        if len(call.args) != 1 or call.keywords:
            raise self.fail(call, "T.LetStmt takes one value: `with T.LetStmt(value) as x:`")
        value = self.expr(call.args[0])
        var = E.Var(name, value.dtype)
        self.define(name, var)
        return self.build(node, LetStmt, var, value, self.body(node.body))

    def block(self, node: ast.With, call: ast.Call) -> Stmt:
        if len(call.args) != 1 or call.keywords:
            raise self.fail(call, 'T.block takes the block name: `with T.block("name"):`')
        frame = BlockFrame(self.str_arg(call.args[0], "the block name"))
        outer_loops, self.loop_ranges = self.loop_ranges, self.loop_ranges.copy()
        body = self.scoped_body(node.body, frame)
        self.loop_ranges = outer_loops
        reads, writes = frame.reads, frame.writes
        block = self.build(
            node, Block, tuple(frame.iter_vars), tuple(reads or ()), tuple(writes or ()),
            frame.name, body, frame.init, tuple(frame.allocs), tuple(frame.matches),
            frame.annotations or {},
        )  # fmt: skip
        if reads is None or writes is None:
            block = self.infer_regions(node, block, reads is None, writes is None)
        predicate = frame.predicate if frame.predicate is not None else E.IntImm(bool_, 1)
        return self.build(node, BlockRealize, tuple(frame.values), predicate, block)

    def infer_regions(self, node, block: Block, reads: bool, writes: bool) -> Block:
        """Blocks written without T.reads/T.writes get them from region analysis."""
        try:
            from schedlab.arith.region import block_access_regions
        except ImportError:
            raise self.fail(node, "write T.reads(...) and T.writes(...) for this block") from None
        found_reads, found_writes = block_access_regions(block)
        changes: dict[str, Any] = {}
        if reads:
            changes["reads"] = tuple(found_reads)
        if writes:
            changes["writes"] = tuple(found_writes)
        return block.replace(**changes)

    # -- parameters -----------------------------------------------------------------------------
    def param(self, arg: ast.arg, buffers: dict) -> E.Var:
        """A function parameter; `A: T.Buffer(...)` params are finished by `param_buffer`."""
        note = arg.annotation
        if note is None:
            raise self.fail(
                arg, f"parameter {arg.arg} needs a type: T.Buffer(...), T.handle or T.int32"
            )
        if self.call_name(note) == N.BUFFER:
            var = E.Var(arg.arg, handle)
            buffers[id(var)] = (arg, note)
            return var
        var = self.annotated_var(note, arg.arg)
        self.define(arg.arg, var)
        return var
