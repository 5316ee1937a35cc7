"""Loop-nest extraction for the cost model: each block of a TensorIR function as the chain of
loops above it, its buffer accesses (indices in terms of those loops) and its arithmetic.

The model reads the SCHEDULED TensorIR form (not the lowered one): blocks keep the
multi-dimensional buffer indices, which give per-dimension footprints (conv windows overlap
correctly), and walking it is cheap enough to run on every click."""

from __future__ import annotations

from dataclasses import dataclass, field

from schedlab.ir import expr as E
from schedlab.ir.functor import post_order_visit, substitute
from schedlab.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IterType

_ARITH = (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max, E.FloorDiv, E.Mod, E.FloorMod)


@dataclass(frozen=True)
class Loop:
    """One loop of a nest: its variable, trip count, kind, and whether it is a reduction."""

    var: E.Var
    extent: int
    kind: ForKind
    reduce: bool


@dataclass(frozen=True)
class Access:
    """One buffer access: indices in terms of the nest's loop variables."""

    buffer: object
    indices: tuple
    write: bool


@dataclass
class Nest:
    """A block with everything above it, outermost loop first."""

    name: str
    loops: list[Loop]
    accesses: list[Access] = field(default_factory=list)
    flops_per_iter: int = 0
    fma_per_iter: int = 0
    dtype: str = "float32"
    guarded: bool = False  # the block runs under a predicate (a split that does not divide)


def _const_int(value, default: int = 1) -> int:
    return int(value.value) if isinstance(value, E.IntImm) else default


def extract(func) -> list[Nest]:
    """Every leaf block of `func` (a PrimFunc in TensorIR form) as a `Nest`, in program order."""
    nests: list[Nest] = []
    _walk(func.body, [], {}, nests)
    return nests


def _walk(stmt, loops: list[Loop], vmap: dict, nests: list[Nest]) -> None:
    if isinstance(stmt, For):
        reduce = False  # filled in when the block below binds it
        loop = Loop(stmt.loop_var, _const_int(stmt.extent), stmt.kind, reduce)
        # a loop of one iteration is gone after compilation: it neither repeats nor reuses
        _walk(stmt.body, [*loops, loop] if loop.extent > 1 else loops, vmap, nests)
    elif isinstance(stmt, BlockRealize):
        _walk_block(stmt, loops, vmap, nests)
    elif hasattr(stmt, "seq"):
        for item in stmt.seq:
            _walk(item, loops, vmap, nests)
    else:
        for name in ("body", "then_case", "else_case"):
            child = getattr(stmt, name, None)
            if child is not None:
                _walk(child, loops, vmap, nests)


def _walk_block(realize: BlockRealize, loops: list[Loop], vmap: dict, nests) -> None:
    block: Block = realize.block
    inner = dict(vmap)
    reduce_vars: set = set()
    for iv, value in zip(block.iter_vars, realize.iter_values, strict=False):
        inner[iv.var] = substitute(value, vmap) if vmap else value
        if iv.iter_type == IterType.REDUCE:
            post_order_visit(value, lambda n: reduce_vars.add(n) if isinstance(n, E.Var) else None)
    loops = [
        Loop(lp.var, lp.extent, lp.kind, True) if lp.var in reduce_vars else lp for lp in loops
    ]
    has_child = []
    post_order_visit(
        block.body, lambda n: has_child.append(1) if isinstance(n, BlockRealize) else None
    )
    if has_child:
        _walk(block.body, loops, inner, nests)
        return
    nest = _leaf(block, loops, inner)
    guard = realize.predicate
    nest.guarded = not (isinstance(guard, E.IntImm) and bool(guard.value))
    nests.append(nest)


def _leaf(block: Block, loops: list[Loop], vmap: dict) -> Nest:
    nest = Nest(block.name_hint, loops)
    seen: set = set()

    def visit(node) -> None:
        if isinstance(node, E.BufferLoad | BufferStore):
            indices = tuple(substitute(i, vmap) for i in node.indices)
            key = (id(node.buffer), tuple(map(str, indices)), isinstance(node, BufferStore))
            if key not in seen:
                seen.add(key)
                nest.accesses.append(Access(node.buffer, indices, isinstance(node, BufferStore)))
            if isinstance(node, BufferStore):
                nest.dtype = str(node.buffer.dtype)
        elif isinstance(node, _ARITH) and node.dtype.is_float:
            nest.flops_per_iter += 1
            if isinstance(node, E.Add | E.Sub) and (
                isinstance(node.a, E.Mul) or isinstance(node.b, E.Mul)
            ):
                nest.fma_per_iter += 1
        elif isinstance(node, E.Call) and node.dtype.is_float and node.op != "if_then_else":
            nest.flops_per_iter += 1

    post_order_visit(block.body, visit)
    return nest
