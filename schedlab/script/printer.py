"""The TVMScript-style printer: `script(node)` turns loop IR into Python-syntax text.

    # from schedlab.script import tir as T

    @T.prim_func
    def gemm(A: T.Buffer((64, 80), "float32"), ...):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True})
        for i, j, k in T.grid(64, 48, 80):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                ...

The text reads back with `schedlab.script.from_source` into a structurally equal function. The
implicit root block is not printed: its buffers print at function level and the parser wraps
the body in a root block again when the body holds a block.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, BufferRegion, MatchBufferRegion
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.node import Node, register_printers
from schedlab.ir.stmt import Block, BlockRealize, Stmt

from . import _print_stmt as PS
from . import names as N
from ._print_expr import expr_text
from ._scan import buffer_vars, scan_function, scan_node

__all__ = ["script", "expr_text", "to_html"]

T, I = N.TIR_ALIAS, N.IR_ALIAS  # noqa: E741 - TVMScript's namespace names
TIR_HEADER = f"# from schedlab.script import tir as {T}"
IR_HEADER = f"# from schedlab.script import ir as {I}"


def script(
    node: Node,
    *,
    show_header: bool = True,
    indent_spaces: int = 4,
    print_line_numbers: bool = False,
    underline: Iterable[Node] = (),
) -> str:
    """Print `node` (PrimFunc, IRModule, statement, expression, buffer, region) as text.

    `show_header` adds the `# from schedlab.script import tir as T` comment; `underline` marks
    the lines of the given loops/blocks with `^^^` (for error messages; the marked text no
    longer parses); `print_line_numbers` prefixes each line with its number.
    """
    from . import relax_printer  # graph-IR nodes and modules holding graph functions

    if relax_printer.is_graph_module(node) or _is_graph_node(node):
        return relax_printer.script(node, show_header=show_header, indent_spaces=indent_spaces)
    printer = PS.StmtPrinter(indent_spaces, underline)
    if isinstance(node, IRModule):
        lines = _module(node, printer, show_header)
    elif isinstance(node, PrimFunc):
        lines = ([TIR_HEADER, ""] if show_header else []) + _function(node, printer, None)
    elif isinstance(node, E.PrimExpr):
        return printer.ex.expr(node)
    elif isinstance(node, Stmt):
        lines = ([TIR_HEADER] if show_header else []) + _statement(node, printer)
    else:
        return _other(node, printer)
    if print_line_numbers:
        width = len(str(len(lines)))
        lines = [f"{k:>{width}} {line}".rstrip() for k, line in enumerate(lines, 1)]
    return "\n".join(lines)


def script_lines(func: PrimFunc, *, show_header: bool = False) -> tuple[str, dict[int, int]]:
    """`func` printed as `script` does, plus the 1-based line of each loop's and block's header
    keyed by uid (the loops of one `T.grid` share its line): explorer views link text to the
    IR with it."""
    printer = PS.StmtPrinter(4, ())
    lines = ([TIR_HEADER, ""] if show_header else []) + _function(func, printer, None)
    offset = len(lines) - len(printer.lines)  # lines printed before the printer's own
    return "\n".join(lines), {uid: k + offset + 1 for uid, k in printer.node_lines.items()}


def _is_graph_node(node) -> bool:
    from schedlab.relax.expr import is_graph_node

    return is_graph_node(node)


def to_html(node: Node) -> str:
    """The printed text as HTML for notebooks: highlighted by pygments when it is installed
    (inline styles, no CSS needed), else an escaped `<pre>` block."""
    try:
        text = node.script() if hasattr(node, "script") else str(node)
    except Exception as err:  # a notebook cell must still show something
        text = f"# cannot print {type(node).__name__}: {err}"
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return f'<pre class="schedlab-script">{html.escape(text)}</pre>'
    formatter = HtmlFormatter(noclasses=True, style="default", cssclass="schedlab-script")
    return highlight(text, PythonLexer(), formatter)


# ---------------------------------------------------------------------------------------------
# modules and functions
# ---------------------------------------------------------------------------------------------
def _module(module: IRModule, printer: PS.StmtPrinter, show_header: bool) -> list[str]:
    lines = [IR_HEADER, TIR_HEADER, ""] if show_header else []
    lines += [f"@{I}.{N.IR_MODULE}", "class Module:"]
    pad = " " * printer.indent_spaces
    if module.attrs:
        lines.append(f"{pad}{I}.{N.MODULE_ATTRS}({printer.ex.literal(module.attrs)})")
    for k, (name, func) in enumerate(module.items()):
        if k or module.attrs:
            lines.append("")
        if not isinstance(func, PrimFunc):
            raise TypeError(f"script: cannot print function {name!r} of type {type(func)}")
        fresh = PS.StmtPrinter(printer.indent_spaces, printer.marked)
        lines += [pad + line if line else line for line in _function(func, fresh, name)]
    if len(module) == 0 and not module.attrs:
        lines.append(f"{pad}pass")
    return lines


def _function(func: PrimFunc, p: PS.StmtPrinter, name: str | None) -> list[str]:
    """Lines of one `@T.prim_func` (without the header comment)."""
    scan = scan_function(func)
    params, matched = _params(func, p)
    name = N.sanitize_name(name or func.attrs.get("global_symbol", "main"))
    p.lines = [f"@{T}.{N.PRIM_FUNC}", f"def {name}({', '.join(params)}):"]
    p.depth = 1
    if func.attrs:
        p.line(f"{T}.{N.FUNC_ATTR}({p.ex.literal(func.attrs)})")
    free_buffers = scan.free_buffers()
    p.declare_vars(scan.free_vars())
    for param, buffer in matched:
        args = p.buffer_args(buffer)
        p.line(f"{p.namer.buffer(buffer)} = {T}.{N.MATCH_BUFFER}({p.namer.lookup(param)}, {args})")
    p.declare_buffers(free_buffers, {id(b.data) for b in scan.defined_buffers.values()})
    body = func.body
    root = _implicit_root(body)
    if root is not None:
        for buffer in root.alloc_buffers:
            p.alloc_buffer(buffer)
        body = root.body
    p.stmts(body)
    return p.lines


def _params(func: PrimFunc, p: PS.StmtPrinter) -> tuple[list[str], list]:
    """Parameter texts; buffers whose shape needs variables declared in the body come back as
    `(param, buffer)` pairs to print as `T.match_buffer` (the parameter is then a handle)."""
    param_ids = {id(param) for param in func.params}
    texts, matched = [], []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            name = p.namer.define(param, param.name)
            texts.append(f"{name}: {p.var_type(param)}")
        elif all(id(v) in param_ids for v in buffer_vars(buffer)):
            args = p.buffer_args(buffer)
            texts.append(f"{p.namer.buffer(buffer)}: {T}.{N.BUFFER}({args})")
        else:
            p.namer.define(buffer, buffer.name)
            hint = param.name if param.name != buffer.name else f"var_{buffer.name}"
            texts.append(f"{p.namer.define(param, hint)}: {T}.handle")
            matched.append((param, buffer))
    return texts, matched


def _implicit_root(body: Stmt) -> Block | None:
    """The root block when it can be left implicit (the parser restores exactly it)."""
    if not isinstance(body, BlockRealize) or body.iter_values:
        return None
    block = body.block
    plain = (
        block.name_hint == N.ROOT_BLOCK
        and not (block.iter_vars or block.reads or block.writes or block.match_buffers)
        and block.init is None
        and not block.annotations
        and PS.is_true(body.predicate)
    )
    if not plain or PS.is_root_like(block.body):
        return None
    if block.alloc_buffers or PS.contains_block(block.body):
        return block
    return None


# ---------------------------------------------------------------------------------------------
# statements and other nodes
# ---------------------------------------------------------------------------------------------
def _statement(stmt: Stmt, p: PS.StmtPrinter) -> list[str]:
    """A statement with declarations of the buffers and variables it uses but does not bind."""
    scan = scan_node(stmt)
    p.lines, p.depth = [], 0
    p.declare_vars(scan.free_vars())
    p.declare_buffers(scan.free_buffers(), {id(b.data) for b in scan.defined_buffers.values()})
    p.stmts(stmt)
    return p.lines


def _other(node: Node, p: PS.StmtPrinter) -> str:
    if isinstance(node, Buffer):
        return f"{p.namer.buffer(node)} = {T}.{N.BUFFER}({p.buffer_args(node)})"
    if isinstance(node, BufferRegion):
        return p.region(node)
    if isinstance(node, MatchBufferRegion):
        args = p.buffer_args(node.buffer)
        text = f"{T}.{N.MATCH_BUFFER}({p.region(node.source)}, {args})"
        return f"{p.namer.buffer(node.buffer)} = {text}"
    if isinstance(node, E.Range):
        start, stop = p.range_bounds(node.min, node.extent)
        return f"{start}:{stop}"
    if hasattr(node, "iter_type") and hasattr(node, "dom"):
        return p.axis_text(node, None)
    return f"{type(node).__name__}(...)"


register_printers(script=script, html=to_html, expr=expr_text)
