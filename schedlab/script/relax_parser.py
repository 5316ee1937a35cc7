"""Reading the graph-IR text form (see `relax_printer`) back, with `ast` only: nothing is
executed. `@R.function` functions stand alone or sit in an `@I.ir_module` class beside
`@T.prim_func` functions (parsed by the loop-IR parser this class extends).

    mod = from_source(mod.script())   # schedlab.script.from_source dispatches here
    assert_structural_equal(mod, original)
"""

from __future__ import annotations

import ast

from schedlab.errors import SchedlabError
from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType
from schedlab.ir.function import IRModule
from schedlab.relax import expr as X
from schedlab.relax import struct_info as S

from . import names as N
from .parser import Parser, _is_docstring

CALL_TIR = "relax.call_tir"


class RelaxParser(Parser):
    """The loop-IR parser plus graph functions."""

    def __init__(self, source):
        super().__init__(source)
        self.r_aliases = {"R"}
        self.vars: dict[str, X.Var] = {}
        self.function_names: set[str] = set()

    # -- top level ------------------------------------------------------------------------------
    def imports(self, node: ast.Import | ast.ImportFrom) -> None:
        rest = []
        for alias in node.names:
            module = node.module if isinstance(node, ast.ImportFrom) else None
            full = f"{module}.{alias.name}" if module else alias.name
            if full in N.R_MODULES:
                self.r_aliases.add(alias.asname or alias.name)
            else:
                rest.append(alias)
        if rest:
            kind = type(node)
            extra = {"module": node.module, "level": node.level} if kind is ast.ImportFrom else {}
            super().imports(ast.copy_location(kind(names=rest, **extra), node))

    def top_level(self, tree: ast.Module):
        items = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node)
        items = items[1:] if items and _is_docstring(items[0]) else items
        if len(items) != 1 or not isinstance(items[0], (ast.FunctionDef, ast.ClassDef)):
            raise self.fail(items[1] if len(items) > 1 else None, "expected one function or class")
        found = items[0]
        if isinstance(found, ast.ClassDef):
            return self.module(found)
        return self.any_function(found)

    def module(self, node: ast.ClassDef) -> IRModule:
        self.decorator(node, N.IR_MODULE)
        self.function_names = {i.name for i in node.body if isinstance(i, ast.FunctionDef)}
        functions, attrs = {}, {}
        for k, item in enumerate(node.body):
            if k == 0 and _is_docstring(item):
                continue
            if isinstance(item, ast.FunctionDef):
                if item.name in functions:
                    raise self.fail(item, f"function {item.name} is defined twice")
                functions[item.name] = self.any_function(item)
            elif isinstance(item, ast.Expr) and self.path(getattr(item.value, "func", None)) == (
                f"ir.{N.MODULE_ATTRS}"
            ):
                attrs = self.module_attrs(item.value)
            elif not isinstance(item, ast.Pass):
                raise self.fail(item, "an @I.ir_module class holds functions only")
        return IRModule(functions, attrs)

    def any_function(self, node: ast.FunctionDef):
        if self._is_relax_function(node):
            return self.relax_function(node)
        return self.function(node)

    def _is_relax_function(self, node: ast.FunctionDef) -> bool:
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if self.rpath(target) == "function":
                return True
        return False

    def rpath(self, node: ast.AST | None) -> str | None:
        """`R.nn.relu` -> "nn.relu"; None when not under an R alias."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.r_aliases and parts:
            return ".".join(reversed(parts))
        return None

    # -- graph functions ------------------------------------------------------------------------
    def relax_function(self, node: ast.FunctionDef) -> X.Function:
        if len(node.decorator_list) != 1:
            raise self.fail(node, f"{node.name} needs exactly one decorator: @R.function")
        self.scopes, self.weak, self.vars = [{}], {}, {}
        body = node.body[1:] if _is_docstring(node.body[0]) else node.body
        body = self.symbolic_vars(body)
        params = []
        for arg in self.check_params(node):
            var = X.Var(arg.arg, self.sinfo(arg.annotation))
            self.define_var(arg, var)
            params.append(var)
        ret = self.sinfo(node.returns) if node.returns is not None else None
        attrs, body = self.func_attrs(body)
        seq = self.seq_expr(body, node)
        return self.build(node, X.Function, tuple(params), seq, ret, attrs)

    def check_params(self, node: ast.FunctionDef) -> list[ast.arg]:
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.fail(node, "parameters are plain names with an R.Tensor/... annotation")
        for arg in args.args:
            if arg.annotation is None:
                raise self.fail(arg, f"parameter {arg.arg} needs a struct info annotation")
        return args.args

    def symbolic_vars(self, body: list[ast.stmt]) -> list[ast.stmt]:
        """Declare `n = T.int32(is_size_var=True)` lines (used by the signature already)."""
        rest = []
        for stmt in body:
            call = stmt.value if isinstance(stmt, ast.Assign) else None
            dtype = self.tir_name(getattr(call, "func", None))
            if dtype and N.dtype_from_name(dtype) is not None and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if not isinstance(target, ast.Name) or call.args:
                    raise self.fail(stmt, "declare a symbolic dim as `n = T.int32()`")
                size = any(k.arg == "is_size_var" and self.literal(k.value) for k in call.keywords)
                kind = E.SizeVar if size else E.Var
                self.define(target.id, kind(target.id, DataType(dtype)))
            else:
                rest.append(stmt)
        return rest

    def func_attrs(self, body: list[ast.stmt]) -> tuple[dict, list[ast.stmt]]:
        if (
            body
            and isinstance(body[0], ast.Expr)
            and self.rpath(getattr(body[0].value, "func", None)) == "func_attr"
        ):
            call = body[0].value
            attrs = self.literal(call.args[0]) if len(call.args) == 1 else None
            if not isinstance(attrs, dict):
                raise self.fail(call, "R.func_attr takes one dict")
            return attrs, body[1:]
        return {}, body

    def define_var(self, node: ast.AST, var: X.Var) -> None:
        self.vars[var.name_hint] = var

    def seq_expr(self, body: list[ast.stmt], node: ast.AST) -> X.SeqExpr:
        """Bindings and dataflow blocks, then `return value`."""
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            raise self.fail(body[-1] if body else node, "a graph function ends with `return`")
        blocks, pending = self.blocks(body[:-1])
        if pending:
            blocks.append(X.BindingBlock(tuple(pending)))
        return X.SeqExpr(tuple(blocks), self.rexpr(body[-1].value))

    def blocks(self, body: list[ast.stmt]) -> tuple[list, list]:
        blocks, pending = [], []
        for stmt in body:
            if isinstance(stmt, ast.With):
                if pending:
                    blocks.append(X.BindingBlock(tuple(pending)))
                    pending = []
                blocks.append(self.dataflow(stmt))
            else:
                pending += self.binding(stmt, None)
        return blocks, pending

    def dataflow(self, node: ast.With) -> X.DataflowBlock:
        item = node.items[0] if len(node.items) == 1 else None
        if item is None or self.rpath(getattr(item.context_expr, "func", None)) != "dataflow":
            raise self.fail(node, "the only `with` in a graph function is `with R.dataflow():`")
        last = node.body[-1]
        call = last.value if isinstance(last, ast.Expr) else None
        if self.rpath(getattr(call, "func", None)) != "output":
            raise self.fail(last, "a dataflow block ends with R.output(...)")
        outputs = set()
        for arg in call.args:
            if not isinstance(arg, ast.Name):
                raise self.fail(arg, "R.output takes variable names")
            outputs.add(arg.id)
        bindings = []
        for stmt in node.body[:-1]:
            bindings += self.binding(stmt, outputs)
        return X.DataflowBlock(tuple(bindings))

    def binding(self, stmt: ast.stmt, outputs: set | None) -> list[X.Binding]:
        """`name: sinfo = value`, `name = value` or an `if` (outputs: None outside dataflow)."""
        if isinstance(stmt, ast.If):
            return [self.if_binding(stmt, outputs)]
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, annotation = stmt.target, self.sinfo(stmt.annotation)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, annotation = stmt.targets[0], None
        else:
            raise self.fail(stmt, "expected a binding `name: R.Tensor(...) = value`")
        if not isinstance(target, ast.Name):
            raise self.fail(target, "a binding defines one name")
        kind = X.DataflowVar if outputs is not None and target.id not in outputs else X.Var
        call = stmt.value
        if self.rpath(getattr(call, "func", None)) == "match_cast":
            if len(call.args) != 2:
                raise self.fail(call, "R.match_cast takes a value and a struct info")
            value, cast = self.rexpr(call.args[0]), self.sinfo(call.args[1])
            var = kind(target.id, annotation or cast)
            self.define_var(target, var)
            return [X.MatchCast(var, value, cast)]
        value = self.rexpr(call)
        var = kind(target.id, annotation or self.infer(value, stmt, target.id))
        self.define_var(target, var)
        return [X.VarBinding(var, value)]

    def infer(self, value: X.Expr, node: ast.AST, name: str) -> S.StructInfo:
        try:
            return value.struct_info
        except (SchedlabError, TypeError, ValueError, KeyError) as err:
            raise self.fail(node, f"binding {name!r}: {err}") from None

    def if_binding(self, node: ast.If, outputs: set | None) -> X.VarBinding:
        cond = self.rexpr(node.test)
        branches, var_node = [], None
        for body in (node.body, node.orelse):
            last = body[-1] if body else node
            if not isinstance(last, (ast.Assign, ast.AnnAssign)):
                raise self.fail(last, "each branch of an `if` ends with `name = value`")
            var_node = last.target if isinstance(last, ast.AnnAssign) else last.targets[0]
            blocks, pending = self.blocks(body[:-1])
            if pending:
                blocks.append(X.BindingBlock(tuple(pending)))
            branches.append(X.SeqExpr(tuple(blocks), self.rexpr(last.value)))
            annotation = last.annotation if isinstance(last, ast.AnnAssign) else None
        sinfo = self.sinfo(annotation) if annotation is not None else branches[0].struct_info
        var = X.Var(var_node.id, sinfo)
        self.define_var(var_node, var)
        return X.VarBinding(var, X.If(cond, branches[0], branches[1]))

    # -- expressions ----------------------------------------------------------------------------
    def rexpr(self, node: ast.AST) -> X.Expr:
        """A graph expression."""
        if isinstance(node, ast.Name):
            if node.id not in self.vars:
                known = self._suggest(node.id, self.vars)
                raise self.fail(node, f"unknown graph variable {node.id!r}{known}")
            return self.vars[node.id]
        if isinstance(node, ast.Tuple):
            return X.Tuple(tuple(self.rexpr(item) for item in node.elts))
        if isinstance(node, ast.Subscript):
            index = self.literal(node.slice)
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.fail(node.slice, "a tuple field index is an int")
            return X.TupleGetItem(self.rexpr(node.value), index)
        if isinstance(node, ast.Attribute) and self.global_name(node):
            return X.GlobalVar(self.global_name(node))
        if isinstance(node, ast.Call):
            return self.rcall(node)
        raise self.fail(node, f"unsupported graph expression: {ast.unparse(node)}")

    def global_name(self, node: ast.AST) -> str | None:
        """`cls.name` -> "name" (a function of the module being parsed)."""
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "cls":
                if self.function_names and node.attr not in self.function_names:
                    raise self.fail(node, f"the module has no function {node.attr!r}")
                return node.attr
        return None

    def rcall(self, node: ast.Call) -> X.Expr:
        name = self.global_name(node.func)
        if name is not None:
            return X.Call(X.GlobalVar(name), tuple(self.rexpr(a) for a in node.args))
        path = self.rpath(node.func)
        if path is None:
            raise self.fail(node.func, f"unknown callee {ast.unparse(node.func)!r}")
        method = getattr(self, f"_r_{path}", None)
        if method is not None:
            return method(node)
        if path == "call":
            if not node.args:
                raise self.fail(node, "R.call takes the operator name first")
            return self.op_call(node, self.str_arg(node.args[0], "R.call"), node.args[1:])
        return self.op_call(node, f"relax.{path}", node.args)

    def op_call(self, node: ast.Call, op: str, args: list[ast.AST]) -> X.Call:
        from schedlab.relax.op import get_op

        try:
            get_op(op)
        except KeyError as err:
            raise self.fail(node.func, str(err.args[0])) from None
        attrs, sinfo_args = {}, ()
        for keyword in node.keywords:
            if keyword.arg == "sinfo_args":
                items = keyword.value.elts if isinstance(keyword.value, ast.Tuple) else []
                sinfo_args = tuple(self.sinfo(item) for item in items)
            elif keyword.arg is None:
                raise self.fail(keyword, "keyword unpacking (**) is not supported")
            else:
                attrs[keyword.arg] = self.literal(keyword.value)
        operands = tuple(self.rexpr(a) for a in args)
        return self.build(node, X.Call, op, operands, attrs, sinfo_args)

    def _r_call_tir(self, node: ast.Call) -> X.Call:
        keywords = {k.arg: k.value for k in node.keywords}
        if len(node.args) != 2 or set(keywords) != {"out_sinfo"}:
            raise self.fail(node, "R.call_tir(cls.func, (args...), out_sinfo=...)")
        callee = self.rexpr(node.args[0])
        if not isinstance(callee, X.GlobalVar):
            raise self.fail(node.args[0], "R.call_tir calls a PrimFunc of the module: cls.name")
        args = self.rexpr(node.args[1])
        if not isinstance(args, X.Tuple):
            args = X.Tuple((args,))
        out = keywords["out_sinfo"]
        items = out.elts if isinstance(out, ast.List) else [out]
        sinfos = [self.sinfo(item) for item in items]
        sinfo = S.TupleStructInfo(tuple(sinfos)) if isinstance(out, ast.List) else sinfos[0]
        return X.Call(CALL_TIR, (callee, args), {}, (sinfo,))

    def _r_const(self, node: ast.Call) -> X.Constant:
        import numpy as np

        if len(node.args) != 2 or node.keywords:
            raise self.fail(node, 'R.const(value, "dtype")')
        dtype = DataType(self.str_arg(node.args[1], "R.const dtype"))
        value = self.literal(node.args[0])
        try:
            return X.Constant(np.array(value, dtype=dtype.numpy))
        except (TypeError, ValueError) as err:
            raise self.fail(node.args[0], f"R.const: bad data: {err}") from None

    def _r_tuple(self, node: ast.Call) -> X.Tuple:
        return X.Tuple(tuple(self.rexpr(a) for a in node.args))

    def _r_shape(self, node: ast.Call) -> X.ShapeExpr:
        if len(node.args) != 1:
            raise self.fail(node, "R.shape([dims...])")
        return self.build(node, X.ShapeExpr, tuple(self.exprs(node.args[0])))

    def _r_prim_value(self, node: ast.Call) -> X.PrimValue:
        if len(node.args) != 1:
            raise self.fail(node, "R.prim_value(value)")
        return X.PrimValue(self.expr(node.args[0]))

    def _r_str(self, node: ast.Call) -> X.StringImm:
        if len(node.args) != 1:
            raise self.fail(node, 'R.str("text")')
        return X.StringImm(self.str_arg(node.args[0], "R.str"))

    # -- struct info ----------------------------------------------------------------------------
    def sinfo(self, node: ast.AST) -> S.StructInfo:
        """`R.Tensor((n, 4), dtype="float32")`, `R.Tuple(...)`, `R.Shape([...])`, ..."""
        path = self.rpath(node.func if isinstance(node, ast.Call) else node)
        if path == "Object" and not isinstance(node, ast.Call):
            return S.ObjectStructInfo()
        if not isinstance(node, ast.Call) or path not in _SINFO_KWARGS:
            raise self.fail(
                node, f"expected a struct info (R.Tensor, ...), got {ast.unparse(node)}"
            )
        allowed = _SINFO_KWARGS[path]
        kwargs = {}
        for keyword in node.keywords:
            if keyword.arg not in allowed:
                raise self.fail(keyword, f"R.{path} has no argument {keyword.arg!r}")
            kwargs[keyword.arg] = keyword.value
        return getattr(self, f"_s_{path}")(node, node.args, kwargs)

    def _s_Tensor(self, node, args, kwargs) -> S.TensorStructInfo:
        if len(args) > 2:
            raise self.fail(node, 'R.Tensor(shape, dtype="float32", ndim=-1)')
        shape = args[0] if args else kwargs.get("shape")
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
        dims = None if shape is None else tuple(self.exprs(shape))
        dtype = self.str_arg(dtype, "R.Tensor dtype") if dtype is not None else "float32"
        ndim = self.int_arg(kwargs["ndim"], "ndim") if "ndim" in kwargs else -1
        return self.build(node, S.TensorStructInfo, dims, dtype, ndim)

    def _s_Tuple(self, node, args, kwargs) -> S.TupleStructInfo:
        return S.TupleStructInfo(tuple(self.sinfo(a) for a in args))

    def _s_Shape(self, node, args, kwargs) -> S.ShapeStructInfo:
        values = tuple(self.exprs(args[0])) if args else None
        ndim = self.int_arg(kwargs["ndim"], "ndim") if "ndim" in kwargs else -1
        return self.build(node, S.ShapeStructInfo, values, ndim)

    def _s_Prim(self, node, args, kwargs) -> S.PrimStructInfo:
        if len(args) != 1:
            raise self.fail(node, 'R.Prim("dtype")')
        return self.build(node, S.PrimStructInfo, self.str_arg(args[0], "R.Prim dtype"))

    def _s_Callable(self, node, args, kwargs) -> S.FuncStructInfo:
        if len(args) != 2 or not isinstance(args[0], (ast.Tuple, ast.List)):
            raise self.fail(node, "R.Callable((params...), ret)")
        params = tuple(self.sinfo(a) for a in args[0].elts)
        return S.FuncStructInfo(params, self.sinfo(args[1]))


_SINFO_KWARGS = {
    "Tensor": ("shape", "dtype", "ndim"), "Tuple": (), "Shape": ("ndim",), "Prim": (),
    "Callable": (),
}  # fmt: skip
