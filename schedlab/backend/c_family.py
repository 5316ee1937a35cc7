"""The shared C-family renderer: lowered loop IR -> C-like source text.

One class holds token tables (types, qualifiers, kernel prefix, thread indices, math names) and
small hooks (signature, loop pragmas, thread loops, local arrays); CPU C, CUDA, HIP and OpenCL are
subclasses that override tokens and hooks, not copies (tinygrad's CStyleLanguage is the model).

Input is the LOWERED form (see schedlab.transform): no blocks, flat 1-D buffers, Allocate for
intermediates. Output is a `RenderedModule`: the source, and per function its C parameters and a
map from each loop's uid to the lines that render it (the explorer links loops to code with it).
Each loop is preceded by a comment naming its loop variable: `// loop i: parallel, 64 iterations`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from schedlab.errors import LoweringError
from schedlab.ir import expr as E
from schedlab.ir import op
from schedlab.ir import stmt as S
from schedlab.ir.dtype import DataType, int32
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import Visitor

from .c_expr import MUL, CExprMixin
from .c_names import C_KEYWORDS, C_LIBRARY, NameTable, c_safe
from .c_prelude import Prelude
from .c_vector import (
    LANE_OP,
    contiguous_base,
    is_plain_numeric,
    lane_of,
    register_vector_lanes,
    split_store,
)


@dataclass(frozen=True)
class LoopSpan:
    """Where one loop is in the source (1-based lines): its comment, its `for` line, its `}`."""

    uid: int
    name: str
    kind: str  # the IR loop kind
    style: str  # how it was emitted: serial, parallel (OpenMP), simd, unroll, ...
    first: int
    header: int
    last: int

    @property
    def lines(self) -> range:
        return range(self.first, self.last + 1)


@dataclass(frozen=True)
class CParam:
    """One parameter of a rendered entry point, in C order. `role` is "buffer" (a pointer to
    the buffer's elements), "handle" (an opaque pointer), "scalar" (a scalar PrimFunc param) or
    "shape" (a symbolic size the caller binds from the argument shapes)."""

    name: str
    role: str
    var: E.Var
    dtype: DataType
    buffer: object = None
    written: bool = False


@dataclass
class RenderedFunction:
    name: str
    symbol: str
    params: tuple[CParam, ...]
    loop_lines: dict[int, LoopSpan] = field(default_factory=dict)
    first_line: int = 0
    last_line: int = 0


@dataclass
class RenderedModule:
    source: str
    functions: dict[str, RenderedFunction]

    @property
    def loop_lines(self) -> dict[int, LoopSpan]:
        """Loop uid -> its lines, over every function."""
        merged: dict[int, LoopSpan] = {}
        for function in self.functions.values():
            merged.update(function.loop_lines)
        return merged


_SCALAR_TYPES = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "float", "bfloat16": "float", "float32": "float", "float64": "double",
    "handle": "void*",
}  # fmt: skip


class CFamilyRenderer(CExprMixin):
    """Renders lowered PrimFuncs as C-family source. Subclasses override the tokens below and the
    hooks `param_decl`, `loop_style`, `thread_loop`, `local_array`, `heap_array`,
    `function_prologue`, `function_epilogue`, `after_function`."""

    # -- token table ----------------------------------------------------------------------------
    headers: tuple[str, ...] = ("<stdint.h>", "<stdbool.h>", "<stddef.h>", "<string.h>",
                                "<stdlib.h>", "<math.h>")  # fmt: skip
    defines: tuple[str, ...] = ()
    preamble: str = ""
    prelude_overrides: dict[str, str] = {}  # a dialect's own text of a fixed helper group
    scalar_types: dict[str, str] = _SCALAR_TYPES
    storage_types: dict[str, str] = {"float16": "uint16_t", "bfloat16": "uint16_t"}
    kernel_prefix = ""  # before the entry point's return type ("__global__", "__kernel", ...)
    return_type = "int32_t"
    buffer_qualifier = ""  # address space of buffer pointers ("__global ")
    restrict = "restrict"
    const_inputs = True
    barrier = ""  # a block-wide barrier statement ("__syncthreads();")
    thread_index: dict[str, str] = {}  # thread tag -> expression ("threadIdx.x")
    reserved_words: frozenset[str] = C_KEYWORDS | C_LIBRARY  # never used as names
    indent_unit = "  "
    stack_limit_bytes = 16 * 1024  # larger scratch goes to the heap (thread stacks are small)
    local_alignment = 64
    native_vector_bits = 0  # vector stores wider than this are split (0: never)
    vector_register_arrays = False  # scratch accessed as whole vectors declared as vectors
    outline_parallel_body = False  # render a parallel loop's body as a function (see _outline)

    def __init__(self, target=None):
        self.target = target

    # -- module ---------------------------------------------------------------------------------
    def render(self, mod: IRModule | PrimFunc) -> RenderedModule:
        """Render every PrimFunc of the module into one translation unit."""
        if isinstance(mod, PrimFunc):
            mod = IRModule.from_expr(mod)
        self.prelude = Prelude(self.headers, self.defines, self.preamble, self.prelude_overrides)
        symbols = self._symbols(mod)
        chunks: list[tuple[list[str], RenderedFunction]] = []
        for name, func in mod.items():
            if isinstance(func, PrimFunc):
                chunks.append(
                    self._render_function(func, name, symbols[name], set(symbols.values()))
                )
        text = self.prelude.render()
        offset = text.count("\n") + 1
        functions = {}
        for lines, info in chunks:
            _shift(info, offset)
            functions[info.name] = info
            text += "\n" + "\n".join(lines) + "\n"
            offset += len(lines) + 1
        return RenderedModule(text, functions)

    def _symbols(self, mod: IRModule) -> dict[str, str]:
        symbols: dict[str, str] = {}
        for name, func in mod.items():
            if not isinstance(func, PrimFunc):
                continue
            symbol = c_safe(func.attrs.get("global_symbol", name))
            if symbol in self.reserved_words or symbol in symbols.values():
                symbol += "_kernel"
            symbols[name] = symbol
        return symbols

    # -- function -------------------------------------------------------------------------------
    def _render_function(self, func: PrimFunc, name: str, symbol: str, symbols: set[str]):
        self.names = NameTable(self.reserved_words | symbols | {symbol + "__timed"})
        self._nonneg: set[int] = set()
        self._lines: list[str] = []
        self._depth = 0
        self._loops: dict[int, LoopSpan] = {}
        self._loop_stack: list[tuple[S.For, str]] = []
        self._ptr_types: dict[int, str] = {}
        self._vector_arrays: dict[int, int] = {}  # scratch held as vectors: its lanes
        self._helpers: list[tuple[list[str], dict[int, LoopSpan]]] = []
        self._symbol = symbol
        self.func = func
        info = RenderedFunction(name, symbol, self._declare_params(func))
        self._param_data = {id(p.buffer.data) for p in info.params if p.buffer is not None}
        self.emit(f"// {name}: generated by schedlab")
        params = ", ".join(self.param_decl(p) for p in info.params) or "void"
        self.emit(f"{self.kernel_prefix}{self.return_type} {symbol}({params}) {{")
        self._depth += 1
        for line in self.function_prologue(info):
            self.emit(line)
        self.stmt(func.body)
        for line in self.function_epilogue(info):
            self.emit(line)
        self._depth -= 1
        self.emit("}")
        lines = self._lines
        info.loop_lines = self._loops
        if self._helpers:  # outlined bodies come first: C declares before use
            lines, info.loop_lines = _with_helpers(self._lines, self._loops, self._helpers)
        info.last_line = len(lines)
        extra = self.after_function(info)
        return lines + ([""] + extra if extra else []), info

    def _declare_params(self, func: PrimFunc) -> tuple[CParam, ...]:
        usage = _function_usage(func)
        params: list[CParam] = []
        for var in func.params:
            buffer = func.buffer_map.get(var)
            if buffer is not None:
                c_name = self.names.declare(buffer.data, buffer.name)
                if var is not buffer.data:
                    self.names.alias(var, c_name)
                self._ptr_types[id(buffer.data)] = self.storage_ctype(buffer.dtype)
                written = id(buffer.data) in usage.stored
                params.append(CParam(c_name, "buffer", var, buffer.dtype, buffer, written))
            else:
                role = "handle" if var.dtype.is_handle else "scalar"
                params.append(CParam(self.names.declare(var, var.name), role, var, var.dtype))
            self._note_nonneg_param(var)
        for var in usage.vars:
            self._nonneg.add(id(var))  # symbolic sizes bound from array shapes are >= 0
            params.append(CParam(self.names.declare(var, var.name), "shape", var, var.dtype))
        return tuple(params)

    def _note_nonneg_param(self, var: E.Var) -> None:
        if isinstance(var, E.SizeVar):
            self._nonneg.add(id(var))

    # -- hooks ----------------------------------------------------------------------------------
    def param_decl(self, param: CParam) -> str:
        """Hook: the C declaration of one entry-point parameter."""
        if param.role != "buffer":
            return f"{self.value_ctype(param.dtype)} {param.name}"
        const = "const " if self.const_inputs and not param.written else ""
        restrict = f"{self.restrict} " if self.func.attrs.get("tir.noalias") else ""
        ctype = self.storage_ctype(param.dtype)
        return f"{const}{self.buffer_qualifier}{ctype}* {restrict}{param.name}"

    def function_prologue(self, info: RenderedFunction) -> list[str]:
        return ["int32_t sl_status = 0;  // set to -1 when a scratch allocation fails"]

    def function_epilogue(self, info: RenderedFunction) -> list[str]:
        return ["return sl_status;"]

    def after_function(self, info: RenderedFunction) -> list[str]:
        """Hook: extra source lines after a function (wrappers, launchers)."""
        return []

    def loop_style(self, loop: S.For) -> tuple[str, list[str], str]:
        """Hook: how a loop is emitted: (style, pragma lines, note for its comment). The base
        emits every kind as a plain loop."""
        if loop.kind == S.ForKind.SERIAL:
            return "serial", [], ""
        return "serial", [], f"{loop.kind.value} kind runs as a plain loop on this target"

    def thread_loop(self, loop: S.For) -> None:
        """Hook: a thread-bound loop (GPU targets map it to a thread index)."""
        kind = getattr(self.target, "kind", "C")
        raise LoweringError(
            f"loop {loop.loop_var.name} is bound to {loop.thread_tag}; the {kind} target has no "
            f"threads to bind (build for a GPU target, or make the loop serial or parallel)"
        )

    def local_array(self, ctype: str, name: str, count: int, buffer) -> str:
        """Hook: a fixed-size scratch array (kept in registers by gcc when small and unrolled)."""
        return f"{ctype} {name}[{max(count, 1)}] __attribute__((aligned({self.local_alignment})));"

    def heap_array(self, ctype: str, name: str, size_bytes: str) -> list[str]:
        """Hook: lines that heap-allocate a big scratch buffer (NULL on failure)."""
        self.prelude.use("alloc")
        return [
            f"{ctype}* {self.restrict} {name} = ({ctype}*)__builtin_assume_aligned("
            f"sl_alloc({size_bytes}), 64);"
        ]

    # -- emission -------------------------------------------------------------------------------
    def emit(self, line: str) -> int:
        """Append one line at the current indentation; returns its 1-based line number."""
        self._lines.append(self.indent_unit * self._depth + line if line else "")
        return len(self._lines)

    def stmt(self, node: S.Stmt) -> None:
        method = getattr(self, f"_s_{type(node).__name__}", None)
        if method is None:
            raise LoweringError(
                f"the C backend cannot render {type(node).__name__}; blocks must be lowered "
                f"first (schedlab.transform.lower)"
            )
        method(node)

    def _block(self, body: S.Stmt) -> None:
        """A nested C block: its own indentation and name scope."""
        self._depth += 1
        self.names.push_scope()
        try:
            self.stmt(body)
        finally:
            self.names.pop_scope()
            self._depth -= 1

    def _s_SeqStmt(self, node: S.SeqStmt) -> None:
        for item in node.seq:
            self.stmt(item)

    def _s_Evaluate(self, node: S.Evaluate) -> None:
        if not isinstance(node.value, (E.IntImm, E.FloatImm)):
            self.emit(f"{self.expr(node.value)};")

    def _s_IfThenElse(self, node: S.IfThenElse) -> None:
        self.emit(f"if ({self.expr(node.condition)}) {{")
        self._block(node.then_case)
        if node.else_case is not None:
            self.emit("} else {")
            self._block(node.else_case)
        self.emit("}")

    def _redeclared(self, obj, render) -> None:
        """Render in a fresh C block when `obj` is already declared in this one (an unrolled
        body repeats its lets and allocations)."""
        if not self.names.declared_here(obj):
            render()
            return
        self.emit("{")
        self._depth += 1
        self.names.push_scope()
        try:
            render()
        finally:
            self.names.pop_scope()
            self._depth -= 1
        self.emit("}")

    def _s_LetStmt(self, node: S.LetStmt) -> None:
        def render():
            value = self.expr(node.value)
            name = self.names.declare(node.var, node.var.name)
            if self.known_nonneg(node.value):
                self._nonneg.add(id(node.var))
            self.emit(f"{self.value_ctype(node.var.dtype)} {name} = {value};")
            self.stmt(node.body)

        self._redeclared(node.var, render)

    # -- loops ----------------------------------------------------------------------------------
    def _s_For(self, loop: S.For) -> None:
        if loop.kind == S.ForKind.THREAD_BINDING:
            self.thread_loop(loop)
            return
        begin = self._bound(loop.min, loop.loop_var.name + "_begin")
        end = self._bound(op.add(loop.min, loop.extent), loop.loop_var.name + "_end")
        style, pragmas, note = self.loop_style(loop)
        self.names.push_scope()
        var = self.names.declare(loop.loop_var, loop.loop_var.name)
        first = self.emit(self._loop_comment(loop, var, style, note))
        for pragma in pragmas:
            self.emit(pragma)
        if self.known_nonneg(loop.min):
            self._nonneg.add(id(loop.loop_var))
        ctype = self.value_ctype(loop.loop_var.dtype)
        header = self.emit(f"for ({ctype} {var} = {begin}; {var} < {end}; ++{var}) {{")
        self._loop_stack.append((loop, style))
        self._depth += 1
        try:
            if style == "parallel" and self.outline_parallel_body:
                self._outline(loop)
            else:
                self.stmt(loop.body)
        finally:
            self._depth -= 1
            self._loop_stack.pop()
            self.names.pop_scope()
        last = self.emit("}")
        span = LoopSpan(loop.uid, loop.loop_var.name, loop.kind.value, style, first, header, last)
        self._loops[loop.uid] = span

    def _outline(self, loop: S.For) -> None:
        """The body of a parallel loop as a function of its own, called once per iteration.

        gcc outlines an OpenMP region into a function that reads the region's pointers from a
        struct, which drops their `restrict`: every store may then alias every load, so sums
        stay in memory and nothing vectorizes (a parallel gemm ran 6x slower than the serial
        one). A function whose parameters are `restrict` pointers gives that back, and gcc
        inlines it into the region with the qualifiers intact."""
        free = _FreeVars(loop.body)
        params: list[tuple[str, str]] = []  # (C name, declaration)
        for var in [loop.loop_var, *free.vars]:
            name = self.names.lookup(var)
            if name is None or any(name == known for known, _ in params):
                continue
            params.append((name, self._outlined_param(var, name, free)))
        symbol = base = f"{self._symbol}__{c_safe(loop.loop_var.name)}_body"
        counter = 1
        while self.names.taken(symbol):  # earlier helpers are reserved names too
            counter += 1
            symbol = f"{base}_{counter}"
        self.names.reserve(symbol)
        decls = ", ".join(decl for _, decl in params)
        outer_lines, outer_depth, outer_loops = self._lines, self._depth, self._loops
        self._lines, self._depth, self._loops = [], 0, {}
        try:
            self.emit(f"// parallel loop {loop.loop_var.name}'s body as a function: it keeps "
                      "`restrict` (gcc's OpenMP outlining drops it)")  # fmt: skip
            self.emit(f"static inline int32_t {symbol}({decls}) {{")
            self.emit(f"{self.indent_unit}int32_t sl_status = 0;")
            self._block(loop.body)
            self.emit(f"{self.indent_unit}return sl_status;")
            self.emit("}")
            self.emit("")
            self._helpers.append((self._lines, self._loops))
        finally:
            self._lines, self._depth, self._loops = outer_lines, outer_depth, outer_loops
        self.emit(f"if ({symbol}({', '.join(name for name, _ in params)}) != 0) {{")
        self.emit(f"{self.indent_unit}#pragma omp atomic write")
        self.emit(f"{self.indent_unit}sl_status = -1;")
        self.emit("}")

    def _outlined_param(self, var: E.Var, name: str, free: _FreeVars) -> str:
        """The declaration of one parameter of an outlined body: buffers as (restrict)
        pointers, const when the body never stores through them, other variables by value."""
        pointee = self._ptr_types.get(id(var))
        if pointee is None:
            return f"{self.value_ctype(var.dtype)} {name}"
        # scratch the function allocates never aliases anything; parameters only by noalias
        restrict = id(var) not in self._param_data or bool(self.func.attrs.get("tir.noalias"))
        const = "const " if self.const_inputs and id(var) not in free.stored else ""
        qualifier = f"{self.restrict} " if restrict else ""
        return f"{const}{self.buffer_qualifier}{pointee}* {qualifier}{name}"

    def _bound(self, value: E.PrimExpr, hint: str) -> str:
        """A loop bound; one that loads memory or calls a function is computed once, before the
        loop (the IR evaluates bounds once)."""
        if not _has_side_inputs(value):
            return self.expr(value)
        name = self.names.declare(object(), hint)
        self.emit(f"const {self.value_ctype(value.dtype)} {name} = {self.expr(value)};")
        return name

    def _loop_comment(self, loop: S.For, var: str, style: str, note: str) -> str:
        extent = loop.extent
        count = f"{extent.value} iterations" if isinstance(extent, E.IntImm) else f"extent {extent}"
        renamed = f" (as {var})" if var != loop.loop_var.name else ""
        return f"// loop {loop.loop_var.name}{renamed}: {style}, {count}" + (
            f"; {note}" if note else ""
        )

    # -- memory ---------------------------------------------------------------------------------
    def buffer_ref(self, buffer) -> str:
        name = self.names.lookup(buffer.data)
        if name is None:
            raise LoweringError(
                f"buffer {buffer.name} is neither a parameter nor allocated in the function"
            )
        ctype = self.storage_ctype(buffer.dtype)
        if self._ptr_types.get(id(buffer.data), ctype) != ctype:  # a view with another dtype
            return f"(({self.buffer_qualifier}{ctype}*){name})"
        return name

    def _s_Allocate(self, node: S.Allocate) -> None:
        self._redeclared(node.buffer.data, lambda: self._allocate(node))

    def _allocate(self, node: S.Allocate) -> None:
        buffer = node.buffer
        ctype = self.storage_ctype(buffer.dtype)
        count = op.const(1, buffer.shape[0].dtype if buffer.shape else int32)
        for extent in buffer.shape:
            count = count * extent
        name = self.names.declare(buffer.data, buffer.name)
        self._ptr_types[id(buffer.data)] = ctype
        nbytes = buffer.dtype.bytes
        if isinstance(count, E.IntImm) and count.value * nbytes <= self.stack_limit_bytes:
            lanes = self._register_lanes(node, count.value)
            if lanes:
                vtype = self.vector_ctype(buffer.dtype.with_lanes(lanes))
                self._vector_arrays[id(buffer.data)] = lanes
                self.emit(f"{vtype} {name}[{count.value // lanes}];")
            else:
                self.emit(self.local_array(ctype, name, count.value, buffer))
            self.stmt(node.body)
            return
        # a run-time size: each extent widened first, so the product cannot overflow int32
        extents = [f"(size_t)({self.expr(e)})" for e in buffer.shape if not _is_one(e)]
        size = " * ".join([*extents, f"sizeof({ctype})"])
        for line in self.heap_array(ctype, name, size):
            self.emit(line)
        self.emit(f"if ({name} != NULL) {{")
        self._block(node.body)
        self.emit(f"{self.indent_unit}free({name});")
        self.emit("} else {")
        self.emit(f"{self.indent_unit}sl_status = -1;")
        self.emit("}")

    def _register_lanes(self, node: S.Allocate, count: int) -> int | None:
        """The lanes of a scratch buffer to declare as an array of vectors (see
        `register_vector_lanes`), when this renderer does that."""
        element = node.buffer.dtype
        if not self.vector_register_arrays or element.lanes != 1 or not is_plain_numeric(element):
            return None
        return register_vector_lanes(node.body, node.buffer.data, count, self.native_vector_bits)

    def _s_BufferStore(self, node: S.BufferStore) -> None:
        buffer, value = node.buffer, node.value
        index = self.buffer_index(node)
        target = self.buffer_ref(buffer)
        lanes = self._vector_arrays.get(id(buffer.data))
        if lanes:  # a whole vector of a scratch array of vectors
            self.emit(f"{target}[{index.base.value // lanes}] = {self.expr(value)};")
            return
        if index.dtype.lanes == 1 and value.dtype.lanes == 1:
            self.emit(f"{target}[{self.expr(index)}] = {self._stored(buffer.dtype, value)};")
            return
        # without tir.noalias another parameter may alias the stored one: keep the store whole
        splittable = self.native_vector_bits and self.func.attrs.get("tir.noalias")
        if splittable and value.dtype.lanes == index.dtype.lanes:
            chunks = split_store(buffer, value, index, self.native_vector_bits)
            if chunks is not None:
                for part, where in chunks:
                    self._s_BufferStore(S.BufferStore(buffer, part, (where,)))
                return
        base = contiguous_base(index)
        element = buffer.dtype
        if base is not None and element.lanes == 1 and is_plain_numeric(element):
            vtype = self.vector_ctype(value.dtype)[3:]
            pointer = target if target.isidentifier() else f"({target})"
            self.emit(f"sl_store_{vtype}({pointer} + {self._sub(base, MUL)}, {self.expr(value)});")
            return
        self._scattered_store(node, target, index)

    def _scattered_store(self, node: S.BufferStore, target: str, index: E.PrimExpr) -> None:
        """A vector store lane by lane; the whole value is computed first, as a vector store
        would."""
        value, lanes = node.value, max(index.dtype.lanes, node.value.dtype.lanes)
        self.emit("{")
        self._depth += 1
        self.names.push_scope()
        try:
            lane = E.Var("sl_l", int32)
            lane_value = value
            if value.dtype.lanes > 1:
                holder = E.Var("sl_v", value.dtype)
                held = self.expr(value)
                name = self.names.declare(holder, "sl_v", internal=True)
                self.emit(f"{self.value_ctype(value.dtype)} {name} = {held};")
                lane_value = E.Call(value.dtype.element_of(), LANE_OP, (holder, lane))
            lane_name = self.names.declare(lane, "sl_l", internal=True)
            self._nonneg.add(id(lane))
            stored = self._stored(node.buffer.dtype, lane_value)
            where = self.expr(lane_of(index, lane))
            self.emit(f"for (int32_t {lane_name} = 0; {lane_name} < {lanes}; ++{lane_name}) "
                      f"{target}[{where}] = {stored};")  # fmt: skip
        finally:
            self.names.pop_scope()
            self._depth -= 1
        self.emit("}")

    def _stored(self, dtype: DataType, value: E.PrimExpr) -> str:
        """The value converted to the buffer's storage (float16/bfloat16 bits)."""
        if not (dtype.is_float and dtype.bits == 16):
            return self.expr(value)
        helper = "f16" if dtype.kind == "float" else "bf16"
        self.prelude.use(helper)
        text = _strip_call(self.expr(value), f"sl_round_{helper}")
        return f"sl_f32_to_{helper}({text})"


def _strip_call(text: str, function: str) -> str:
    """`inner` when `text` is exactly `function(inner)` (a rounding the store repeats)."""
    prefix = function + "("
    if not (text.startswith(prefix) and text.endswith(")")):
        return text
    depth = 0
    for position, char in enumerate(text[len(prefix) - 1 :], start=len(prefix) - 1):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return text[len(prefix) : -1] if position == len(text) - 1 else text
    return text


def _is_one(extent: E.PrimExpr) -> bool:
    return isinstance(extent, E.IntImm) and extent.value == 1


def _has_side_inputs(value: E.PrimExpr) -> bool:
    found = False

    class _Find(Visitor):
        def visit_BufferLoad(self, node):
            nonlocal found
            found = True

        def visit_Call(self, node):
            nonlocal found
            found = True

    _Find().visit(value)
    return found


def _shift(info: RenderedFunction, offset: int) -> None:
    info.first_line = offset + 1
    info.last_line += offset
    info.loop_lines = _shifted(info.loop_lines, offset)


def _shifted(spans: dict[int, LoopSpan], offset: int) -> dict[int, LoopSpan]:
    return {
        uid: dataclasses.replace(
            s, first=s.first + offset, header=s.header + offset, last=s.last + offset
        )
        for uid, s in spans.items()
    }


def _with_helpers(lines: list[str], spans: dict[int, LoopSpan], helpers) -> tuple[list, dict]:
    """The function's lines after its outlined bodies (each rendered on its own, lines from 1),
    with every loop's span moved to where it ends up. The function's first line (its
    `// name: generated by schedlab` comment) stays first."""
    merged_lines, merged_spans = [lines[0]], {}
    for helper_lines, helper_spans in helpers:
        merged_spans.update(_shifted(helper_spans, len(merged_lines)))
        merged_lines += helper_lines
    merged_spans.update(_shifted(spans, len(merged_lines) - 1))
    return merged_lines + lines[1:], merged_spans


class _FreeVars(Visitor):
    """The variables some IR uses without binding them (in order of first use; buffers by
    their data variable, allocation sizes included), and the buffers it stores to or hands
    to a call. For a function: its symbolic sizes; for an outlined loop body: its inputs."""

    def __init__(self, *nodes, bound=()):
        self.used: dict[int, E.Var] = {}
        self.bound: set[int] = set(bound)
        self.stored: set[int] = set()
        for node in nodes:
            self.visit(node)
        self.vars = [v for key, v in self.used.items() if key not in self.bound]

    def _buffer(self, node) -> None:
        self.used.setdefault(id(node.buffer.data), node.buffer.data)

    def visit_BufferLoad(self, node):
        self._buffer(node)
        self.generic_visit(node)

    def visit_BufferStore(self, node):
        self._buffer(node)
        self.stored.add(id(node.buffer.data))
        self.generic_visit(node)

    def visit_Call(self, node):
        for arg in node.args:
            if isinstance(arg, E.Var) and arg.dtype.is_handle:
                self.stored.add(id(arg))  # an opaque call may write through a pointer
            elif isinstance(arg, E.Call) and arg.op == "address_of":  # so may one of &X[i]
                self.stored.add(id(arg.args[0].buffer.data))
        self.generic_visit(node)

    def visit_For(self, node):
        self.bound.add(id(node.loop_var))
        self.generic_visit(node)

    def visit_LetStmt(self, node):
        self.bound.add(id(node.var))
        self.generic_visit(node)

    def visit_Let(self, node):
        self.bound.add(id(node.var))
        self.generic_visit(node)

    def visit_Allocate(self, node):
        self.bound.add(id(node.buffer.data))
        for extent in node.buffer.shape:
            self.visit(extent)
        self.generic_visit(node)

    def visit_Var(self, node):
        self.used.setdefault(id(node), node)


def _function_usage(func: PrimFunc) -> _FreeVars:
    """What a function stores to, and its free variables: the symbolic sizes that become
    entry-point parameters."""
    shapes = [extent for buffer in func.buffer_map.values() for extent in buffer.shape]
    bound = {id(p) for p in func.params} | {id(b.data) for b in func.buffer_map.values()}
    return _FreeVars(*shapes, func.body, bound=bound)
