"""Well-formedness checks for PrimFuncs.

`verify(func)` raises `VerifyError` listing every problem found:
- every variable is defined before use (params, buffer shapes, loops, block iter vars, lets) and
  no variable is defined twice (loop and iter vars are SSA);
- every buffer used is declared (buffer_map, alloc_buffers, match_buffers, Allocate);
- each block's iter values match its iter vars in number and dtype;
- a block's body does not use the loop variables around it (only its iter values and predicate
  may): blocks see the outside only through their bindings;
- loop extents and block domains are integers.
"""

from __future__ import annotations

from .buffer import Buffer
from .expr import BufferLoad, Let, PrimExpr, Var
from .function import IRModule, PrimFunc
from .functor import Visitor
from .stmt import Allocate, Block, BlockRealize, BufferStore, For, LetStmt


class VerifyError(ValueError):
    """The IR is malformed; the message lists each problem."""


class _Verifier(Visitor):
    def __init__(self):
        self.defined: set[int] = set()
        self.buffers: set[int] = set()
        self.errors: list[str] = []
        self.scope: list[str] = []
        self.loop_vars: list[Var] = []
        self.hidden: set[int] = set()

    def error(self, message: str) -> None:
        where = f" (in {' > '.join(self.scope)})" if self.scope else ""
        self.errors.append(message + where)

    def define(self, var: Var, what: str) -> None:
        if id(var) in self.defined:
            self.error(f"variable {var.name} is defined twice ({what})")
        self.defined.add(id(var))

    def declare_buffer(self, buffer: Buffer) -> None:
        for expr in (*buffer.shape, *buffer.strides, buffer.elem_offset):
            for var in _free_vars(expr):
                if id(var) not in self.defined:
                    self.defined.add(id(var))  # shape vars are defined by their first buffer
        self.buffers.add(id(buffer))

    def check_buffer(self, buffer: Buffer, use: str) -> None:
        if id(buffer) not in self.buffers:
            self.error(f"buffer {buffer.name} is used by {use} but never declared")

    # -- nodes ------------------------------------------------------------------------------
    def visit_Var(self, var: Var) -> None:
        if id(var) not in self.defined:
            self.error(f"variable {var.name} is used but not defined")
        elif id(var) in self.hidden:
            self.error(f"loop variable {var.name} is used inside a block; bind it to an iter var")

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.check_buffer(node.buffer, "a load")
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.check_buffer(node.buffer, "a store")
        self.generic_visit(node)

    def visit_For(self, node: For) -> None:
        self.visit(node.min)
        self.visit(node.extent)
        if not node.extent.dtype.is_integer:
            self.error(f"loop {node.loop_var.name} has a non-integer extent {node.extent}")
        self.define(node.loop_var, "loop")
        self.loop_vars.append(node.loop_var)
        self.scope.append(f"for {node.loop_var.name}")
        self.visit(node.body)
        self.scope.pop()
        self.loop_vars.pop()

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        block = node.block
        for value, iter_var in zip(node.iter_values, block.iter_vars):
            self.visit(value)
            if value.dtype != iter_var.var.dtype:
                self.error(
                    f"block {block.name_hint}: iter var {iter_var.var.name} is "
                    f"{iter_var.var.dtype} but bound to a {value.dtype} value"
                )
        self.visit(node.predicate)
        self.visit(block)

    def visit_Block(self, block: Block) -> None:
        outer_hidden, outer_loops = self.hidden, self.loop_vars
        self.hidden = outer_hidden | {id(v) for v in outer_loops}
        self.loop_vars = []
        self.scope.append(f"block {block.name_hint}")
        for iter_var in block.iter_vars:
            self.visit(iter_var.dom.min)
            self.visit(iter_var.dom.extent)
            self.define(iter_var.var, "block iter var")
        for buffer in block.alloc_buffers:
            self.declare_buffer(buffer)
        for match in block.match_buffers:
            self.check_buffer(match.source.buffer, f"match_buffer of {block.name_hint}")
            self.visit(match.source)
            self.declare_buffer(match.buffer)
        for region in (*block.reads, *block.writes):
            self.check_buffer(region.buffer, f"the signature of block {block.name_hint}")
            self.visit(region)
        if block.init is not None:
            self.visit(block.init)
        self.visit(block.body)
        self.scope.pop()
        self.hidden, self.loop_vars = outer_hidden, outer_loops

    def visit_Allocate(self, node: Allocate) -> None:
        self.declare_buffer(node.buffer)
        self.visit(node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.visit(node.value)
        self.define(node.var, "let")
        self.visit(node.body)

    def visit_Let(self, node: Let) -> None:
        self.visit(node.value)
        self.define(node.var, "let")
        self.visit(node.body)


def _free_vars(expr: PrimExpr) -> list[Var]:
    from .functor import collect_vars

    return collect_vars(expr)


def verify(func: PrimFunc | IRModule) -> None:
    """Check well-formedness; raise VerifyError listing every problem."""
    if isinstance(func, IRModule):
        for name, item in func.items():
            if isinstance(item, PrimFunc):
                try:
                    verify(item)
                except VerifyError as err:
                    raise VerifyError(f"function {name}: {err}") from None
        return
    if not isinstance(func, PrimFunc):
        raise TypeError(f"verify: expected a PrimFunc or IRModule, got {type(func).__name__}")
    checker = _Verifier()
    for param in func.params:
        checker.define(param, "parameter")
    for buffer in func.buffer_map.values():
        checker.declare_buffer(buffer)
    checker.visit(func.body)
    if checker.errors:
        listed = "\n  - ".join(checker.errors)
        raise VerifyError(f"{len(checker.errors)} problem(s) in the IR:\n  - {listed}")


def is_well_formed(func) -> bool:
    try:
        verify(func)
    except VerifyError:
        return False
    return True
