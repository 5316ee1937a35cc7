"""Printing statements: loops (folded into `T.grid`), blocks, stores, control flow, buffers."""

from __future__ import annotations

from collections.abc import Iterable

from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.dtype import int32
from schedlab.ir.functor import uses_var
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
from schedlab.ir.structural import structural_equal

from . import names as N
from ._print_expr import ExprPrinter, Namer, is_one, is_true, is_zero, string_text
from ._scan import contains_block, is_root_like

__all__ = ["StmtPrinter", "contains_block", "is_root_like", "is_true"]

T = N.TIR_ALIAS


class StmtPrinter:
    """Accumulates the lines of one function (or statement) at the current indentation."""

    def __init__(self, indent_spaces: int = 4, underline: Iterable = ()):
        self.namer = Namer()
        self.ex = ExprPrinter(self.namer)
        self.lines: list[str] = []
        self.depth = 0
        self.indent_spaces = indent_spaces
        self.loops: dict[int, For] = {}  # enclosing loops by loop-var id (for T.axis.remap)
        self.pending: dict[int, list[Buffer]] = {}  # data var id -> declarations waiting for it
        self.marked = underline if isinstance(underline, _Marks) else _Marks(underline)
        self.node_lines: dict[int, int] = {}  # loop/block uid -> its header line (0-based)

    def line(self, text: str) -> None:
        self.lines.append(" " * (self.indent_spaces * self.depth) + text)

    def mark(self, node) -> None:
        """Underline the last line if `node` is one of the nodes to point at (and remember
        which line prints the loop or block, for views that link text to the IR)."""
        self.node_lines[node.uid] = len(self.lines) - 1
        if self.marked.contains(node):
            last = self.lines[-1]
            start = len(last) - len(last.lstrip())
            self.lines.append(" " * start + "^" * (len(last) - start))

    # -- declarations -------------------------------------------------------------------------
    def var_type(self, var: E.Var) -> str:
        base = f"{T}.{N.dtype_name(var.dtype)}"
        return f"{base}(is_size_var=True)" if isinstance(var, E.SizeVar) else base

    def declare_vars(self, variables: Iterable[E.Var]) -> None:
        for var in variables:
            name = self.namer.define(var, var.name)
            flag = "is_size_var=True" if isinstance(var, E.SizeVar) else ""
            self.line(f"{name} = {T}.{N.dtype_name(var.dtype)}({flag})")

    def declare_buffers(self, buffers: Iterable[Buffer], later: set[int] = frozenset()) -> None:
        """`X = T.Buffer(...)` for buffers no construct declares; one whose data pointer belongs
        to a buffer allocated further down waits until that allocation is printed."""
        for buffer in buffers:
            if id(buffer.data) in later and not self._data_known(buffer):
                self.pending.setdefault(id(buffer.data), []).append(buffer)
                continue
            args = self.buffer_args(buffer)
            self.line(f"{self.namer.buffer(buffer)} = {T}.{N.BUFFER}({args})")

    def _data_known(self, buffer: Buffer) -> bool:
        return (
            id(buffer.data) in self.namer.data_owner or self.namer.lookup(buffer.data) is not None
        )

    def flush_pending(self, buffer: Buffer) -> None:
        self.declare_buffers(self.pending.pop(id(buffer.data), ()))

    def buffer_args(self, buffer: Buffer) -> str:
        """`(shape), "dtype"` plus keyword arguments for every non-default field."""
        parts = [self.tuple_text(buffer.shape), string_text(str(buffer.dtype))]
        owner = self.namer.data_owner.get(id(buffer.data))
        if owner is not None and owner is not buffer:
            parts.append(f"data={self.namer.lookup(owner)}.data")
        elif owner is None and self.namer.lookup(buffer.data) is not None:
            parts.append(f"data={self.namer.lookup(buffer.data)}")
        if buffer.strides:
            parts.append(f"strides={self.tuple_text(buffer.strides)}")
        if not (is_zero(buffer.elem_offset, int32)):
            parts.append(f"elem_offset={self.ex(buffer.elem_offset)}")
        if buffer.scope != "global":
            parts.append(f"scope={string_text(buffer.scope)}")
        if buffer.data_alignment != 64:
            parts.append(f"data_alignment={buffer.data_alignment}")
        if buffer.offset_factor != 1:
            parts.append(f"offset_factor={buffer.offset_factor}")
        if buffer.axis_separators:
            parts.append(f"axis_separators={list(buffer.axis_separators)}")
        return ", ".join(parts)

    def tuple_text(self, values) -> str:
        items = [self.ex.expr(v) for v in values]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def alloc_buffer(self, buffer: Buffer) -> None:
        args = self.buffer_args(buffer)
        self.line(f"{self.namer.buffer(buffer)} = {T}.{N.ALLOC_BUFFER}({args})")
        self.flush_pending(buffer)

    # -- ranges and regions ---------------------------------------------------------------------
    def range_bounds(self, start: E.PrimExpr, extent: E.PrimExpr) -> tuple[str, str]:
        """`(start, stop)` texts from which the parser recovers exactly `extent`."""
        if is_zero(start, extent.dtype):
            return self.ex(start), self.ex(extent)
        if _same_int_consts(start, extent):
            total = start.value + extent.value
            dtype = start.dtype
            if dtype.min_value() <= total <= dtype.max_value():
                return self.ex(start), self.ex(E.IntImm(dtype, total))
        stop = f"{self.ex(start, N.PREC_ADD)} + {self.ex(extent, N.PREC_ADD + 1)}"
        return self.ex(start), stop

    def region(self, region: BufferRegion) -> str:
        name = self.namer.lookup(region.buffer) or self.namer.buffer(region.buffer)
        if not region.region:
            return f"{name}[()]"
        dims = []
        for rng in region.region:
            if is_one(rng.extent, rng.min.dtype):
                dims.append(self.ex(rng.min))
            else:
                dims.append(":".join(self.range_bounds(rng.min, rng.extent)))
        return f"{name}[{', '.join(dims)}]"

    # -- statement lists ----------------------------------------------------------------------
    def stmts(self, stmt: Stmt) -> None:
        """A statement list; only its last statement may print a let/allocate "flat"."""
        items = _flat_items(stmt)
        for k, item in enumerate(items):
            self.stmt(item, tail=k == len(items) - 1)

    def body(self, stmt: Stmt) -> None:
        self.depth += 1
        self.stmts(stmt)
        self.depth -= 1

    def stmt(self, stmt: Stmt, tail: bool = True) -> None:
        method = getattr(self, f"_{type(stmt).__name__}", None)
        if method is None:
            raise TypeError(f"script: cannot print statement {type(stmt).__name__}")
        method(stmt, tail)

    def _BufferStore(self, store: BufferStore, tail: bool) -> None:
        self.line(f"{self.ex.subscript(store.buffer, store.indices)} = {self.ex(store.value)}")

    def _Evaluate(self, stmt: Evaluate, tail: bool) -> None:
        if isinstance(stmt.value, E.Call):
            self.line(self.ex(stmt.value))
        else:
            self.line(f"{T}.{N.EVALUATE}({self.ex(stmt.value)})")

    def _SeqStmt(self, stmt: SeqStmt, tail: bool) -> None:
        self.stmts(stmt)

    def _IfThenElse(self, stmt: IfThenElse, tail: bool, keyword: str = "if") -> None:
        self.line(f"{keyword} {self.ex(stmt.condition)}:")
        self.body(stmt.then_case)
        other = stmt.else_case
        if isinstance(other, IfThenElse):
            self._IfThenElse(other, tail, "elif")
        elif other is not None:
            self.line("else:")
            self.body(other)

    def _LetStmt(self, stmt: LetStmt, tail: bool) -> None:
        value = self.ex(stmt.value)
        name = self.namer.define(stmt.var, stmt.var.name)
        if tail:
            self.line(f"{name}: {self.var_type(stmt.var)} = {value}")
            self.stmts(stmt.body)
        else:
            self.line(f"with {T}.{N.LET_STMT}({value}) as {name}:")
            self.body(stmt.body)

    def _Allocate(self, stmt: Allocate, tail: bool) -> None:
        args = self.buffer_args(stmt.buffer)
        if stmt.annotations:
            args += f", annotations={self.ex.literal(stmt.annotations)}"
        name = self.namer.buffer(stmt.buffer)
        call = f"{T}.{N.ALLOCATE}({args})"
        if tail:
            self.line(f"{name} = {call}")
            self.flush_pending(stmt.buffer)
            self.stmts(stmt.body)
        else:
            self.line(f"with {call} as {name}:")
            self.depth += 1
            self.flush_pending(stmt.buffer)
            self.stmts(stmt.body)
            self.depth -= 1

    # -- loops ----------------------------------------------------------------------------------
    def _For(self, loop: For, tail: bool) -> None:
        chain = self._grid_chain(loop)
        if len(chain) > 1:
            extents = ", ".join(self.ex(inner.extent) for inner in chain)
            names = ", ".join(self.namer.define(v.loop_var, v.loop_var.name) for v in chain)
            self.line(f"for {names} in {T}.{N.GRID}({extents}):")
        else:
            header = self._loop_iter(loop)
            self.line(f"for {self.namer.define(loop.loop_var, loop.loop_var.name)} in {header}:")
        for inner in chain:
            self.mark(inner)
            self.loops[id(inner.loop_var)] = inner
        self.body(chain[-1].body)
        for inner in chain:
            self.loops.pop(id(inner.loop_var), None)

    def _grid_chain(self, loop: For) -> list[For]:
        chain = [loop]
        while _simple_loop(chain[-1]) and _simple_loop(chain[-1].body):
            inner = chain[-1].body
            outer_ids = {id(c.loop_var) for c in chain}
            if uses_var(inner.extent, lambda v, ids=outer_ids: id(v) in ids):
                break
            chain.append(inner)
        return chain if len(chain) > 1 and _simple_loop(loop) else [loop]

    def _loop_iter(self, loop: For) -> str:
        var = loop.loop_var
        if is_zero(loop.min, var.dtype) and loop.extent.dtype == var.dtype:
            args = [self.ex(loop.extent)]
        else:
            args = list(self.range_bounds(loop.min, loop.extent))
        if loop.kind == ForKind.SERIAL and not loop.annotations:
            return f"range({', '.join(args)})"
        if loop.thread_tag is not None:
            args.append(f"thread={string_text(loop.thread_tag)}")
        if loop.annotations:
            args.append(f"annotations={self.ex.literal(loop.annotations)}")
        return f"{T}.{N.LOOP_KINDS[loop.kind]}({', '.join(args)})"

    # -- blocks ---------------------------------------------------------------------------------
    def _BlockRealize(self, realize: BlockRealize, tail: bool) -> None:
        self._block(realize.block, realize.iter_values, realize.predicate)

    def _Block(self, block: Block, tail: bool) -> None:
        self._block(block, None, None)

    def _block(self, block: Block, values, predicate) -> None:
        self.line(f"with {T}.{N.BLOCK}({string_text(block.name_hint)}):")
        self.mark(block)
        self.depth += 1
        outer_loops, self.loops = self.loops, {}  # a block sees outer loops only via bindings
        self._iter_vars(block.iter_vars, values, outer_loops)
        if predicate is not None and not is_true(predicate):
            self.line(f"{T}.{N.WHERE}({self.ex(predicate)})")
        self.line(f"{T}.{N.READS}({', '.join(self.region(r) for r in block.reads)})")
        self.line(f"{T}.{N.WRITES}({', '.join(self.region(r) for r in block.writes)})")
        if block.annotations:
            self.line(f"{T}.{N.BLOCK_ATTR}({self.ex.literal(block.annotations)})")
        for buffer in block.alloc_buffers:
            self.alloc_buffer(buffer)
        for match in block.match_buffers:
            args = f"{self.region(match.source)}, {self.buffer_args(match.buffer)}"
            self.line(f"{self.namer.buffer(match.buffer)} = {T}.{N.MATCH_BUFFER}({args})")
            self.flush_pending(match.buffer)
        if block.init is not None:
            self.line(f"with {T}.{N.INIT}():")
            self.body(block.init)
        self.stmts(block.body)
        self.loops = outer_loops
        self.depth -= 1

    def _iter_vars(self, iter_vars, values, loops: dict[int, For]) -> None:
        """`T.axis.remap` for runs of plain loop bindings, `T.axis.<kind>` for the rest."""
        if values is None:
            for iv in iter_vars:
                self.line(self.axis_text(iv, None))
            return
        pairs = list(zip(iter_vars, values))
        k = 0
        while k < len(pairs):
            run = k
            while run < len(pairs) and _remappable(*pairs[run], loops):
                run += 1
            if run - k >= 2:
                self._remap(pairs[k:run])
                k = run
            else:
                self.line(self.axis_text(*pairs[k]))
                k += 1

    def _remap(self, pairs) -> None:
        kinds = "".join(N.REMAP_LETTERS[iv.iter_type] for iv, _ in pairs)
        values = ", ".join(self.ex(value) for _, value in pairs)
        names = ", ".join(self.namer.define(iv.var, iv.var.name) for iv, _ in pairs)
        self.line(f'{names} = {T}.{N.AXIS}.{N.REMAP}("{kinds}", [{values}])')

    def axis_text(self, iv: IterVar, value) -> str:
        dom = iv.dom
        if is_zero(dom.min, dom.extent.dtype):
            dom_text = self.ex(dom.extent)
        else:
            dom_text = "({}, {})".format(*self.range_bounds(dom.min, dom.extent))
        args = dom_text if value is None else f"{dom_text}, {self.ex(value)}"
        name = self.namer.define(iv.var, iv.var.name)
        return f"{name} = {T}.{N.AXIS}.{N.AXIS_KINDS[iv.iter_type]}({args})"


class _Marks:
    """Nodes to underline, matched by identity or by the stable uid of loops and blocks."""

    def __init__(self, nodes: Iterable):
        nodes = list(nodes)
        self.ids = {id(n) for n in nodes}
        self.uids = {n.uid for n in nodes if isinstance(n, (For, Block))}
        self._alive = nodes

    def contains(self, node) -> bool:
        return id(node) in self.ids or getattr(node, "uid", None) in self.uids


def _flat_items(stmt: Stmt) -> list[Stmt]:
    if not isinstance(stmt, SeqStmt):
        return [stmt]
    items: list[Stmt] = []
    for item in stmt.seq:
        items.extend(_flat_items(item))
    return items


def _simple_loop(stmt) -> bool:
    """A plain `for v in range(extent)` loop (foldable into `T.grid`)."""
    return (
        isinstance(stmt, For)
        and stmt.kind == ForKind.SERIAL
        and not stmt.annotations
        and is_zero(stmt.min, stmt.loop_var.dtype)
        and stmt.extent.dtype == stmt.loop_var.dtype
    )


def _same_int_consts(a, b) -> bool:
    return (
        isinstance(a, E.IntImm)
        and isinstance(b, E.IntImm)
        and a.dtype == b.dtype
        and not a.dtype.is_bool
    )


def _remappable(iv: IterVar, value, loops: dict[int, For]) -> bool:
    """Can `T.axis.remap` express this binding (the parser rebuilds the domain from the loop)?"""
    loop = loops.get(id(value)) if isinstance(value, E.Var) else None
    return (
        loop is not None
        and iv.iter_type in N.REMAP_LETTERS
        and iv.var.dtype == value.dtype
        and type(iv.var) is E.Var
        and structural_equal(iv.dom.min, loop.min)
        and structural_equal(iv.dom.extent, loop.extent)
    )
