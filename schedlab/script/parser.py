"""The safe parser: `from_source(text)` reads the printed text form back into loop IR.

The text is parsed with Python's `ast` module and never executed: only the vocabulary of the
`T` and `I` namespaces is understood, and anything else (an unknown name, `__import__(...)`, a
`while` loop) is a `ScriptError` with the 1-based line and column of the problem.

    func = from_source(gemm.script())
    assert_structural_equal(func, gemm)
"""

from __future__ import annotations

import ast
import inspect
import io
import textwrap
import tokenize

from schedlab.errors import ScriptError
from schedlab.ir import expr as E
from schedlab.ir.dtype import bool_
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.stmt import Block, BlockRealize

from . import names as N
from ._parse_frame import buffer_call
from ._parse_stmt import FuncFrame, StmtParser
from ._scan import contains_block, is_root_like

__all__ = ["from_source", "parse_object"]


def from_source(text: str) -> PrimFunc | IRModule:
    """Parse script text holding one `@T.prim_func` function (-> PrimFunc) or one
    `@I.ir_module` class (-> IRModule). Raises ScriptError on malformed text."""
    if not isinstance(text, str):
        raise TypeError(f"from_source: expected the script text as a str, got {type(text)}")
    return _parse(_Source(text))


def parse_object(obj) -> PrimFunc | IRModule:
    """Parse the source of a Python function or class (for the `@T.prim_func` and
    `@I.ir_module` decorators). Errors name lines and columns of the file it came from."""
    try:
        lines, start = inspect.getsourcelines(obj)
        filename = inspect.getsourcefile(obj)
    except (OSError, TypeError) as err:
        raise ScriptError(
            f"cannot read the source of {getattr(obj, '__qualname__', obj)!r} ({err}); "
            "pass the text to schedlab.script.from_source instead"
        ) from None
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    first = lines[0]
    indent = len(first) - len(first.lstrip()) - (len(text) - len(text.lstrip()))
    source = _Source(text, start - 1, max(indent, 0), filename, [ln.rstrip("\n") for ln in lines])
    return _parse(source)


class _Source:
    """The text being parsed and how to report a position in it."""

    def __init__(self, text, line_offset=0, indent=0, filename=None, display_lines=None):
        self.text = text
        self.lines = text.splitlines()
        self.line_offset = line_offset
        self.indent = indent
        self.filename = filename
        self.display_lines = display_lines or self.lines

    def error(self, node: ast.AST | None, message: str) -> ScriptError:
        line = getattr(node, "lineno", None)
        if line is None:
            return self._finish(ScriptError(message))
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        column = len(text.encode()[: node.col_offset].decode("utf-8", "replace")) + 1
        return self._at(message, line, column)

    def _at(self, message: str, line: int, column: int) -> ScriptError:
        shown = self.display_lines[line - 1] if 0 < line <= len(self.display_lines) else None
        column += self.indent
        return self._finish(ScriptError(message, line + self.line_offset, column, shown))

    def _finish(self, err: ScriptError) -> ScriptError:
        err.filename = self.filename
        return err

    def syntax_error(self, err: SyntaxError) -> ScriptError:
        message = err.msg if err.msg.startswith("invalid syntax") else f"invalid syntax: {err.msg}"
        return self._at(message, err.lineno or 1, err.offset or 1)

    def too_deep(self) -> ScriptError:
        """The error for text nested too deeply to read, at the expression most likely to blame."""
        message = (
            "this expression is nested too deeply (or chains too many operators) to be read; "
            "write it in smaller parts"
        )
        where = largest_group(self.text)
        return self._at(message, *where) if where else self._finish(ScriptError(message))


def largest_group(text: str) -> tuple[int, int] | None:
    """(line, column), 1-based, of the first token of the bracketed group or logical line that
    holds the most tokens: where a too-long or too-deep expression starts. The tokenizer is not
    recursive, so this works on text that `ast.parse` cannot build. None when it cannot tell."""
    best, best_start = 0, None
    groups: list[list] = [[None, 0]]  # open groups, the logical line first: [start, tokens]

    def close(group: list) -> None:
        nonlocal best, best_start
        if group[1] > best:
            best, best_start = group[1], group[0]

    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                continue
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                for group in groups:
                    close(group)
                groups = [[None, 0]]
                continue
            is_op = tok.type == tokenize.OP
            if is_op and tok.string in ")]}" and len(groups) > 1:
                close(groups.pop())  # the bracket itself counts in the enclosing group
            group = groups[-1]
            group[0] = group[0] or tok.start
            group[1] += 1
            if is_op and tok.string in "([{":
                groups.append([None, 0])
    except (tokenize.TokenError, SyntaxError):
        pass
    return None if best_start is None else (best_start[0], best_start[1] + 1)


def _parse(source: _Source) -> PrimFunc | IRModule:
    # a long operator chain (`n + n + ...`) is as deep as it is long for Python's `ast` and for
    # the recursive readers here: both give up with a bare RecursionError that says nowhere
    try:
        tree = ast.parse(source.text)
    except SyntaxError as err:
        raise source.syntax_error(err) from None
    except ValueError as err:  # e.g. null bytes
        raise ScriptError(f"invalid script text: {err}") from None
    except RecursionError:
        raise source.too_deep() from None
    try:
        if uses_relax(tree):  # graph functions have their own parser, loaded only for them
            from . import relax_parser

            return relax_parser.RelaxParser(source).top_level(tree)
        return Parser(source).top_level(tree)
    except RecursionError:
        raise source.too_deep() from None


def uses_relax(tree: ast.Module) -> bool:
    """Whether the text holds graph functions (an `@R.function` or an import of `R`). Decided
    here, on the syntax alone: loop-IR text never imports the graph IR, whose import builds
    kernels with `@T.prim_func` (the built-in intrinsics) and so parses text itself."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if f"{node.module}.{node.names[0].name}" in N.R_MODULES:
                return True
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if isinstance(target, ast.Attribute) and target.attr == "function":
                    return True
    return False


class Parser(StmtParser):
    """Top level, modules and functions; statements and expressions live in the base classes."""

    def top_level(self, tree: ast.Module) -> PrimFunc | IRModule:
        found = None
        for k, node in enumerate(tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node)
            elif k == 0 and _is_docstring(node):
                continue
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                if found is not None:
                    raise self.fail(
                        node, "expected one function; put several in `@I.ir_module class Module:`"
                    )
                found = node
            else:
                raise self.fail(node, "expected a @T.prim_func function or an @I.ir_module class")
        if found is None:
            raise self.fail(None, "no @T.prim_func function or @I.ir_module class in the text")
        if isinstance(found, ast.ClassDef):
            return self.module(found)
        return self.function(found)

    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        """`from schedlab.script import tir as T` names the namespaces; nothing is imported."""
        for alias in node.names:
            if isinstance(node, ast.ImportFrom):
                if node.module == "__future__":
                    continue
                full = f"{node.module}.{alias.name}"
            else:
                full = alias.name
            bound = alias.asname or alias.name
            if full in N.TIR_MODULES:
                self.tir_aliases.add(bound)
            elif full in N.IR_MODULES:
                self.ir_aliases.add(bound)
            else:
                raise self.fail(
                    node, f"script text may only import the T and I namespaces, not {full}"
                )

    def decorator(self, node: ast.FunctionDef | ast.ClassDef, expected: str) -> None:
        """Check the `@T.prim_func` / `@I.ir_module` decorator (its alias becomes known)."""
        if len(node.decorator_list) != 1:
            what = "@T.prim_func" if expected == N.PRIM_FUNC else "@I.ir_module"
            raise self.fail(node, f"{node.name} needs exactly one decorator: {what}")
        deco = node.decorator_list[0]
        target = deco.func if isinstance(deco, ast.Call) else deco
        if not (isinstance(target, ast.Attribute) and target.attr == expected):
            raise self.fail(deco, f"unknown decorator {ast.unparse(deco)!r}")
        if isinstance(target.value, ast.Name):
            aliases = self.tir_aliases if expected == N.PRIM_FUNC else self.ir_aliases
            aliases.add(target.value.id)
        if isinstance(deco, ast.Call):
            for keyword in deco.keywords:
                if keyword.arg not in ("private", "check_well_formed"):
                    raise self.fail(keyword, f"unexpected decorator argument {keyword.arg!r}")
            if deco.args:
                raise self.fail(deco, "the decorator takes keyword arguments only")

    # -- modules --------------------------------------------------------------------------------
    def module(self, node: ast.ClassDef) -> IRModule:
        self.decorator(node, N.IR_MODULE)
        if node.bases or node.keywords:
            raise self.fail(node, "an @I.ir_module class has no base classes")
        functions, attrs = {}, {}
        for k, item in enumerate(node.body):
            if k == 0 and _is_docstring(item):
                continue
            if isinstance(item, ast.FunctionDef):
                if item.name in functions:
                    raise self.fail(item, f"function {item.name} is defined twice")
                functions[item.name] = self.function(item)
            elif isinstance(item, ast.Expr) and self.path(getattr(item.value, "func", None)) == (
                f"ir.{N.MODULE_ATTRS}"
            ):
                attrs = self.module_attrs(item.value)
            elif not isinstance(item, ast.Pass):
                raise self.fail(item, "an @I.ir_module class holds @T.prim_func functions only")
        return IRModule(functions, attrs)

    def module_attrs(self, call: ast.Call) -> dict:
        if len(call.args) != 1 or call.keywords:
            raise self.fail(call, "I.module_attrs takes one dict")
        attrs = self.literal(call.args[0])
        if not isinstance(attrs, dict):
            raise self.fail(call.args[0], "I.module_attrs takes a dict")
        return attrs

    # -- functions ------------------------------------------------------------------------------
    def function(self, node: ast.FunctionDef) -> PrimFunc:
        self.decorator(node, N.PRIM_FUNC)
        self.scopes, self.loop_ranges, self.weak = [{}], {}, {}
        params = self.params(node)
        frame = FuncFrame(params)
        frame.buffer_map.update(self._param_buffers)
        nodes = node.body[1:] if _is_docstring(node.body[0]) else node.body
        body = self.body(nodes, frame)
        if (frame.allocs or contains_block(body)) and not (is_root_like(body) and not frame.allocs):
            root = Block((), (), (), N.ROOT_BLOCK, body, alloc_buffers=tuple(frame.allocs))
            body = BlockRealize((), E.IntImm(bool_, 1), root)
        return self.build(node, PrimFunc, tuple(params), body, frame.buffer_map, frame.attrs or {})

    def params(self, node: ast.FunctionDef) -> list[E.Var]:
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.fail(node, "parameters are plain names with a type annotation")
        pending: dict[int, tuple] = {}
        params = [self.param(arg, pending) for arg in args.args]
        self._param_buffers = {}
        for var in params:  # buffers after scalars, so shapes may use any scalar parameter
            if id(var) in pending:
                arg, note = pending[id(var)]
                buffer, _ = buffer_call(self, note, arg.arg, N.BUFFER)
                self.define(arg.arg, buffer)
                self._param_buffers[var] = buffer
        return params


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )
