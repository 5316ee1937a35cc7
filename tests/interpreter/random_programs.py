"""Random loop programs for the vectorizer's property tests.

A program is one to three loop nests over small odd extents; each nest holds guarded stores or a
reduction block (optional init, predicate, fused reduction loops). Indices are in range by
construction (offsets that fit, `floormod`), except for guarded `if_then_else` loads that step past
the border. Stores read the buffers they write at other indices, so loop-carried dependences are
common: the vectorizer must notice them.
"""

from __future__ import annotations

import numpy as np

from schedlab.ir import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IfThenElse,
    IterType,
    IterVar,
    Range,
    SeqStmt,
    Var,
    const,
    decl_buffer,
    op,
)

from .interp_builders import func, root

KINDS = ("serial", "parallel", "vectorized", "unrolled")


class ProgramGen:
    def __init__(self, seed: int, dtype: str = "int32"):
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.inputs = [decl_buffer((5, 6), dtype, "X"), decl_buffer((7,), dtype, "Y")]
        self.outputs = [
            decl_buffer((5, 6), dtype, "Z"),
            decl_buffer((7,), dtype, "W"),
            decl_buffer((1,), dtype, "S"),
        ]
        self.counter = 0
        self.last = None  # (buffer, indices) of the previous store in this nest

    @property
    def buffers(self):
        return self.inputs + self.outputs

    def pick(self, items):
        return items[int(self.rng.integers(len(items)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    # -- program -------------------------------------------------------------------------------
    def program(self):
        stages = [self.nest() for _ in range(int(self.rng.integers(1, 4)))]
        return func(self.buffers, root(SeqStmt.flatten(*stages)))

    def nest(self, outer=(), levels: int = 2):
        depth = int(self.rng.integers(1, 4))
        self.counter += 1
        new = [(Var(f"l{self.counter}_{d}"), int(self.rng.integers(1, 7))) for d in range(depth)]
        loops = list(outer) + new
        self.last = None
        if self.chance(0.4):
            body = self.reduction(loops)
        else:
            body = SeqStmt.flatten(
                *[self.statement(loops) for _ in range(int(self.rng.integers(1, 3)))]
            )
        if levels > 1 and self.chance(0.3):  # an imperfect nest: more loops after a statement
            inner = self.nest(loops, levels - 1)
            body = (
                SeqStmt.flatten(inner, body) if self.chance(0.5) else SeqStmt.flatten(body, inner)
            )
        for var, extent in reversed(new):
            body = For(var, const(0), const(extent), self.pick(KINDS), body)
        return body

    def statement(self, loops):
        if self.last is not None and self.chance(0.4):
            # the same element again: init/update-like pairs, read-modify-write chains
            buffer, indices = self.last
            value = self.value(loops, 2)
            if self.chance(0.5):
                value = self.pick([op.add, op.max, op.sub])(buffer[indices], value)
        else:
            buffer = self.pick(self.outputs)
            indices = self.indices(buffer, loops)
            value = self.value(loops, 2)
        self.last = (buffer, indices)
        store = BufferStore(buffer, value, indices)
        if self.chance(0.3):
            return IfThenElse(self.condition(loops), store)
        return store

    # -- pieces ----------------------------------------------------------------------------------
    def index(self, size: int, loops):
        if len(loops) >= 2 and self.chance(0.25):
            (outer, e_outer), (inner, e_inner) = (self.pick(loops) for _ in range(2))
            if outer is not inner and e_outer * e_inner <= size:
                return outer * e_inner + inner  # a tile: fused or split loops
        var, extent = self.pick(loops) if loops else (None, 0)
        roll = self.rng.random()
        if var is not None and extent <= size and roll < 0.5:
            offset = int(self.rng.integers(0, size - extent + 1))
            return var + offset if self.chance(0.7) else (size - 1 - offset) - var
        if var is not None and roll < 0.85:
            scale = int(self.rng.integers(1, 4))
            return op.floormod(var * scale + int(self.rng.integers(0, 5)), size)
        return const(int(self.rng.integers(0, size)))

    def indices(self, buffer, loops):
        return tuple(self.index(int(s.value), loops) for s in buffer.shape)

    def load(self, loops):
        buffer = self.pick(self.buffers)
        if buffer.ndim == 1 and loops and self.chance(0.3):
            # a load that steps past the border, guarded lazily
            var, extent = self.pick(loops)
            size = int(buffer.shape[0].value)
            if extent <= size:
                shifted = var + int(self.rng.integers(1, 3))
                return op.if_then_else(shifted < size, buffer[shifted], const(3, self.dtype))
        return buffer[self.indices(buffer, loops)]

    def leaf(self, loops):
        roll = self.rng.random()
        if roll < 0.6:
            return self.load(loops)
        if roll < 0.8 and loops:
            return op.cast(self.pick(loops)[0], self.dtype)
        return const(int(self.rng.integers(-4, 5)), self.dtype)

    def value(self, loops, depth: int):
        if depth == 0 or self.chance(0.3):
            return self.leaf(loops)
        a, b = self.value(loops, depth - 1), self.value(loops, depth - 1)
        choices = ["add", "sub", "mul", "min", "max", "select", "ite"]
        if self.dtype.startswith("int"):
            choices += ["floordiv", "floormod", "truncdiv"]
        kind = self.pick(choices)
        if kind in ("floordiv", "floormod", "truncdiv"):
            divisor = const(int(self.pick([-3, 2, 3, 4])), self.dtype)
            return {"floordiv": op.floordiv, "floormod": op.floormod, "truncdiv": op.truncdiv}[
                kind
            ](a, divisor)
        if kind == "select":
            return op.select(a < b, a, b - const(1, self.dtype))
        if kind == "ite":
            return op.if_then_else(a > b, b, a + const(2, self.dtype))
        return getattr(op, kind)(a, b)

    def condition(self, loops):
        if loops and self.chance(0.6):
            var, extent = self.pick(loops)
            return var < int(self.rng.integers(0, extent + 1))
        return self.value(loops, 1) > const(0, self.dtype)

    # -- reductions ------------------------------------------------------------------------------
    def reduction(self, loops):
        """A block over the nest: some loops spatial, the rest (at least one) reduce; sometimes
        two reduce loops are fused into one iter var."""
        roles = ["S" if self.chance(0.5) else "R" for _ in loops]
        if "R" not in roles:
            roles[-1] = "R"
        values, doms, kinds = [], [], []
        reduce_loops = [lv for lv, role in zip(loops, roles) if role == "R"]
        if len(reduce_loops) == 2 and self.chance(0.5):
            (a, ea), (b, eb) = reduce_loops
            values.append(a * eb + b)
            doms.append(ea * eb)
            kinds.append(IterType.REDUCE)
            reduce_loops = []
        for (var, extent), role in zip(loops, roles):
            if role == "S" or any(var is r for r, _ in reduce_loops):
                values.append(var)
                doms.append(extent)
                kinds.append(IterType.SPATIAL if role == "S" else IterType.REDUCE)
        self.counter += 1
        iter_vars = [Var(f"v{self.counter}_{n}") for n in range(len(values))]
        ivs = [IterVar(v, Range(0, d), k) for v, d, k in zip(iter_vars, doms, kinds)]
        inner = [(v, d) for v, d in zip(iter_vars, doms)]
        spatial = [(v, d) for v, d, k in zip(iter_vars, doms, kinds) if k == IterType.SPATIAL]
        target = self.pick(self.outputs)
        indices = self.indices(target, spatial)
        combine = self.pick([op.add, op.add, op.max, op.min, op.sub])
        update = BufferStore(target, combine(target[indices], self.value(inner, 1)), indices)
        init = BufferStore(target, self.value(spatial, 0), indices) if self.chance(0.7) else None
        block = Block(ivs, (), (), f"b{self.counter}", update, init=init)
        predicate = const(True)
        if self.chance(0.3):  # in terms of the loops around the block, as in TensorIR
            var, extent = self.pick(loops)
            predicate = var < int(self.rng.integers(1, extent + 1))
        return BlockRealize(tuple(values), predicate, block)

    # -- data --------------------------------------------------------------------------------
    def arrays(self):
        arrays = []
        for buffer in self.buffers:
            shape = tuple(int(s.value) for s in buffer.shape)
            if self.dtype.startswith("int"):
                arrays.append(self.rng.integers(-20, 20, shape).astype(self.dtype))
            else:
                arrays.append(self.rng.uniform(-2, 2, shape).astype(self.dtype))
        return arrays
