"""PrimFunc -> Python source: the interpreter's translator.

`translate(func)` walks the IR once and writes one Python function, `_kernel(_args, _vars)`,
that performs the PrimFunc on numpy arrays. Loop nests the dependence tests prove safe run as
numpy array expressions (see `loops.py`); everything else runs as plain Python loops over
scalars. The source is our own generated text, compiled with `compile()`; `Translation.source`
shows it.
"""

from __future__ import annotations

import itertools
import keyword
import linecache
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from schedlab.ir import expr as E
from schedlab.ir import mma, op
from schedlab.ir.buffer import Buffer
from schedlab.ir.dtype import DataType
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import collect_vars, post_order_visit
from schedlab.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterType,
    LetStmt,
    SeqStmt,
    Stmt,
)  # fmt: skip

from . import runtime
from .exprgen import BufInfo, Code, ExprCtx, ExprGen, TranslateError, VarInfo
from .loops import MAX_INDENT, LoopGen

_RESERVED = {"np", "min", "max", "int", "bool", "range", "abs", "len", "tuple", "float"}


@dataclass(frozen=True)
class Ctx:
    """Where the statement being translated runs."""

    indent: int = 1
    loops: int = 0  # Python loops around this point (CPython allows 20 nested)
    ndim: int = 0  # vectorized loop axes in effect
    shape: str | None = None  # local holding the full shape tuple of those axes
    size: int | None = 1  # number of points, when known statically
    count: str = "1"  # text giving the number of points at run time
    mask: str | None = None  # local holding the active-lanes mask (None: all lanes)
    live: tuple[str, ...] = ("_args", "_vars")  # locals defined so far (for outlining)

    @property
    def ectx(self) -> ExprCtx:
        return ExprCtx(self.ndim, self.mask is not None)

    def deeper(self, *names: str, loop: bool = False) -> Ctx:
        return replace(
            self, indent=self.indent + 1, loops=self.loops + int(loop), live=self.live + names
        )

    def with_live(self, *names: str) -> Ctx:
        return replace(self, live=self.live + names)


@dataclass
class Translation:
    """A PrimFunc translated to Python: `function(values, values_by_id)` runs it."""

    source: str
    function: Callable
    written: frozenset[int] = field(default_factory=frozenset)  # param positions it writes


class Translator(LoopGen):
    def __init__(self, func: PrimFunc, vectorize: bool = True):
        self.func = func
        self.vectorize = vectorize
        self.exprs = ExprGen(self)
        self.used: set[str] = set(_RESERVED)
        self.counter = itertools.count()
        self.consts: dict[str, object] = {}
        self.const_keys: dict[tuple, str] = {}
        self.env: dict[int, VarInfo] = {}
        self.bufs: dict[int, BufInfo] = {}
        self.out: list[str] = []
        self.functions: list[list[str]] = []
        self.storage_root: dict[int, int] = {}
        self.aliases: dict[int, list[Buffer]] = {}
        self.declared: set[int] = set()
        self.hoist_ctx = Ctx()
        self._scan(func.body)

    # -- names and constants -----------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        base = re.sub(r"\W", "_", hint).lstrip("_") or "v"
        if base[0].isdigit():
            base = "v" + base
        if keyword.iskeyword(base):
            base += "_"
        name, suffix = base, 0
        while name in self.used:
            suffix += 1
            name = f"{base}_{suffix}"
        self.used.add(name)
        return name

    def internal(self, hint: str) -> str:
        return f"_{hint}{next(self.counter)}"

    def temp(self) -> str:
        return self.internal("t")

    def constant(self, key: tuple, make: Callable[[], object], hint: str = "c") -> str:
        name = self.const_keys.get(key)
        if name is None:
            name = self.internal(hint)
            self.consts[name] = make()
            self.const_keys[key] = name
        return name

    def float_const(self, dtype: DataType, value: float) -> str:
        element = dtype.element_of()
        return self.constant(("f", str(element), float(value).hex()),
                             lambda: element.numpy.type(value), "f")  # fmt: skip

    def dtype_const(self, dtype: DataType) -> str:
        element = dtype.element_of()
        return self.constant(("dt", str(element)), lambda: element.numpy, "dt")

    def type_const(self, dtype: DataType) -> str:
        element = dtype.element_of()
        return self.constant(("ty", str(element)), lambda: element.numpy.type, "ty")

    def lanes_const(self, count: int, dtype: DataType, ndim: int) -> str:
        element = dtype.element_of()
        return self.constant(
            ("lanes", count, str(element), ndim),
            lambda: _frozen(runtime.lanes(count, element.numpy, ndim)), "lanes",
        )  # fmt: skip

    # -- variables and buffers -----------------------------------------------------------------
    def var_info(self, var: E.Var) -> VarInfo:
        info = self.env.get(id(var))
        if info is None:
            raise TranslateError(f"interpret: variable {var.name} is used but not defined")
        return info

    def bind_var(self, var: E.Var, code: Code) -> str:
        name = self.fresh(var.name)
        self.env[id(var)] = VarInfo(name, var.dtype, code.varying, code.interval)
        return name

    def buffer_info(self, buffer: Buffer) -> BufInfo:
        info = self.bufs.get(id(buffer))
        if info is None:
            raise TranslateError(f"interpret: buffer {buffer.name} is used but not declared")
        return info

    def storage(self, buffer: Buffer) -> int:
        key = id(buffer.data)
        return self.storage_root.get(key, key)

    def _scan(self, body: Stmt) -> None:
        """Find match_buffer views and buffers that alias another's storage."""
        seen: set[int] = set()

        def visit(node):
            if isinstance(node, (E.BufferLoad, BufferStore)) and id(node.buffer) not in seen:
                seen.add(id(node.buffer))
                self.aliases.setdefault(id(node.buffer.data), []).append(node.buffer)
            elif isinstance(node, Block):
                for match in node.match_buffers:
                    self.storage_root[id(match.buffer.data)] = self.storage(match.source.buffer)
                    self.declared.add(id(match.buffer))
                self.declared.update(id(b) for b in node.alloc_buffers)
            elif isinstance(node, Allocate):
                self.declared.add(id(node.buffer))

        self.declared.update(id(b) for b in self.func.buffer_map.values())
        post_order_visit(body, visit)

    # -- emission ----------------------------------------------------------------------------
    def emit(self, ctx: Ctx, text: str) -> None:
        self.out.append("    " * ctx.indent + text)

    def assign(self, ctx: Ctx, name: str, text: str) -> Ctx:
        self.emit(ctx, f"{name} = {text}")
        return ctx.with_live(name)

    def nested(self, ctx: Ctx, fn: Callable[[Ctx], None]) -> None:
        """Run `fn` for an indented block; an empty block gets `pass`."""
        before = len(self.out)
        fn(ctx)
        if len(self.out) == before:
            self.emit(ctx, "pass")

    def expr(self, node: E.PrimExpr, ctx: Ctx, ectx: ExprCtx | None = None) -> Code:
        """Translate an expression used by the statement being generated at `ctx`."""
        self.hoist_ctx = ctx
        return self.exprs.expr(node, ectx or ctx.ectx)

    def hoist(self, text: str) -> str:
        """Compute a deep subexpression into a temporary before the current statement (Python
        limits the nesting of parentheses)."""
        name = self.temp()
        self.emit(self.hoist_ctx, f"{name} = {text}")
        return name

    def scalar(self, node: E.PrimExpr, ctx: Ctx, what: str) -> Code:
        code = self.expr(node, ctx)
        if code.varying:
            raise TranslateError(f"interpret: {what} ({node}) varies across vector lanes")
        return code

    # -- function ----------------------------------------------------------------------------
    def translate(self) -> Translation:
        ctx = Ctx()
        self.out = ["def _kernel(_args, _vars):"]
        ctx = self.prologue(ctx)
        self.nested(ctx, lambda c: self.gen(self.func.body, c))
        self.functions.insert(0, self.out)
        source = "\n\n".join("\n".join(lines) for lines in self.functions) + "\n"
        namespace = {"np": np, "_rt": runtime, **self.consts}
        filename = f"<schedlab.interpret {self.func.name} #{id(self):x}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # our own generated code
        translation = Translation(source, namespace["_kernel"], self.written_params())
        weakref.finalize(translation, linecache.cache.pop, filename, None)
        return translation

    def prologue(self, ctx: Ctx) -> Ctx:
        """Scalar parameters, then the symbolic sizes bound from the arrays, then the buffers
        (whose aliases may need those sizes)."""
        func = self.func
        buffers = []
        for position, param in enumerate(func.params):
            buffer = func.buffer_map.get(param)
            if buffer is not None:
                buffers.append((position, buffer))
            else:
                name = self.fresh(param.name)
                ctx = self.assign(ctx, name, f"_args[{position}]")
                self.env[id(param)] = VarInfo(name, param.dtype)
        for _, buffer in buffers:
            for part in (*buffer.shape, *buffer.strides, buffer.elem_offset):
                for var in collect_vars(part):
                    if id(var) not in self.env:
                        name = self.fresh(var.name)
                        ctx = self.assign(ctx, name, f"_vars[{id(var)}]")
                        self.env[id(var)] = VarInfo(name, var.dtype, False, _size_interval(var))
        for position, buffer in buffers:
            ctx = self.declare(buffer, f"_args[{position}]", ctx)
        return ctx

    def written_params(self) -> frozenset[int]:
        written: set[int] = set()
        post_order_visit(
            self.func.body,
            lambda n: written.add(self.storage(n.buffer)) if isinstance(n, BufferStore) else None,
        )
        return frozenset(
            position
            for position, param in enumerate(self.func.params)
            if param in self.func.buffer_map
            and self.storage(self.func.buffer_map[param]) in written
        )

    # -- buffers -----------------------------------------------------------------------------
    def declare(self, buffer: Buffer, array_text: str, ctx: Ctx) -> Ctx:
        """Bind `buffer` to an array; also views for other buffers over the same storage."""
        name = self.fresh(buffer.name)
        ctx = self.assign(ctx, name, array_text)
        extents = []
        for dim, extent in enumerate(buffer.shape):
            if isinstance(extent, E.IntImm):
                extents.append(Code(str(extent.value), extent.dtype, False, (extent.value,) * 2))
            else:
                local = self.fresh(f"{name}_n{dim}")
                ctx = self.assign(ctx, local, f"{name}.shape[{dim}]")
                extents.append(Code(local, extent.dtype, False, (0, extent.dtype.max_value())))
        self.bufs[id(buffer)] = BufInfo(name, buffer.name, tuple(extents))
        for other in self.aliases.get(id(buffer.data), []):
            if other is not buffer and id(other) not in self.declared:
                ctx = self.declare_alias(other, name, ctx)
        return ctx

    def declare_alias(self, buffer: Buffer, storage: str, ctx: Ctx) -> Ctx:
        shape, strides, offset = self.layout(buffer, ctx)
        dt = self.dtype_const(buffer.dtype)
        strides = strides if strides != "None" else f"_rt.compact_strides({shape})"
        self.declared.add(id(buffer))
        return self.declare(
            buffer, f"_rt.reinterpret({storage}, {dt}, {shape}, {strides}, {offset})", ctx
        )

    def layout(self, buffer: Buffer, ctx: Ctx) -> tuple[str, str, str]:
        def texts(values):
            items = [self.scalar(v, ctx, f"a size of buffer {buffer.name}").text for v in values]
            return "(" + "".join(f"{t}, " for t in items) + ")"

        strides = texts(buffer.strides) if buffer.strides else "None"
        offset = self.scalar(buffer.elem_offset, ctx, f"the offset of {buffer.name}").text
        return texts(buffer.shape), strides, offset

    def allocate(self, buffer: Buffer, ctx: Ctx) -> Ctx:
        if buffer.dtype.is_vector:
            raise TranslateError(f"interpret: buffer {buffer.name} has vector type {buffer.dtype}")
        shape, strides, offset = self.layout(buffer, ctx)
        dt = self.dtype_const(mma.storage_dtype(buffer))  # fp32 accumulator fragments
        return self.declare(buffer, f"_rt.allocate({dt}, {shape}, {strides}, {offset})", ctx)

    def match_buffer(self, match, ctx: Ctx) -> Ctx:
        source = self.buffer_info(match.source.buffer)
        starts = [
            self.scalar(r.min, ctx, "a match_buffer region").text for r in match.source.region
        ]
        extents = [
            self.scalar(r.extent, ctx, "a match_buffer region").text for r in match.source.region
        ]
        view = (
            f"_rt.match_region({source.name}, ({''.join(s + ', ' for s in starts)}), "
            f"({''.join(e + ', ' for e in extents)}), {match.buffer.ndim}, {match.buffer.name!r})"
        )
        ctx = self.declare(match.buffer, view, ctx)
        info = self.bufs[id(match.buffer)]
        return self.bind_layout_vars(match.buffer, info.name, source.name, ctx)

    def bind_layout_vars(self, buffer: Buffer, view: str, storage: str, ctx: Ctx) -> Ctx:
        """Symbolic shape/strides/offset of a matched buffer take the view's values."""
        parts = [(s, f"{view}.shape[{d}]") for d, s in enumerate(buffer.shape)]
        parts += [(s, f"_rt.view_strides({view})[{d}]") for d, s in enumerate(buffer.strides)]
        parts.append((buffer.elem_offset, f"_rt.view_offset({view}, {storage})"))
        for expr, text in parts:
            if isinstance(expr, E.Var) and id(expr) not in self.env:
                name = self.fresh(expr.name)
                ctx = self.assign(ctx, name, text)
                self.env[id(expr)] = VarInfo(name, expr.dtype, False, _size_interval(expr))
        return ctx

    # -- statements --------------------------------------------------------------------------
    def gen(self, node: Stmt, ctx: Ctx) -> None:
        if isinstance(node, SeqStmt):
            for item in node.seq:
                self.gen(item, ctx)
        elif isinstance(node, BufferStore):
            self.gen_store(node, ctx)
        elif isinstance(node, For):
            self.gen_for(node, ctx)
        elif isinstance(node, BlockRealize):
            self.gen_block_realize(node, ctx)
        elif isinstance(node, Block):
            if node.iter_vars:
                raise TranslateError(f"interpret: block {node.name_hint} has no BlockRealize")
            self.block_body(node, ctx)
        elif isinstance(node, IfThenElse):
            else_fn = None if node.else_case is None else (lambda c: self.gen(node.else_case, c))
            self.guard(node.condition, lambda c: self.gen(node.then_case, c), else_fn, ctx)
        elif isinstance(node, LetStmt):
            value = self.expr(node.value, ctx)
            name = self.bind_var(node.var, value)
            self.gen(node.body, self.assign(ctx, name, value.text))
        elif isinstance(node, Allocate):
            self.gen(node.body, self.allocate(node.buffer, ctx))
        elif isinstance(node, Evaluate):
            if isinstance(node.value, E.Call) and node.value.op in mma.OPS:
                self.gen_warp_op(node.value, ctx)
            elif not isinstance(node.value, (E.IntImm, E.FloatImm)):
                self.emit(ctx, self.expr(node.value, ctx).text)
        else:
            raise TranslateError(f"interpret: unsupported statement {type(node).__name__}")

    def gen_warp_op(self, call: E.Call, ctx: Ctx) -> None:
        """A warp-level tensor-core operation on whole tiles (schedlab.ir.mma): run by its
        numpy emulation, each `address_of(X[i, j])` passed as (X's array, (i, j))."""
        args = []
        for arg in call.args:
            if isinstance(arg, E.Call) and arg.op == mma.ADDRESS_OF:
                load = arg.args[0]
                info = self.buffer_info(load.buffer)
                where = "an mma tile's address"
                indices = "".join(self.scalar(i, ctx, where).text + ", " for i in load.indices)
                args.append(f"({info.name}, ({indices}))")
            else:
                args.append(self.scalar(arg, ctx, f"an argument of {call.op}").text)
        self.emit(ctx, f"_rt.warp_op({call.op!r}, {', '.join(args)})")

    def gen_store(self, node: BufferStore, ctx: Ctx) -> None:
        value = self.expr(node.value, ctx)
        info = self.buffer_info(node.buffer)
        indices = [self.expr(i, ctx) for i in node.indices]
        self.store(info, indices, value.text, ctx.mask, ctx)

    def store(self, info: BufInfo, indices: list[Code], value: str, mask, ctx: Ctx) -> None:
        texts = "".join(f"{i.text}, " for i in indices)
        if mask is not None:
            self.emit(ctx, f"_rt.masked_store({info.name}, ({texts}), {value}, {mask}, "
                           f"{info.label!r})")  # fmt: skip
        elif not any(i.varying for i in indices):
            index = self.exprs.scalar_index(info, indices, guarded=False)
            self.emit(ctx, f"{info.name}[{index or '()'}] = {value}")
        elif _all_in_bounds(indices, info):
            self.emit(ctx, f"{info.name}[{texts}] = {value}")
        else:
            self.emit(ctx, f"_rt.store({info.name}, ({texts}), {value}, {info.label!r})")

    def guard(self, condition: E.PrimExpr, then_fn, else_fn, ctx: Ctx) -> None:
        """`if condition: then else: else` — a Python `if` for a scalar condition, masks for a
        condition that varies across lanes."""
        if ctx.indent >= MAX_INDENT:
            self.outline(ctx, lambda c: self.guard(condition, then_fn, else_fn, c))
            return
        code = self.expr(condition, ctx)
        if not code.varying:
            self.emit(ctx, f"if {code.text}:")
            self.nested(ctx.deeper(), then_fn)
            if else_fn is not None:
                self.emit(ctx, "else:")
                self.nested(ctx.deeper(), else_fn)
            return
        flag = self.internal("cond")
        ctx = self.assign(ctx, flag, code.text)
        for fn, text in ((then_fn, flag), (else_fn, f"(~{flag})")):
            if fn is None:
                continue
            mask = self.internal("mask")
            inner = self.assign(ctx, mask, text if ctx.mask is None else f"({ctx.mask} & {text})")
            fn(replace(inner, mask=mask))

    def gen_block_realize(self, node: BlockRealize, ctx: Ctx) -> None:
        block = node.block
        for iter_var, value in zip(block.iter_vars, node.iter_values):
            code = self.expr(value, ctx)
            if code.text.isidentifier():  # reuse the bound name: no copy
                self.env[id(iter_var.var)] = VarInfo(code.text, iter_var.var.dtype,
                                                     code.varying, code.interval)  # fmt: skip
                continue
            name = self.bind_var(iter_var.var, code)
            ctx = self.assign(ctx, name, code.text)
        if isinstance(node.predicate, E.IntImm) and node.predicate.value:
            self.block_body(block, ctx)
        else:
            self.guard(node.predicate, lambda c: self.block_body(block, c), None, ctx)

    def block_body(self, block: Block, ctx: Ctx) -> None:
        for buffer in block.alloc_buffers:
            ctx = self.allocate(buffer, ctx)
        for match in block.match_buffers:
            ctx = self.match_buffer(match, ctx)
        if block.init is not None:
            reduce_vars = [iv for iv in block.iter_vars if iv.iter_type == IterType.REDUCE]
            condition = op.all(*[op.eq(iv.var, iv.dom.min) for iv in reduce_vars])
            if isinstance(condition, E.IntImm):
                if condition.value:
                    self.gen(block.init, ctx)
            else:
                self.guard(condition, lambda c: self.gen(block.init, c), None, ctx)
        self.gen(block.body, ctx)


def _all_in_bounds(indices: list[Code], info: BufInfo) -> bool:
    return all(
        i.interval is not None
        and e.interval is not None
        and i.interval[0] >= 0
        and i.interval[1] < e.interval[0]
        for i, e in zip(indices, info.extents)
    )


def _size_interval(var: E.Var):
    return (0, int(var.dtype.max_value())) if var.dtype.is_integer else None


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def translate(func: PrimFunc, vectorize: bool = True) -> Translation:
    """Translate `func` to a Python function (see `Translation`)."""
    return Translator(func, vectorize).translate()
