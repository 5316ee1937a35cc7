"""Loop IR as TVMScript that Apache TVM (0.27's `tirx` dialect) parses.

schedlab's own text form follows TVMScript, so this printer is schedlab's printer with TVM's
current spellings where they differ:

- the header is the comment `# from tvm.script import tirx as T` (TVM's parser knows `T` and
  refuses import statements);
- `@T.prim_func` is `@T.prim_func(s_tir=True)` (blocks, an implicit root block);
- `with T.block("C"):` is `with T.sblock("C"):`, `T.block_attr` is `T.sblock_attr`, and a
  block's `T.alloc_buffer` is `T.sblock_alloc_buffer`;
- a buffer's `data_alignment=` is `align=`;
- attribute keys in `tir.` are in `tirx.` (`"tirx.noalias"`);
- `T.call_intrin("float32", "exp", x)` names TVM's op: `"tirx.exp"`;
- a `T.Buffer` parameter whose shape uses a later parameter is a `T.handle` matched in the body;
- a region view (`T.match_buffer` in a block) gets variable strides and elem_offset, which TVM
  binds to the region (schedlab places a view by its region alone).

Everything else (T.grid, loop kinds, T.axis forms, T.where, T.init, T.reads/T.writes,
T.match_buffer, dtypes, T.Select, T.Cast, T.if_then_else, the math intrinsics) is spelled the
same. Lowered IR (`T.allocate`) and let bindings (TVM 0.27 has its own `T.let` / `T.Bind`
forms) raise `TVMExportError`: export functions before lowering, as schedules and traces see
them.

    >>> from schedlab import workloads
    >>> print(to_tvm_script(workloads.get("gemm", M=2, N=3, K=4)[0]))  # doctest: +ELLIPSIS
    # from tvm.script import tirx as T
    <BLANKLINE>
    @T.prim_func(s_tir=True)
    def gemm(A: T.Buffer((2, 4), "float32"), B: ..., C: T.Buffer((2, 3), "float32")):
        T.func_attr({"global_symbol": "gemm", "tirx.noalias": True, "schedlab.num_outputs": 1})
        for i, j, k in T.grid(2, 3, 4):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

from __future__ import annotations

from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer
from schedlab.ir.dtype import int32
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.stmt import Allocate, LetStmt
from schedlab.script import _print_stmt as PS
from schedlab.script import names as N
from schedlab.script import printer as _printer
from schedlab.script._print_expr import ExprPrinter, is_zero, string_text
from schedlab.script._scan import buffer_vars, scan_function

from .errors import TVMExportError

__all__ = ["to_tvm_script", "TIR_HEADER", "IR_HEADER"]

TIR_HEADER = "# from tvm.script import tirx as T"
IR_HEADER = "# from tvm.script import ir as I"
PRIM_FUNC = "@T.prim_func(s_tir=True)"

# statement heads renamed in TVM 0.27 (the printer starts every statement on its own line)
_HEADS = (
    (f"with T.{N.BLOCK}(", "with T.sblock("),
    (f"T.{N.BLOCK_ATTR}(", "T.sblock_attr("),
)
# attribute namespaces renamed in TVM 0.27 ("tir.noalias" -> "tirx.noalias")
_ATTR_PREFIXES = (("tir.", "tirx."),)


def to_tvm_script(node: PrimFunc | IRModule, *, show_header: bool = True) -> str:
    """`node` (a PrimFunc or an IRModule of PrimFuncs) as TVMScript for
    `tvm.script.from_source`: a PrimFunc reads back as a `tvm.tirx.PrimFunc`, a module as a
    `tvm.IRModule`, structurally equal to what TVM's own schedule makes of the same function
    and trace.

    The header is a comment, as in TVM's own printing (TVM's parser knows `T` and `I` and
    refuses import statements). Raises TVMExportError for lowered IR (allocations, let
    statements) and for nodes that are neither a PrimFunc nor an IRModule."""
    if isinstance(node, PrimFunc):
        lines = _function(node, None)
        return "\n".join(([TIR_HEADER, ""] if show_header else []) + lines)
    if isinstance(node, IRModule):
        return _module(node, show_header)
    raise TVMExportError(
        f"to_tvm_script: expected a PrimFunc or an IRModule, got {type(node).__name__}"
    )


def _module(module: IRModule, show_header: bool) -> str:
    lines = [IR_HEADER, TIR_HEADER, ""] if show_header else []
    lines += ["@I.ir_module", "class Module:"]
    for k, (name, func) in enumerate(module.items()):
        if not isinstance(func, PrimFunc):
            raise TVMExportError(
                f"to_tvm_script: function {name!r} is a {type(func).__name__}; only PrimFuncs "
                "(loop IR) are exported"
            )
        if k:
            lines.append("")
        lines += ["    " + line if line else line for line in _function(func, name)]
    return "\n".join(lines)


def _function(func: PrimFunc, name: str | None) -> list[str]:
    """The lines of one `@T.prim_func(s_tir=True)`: schedlab's layout (see
    `schedlab.script.printer`), but a buffer parameter is written `X: T.Buffer(...)` only when
    the variables of its shape are parameters before it (TVM's parser reads parameters in
    order); the others become a `T.handle` and a `T.match_buffer` in the body."""
    _check_unlowered(func)
    p = _TVMStmtPrinter()
    func = func.replace(attrs={_attr_key(k): v for k, v in func.attrs.items()})
    scan = scan_function(func)
    params, matched = _params(func, p)
    name = N.sanitize_name(name or func.attrs.get("global_symbol", "main"))
    p.lines = [PRIM_FUNC, f"def {name}({', '.join(params)}):"]
    p.depth = 1
    if func.attrs:
        p.line(f"T.{N.FUNC_ATTR}({p.ex.literal(func.attrs)})")
    p.declare_vars(scan.free_vars())
    for param, buffer in matched:
        args = p.buffer_args(buffer)
        p.line(f"{p.namer.buffer(buffer)} = T.{N.MATCH_BUFFER}({p.namer.lookup(param)}, {args})")
    p.declare_buffers(scan.free_buffers(), {id(b.data) for b in scan.defined_buffers.values()})
    body = func.body
    root = _printer._implicit_root(body)
    if root is not None:
        for buffer in root.alloc_buffers:
            p.alloc_buffer(buffer)
        body = root.body
    p.stmts(body)
    return p.lines


def _params(func: PrimFunc, p: _TVMStmtPrinter) -> tuple[list[str], list]:
    texts, matched, before = [], [], set()
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            texts.append(f"{p.namer.define(param, param.name)}: {p.var_type(param)}")
        elif all(id(v) in before for v in buffer_vars(buffer)):
            texts.append(f"{p.namer.buffer(buffer)}: T.{N.BUFFER}({p.buffer_args(buffer)})")
        else:
            p.namer.define(buffer, buffer.name)
            hint = param.name if param.name != buffer.name else f"var_{buffer.name}"
            texts.append(f"{p.namer.define(param, hint)}: T.handle")
            matched.append((param, buffer))
        before.add(id(param))
    return texts, matched


def _attr_key(key):
    for old, new in _ATTR_PREFIXES:
        if isinstance(key, str) and key.startswith(old):
            return new + key[len(old) :]
    return key


def _check_unlowered(func: PrimFunc) -> None:
    """Refuse what TVM 0.27 spells differently and this printer does not write: allocations
    (lowered IR) and let bindings (TVM's `T.let` / `T.Bind` forms)."""
    from schedlab.ir.functor import post_order_visit

    found = []

    def visit(node):
        if isinstance(node, (Allocate, LetStmt, E.Let)) and not found:
            found.append(node)

    post_order_visit(func.body, visit)
    if not found:
        return
    if isinstance(found[0], Allocate):
        what = "an Allocate (lowered IR); export it before lowering, as its schedule sees it"
    else:
        name = found[0].var.name
        what = f"a let binding of {name} ({type(found[0]).__name__}), which TVM 0.27 spells "
        what += "differently; inline the value or give it a buffer"
    raise TVMExportError(f"to_tvm_script: the function holds {what}")


class _TVMExprPrinter(ExprPrinter):
    """Expressions: the same text, but intrinsics called by name through T.call_intrin use
    TVM's op names (`tirx.exp`)."""

    def _Call(self, call: E.Call) -> tuple[str, int]:
        text, prec = super()._Call(call)
        prefix = f"T.{N.CALL_INTRIN}({string_text(str(call.dtype))}, {string_text(call.op)}"
        if text.startswith(prefix):
            op = string_text(f"tirx.{call.op}")
            text = f"T.{N.CALL_INTRIN}({string_text(str(call.dtype))}, {op}" + text[len(prefix) :]
        return text, prec


class _TVMStmtPrinter(PS.StmtPrinter):
    def __init__(self):
        super().__init__(4, ())
        self.ex = _TVMExprPrinter(self.namer)
        self.views: set[int] = set()  # ids of buffers matched to a region in a block

    def line(self, text: str) -> None:
        for old, new in _HEADS:
            if text.startswith(old):
                text = new + text[len(old) :]
                break
        super().line(text)

    def alloc_buffer(self, buffer: Buffer) -> None:
        args = self.buffer_args(buffer)
        self.line(f"{self.namer.buffer(buffer)} = T.sblock_alloc_buffer({args})")
        self.flush_pending(buffer)

    def _block(self, block, values, predicate) -> None:
        self.views.update(id(match.buffer) for match in block.match_buffers)
        super()._block(block, values, predicate)

    def buffer_args(self, buffer: Buffer) -> str:
        """As schedlab prints them, with TVM's keyword `align` for the data alignment.

        A view matched to a region (`T.match_buffer` in a block) is placed by the region alone
        in schedlab. TVM binds a view's elem_offset and strides to the region only where they
        are variables (constants are constraints), so such a view gets `offset_factor`, which
        makes TVM create its elem_offset variable, and named strides when it has several
        dimensions (a one-dimensional view lines up with the region's last dimension)."""
        text = self._buffer_args(buffer)
        if id(buffer) in self.views and not buffer.strides and is_zero(buffer.elem_offset):
            name = self.namer.lookup(buffer) or buffer.name
            if buffer.ndim > 1:
                strides = ", ".join(string_text(f"{name}_s{k}") for k in range(buffer.ndim))
                text += f", strides=({strides})"
            if buffer.offset_factor == 1:  # printed only when it is not 1
                text += ", offset_factor=1"
        return text

    def _buffer_args(self, buffer: Buffer) -> str:
        parts = [self.tuple_text(buffer.shape), string_text(str(buffer.dtype))]
        owner = self.namer.data_owner.get(id(buffer.data))
        if owner is not None and owner is not buffer:
            parts.append(f"data={self.namer.lookup(owner)}.data")
        elif owner is None and self.namer.lookup(buffer.data) is not None:
            parts.append(f"data={self.namer.lookup(buffer.data)}")
        if buffer.strides:
            parts.append(f"strides={self.tuple_text(buffer.strides)}")
        if not is_zero(buffer.elem_offset, int32):
            parts.append(f"elem_offset={self.ex(buffer.elem_offset)}")
        if buffer.scope != "global":
            parts.append(f"scope={string_text(buffer.scope)}")
        if buffer.data_alignment != 64:
            parts.append(f"align={buffer.data_alignment}")
        if buffer.offset_factor != 1:
            parts.append(f"offset_factor={buffer.offset_factor}")
        if buffer.axis_separators:
            parts.append(f"axis_separators={list(buffer.axis_separators)}")
        return ", ".join(parts)
