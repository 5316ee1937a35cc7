"""The text form of the graph IR (TVMScript Relax style), read back by `relax_parser`.

    @R.function
    def main(x: R.Tensor((n, 4), dtype="float32")) -> R.Tensor((n, 4), dtype="float32"):
        n = T.int32()
        with R.dataflow():
            lv: R.Tensor((n, 4), dtype="float32") = R.call_tir(cls.add, (x, x), out_sinfo=...)
            gv: R.Tensor((n, 4), dtype="float32") = lv
            R.output(gv)
        return gv

Symbolic dimensions are declared at the top of the function (`n = T.int32(is_size_var=True)`
for a SizeVar, `n = T.int32()` for a plain Var, as in the loop-IR text). Constants print
inline as `R.const(<nested list>, "dtype")`. An IRModule prints its PrimFuncs with the
loop-IR printer, in the same class.
"""

from __future__ import annotations

import json
import keyword
import math

from schedlab.ir import expr as E
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import post_order_visit
from schedlab.relax import expr as X
from schedlab.relax import struct_info as S

from . import _print_stmt as PS
from . import names as N
from ._print_expr import expr_text

R_ALIAS = "R"
R_HEADER = f"# from schedlab.relax import {R_ALIAS}"
HEADERS = [f"# from schedlab.script import ir as {N.IR_ALIAS}",
           f"# from schedlab.script import tir as {N.TIR_ALIAS}", R_HEADER]  # fmt: skip
CALL_TIR = "relax.call_tir"
_RESERVED = frozenset({R_ALIAS, N.TIR_ALIAS, N.IR_ALIAS, "cls", "float"})


def is_graph_module(node) -> bool:
    """Whether `node` is an IRModule holding at least one graph function."""
    return isinstance(node, IRModule) and any(isinstance(f, X.Function) for _, f in node.items())


def script(node, *, show_header: bool = True, indent_spaces: int = 4, **_ignored) -> str:
    """Print a graph-IR module, function, expression or struct info."""
    pad = " " * indent_spaces
    if isinstance(node, IRModule):
        lines = _module(node, pad)
    elif isinstance(node, X.Function):
        lines = _function(node, node.attrs.get("global_symbol", "main"), pad)
    elif isinstance(node, S.StructInfo):
        return sinfo_text(node, _Names())
    elif isinstance(node, X.Expr):
        return _Printer(pad).expr(node)
    elif isinstance(node, X.BindingBlock):
        return "\n".join(_Printer(pad).block_lines(node, 0))
    else:
        return "\n".join(_Printer(pad).binding_lines(node, 0))
    return "\n".join((HEADERS + [""] if show_header else []) + lines)


def _module(module: IRModule, pad: str) -> list[str]:
    lines = [f"@{N.IR_ALIAS}.{N.IR_MODULE}", "class Module:"]
    if module.attrs:
        lines.append(f"{pad}{N.IR_ALIAS}.{N.MODULE_ATTRS}({literal(module.attrs)})")
    for k, (name, func) in enumerate(module.items()):
        if k or module.attrs:
            lines.append("")
        if isinstance(func, PrimFunc):
            from .printer import _function as prim_function

            inner = prim_function(func, PS.StmtPrinter(len(pad), ()), name)
        elif isinstance(func, X.Function):
            inner = _function(func, name, pad)
        else:
            raise TypeError(f"script: cannot print function {name!r} of type {type(func)}")
        lines += [pad + line if line else line for line in inner]
    return lines


def _function(func: X.Function, name: str, pad: str) -> list[str]:
    p = _Printer(pad)
    params = [f"{p.names.define(v)}: {sinfo_text(v.struct_info_, p.names)}" for v in func.params]
    ret = sinfo_text(func.ret_struct_info, p.names)
    lines = [f"@{R_ALIAS}.function", f"def {N.sanitize_name(name)}({', '.join(params)}) -> {ret}:"]
    for var in _symbolic_vars(func):
        size = "is_size_var=True" if isinstance(var, E.SizeVar) else ""
        kind = f"{N.TIR_ALIAS}.{var.dtype}({size})"
        lines.append(f"{pad}{var.name} = {kind}")
    if func.attrs:
        lines.append(f"{pad}{R_ALIAS}.func_attr({literal(func.attrs)})")
    body = func.body if isinstance(func.body, X.SeqExpr) else X.SeqExpr((), func.body)
    for block in body.blocks:
        lines += p.block_lines(block, 1)
    lines.append(f"{pad}return {p.expr(body.body)}")
    return lines


def _symbolic_vars(func: X.Function) -> list[E.Var]:
    """Loop-IR variables used in the function (symbolic dims), in order of first use."""
    found: dict[int, E.Var] = {}

    def record(node):
        if isinstance(node, E.Var):
            found.setdefault(id(node), node)

    post_order_visit(func, record)
    return list(found.values())


class _Names:
    """Unique names for graph variables within one function."""

    def __init__(self):
        self.by_id: dict[int, str] = {}
        self.used: set[str] = set()

    def define(self, var: X.Var) -> str:
        base = N.sanitize_name(var.name_hint or "v")
        if keyword.iskeyword(base) or base in _RESERVED:
            base += "_"
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        self.by_id[id(var)] = name
        return name

    def get(self, var: X.Var) -> str:
        return self.by_id.get(id(var)) or N.sanitize_name(var.name_hint)


class _Printer:
    def __init__(self, pad: str):
        self.pad = pad
        self.names = _Names()

    # -- blocks and bindings --------------------------------------------------------------------
    def block_lines(self, block: X.BindingBlock, depth: int) -> list[str]:
        if not isinstance(block, X.DataflowBlock):
            return [line for b in block.bindings for line in self.binding_lines(b, depth)]
        lines = [f"{self.pad * depth}with {R_ALIAS}.dataflow():"]
        for binding in block.bindings:
            lines += self.binding_lines(binding, depth + 1)
        outputs = [self.names.get(b.var) for b in block.bindings if type(b.var) is X.Var]
        lines.append(f"{self.pad * (depth + 1)}{R_ALIAS}.output({', '.join(outputs)})")
        return lines

    def binding_lines(self, binding, depth: int) -> list[str]:
        indent = self.pad * depth
        if isinstance(binding, X.MatchCast):
            value = self.expr(binding.value)
            target = sinfo_text(binding.struct_info, self.names)
            rhs = f"{R_ALIAS}.match_cast({value}, {target})"
        elif isinstance(binding, X.VarBinding):
            if isinstance(binding.value, X.If):
                return self.if_lines(binding, depth)
            rhs = self.expr(binding.value)
        else:
            raise TypeError(f"script: cannot print binding {type(binding).__name__}")
        name = self.names.define(binding.var)
        return [f"{indent}{name}: {sinfo_text(binding.var.struct_info_, self.names)} = {rhs}"]

    def if_lines(self, binding: X.VarBinding, depth: int) -> list[str]:
        """`if cond:` with each branch's bindings, ending in `var = value` (TVM's form)."""
        node, indent = binding.value, self.pad * depth
        lines = [f"{indent}if {self.expr(node.cond)}:"]
        name = None
        for k, branch in enumerate((node.true_branch, node.false_branch)):
            if k:
                lines.append(f"{indent}else:")
            seq = branch if isinstance(branch, X.SeqExpr) else X.SeqExpr((), branch)
            for block in seq.blocks:
                lines += self.block_lines(block, depth + 1)
            name = name or self.names.define(binding.var)
            sinfo = sinfo_text(binding.var.struct_info_, self.names)
            lines.append(f"{indent}{self.pad}{name}: {sinfo} = {self.expr(seq.body)}")
        return lines

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, node: X.Expr) -> str:
        method = getattr(self, f"_x_{type(node).__name__}", None)
        if method is None:
            raise TypeError(f"script: cannot print {type(node).__name__} as an expression")
        return method(node)

    def _x_Var(self, node: X.Var) -> str:
        return self.names.get(node)

    _x_DataflowVar = _x_Var

    def _x_GlobalVar(self, node: X.GlobalVar) -> str:
        return f"cls.{N.sanitize_name(node.name_hint)}"

    def _x_Constant(self, node: X.Constant) -> str:
        return f'{R_ALIAS}.const({literal(node.data.tolist())}, "{node.data.dtype}")'

    def _x_Tuple(self, node: X.Tuple) -> str:
        if not node.fields:
            return f"{R_ALIAS}.tuple()"
        items = [self.expr(f) for f in node.fields]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"

    def _x_TupleGetItem(self, node: X.TupleGetItem) -> str:
        return f"{self.expr(node.tuple_value)}[{node.index}]"

    def _x_ShapeExpr(self, node: X.ShapeExpr) -> str:
        return f"{R_ALIAS}.shape([{', '.join(expr_text(v) for v in node.values)}])"

    def _x_PrimValue(self, node: X.PrimValue) -> str:
        return f"{R_ALIAS}.prim_value({expr_text(node.value)})"

    def _x_StringImm(self, node: X.StringImm) -> str:
        return f"{R_ALIAS}.str({quote(node.value)})"

    def _x_Call(self, node: X.Call) -> str:
        if isinstance(node.op, X.GlobalVar):
            return f"{self.expr(node.op)}({', '.join(self.expr(a) for a in node.args)})"
        if node.op == CALL_TIR:
            callee, args = node.args[0], self.expr(node.args[1])
            out = sinfo_text(node.sinfo_args[0], self.names)
            return f"{R_ALIAS}.call_tir({self.expr(callee)}, {args}, out_sinfo={out})"
        parts = [self.expr(a) for a in node.args]
        parts += [f"{key}={literal(value)}" for key, value in node.attrs.items()]
        if node.sinfo_args:
            sinfos = ", ".join(sinfo_text(s, self.names) for s in node.sinfo_args)
            parts.append(f"sinfo_args=({sinfos},)")
        if node.op.startswith("relax.") and all(p.isidentifier() for p in node.op.split(".")):
            return f"{R_ALIAS}.{node.op[6:]}({', '.join(parts)})"
        return f"{R_ALIAS}.call({', '.join([quote(node.op), *parts])})"


def sinfo_text(sinfo: S.StructInfo, names: _Names) -> str:
    """`R.Tensor((n, 4), dtype="float32")` and friends."""
    if isinstance(sinfo, S.TensorStructInfo):
        if sinfo.shape is None:
            ndim = f", ndim={sinfo.ndim}" if sinfo.ndim != -1 else ""
            return f'{R_ALIAS}.Tensor(dtype="{sinfo.dtype}"{ndim})'
        dims = [expr_text(d) for d in sinfo.shape]
        shape = f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"
        return f'{R_ALIAS}.Tensor({shape}, dtype="{sinfo.dtype}")'
    if isinstance(sinfo, S.TupleStructInfo):
        return f"{R_ALIAS}.Tuple({', '.join(sinfo_text(f, names) for f in sinfo.fields)})"
    if isinstance(sinfo, S.ShapeStructInfo):
        if sinfo.values is None:
            return f"{R_ALIAS}.Shape(ndim={sinfo.ndim})"
        return f"{R_ALIAS}.Shape([{', '.join(expr_text(v) for v in sinfo.values)}])"
    if isinstance(sinfo, S.PrimStructInfo):
        return f'{R_ALIAS}.Prim("{sinfo.dtype}")'
    if isinstance(sinfo, S.ObjectStructInfo):
        return f"{R_ALIAS}.Object"
    if isinstance(sinfo, S.FuncStructInfo):
        params = ", ".join(sinfo_text(p, names) for p in sinfo.params)
        params = f"({params},)" if len(sinfo.params) == 1 else f"({params})"
        return f"{R_ALIAS}.Callable({params}, {sinfo_text(sinfo.ret, names)})"
    raise TypeError(f"script: cannot print struct info {type(sinfo).__name__}")


def quote(text: str) -> str:
    """A double-quoted Python string literal (JSON escapes are valid Python escapes)."""
    return json.dumps(text)


def literal(value) -> str:
    """Python literal syntax for attribute values and constant data (inf/nan spelled as the
    parser reads them)."""
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    if isinstance(value, (list, tuple)):
        items = [literal(v) for v in value]
        if isinstance(value, list):
            return f"[{', '.join(items)}]"
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, E.PrimExpr):
        return expr_text(value)
    if isinstance(value, str):
        return quote(value)
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if type(value).__module__ == "numpy":
        return literal(value.item() if hasattr(value, "item") else str(value))
    return repr(str(value))
