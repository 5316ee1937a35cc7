"""LegalizeOps: replace each call of a registered operator by a `call_tir` of a PrimFunc made
from the operator's `legalize` (tensor expressions -> `te.create_prim_func`). After it, the
graph only calls loop-IR functions, which schedules and code generators understand.

Each PrimFunc is named after its operator ("add", "nn_conv2d"; a number is appended on name
clashes) and structurally equal PrimFuncs are shared (two `add`s of the same shapes use one).
Symbolic dimensions stay symbolic: the PrimFunc gets its own size variables, bound from the
argument shapes when it runs. Each new PrimFunc gets the attribute "op_pattern" (TVM's
OpPatternKind number) from the operator's registered pattern, for FuseOps.

Nested operator calls (`R.add(R.matmul(x, w), b)`) would become nested call_tirs, which FuseOps
cannot see as producer and consumer; each changed function is therefore normalized
(`normalize.normalize_function`): every nested call gets its own binding.
"""

from __future__ import annotations

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..block_builder import BlockBuilder
from ..functor import ExprMutator
from ..infer import CALL_TIR
from ._util import OP_PATTERN_KINDS
from .concat_in_place import CONCAT_AXIS_ATTR
from .normalize import normalize_function


def primfunc_name(op_name: str) -> str:
    """The PrimFunc name for an operator: "relax.nn.conv2d" -> "nn_conv2d"."""
    return op_name.removeprefix("relax.").replace(".", "_")


def legalize_call(bb: BlockBuilder, call: X.Call) -> X.Call:
    """The `call_tir` computing `call` (a call of a registered operator); its PrimFunc is added
    to `bb`'s module."""
    from schedlab.relax.op import get_op

    spec = get_op(call.op)
    spec.check_arity(list(call.args))
    attrs = spec.resolve_attrs(dict(call.attrs))

    def te_func(*tensors):
        result = spec.legalize(list(tensors), attrs)
        if isinstance(result, (list, tuple)):
            return [_copy_if_input(out, tensors) for out in result]
        return _copy_if_input(result, tensors)

    return bb.call_te(te_func, *call.args, primfunc_name_hint=primfunc_name(call.op))


def _copy_if_input(out, inputs):
    """A PrimFunc cannot write its input buffer: an identity-like legalization (a reshape to
    the same shape) gets a copy stage."""
    from schedlab import te

    if any(out is t for t in inputs):
        return te.compute(out.shape, lambda *i: out[i], name="copy")
    return out


class _Legalizer(ExprMutator):
    def __init__(self, bb: BlockBuilder):
        super().__init__()
        self.bb = bb
        self.patterns: dict[str, str] = {}  # new PrimFunc name -> registered pattern
        self.concat_axes: dict[str, int] = {}  # PrimFunc name -> axis, of relax.concat's

    def visit_Call(self, call: X.Call) -> X.Expr:  # noqa: N802 - dispatch name
        call = self.generic_visit(call)
        if not isinstance(call.op, str) or call.op == CALL_TIR:
            return call
        from schedlab.relax.op import get_op

        new = legalize_call(self.bb, call)
        self.patterns.setdefault(new.args[0].name_hint, get_op(call.op).pattern)
        ndim = getattr(call.struct_info, "ndim", -1)
        if call.op == "relax.concat" and ndim > 0:  # PlanConcatInPlace elides it if alone
            self.concat_axes[new.args[0].name_hint] = call.attrs.get("axis", 0) % ndim
        return new


def _annotate(mod: IRModule, patterns: dict[str, str], concat_axes: dict[str, int]) -> IRModule:
    updated = {}
    for name, pattern in patterns.items():
        func = mod[name]
        if isinstance(func, PrimFunc) and "op_pattern" not in func.attrs:
            updated[name] = func.with_attr("op_pattern", OP_PATTERN_KINDS[pattern])
    for name, axis in concat_axes.items():
        func = updated.get(name, mod[name])
        if isinstance(func, PrimFunc):
            updated[name] = func.with_attr(CONCAT_AXIS_ATTR, axis)
    return mod.update(updated) if updated else mod


def LegalizeOps() -> Pass:  # noqa: N802 - TVM's name: a pass factory
    """The LegalizeOps pass (see the module docstring)."""

    @module_pass(name="LegalizeOps")
    def legalize_ops(mod: IRModule) -> IRModule:
        """Registered-op calls -> call_tir of generated PrimFuncs, in every graph function."""
        bb = BlockBuilder(mod)
        legalizer = _Legalizer(bb)
        changed = {}
        for name, func in mod.items():
            if isinstance(func, X.Function):
                new = legalizer.visit(func)
                if new is not func:
                    changed[name] = normalize_function(new)
        if not changed:
            return mod
        for name, func in changed.items():
            bb.update_func(X.GlobalVar(name), func)
        return _annotate(bb.get(), legalizer.patterns, legalizer.concat_axes)

    return legalize_ops
