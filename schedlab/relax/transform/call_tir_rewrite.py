"""CallTIRRewrite: `call_tir` -> explicit output allocation + a call that writes into it (TVM's
"destination passing" form, what the VM executes).

    lv = R.call_tir(cls.add, (x, y), out_sinfo=R.Tensor((4, 5), "float32"))
becomes
    lv_out = R.builtin.alloc_tensor(R.shape([4, 5]), dtype="float32")
    _ = cls.add(x, y, lv_out)           # a PrimFunc call: returns nothing, writes lv_out
    lv = lv_out

Nested calls (a call_tir inside another call's arguments) get bindings of their own, so every
kernel call in the result is a binding of its own. Run it after ToNonDataflow: the new
bindings use plain Vars. The VM-form operators below have no registry entry; their struct
info is set when they are built.
"""

from __future__ import annotations

from schedlab.ir.function import IRModule
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..infer import CALL_TIR
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ._util import map_functions

ALLOC_TENSOR = "relax.builtin.alloc_tensor"  # args: (ShapeExpr,); attrs: dtype
# a part of a tensor (PlanConcatInPlace): args (base, ShapeExpr, PrimValue byte offset); dtype
MEMORY_VIEW = "relax.memory.view"
NO_RESULT = TupleStructInfo(())  # the struct info of a destination-passing kernel call


def typed(expr: X.Expr, sinfo: StructInfo) -> X.Expr:
    """`expr` with its struct info set (for VM-form operators the registry does not know)."""
    object.__setattr__(expr, "_sinfo", sinfo)
    return expr


def alloc_tensor(sinfo: TensorStructInfo) -> X.Call:
    """`R.builtin.alloc_tensor(shape, dtype)`: a fresh tensor for a kernel output."""
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        raise TypeError(f"CallTIRRewrite: outputs must be tensors of known shape, got {sinfo}")
    call = X.Call(ALLOC_TENSOR, (X.ShapeExpr(sinfo.shape),), {"dtype": str(sinfo.dtype)})
    return typed(call, sinfo)


class _Rewriter:
    """Rewrites one function's bindings into destination-passing form."""

    def __init__(self):
        self.out: list[X.Binding] = []
        self.count = 0

    def fresh(self, hint: str, sinfo: StructInfo) -> X.Var:
        self.count += 1
        return X.Var(f"{hint}_{self.count}" if hint else f"_{self.count}", sinfo)

    def bind(self, hint: str, value: X.Expr) -> X.Var:
        var = self.fresh(hint, value.struct_info)
        self.out.append(X.VarBinding(var, value))
        return var

    def lower(self, expr: X.Expr, hint: str) -> X.Expr:
        """`expr` with every call inside it replaced by a variable bound before it."""
        if isinstance(expr, X.Tuple):
            return X.Tuple(tuple(self.lower(f, hint) for f in expr.fields))
        if isinstance(expr, X.TupleGetItem):
            return X.TupleGetItem(self.lower(expr.tuple_value, hint), expr.index)
        if isinstance(expr, X.Call):
            return self.bind(hint, self.lower_call(expr, hint))
        return expr

    def lower_call(self, call: X.Call, hint: str) -> X.Expr:
        """The value replacing `call` (its arguments lowered; call_tir becomes allocations and a
        kernel call, and its value the allocated outputs)."""
        if call.op != CALL_TIR:
            args = tuple(self.lower(a, hint) for a in call.args)
            return typed(call.replace(args=args), call.struct_info)
        gvar, packed = call.args
        args = self.lower(packed, hint)
        args = args.fields if isinstance(args, X.Tuple) else (args,)
        sinfo = call.sinfo_args[0]
        infos = sinfo.fields if isinstance(sinfo, TupleStructInfo) else (sinfo,)
        outs = [self.bind(f"{hint}_out", alloc_tensor(info)) for info in infos]
        kernel = X.Call(gvar, (*args, *outs), {}, (NO_RESULT,))
        self.out.append(X.VarBinding(self.fresh("", NO_RESULT), typed(kernel, NO_RESULT)))
        return X.Tuple(tuple(outs)) if isinstance(sinfo, TupleStructInfo) else outs[0]

    def binding(self, binding: X.Binding) -> None:
        value = binding.value
        hint = binding.var.name_hint
        if isinstance(value, X.Call):
            value = self.lower_call(value, hint)
        else:
            value = self.lower(value, hint)
        self.out.append(binding.replace(value=value))


def rewrite_function(func: X.Function) -> X.Function:
    """`func` in destination-passing form (the same function when it has no call_tir)."""
    body = func.body
    if not isinstance(body, X.SeqExpr) or not _has_call_tir(func):
        return func
    blocks = []
    for block in body.blocks:
        rewriter = _Rewriter()
        for binding in block.bindings:
            rewriter.binding(binding)
        blocks.append(type(block)(tuple(rewriter.out)))
    tail = _Rewriter()
    result = tail.lower(body.body, "ret")
    if tail.out:
        blocks.append(X.BindingBlock(tuple(tail.out)))
    return func.replace(body=X.SeqExpr(tuple(blocks), result))


def _has_call_tir(func: X.Function) -> bool:
    from schedlab.ir.functor import post_order_visit

    found = []
    post_order_visit(
        func, lambda n: found.append(1) if isinstance(n, X.Call) and n.op == CALL_TIR else None
    )
    return bool(found)


def CallTIRRewrite() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The CallTIRRewrite pass (see the module docstring)."""

    @module_pass(name="CallTIRRewrite")
    def call_tir_rewrite(mod: IRModule) -> IRModule:
        """call_tir -> alloc_tensor + a kernel call writing the outputs, in every graph
        function."""
        return map_functions(mod, rewrite_function)

    return call_tir_rewrite
