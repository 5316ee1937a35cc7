"""PromoteInvariantScratch (no TVM counterpart; LLVM's LICM does it as "scalar promotion"):
scratch elements a loop only touches at loop-invariant places are held in a register tile for
the loop's duration.

A scratch buffer the function allocates (an accumulator tile, "local" after cache_write, or a
whole intermediate) accessed inside a serial loop at indices that do not change in the loop
(`acc[h*112 + 16*j]` inside `for rb`) is loaded into a small scratch of its own before the
loop, used there at constant places, and stored back after it. The C back end declares
scratch used at constant whole-vector places as an array of vectors, which gcc keeps in
registers; at a run-time index (the `h` above) the tile stays in memory and every update is a
load, an add and a store on the loop-carried path (gcc does not move them out of the loop).

That is what lets a schedule put the reduction over input channels *outside* the loops over
an output tile's rows (the tile's accumulators live in memory between channel chunks, in
registers within one), so each chunk of a convolution's weight is used for the whole tile
once it is loaded (a 3x3 512->512 conv at 7x7 in that order: 1.92 -> 0.88 ms, Intel Xeon;
docs/performance.md "Accumulators at run-time places").

Applied at the outermost serial or unrolled loop of constant extent > 1 in which every access
to the buffer is
- at an index that uses no variable bound inside the loop,
- unconditional (not under an `if`, a select or `if_then_else`: the index may be out of
  bounds where the access does not run),
- at a place that provably equals or is disjoint from every other such place (constant
  offsets of one another),
and where the buffer is used only through loads and stores, some index is not a constant
(constant places are already registers) and at most MAX_SLOTS places are touched.
"""

from __future__ import annotations

from schedlab.ir.buffer import decl_buffer
from schedlab.ir.expr import BufferLoad, Call, IntImm, PrimExpr, Ramp, Select, Var
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import Mutator, Visitor, uses_var
from schedlab.ir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, LetStmt, SeqStmt
from schedlab.ir.structural import structural_equal
from schedlab.ir.transform import Pass, prim_func_pass

from ._util import analyzer, as_int, with_doc

MAX_SLOTS = 32  # places of one buffer held at once (a vector register file holds 16-32)


def promote_invariant_scratch(func: PrimFunc) -> PrimFunc:
    """`func` with loop-invariant scratch accesses held in register tiles (module docstring)."""
    body = _Promoter().visit(func.body)
    return func if body is func.body else func.with_body(body)


def PromoteInvariantScratch() -> Pass:  # noqa: N802 - pass names are CamelCase
    """The pass form of `promote_invariant_scratch`."""
    return with_doc(
        prim_func_pass(promote_invariant_scratch, name="PromoteInvariantScratch"), __doc__
    )


class _Promoter(Mutator):
    def __init__(self):
        # data var id -> buffer allocated in the function, around the loop being visited
        self.scratch: dict[int, object] = {}

    def visit_Allocate(self, node: Allocate):
        self.scratch[id(node.buffer.data)] = node.buffer
        try:
            return self.generic_visit(node)
        finally:
            del self.scratch[id(node.buffer.data)]

    def visit_For(self, node: For):
        extent = as_int(node.extent)  # constant: the tile's loads run only where the loop does
        if node.kind in (ForKind.SERIAL, ForKind.UNROLLED) and (extent or 0) > 1 and self.scratch:
            accesses = _Accesses(node, self.scratch)
            accesses.visit(node.body)
            for key, buffer in self.scratch.items():
                slots = accesses.promotable(key)
                if slots:
                    return self.visit(_promote(node, buffer, slots))
        return self.generic_visit(node)


class _Accesses(Visitor):
    """The accesses of each scratch buffer inside a loop: index, lanes, and whether every one
    is invariant, unconditional and a plain load/store."""

    def __init__(self, loop: For, scratch: dict):
        self.scratch = scratch
        self.inner_vars: set[int] = {id(loop.loop_var)}
        self.places: dict[int, list[tuple[PrimExpr, int]]] = {}
        self.written: dict[int, list[tuple[PrimExpr, int]]] = {}
        self.rejected: set[int] = set()
        self.conditional = 0

    def _record(self, node) -> None:
        key = id(node.buffer.data)
        if key not in self.scratch or key in self.rejected:
            return
        if self.conditional or len(node.indices) != 1:
            self.rejected.add(key)
            return
        index = node.indices[0]
        base, lanes = (index.base, index.lanes) if isinstance(index, Ramp) else (index, 1)
        if isinstance(index, Ramp) and as_int(index.stride) != 1:
            self.rejected.add(key)
            return
        if uses_var(base, lambda var: id(var) in self.inner_vars):
            self.rejected.add(key)
            return
        self.places.setdefault(key, []).append((base, lanes))
        if isinstance(node, BufferStore):
            self.written.setdefault(key, []).append((base, lanes))

    def visit_BufferLoad(self, node: BufferLoad):
        self._record(node)
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore):
        self._record(node)
        self.generic_visit(node)

    def visit_Var(self, node: Var):  # a scratch pointer used as a value: opaque use
        if id(node) in self.scratch:
            self.rejected.add(id(node))

    def visit_For(self, node: For):
        self.inner_vars.add(id(node.loop_var))
        self.generic_visit(node)

    def visit_LetStmt(self, node: LetStmt):
        self.inner_vars.add(id(node.var))
        self.generic_visit(node)

    def visit_Let(self, node):
        self.inner_vars.add(id(node.var))
        self.generic_visit(node)

    def visit_IfThenElse(self, node: IfThenElse):
        self.visit(node.condition)
        self.conditional += 1
        try:
            self.visit(node.then_case)
            if node.else_case is not None:
                self.visit(node.else_case)
        finally:
            self.conditional -= 1

    def visit_Select(self, node: Select):
        self._conditional_expr(node.condition, (node.true_value, node.false_value))

    def visit_Call(self, node: Call):
        if node.op == "if_then_else":
            self._conditional_expr(node.args[0], node.args[1:])
        else:
            self.generic_visit(node)

    def _conditional_expr(self, condition, branches) -> None:
        self.visit(condition)
        self.conditional += 1
        try:
            for branch in branches:
                self.visit(branch)
        finally:
            self.conditional -= 1

    def promotable(self, key: int) -> list[tuple[PrimExpr, int, bool]] | None:
        """The distinct places (base, lanes, stored to) to hold, or None when the buffer
        stays."""
        if key in self.rejected or key not in self.places:
            return None
        slots: list[tuple[PrimExpr, int]] = []
        for base, lanes in self.places[key]:
            if not any(structural_equal(base, b) and lanes == n for b, n in slots):
                slots.append((base, lanes))
        if len(slots) > MAX_SLOTS or all(isinstance(b, IntImm) for b, _ in slots):
            return None
        simplify = analyzer().simplify
        for i, (base, lanes) in enumerate(slots):
            for other, other_lanes in slots[:i]:
                gap = as_int(simplify(base - other))
                if gap is None or not (gap >= other_lanes or -gap >= lanes):
                    return None  # may overlap at run time
        written = self.written.get(key, [])
        return [
            (base, lanes, any(n == lanes and structural_equal(b, base) for b, n in written))
            for base, lanes in slots
        ]


def _promote(loop: For, buffer, held: list[tuple[PrimExpr, int, bool]]):
    """`Allocate(tile, [tile <- buffer at each place], loop on tile, [buffer <- tile at each
    place stored to])`."""
    slots = [(base, lanes) for base, lanes, _ in held]
    offsets, total = [], 0
    for _, lanes in slots:
        offsets.append(total)
        total += lanes
    tile = decl_buffer((total,), buffer.dtype, f"{buffer.name}_tile", scope="local")

    def place(base, lanes):
        return Ramp(base, IntImm(base.dtype, 1), lanes) if lanes > 1 else base

    def tile_place(offset, lanes):
        return place(IntImm(slots[0][0].dtype, offset), lanes)

    def slot_of(index) -> int:
        base, lanes = (index.base, index.lanes) if isinstance(index, Ramp) else (index, 1)
        return next(k for k, (b, n) in enumerate(slots) if n == lanes and structural_equal(b, base))

    class Redirect(Mutator):
        def visit_BufferLoad(self, node):
            node = self.generic_visit(node)
            if node.buffer.data is not buffer.data:
                return node
            k = slot_of(node.indices[0])
            return BufferLoad(tile, (tile_place(offsets[k], slots[k][1]),))

        def visit_BufferStore(self, node):
            node = self.generic_visit(node)
            if node.buffer.data is not buffer.data:
                return node
            k = slot_of(node.indices[0])
            return BufferStore(tile, node.value, (tile_place(offsets[k], slots[k][1]),))

    loads = [
        BufferStore(tile, BufferLoad(buffer, (place(b, n),)), (tile_place(o, n),))
        for (b, n), o in zip(slots, offsets)
    ]
    stores = [
        BufferStore(buffer, BufferLoad(tile, (tile_place(o, n),)), (place(b, n),))
        for (b, n, stored), o in zip(held, offsets)
        if stored
    ]
    body = SeqStmt.flatten(*loads, Redirect().visit(loop), *stores)
    return Allocate(tile, body)


__all__ = ["PromoteInvariantScratch", "promote_invariant_scratch", "MAX_SLOTS"]
