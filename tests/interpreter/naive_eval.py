"""A deliberately naive tree-walking evaluator of the loop IR, independent of the interpreter's
translator: a third opinion for the random-program tests (integers and floats, the subset the
generator produces). Every integer result is wrapped to its dtype; every float is rounded to its
dtype after each operation."""

from __future__ import annotations

import numpy as np

from schedlab.ir import expr as E
from schedlab.ir import stmt as S


def _wrap(value, dtype):
    if dtype.is_bool:
        return bool(value)
    if dtype.is_float:
        return dtype.numpy.type(value)
    bits = dtype.bits
    value = int(value) % (1 << bits)
    if dtype.is_int and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


class Naive:
    def __init__(self, buffers: dict[int, np.ndarray]):
        self.buffers = buffers  # id(buffer) -> array
        self.env: dict[int, object] = {}

    def run(self, func, *arrays):
        for param, array in zip(func.params, arrays):
            self.buffers[id(func.buffer_map[param])] = array
        self.stmt(func.body)

    # -- statements --------------------------------------------------------------------------
    def stmt(self, node):
        if isinstance(node, S.SeqStmt):
            for item in node.seq:
                self.stmt(item)
        elif isinstance(node, S.For):
            start, extent = self.expr(node.min), self.expr(node.extent)
            for value in range(start, start + extent):
                self.env[id(node.loop_var)] = value
                self.stmt(node.body)
        elif isinstance(node, S.BufferStore):
            value = self.expr(node.value)
            self.array(node.buffer)[self.index(node.buffer, node.indices)] = value
        elif isinstance(node, S.IfThenElse):
            if self.expr(node.condition):
                self.stmt(node.then_case)
            elif node.else_case is not None:
                self.stmt(node.else_case)
        elif isinstance(node, S.BlockRealize):
            self.block(node)
        elif isinstance(node, S.Evaluate):
            self.expr(node.value)
        else:
            raise NotImplementedError(type(node).__name__)

    def block(self, node: S.BlockRealize):
        block = node.block
        for iter_var, value in zip(block.iter_vars, node.iter_values):
            self.env[id(iter_var.var)] = self.expr(value)
        if not self.expr(node.predicate):
            return
        for buffer in block.alloc_buffers:
            fill = np.nan if buffer.dtype.is_float else 0
            shape = tuple(self.expr(s) for s in buffer.shape)
            self.buffers[id(buffer)] = np.full(shape, fill, buffer.dtype.numpy)
        reduce_vars = [iv for iv in block.iter_vars if iv.iter_type == S.IterType.REDUCE]
        if block.init is not None and all(
            self.env[id(iv.var)] == self.expr(iv.dom.min) for iv in reduce_vars
        ):
            self.stmt(block.init)
        self.stmt(block.body)

    def array(self, buffer):
        return self.buffers[id(buffer)]

    def index(self, buffer, indices):
        array = self.array(buffer)
        values = tuple(self.expr(i) for i in indices)
        for value, extent in zip(values, array.shape):
            if not 0 <= value < extent:
                raise IndexError(f"{buffer.name}{list(values)} out of bounds")
        return values

    # -- expressions -------------------------------------------------------------------------
    def expr(self, node):
        if isinstance(node, E.Var):
            return self.env[id(node)]
        if isinstance(node, (E.IntImm, E.FloatImm)):
            return _wrap(node.value, node.dtype)
        if isinstance(node, E.BufferLoad):
            value = self.array(node.buffer)[self.index(node.buffer, node.indices)]
            return value if node.dtype.is_float else _wrap(int(value), node.dtype)
        if isinstance(node, E.Call) and node.op == "if_then_else":
            branch = node.args[1] if self.expr(node.args[0]) else node.args[2]
            return self.expr(branch)
        if isinstance(node, E.Select):
            t, f = self.expr(node.true_value), self.expr(node.false_value)
            return t if self.expr(node.condition) else f
        if isinstance(node, E.Not):
            return not self.expr(node.a)
        if isinstance(node, E.Cast):
            value = self.expr(node.value)
            if node.dtype.is_integer and node.value.dtype.is_float:
                value = int(np.trunc(value))
            return _wrap(value, node.dtype)
        a, b = self.expr(node.a), self.expr(node.b)
        return _wrap(_BINARY[type(node)](a, b, node.a.dtype), node.dtype)


def _trunc_div(a, b):
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _floordiv(a, b, dtype):
    return np.floor(a / b) if dtype.is_float else a // b


def _floormod(a, b, dtype):
    return a - np.floor(a / b) * b if dtype.is_float else a % b


_BINARY = {
    E.Add: lambda a, b, t: a + b,
    E.Sub: lambda a, b, t: a - b,
    E.Mul: lambda a, b, t: a * b,
    E.Div: lambda a, b, t: a / b if t.is_float else _trunc_div(a, b),
    E.Mod: lambda a, b, t: np.fmod(a, b) if t.is_float else a - _trunc_div(a, b) * b,
    E.FloorDiv: _floordiv,
    E.FloorMod: _floormod,
    # floats: NaN propagates (the interpreter's documented choice, numpy's minimum/maximum)
    E.Min: lambda a, b, t: np.minimum(a, b) if t.is_float else min(a, b),
    E.Max: lambda a, b, t: np.maximum(a, b) if t.is_float else max(a, b),
    E.EQ: lambda a, b, t: a == b,
    E.NE: lambda a, b, t: a != b,
    E.LT: lambda a, b, t: a < b,
    E.LE: lambda a, b, t: a <= b,
    E.GT: lambda a, b, t: a > b,
    E.GE: lambda a, b, t: a >= b,
    E.And: lambda a, b, t: a and b,
    E.Or: lambda a, b, t: a or b,
}
