"""PlanConcatInPlace: the parts of a concatenation are written where they land in its result, so
the concat copies nothing. Runs on the destination-passing form (after CallTIRRewrite, before
StaticPlanBlockMemory). TVM has no such pass; TensorRT and XLA elide concatenations this way.

    a_out = R.builtin.alloc_tensor(R.shape([1, 4, 56, 56, 16]), dtype="float32")
    _ = cls.conv_a(x, w, a_out)
    b_out = R.builtin.alloc_tensor(R.shape([1, 4, 56, 56, 16]), dtype="float32")
    _ = cls.conv_b(x, v, b_out)
    c_out = R.builtin.alloc_tensor(R.shape([1, 8, 56, 56, 16]), dtype="float32")
    _ = cls.concat(a_out, b_out, c_out)
becomes
    c_out = R.builtin.alloc_tensor(R.shape([1, 8, 56, 56, 16]), dtype="float32")
    a_out = R.memory.view(c_out, R.shape([1, 4, 56, 56, 16]), R.prim_value(0), dtype="float32")
    _ = cls.conv_a(x, w, a_out)
    b_out = R.memory.view(c_out, R.shape([1, 4, 56, 56, 16]), R.prim_value(802816), ...)
    _ = cls.conv_b(x, v, b_out)

On squeezenet (fire modules end in a concat of two convolutions) each concat read what its two
producers had just written on both cores and wrote it again.

A call of a lone concatenation (a PrimFunc LegalizeOps tagged with CONCAT_AXIS_ATTR; one fused
with other operators is not) is removed when
- every dimension before the axis has extent 1, so each part is one contiguous run of the
  result, starting at a multiple of ALIGN_BYTES (the kernels were tuned on aligned arrays);
- the result and every part are tensors this function allocates, of static shape, the parts
  distinct, none of them returned by the function or a part of another concatenation elided
  here (its storage is then that other result's), and the result not itself an elided part.
The result's allocation moves before the first part's. StaticPlanBlockMemory then keeps it alive
while any view of it is: a view aliases its base.
"""

from __future__ import annotations

import math

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.op import convert
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..struct_info import TensorStructInfo
from ._util import called_functions, map_functions, used_vars
from .call_tir_rewrite import MEMORY_VIEW, typed
from .static_plan_block_memory import _is_alloc, aliases

CONCAT_AXIS_ATTR = "schedlab.concat_axis"  # on the PrimFunc LegalizeOps makes of a relax.concat
ALIGN_BYTES = 64


def memory_view(base: X.Var, sinfo: TensorStructInfo, offset: int) -> X.Call:
    """`R.memory.view(base, shape, offset)`: the tensor of `sinfo` starting `offset` bytes into
    the (contiguous) tensor `base`."""
    args = (base, X.ShapeExpr(sinfo.shape), X.PrimValue(convert(int(offset))))
    return typed(X.Call(MEMORY_VIEW, args, {"dtype": str(sinfo.dtype)}), sinfo)


def _static_shape(var: X.Var) -> tuple[int, ...] | None:
    sinfo = var.struct_info_
    return sinfo.static_shape() if isinstance(sinfo, TensorStructInfo) else None


def _part_offsets(parts: list[X.Var], out: X.Var, axis: int) -> list[int] | None:
    """Byte offset of each part in `out` when each is one aligned contiguous run of it."""
    shape = _static_shape(out)
    shapes = [_static_shape(p) for p in parts]
    if shape is None or None in shapes or any(d != 1 for d in shape[:axis]):
        return None
    sinfo = out.struct_info_
    itemsize = sinfo.dtype.bits * sinfo.dtype.lanes // 8
    row = math.prod(shape[axis + 1 :]) * itemsize  # bytes per step along the axis
    offsets, start = [], 0
    for part_shape in shapes:
        if start % ALIGN_BYTES:
            return None
        offsets.append(start)
        start += part_shape[axis] * row
    return offsets if start == math.prod(shape) * itemsize else None


class _Planner:
    """Finds the concatenations of one function to elide and rewrites it."""

    def __init__(self, mod: IRModule, func: X.Function):
        self.mod, self.func = mod, func
        self.bindings = [b for block in func.body.blocks for b in block.bindings]
        self.allocs = {b.var: b for b in self.bindings if _is_alloc(b)}
        self.copy_of = {  # var -> the var it copies (`lv = lv_out` after each kernel call)
            b.var: b.value for b in self.bindings if isinstance(b.value, X.Var)
        }
        self.returned = self._escaping()

    def _escaping(self) -> set:
        """Alloc vars the function's result may refer to."""
        alias = aliases(self.bindings, set(self.allocs))
        out = set()
        for var in used_vars(self.func.body.body):
            out |= alias.get(var, set())
        return out

    def _alloc_var(self, expr) -> X.Var | None:
        while isinstance(expr, X.Var) and expr not in self.allocs and expr in self.copy_of:
            expr = self.copy_of[expr]
        return expr if isinstance(expr, X.Var) and expr in self.allocs else None

    def _axis(self, call) -> int | None:
        if not isinstance(call, X.Call) or not isinstance(call.op, X.GlobalVar):
            return None
        callee = self.mod.get(call.op.name_hint)
        if not isinstance(callee, PrimFunc) or CONCAT_AXIS_ATTR not in callee.attrs:
            return None
        return int(callee.attrs[CONCAT_AXIS_ATTR])

    def plan(self) -> tuple[set, dict]:
        """(ids of the concat bindings to drop, part alloc var -> (result var, byte offset))."""
        dropped, views, results = set(), {}, set()
        for binding in self.bindings:
            axis = self._axis(binding.value)
            if axis is None:
                continue
            args = [self._alloc_var(a) for a in binding.value.args]
            parts, out = args[:-1], args[-1]
            if out is None or out in views or None in parts or len(set(parts)) != len(parts):
                continue
            if any(p in views or p in results or p in self.returned for p in parts):
                continue
            offsets = _part_offsets(parts, out, axis)
            if offsets is None:
                continue
            dropped.add(id(binding))
            results.add(out)
            views.update({part: (out, offset) for part, offset in zip(parts, offsets)})
        return dropped, views

    def rewrite(self) -> X.Function:
        dropped, views = self.plan()
        if not dropped:
            return self.func
        position = {b.var: k for k, b in enumerate(self.bindings)}
        first_part: dict = {}  # result -> its part allocated first: its allocation goes there
        for part, (out, _) in views.items():
            if out not in first_part or position[part] < position[first_part[out]]:
                first_part[out] = part
        before = {part: self.allocs[out] for out, part in first_part.items()}
        moving = {id(b) for b in before.values()}
        blocks = []
        for block in self.func.body.blocks:
            kept = []
            for binding in block.bindings:
                if id(binding) in dropped or id(binding) in moving:
                    continue
                if binding.var in before:
                    kept.append(before[binding.var])
                if binding.var in views:
                    base, offset = views[binding.var]
                    binding = binding.replace(
                        value=memory_view(base, binding.var.struct_info_, offset)
                    )
                kept.append(binding)
            blocks.append(type(block)(tuple(kept)))
        return self.func.replace(body=X.SeqExpr(tuple(blocks), self.func.body.body))


def PlanConcatInPlace() -> Pass:  # noqa: N802 - a pass factory, named as TVM's are
    """The PlanConcatInPlace pass (see the module docstring)."""

    @module_pass(name="PlanConcatInPlace")
    def plan_concat_in_place(mod: IRModule) -> IRModule:
        """Elide the concatenations whose parts can be written in place, in every graph
        function; drop the concat kernels no call is left to."""
        new = map_functions(mod, lambda func: _rewrite_function(mod, func))
        if new is mod:
            return mod
        called = set().union(
            *(called_functions(f) for f in new.values() if isinstance(f, X.Function))
        )
        kept = {name: func for name, func in new.items()
                if name in called or not isinstance(func, PrimFunc)
                or CONCAT_AXIS_ATTR not in func.attrs}  # fmt: skip
        return IRModule(kept, new.attrs) if len(kept) < len(new) else new

    return plan_concat_in_place


def _rewrite_function(mod: IRModule, func: X.Function) -> X.Function:
    if not isinstance(func.body, X.SeqExpr):
        return func
    return _Planner(mod, func).rewrite()
