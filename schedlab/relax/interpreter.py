"""The reference semantics of the graph IR: `run(mod, *arrays)` evaluates a graph function
binding by binding on numpy arrays.

- a registered operator call is legalized to tensor expressions over placeholders of the
  concrete input shapes, turned into a PrimFunc and run by the loop-IR interpreter (the PrimFunc
  is cached per operator, attributes, shapes and dtypes);
- `relax.call_tir` runs the module's PrimFunc on freshly allocated outputs (shapes from its
  out_sinfo, symbolic dimensions bound from the values seen so far);
- constants, tuples, `If`, `MatchCast` (shapes checked) and calls of other graph functions.

    out = run(mod, x, w)            # the function "main"
    out = run(mod["f"], x)          # a single function (no call_tir / graph calls inside)

Errors raise `GraphRunError` naming the function and the binding.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from schedlab.errors import SchedlabError
from schedlab.ir import expr as E
from schedlab.ir.function import IRModule, PrimFunc

from . import expr as X
from .infer import CALL_TIR
from .struct_info import ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo

_OP_CACHE: OrderedDict[tuple, tuple[PrimFunc, list]] = OrderedDict()
_OP_CACHE_SIZE = 1024  # legalized PrimFuncs kept (least recently used dropped)


class GraphRunError(SchedlabError, RuntimeError):
    """Evaluating a graph function failed (the message names the binding)."""


def run(mod_or_func: IRModule | X.Function, *arrays, func_name: str = "main"):
    """Evaluate the graph function `func_name` of `mod_or_func` (or the given Function) on
    numpy `arrays`. Returns a numpy array, or a tuple for a tuple-valued function."""
    if isinstance(mod_or_func, X.Function):
        return _Frame({}, mod_or_func.name).call(mod_or_func, arrays)
    if not isinstance(mod_or_func, IRModule):
        raise TypeError(f"run: expected an IRModule or a relax Function, got {mod_or_func!r}")
    if func_name not in mod_or_func:
        known = ", ".join(sorted(mod_or_func))
        raise GraphRunError(f"run: the module has no function {func_name!r}; it has {known}")
    func = mod_or_func[func_name]
    if not isinstance(func, X.Function):
        raise GraphRunError(f"run: {func_name!r} is a {type(func).__name__}, not a graph function")
    return _Frame(mod_or_func, func_name).call(func, arrays)


class _Frame:
    """The values of one function call: variables -> arrays, symbolic dims -> ints."""

    def __init__(self, mod: Mapping, name: str):
        self.mod, self.name = mod, name
        self.env: dict = {}
        self.dims: dict = {}
        self.binding = "the parameters"

    def call(self, func: X.Function, arrays):
        if len(arrays) != len(func.params):
            raise GraphRunError(
                f"{self.name}: takes {len(func.params)} argument(s) "
                f"({', '.join(p.name_hint for p in func.params)}), got {len(arrays)}"
            )
        for param, array in zip(func.params, arrays):
            value = _as_value(array)
            self._match(param.struct_info_, value, f"parameter {param.name_hint!r}")
            self.env[param] = value
        return self.eval(func.body)

    # -- expressions ------------------------------------------------------------------------
    def eval(self, expr: X.Expr):
        method = getattr(self, f"_eval_{type(expr).__name__}", None)
        if method is None:
            raise self.error(f"cannot evaluate a {type(expr).__name__}")
        return method(expr)

    def _eval_SeqExpr(self, expr: X.SeqExpr):  # noqa: N802
        for block in expr.blocks:
            for binding in block.bindings:
                self.binding = binding.var.name_hint
                self._bind(binding)
        self.binding = "the function output"
        return self.eval(expr.body)

    def _bind(self, binding: X.Binding) -> None:
        value = self.eval(binding.value)
        if isinstance(binding, X.MatchCast):
            self._match(binding.struct_info, value, "match_cast")
        else:
            self._match(binding.var.struct_info_, value, "its struct info")
        self.env[binding.var] = value

    def _eval_Var(self, var: X.Var):  # noqa: N802
        if var not in self.env:
            raise self.error(f"variable {var.name_hint!r} is used before it is defined")
        return self.env[var]

    _eval_DataflowVar = _eval_Var  # noqa: N815

    def _eval_Constant(self, expr: X.Constant):  # noqa: N802
        return expr.data

    def _eval_Tuple(self, expr: X.Tuple):  # noqa: N802
        return tuple(self.eval(f) for f in expr.fields)

    def _eval_TupleGetItem(self, expr: X.TupleGetItem):  # noqa: N802
        value = self.eval(expr.tuple_value)
        if not isinstance(value, tuple) or not 0 <= expr.index < len(value):
            raise self.error(f"TupleGetItem index {expr.index} of a non-tuple or short tuple")
        return value[expr.index]

    def _eval_ShapeExpr(self, expr: X.ShapeExpr):  # noqa: N802
        return tuple(self.dim(v) for v in expr.values)

    def _eval_PrimValue(self, expr: X.PrimValue):  # noqa: N802
        if expr.value.dtype.is_integer:
            return self.dim(expr.value)
        return _prim(expr.value, self.dims)

    def _eval_StringImm(self, expr: X.StringImm):  # noqa: N802
        return expr.value

    def _eval_If(self, expr: X.If):  # noqa: N802
        cond = np.asarray(self.eval(expr.cond))
        if cond.size != 1:
            raise self.error(f"If: the condition must be a scalar, got shape {cond.shape}")
        return self.eval(expr.true_branch if bool(cond.item()) else expr.false_branch)

    def _eval_Call(self, call: X.Call):  # noqa: N802
        if isinstance(call.op, X.GlobalVar):
            return self._call_function(call)
        if call.op == CALL_TIR:
            return self._call_tir(call)
        args = [self.eval(a) for a in call.args]
        attrs = {key: self._concrete(value) for key, value in call.attrs.items()}
        try:
            return run_op(call.op, args, attrs)
        except GraphRunError:
            raise
        except Exception as err:  # operator errors: say which binding
            raise self.error(f"{call.op}: {err}") from err

    def _call_function(self, call: X.Call):
        name = call.op.name_hint
        func = self.mod.get(name) if isinstance(self.mod, Mapping) else None
        if isinstance(func, PrimFunc):
            raise self.error(f"{name} is a PrimFunc: call it through relax.call_tir")
        if not isinstance(func, X.Function):
            raise self.error(f"calls {name!r}, which is not a graph function of the module")
        return _Frame(self.mod, name).call(func, [self.eval(a) for a in call.args])

    def _call_tir(self, call: X.Call):
        name = call.args[0].name_hint
        func = self.mod.get(name) if isinstance(self.mod, Mapping) else None
        if not isinstance(func, PrimFunc):
            raise self.error(f"call_tir: the module has no PrimFunc {name!r}")
        args = self.eval(call.args[1])
        args = args if isinstance(args, tuple) else (args,)
        sinfo = call.sinfo_args[0]
        out_infos = sinfo.fields if isinstance(sinfo, TupleStructInfo) else (sinfo,)
        outs = [self._alloc(info) for info in out_infos]
        try:
            from schedlab import interpret

            interpret(func, *[np.asarray(a, order="C") for a in args], *outs)
        except Exception as err:
            raise self.error(f"call_tir {name}: {err}") from err
        return tuple(outs) if isinstance(sinfo, TupleStructInfo) else outs[0]

    def _alloc(self, info: StructInfo) -> np.ndarray:
        if not isinstance(info, TensorStructInfo) or info.shape is None:
            raise self.error(f"call_tir: out_sinfo must be tensors of known shape, got {info}")
        return np.zeros(tuple(self.dim(d) for d in info.shape), info.dtype.numpy)

    def _concrete(self, value):
        """An attribute with its symbolic dimensions (e.g. a reshape target) bound to ints."""
        if isinstance(value, (list, tuple)):
            return type(value)(self._concrete(v) for v in value)
        if isinstance(value, E.PrimExpr) and value.dtype.is_integer:
            return self.dim(value)
        return value

    # -- shapes -------------------------------------------------------------------------------
    def dim(self, value: E.PrimExpr) -> int:
        try:
            return int(_prim(value, self.dims))
        except KeyError as err:
            raise self.error(f"the symbolic dimension {err.args[0]} is not bound") from None

    def _match(self, sinfo: StructInfo, value, what: str) -> None:
        """Check `value` against `sinfo`, binding the symbolic dims seen first here."""
        if isinstance(sinfo, TensorStructInfo):
            self._match_tensor(sinfo, value, what)
        elif isinstance(sinfo, TupleStructInfo):
            if not isinstance(value, tuple) or len(value) != len(sinfo.fields):
                raise self.error(f"{what}: expected a {len(sinfo.fields)}-tuple, got {value!r}")
            for field, item in zip(sinfo.fields, value):
                self._match(field, item, what)
        elif isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
            self._match_dims(sinfo.values, tuple(value), what)

    def _match_tensor(self, sinfo: TensorStructInfo, value, what: str) -> None:
        if not isinstance(value, np.ndarray):
            raise self.error(f"{what}: expected a tensor, got {type(value).__name__}")
        if sinfo.ndim >= 0 and value.ndim != sinfo.ndim:
            raise self.error(f"{what}: expected rank {sinfo.ndim}, got shape {value.shape}")
        if value.dtype != sinfo.dtype.numpy:
            raise self.error(f"{what}: expected dtype {sinfo.dtype}, got {value.dtype}")
        if sinfo.shape is not None:
            self._match_dims(sinfo.shape, value.shape, what)

    def _match_dims(self, dims, shape, what: str) -> None:
        for dim, size in zip(dims, shape):
            if isinstance(dim, E.Var) and dim not in self.dims:
                self.dims[dim] = int(size)
                continue
            try:
                expected = int(_prim(dim, self.dims))
            except KeyError:
                continue  # a compound expression of unbound vars: nothing to check yet
            if expected != int(size):
                shown = tuple(str(d) for d in dims)
                raise self.error(f"{what}: expected shape ({', '.join(shown)}), got {shape}")

    def error(self, message: str) -> GraphRunError:
        return GraphRunError(f"{self.name}, binding {self.binding!r}: {message}")


def _as_value(array):
    if isinstance(array, (tuple, list)):
        return tuple(_as_value(a) for a in array)
    return np.asarray(array)


_BINARY = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b,
    E.FloorMod: lambda a, b: a % b,
    E.Div: lambda a, b: int(a / b) if isinstance(a, int) and isinstance(b, int) else a / b,
    E.Mod: lambda a, b: a - b * int(a / b) if isinstance(a, int) else np.fmod(a, b),
    E.Min: min,
    E.Max: max,
}


def _prim(value: E.PrimExpr, dims: Mapping):
    """Evaluate a loop-IR scalar expression with the bound symbolic dims."""
    if isinstance(value, (E.IntImm, E.FloatImm)):
        return value.value
    if isinstance(value, E.Var):
        return dims[value]
    if isinstance(value, E.Cast):
        inner = _prim(value.value, dims)
        return int(inner) if value.dtype.is_int else float(inner)
    fn = _BINARY.get(type(value))
    if fn is None:
        raise TypeError(f"cannot evaluate the shape expression {value}")
    return fn(_prim(value.a, dims), _prim(value.b, dims))


# -- registered operators -------------------------------------------------------------------------
def run_op(name: str, arrays, attrs: Mapping | None = None):
    """Run the registered operator `name` on numpy arrays by legalizing it for their shapes."""
    arrays = [np.asarray(a, order="C") for a in arrays]
    func, out_tensors = _legalized(name, arrays, dict(attrs or {}))
    outs = [np.zeros(tuple(int(d) for d in t.shape), str(t.dtype)) for t in out_tensors]
    from schedlab import interpret

    interpret(func, *arrays, *outs)
    return tuple(outs) if out_tensors.is_tuple else outs[0]


class _Outs(list):
    """The legalized output tensors, remembering whether the operator returns a tuple."""

    is_tuple = False


def _legalized(name: str, arrays, attrs: dict):
    key = (name, repr(sorted(attrs.items())), tuple((a.shape, str(a.dtype)) for a in arrays))
    cached = _OP_CACHE.get(key)
    if cached is None:
        cached = _OP_CACHE[key] = _legalize(name, arrays, attrs)
        if len(_OP_CACHE) > _OP_CACHE_SIZE:
            _OP_CACHE.popitem(last=False)
    else:
        _OP_CACHE.move_to_end(key)
    return cached


def _legalize(name: str, arrays, attrs: dict):
    from schedlab import te
    from schedlab.relax.op import get_op

    spec = get_op(name)
    spec.check_arity(arrays)
    attrs = spec.resolve_attrs(attrs)
    holders = [te.placeholder(a.shape, str(a.dtype), name=f"x{k}") for k, a in enumerate(arrays)]
    result = spec.legalize(holders, attrs)
    outs = _Outs(result if isinstance(result, (tuple, list)) else [result])
    outs.is_tuple = isinstance(result, (tuple, list))
    # an output that is an input (an identity-like legalization) needs a copy stage
    for k, out in enumerate(outs):
        if any(out is h for h in holders):
            outs[k] = te.compute(out.shape, lambda *i, t=out: t[i], name="copy")
    return te.create_prim_func([*holders, *outs], name=name.replace(".", "_")), outs
