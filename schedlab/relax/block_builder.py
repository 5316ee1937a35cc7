"""BlockBuilder: build graph functions binding by binding (TVM's relax.BlockBuilder).

    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit_te(te_matmul, x, w, primfunc_name_hint="matmul")
            gv = bb.emit_output(R.add(lv, lv))
        bb.emit_func_output(gv)
    mod = bb.get()   # IRModule with "main" and the PrimFunc "matmul"

`emit` normalizes: the value's struct info is inferred (errors name the op, its inputs' shapes
and the binding), and the new variable carries it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

from schedlab.errors import SchedlabError
from schedlab.ir.function import BaseFunc, IRModule, PrimFunc
from schedlab.ir.structural import structural_equal

from . import expr as X
from .infer import CALL_TIR, GraphTypeError, infer_struct_info
from .struct_info import StructInfo, TensorStructInfo, TupleStructInfo


class BlockBuilderError(SchedlabError):
    """The builder was used out of order (emit outside a function, nested functions, ...)."""


class _FunctionFrame:
    def __init__(self, name: str, params: Sequence[X.Var], attrs: dict | None):
        self.name, self.params, self.attrs = name, tuple(params), dict(attrs or {})
        self.blocks: list[X.BindingBlock] = []
        self.bindings: list[X.Binding] = []  # the block being built
        self.dataflow = False
        self.output: X.Expr | None = None


class BlockBuilder:
    """Builds an IRModule of graph functions and PrimFuncs."""

    def __init__(self, mod: IRModule | None = None):
        self._functions: dict[str, BaseFunc] = dict(mod.functions()) if mod else {}
        self._frame: _FunctionFrame | None = None
        self._names: dict[str, int] = {}

    # -- functions and blocks -------------------------------------------------------------------
    @contextlib.contextmanager
    def function(self, name: str, params: Sequence[X.Var] = (), attrs: dict | None = None):
        """Build the function `name`; end it with `emit_func_output`."""
        if self._frame is not None:
            raise BlockBuilderError(f"function {name!r}: already inside {self._frame.name!r}")
        self._frame, self._names = _FunctionFrame(name, params, attrs), {}
        for param in self._frame.params:
            self._names[param.name_hint] = 1
        try:
            yield self
            if self._frame.output is None:
                raise BlockBuilderError(f"function {name!r} ended without emit_func_output")
        finally:
            self._frame = None

    @contextlib.contextmanager
    def dataflow(self):
        """A dataflow block: `emit` makes DataflowVars; `emit_output` makes the block's outputs."""
        frame = self._current("dataflow")
        if frame.dataflow:
            raise BlockBuilderError("dataflow blocks do not nest")
        self._end_block(frame)
        frame.dataflow = True
        try:
            yield self
        finally:
            self._end_block(frame)
            frame.dataflow = False

    def _end_block(self, frame: _FunctionFrame) -> None:
        if frame.bindings:
            kind = X.DataflowBlock if frame.dataflow else X.BindingBlock
            frame.blocks.append(kind(tuple(frame.bindings)))
            frame.bindings = []

    def _current(self, what: str) -> _FunctionFrame:
        if self._frame is None:
            raise BlockBuilderError(f"{what}: call it inside `with bb.function(...)`")
        return self._frame

    # -- bindings ---------------------------------------------------------------------------------
    def emit(self, expr: X.Expr, name_hint: str = "") -> X.Var:
        """Bind `expr` to a new variable (a DataflowVar inside a dataflow block)."""
        frame = self._current("emit")
        kind = X.DataflowVar if frame.dataflow else X.Var
        return self._bind(frame, expr, name_hint or "lv", kind)

    def emit_output(self, expr: X.Expr, name_hint: str = "") -> X.Var:
        """Bind `expr` to a variable visible after the dataflow block."""
        frame = self._current("emit_output")
        if not frame.dataflow:
            raise BlockBuilderError("emit_output: call it inside `with bb.dataflow()`")
        return self._bind(frame, expr, name_hint or "gv", X.Var)

    def match_cast(self, expr: X.Expr, struct_info: StructInfo, name_hint: str = "") -> X.Var:
        """Bind `expr` asserting `struct_info` (binds the symbolic dims it names)."""
        frame = self._current("match_cast")
        kind = X.DataflowVar if frame.dataflow else X.Var
        var = kind(self._unique(name_hint or "lv"), struct_info)
        frame.bindings.append(X.MatchCast(var, self.normalize(expr, var.name_hint), struct_info))
        return var

    def _bind(self, frame, expr: X.Expr, name_hint: str, kind) -> X.Var:
        name = self._unique(name_hint)
        value = self.normalize(expr, name)
        var = kind(name, value.struct_info)
        frame.bindings.append(X.VarBinding(var, value))
        return var

    def emit_func_output(self, output: X.Expr | Sequence[X.Expr]) -> X.GlobalVar:
        """End the function with `output` as its result (a sequence becomes a Tuple)."""
        frame = self._current("emit_func_output")
        if frame.dataflow:
            raise BlockBuilderError("emit_func_output: leave the dataflow block first")
        if isinstance(output, (list, tuple)):
            output = X.Tuple(tuple(output))
        output = self.normalize(output, "the function output")
        self._end_block(frame)
        frame.output = output
        body = X.SeqExpr(tuple(frame.blocks), output)
        func = X.Function(frame.params, body, output.struct_info, frame.attrs)
        self._functions[frame.name] = func
        return X.GlobalVar(frame.name)

    def _unique(self, hint: str) -> str:
        count = self._names.get(hint, 0)
        self._names[hint] = count + 1
        return hint if count == 0 else f"{hint}{count}"

    # -- normalization ------------------------------------------------------------------------
    def normalize(self, expr: X.Expr, binding: str = "") -> X.Expr:
        """`expr` with its struct info inferred (cached on the node). Errors name the binding."""
        if not isinstance(expr, X.Expr):
            raise TypeError(f"binding {binding!r}: expected a graph expression, got {expr!r}")
        if "_sinfo" in expr.__dict__ or isinstance(expr, (X.Var, X.Constant, X.GlobalVar)):
            return expr
        try:
            sinfo = infer_struct_info(expr, self._functions)
        except (GraphTypeError, TypeError, ValueError, KeyError) as err:
            if isinstance(err, KeyError):  # unknown operator: KeyError quotes its message
                err = err.args[0]
            raise GraphTypeError(f"in binding {binding!r}: {err}") from None
        object.__setattr__(expr, "_sinfo", sinfo)
        return expr

    # -- PrimFuncs ------------------------------------------------------------------------------
    def add_func(self, func: BaseFunc, name: str) -> X.GlobalVar:
        """Add a function under a unique name (a structurally equal PrimFunc already in the
        module is reused)."""
        if isinstance(func, PrimFunc):
            for known, other in self._functions.items():
                same_name = func.with_attr("global_symbol", known)
                if isinstance(other, PrimFunc) and structural_equal(other, same_name):
                    return X.GlobalVar(known)
        unique, k = name, 0
        while unique in self._functions or (self._frame and unique == self._frame.name):
            k += 1
            unique = f"{name}{k}"
        if isinstance(func, PrimFunc):
            func = func.with_attr("global_symbol", unique)
        self._functions[unique] = func
        return X.GlobalVar(unique)

    def update_func(self, gvar: X.GlobalVar, func: BaseFunc) -> None:
        """Replace the function named by `gvar`."""
        self._functions[gvar.name_hint] = func

    def call_te(self, te_func: Callable, *args, primfunc_name_hint: str = "", **kwargs) -> X.Call:
        """A `call_tir` of the PrimFunc that `te_func` builds over placeholders for the graph
        expressions in `args` (other arguments, e.g. an axis, are passed to it unchanged)."""
        from schedlab import te

        fresh: dict = {}  # the PrimFunc gets its own symbolic dims (functions share no vars)
        tensors, holders, te_args = [], [], []
        for arg in args:  # graph values become placeholders; others go to te_func as they are
            if isinstance(arg, X.Expr):
                tensors.append(arg)
                holders.append(_placeholder(arg, len(holders), fresh))
            te_args.append(holders[-1] if isinstance(arg, X.Expr) else arg)
        result = te_func(*te_args, **kwargs)
        outs = list(result) if isinstance(result, (list, tuple)) else [result]
        func = te.create_prim_func([*holders, *outs])
        gvar = self.add_func(func, primfunc_name_hint or getattr(te_func, "__name__", "te_func"))
        back = {new: old for old, new in fresh.items()}
        sinfos = [TensorStructInfo(_substitute(o.shape, back), o.dtype) for o in outs]
        out = sinfos[0] if len(sinfos) == 1 and not isinstance(result, (list, tuple)) else None
        return call_tir(gvar, tensors, out or TupleStructInfo(tuple(sinfos)))

    def emit_te(self, te_func: Callable, *args, primfunc_name_hint: str = "", **kwargs) -> X.Var:
        """`emit(call_te(...))`."""
        call = self.call_te(te_func, *args, primfunc_name_hint=primfunc_name_hint, **kwargs)
        return self.emit(call)

    def get(self) -> IRModule:
        """The module built so far."""
        if self._frame is not None:
            raise BlockBuilderError(f"get: function {self._frame.name!r} is not finished")
        return IRModule(dict(self._functions))


def _substitute(shape, vmap: dict) -> tuple:
    from schedlab.ir.functor import substitute

    return tuple(substitute(d, vmap) if vmap else d for d in shape)


def _placeholder(arg, k: int, fresh: dict):
    """A TE placeholder for `arg`; its symbolic dims are replaced by fresh copies (recorded in
    `fresh`, old -> new)."""
    from schedlab import te
    from schedlab.ir.functor import collect_vars

    sinfo = arg.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        raise GraphTypeError(f"call_te: argument {k} needs a tensor with a known shape: {sinfo}")
    for dim in sinfo.shape:
        for var in collect_vars(dim):
            if var not in fresh:
                fresh[var] = type(var)(var.name, var.dtype)
    name = arg.name_hint if isinstance(arg, X.Var) else f"arg{k}"
    return te.placeholder(_substitute(sinfo.shape, fresh), str(sinfo.dtype), name)


def call_tir(gvar: X.GlobalVar, args, out_sinfo: StructInfo | Sequence[StructInfo]) -> X.Call:
    """`R.call_tir(gvar, args, out_sinfo)`: call a PrimFunc that writes its outputs (the
    trailing buffer parameters); a list of out_sinfo means a tuple of outputs."""
    if not isinstance(gvar, X.GlobalVar):
        raise TypeError(f"call_tir: the callee must be a GlobalVar, got {gvar!r}")
    if isinstance(args, X.Expr) and not isinstance(args, X.Tuple):
        args = (args,)
    fields = args if isinstance(args, X.Tuple) else X.Tuple(tuple(args))
    if isinstance(out_sinfo, (list, tuple)):
        out_sinfo = TupleStructInfo(tuple(out_sinfo))
    return X.Call(CALL_TIR, (gvar, fields), {}, (out_sinfo,))
