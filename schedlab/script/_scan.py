"""What a function or statement defines and uses, found before printing it.

The printer needs this up front: variables used but bound by no construct of the text (symbolic
shape variables, free variables) are declared at the top as `n = T.int32()`, and buffers used but
declared nowhere become `X = T.Buffer(...)` declarations.
"""

from __future__ import annotations

from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, BufferRegion, MatchBufferRegion
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Visitor
from schedlab.ir.stmt import Allocate, Block, BufferStore, For, IterVar


class Scan(Visitor):
    """Collects defined/used variables and buffers, in first-seen order."""

    def __init__(self):
        self.defined_vars: set[int] = set()
        self.used_vars: dict[int, E.Var] = {}
        self.defined_buffers: dict[int, Buffer] = {}
        self.used_buffers: dict[int, Buffer] = {}

    # -- buffers ------------------------------------------------------------------------------
    def _fields(self, buffer: Buffer) -> None:
        for value in (*buffer.shape, *buffer.strides, buffer.elem_offset):
            self.visit(value)

    def define_buffer(self, buffer: Buffer) -> None:
        if id(buffer) not in self.defined_buffers:
            self.defined_buffers[id(buffer)] = buffer
            self._fields(buffer)

    def use_buffer(self, buffer: Buffer) -> None:
        if id(buffer) not in self.used_buffers:
            self.used_buffers[id(buffer)] = buffer
            self._fields(buffer)

    # -- nodes --------------------------------------------------------------------------------
    def visit_Var(self, var: E.Var) -> None:
        self.used_vars.setdefault(id(var), var)

    def visit_For(self, node: For) -> None:
        self.defined_vars.add(id(node.loop_var))
        self.visit(node.min)
        self.visit(node.extent)
        self._visit_value(node.annotations)
        self.visit(node.body)

    def visit_IterVar(self, node: IterVar) -> None:
        self.defined_vars.add(id(node.var))
        self.visit(node.dom)

    def visit_Let(self, node: E.Let) -> None:
        self.defined_vars.add(id(node.var))
        self.visit(node.value)
        self.visit(node.body)

    visit_LetStmt = visit_Let

    def visit_BufferLoad(self, node: E.BufferLoad) -> None:
        self.use_buffer(node.buffer)
        self._visit_value(node.indices)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.use_buffer(node.buffer)
        self.visit(node.value)
        self._visit_value(node.indices)

    def visit_BufferRegion(self, node: BufferRegion) -> None:
        self.use_buffer(node.buffer)
        self._visit_value(node.region)

    def visit_MatchBufferRegion(self, node: MatchBufferRegion) -> None:
        self.visit(node.source)
        self.define_buffer(node.buffer)

    def visit_Block(self, node: Block) -> None:
        for buffer in node.alloc_buffers:
            self.define_buffer(buffer)
        self.generic_visit(node)

    def visit_Allocate(self, node: Allocate) -> None:
        self.define_buffer(node.buffer)
        self.generic_visit(node)

    def _visit_value(self, value) -> None:
        if isinstance(value, Buffer):
            self.use_buffer(value)
        else:
            super()._visit_value(value)

    # -- results ------------------------------------------------------------------------------
    def free_buffers(self) -> list[Buffer]:
        return [b for key, b in self.used_buffers.items() if key not in self.defined_buffers]

    def free_vars(self) -> list[E.Var]:
        """Variables no construct of the text binds (excluding buffer data pointers)."""
        data = {id(b.data) for b in (*self.defined_buffers.values(), *self.used_buffers.values())}
        return [
            var
            for key, var in self.used_vars.items()
            if key not in self.defined_vars and key not in data
        ]


def scan_function(func: PrimFunc) -> Scan:
    scan = Scan()
    for param in func.params:
        scan.defined_vars.add(id(param))
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is not None:
            scan.define_buffer(buffer)
    scan._visit_value(func.attrs)
    scan.visit(func.body)
    return scan


def scan_node(node) -> Scan:
    scan = Scan()
    scan.visit(node)
    return scan


def buffer_vars(buffer: Buffer) -> list[E.Var]:
    """The variables in a buffer's shape, strides and elem_offset."""
    scan = Scan()
    scan._fields(buffer)
    return list(scan.used_vars.values())


def contains_block(stmt) -> bool:
    """Whether a statement holds a block anywhere (then the function needs a root block)."""
    from schedlab.ir.functor import pre_order_visit
    from schedlab.ir.stmt import BlockRealize

    found = False

    def check(node):
        nonlocal found
        if found or isinstance(node, (Block, BlockRealize)):
            found = True
            return False
        return not isinstance(node, E.PrimExpr)  # blocks never hide inside expressions

    pre_order_visit(stmt, check)
    return found


def is_root_like(stmt) -> bool:
    """A realize of an iterless block named "root": the parser never wraps such a body again."""
    from schedlab.ir.stmt import BlockRealize

    return (
        isinstance(stmt, BlockRealize)
        and not stmt.iter_values
        and not stmt.block.iter_vars
        and stmt.block.name_hint == "root"
    )
