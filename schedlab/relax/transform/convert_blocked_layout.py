"""ConvertToBlockedLayout: float32 NCHW conv2d networks into the channel-blocked NCHW{b}c
layout (TVM's AlterOpLayout to conv2d_NCHWc with layout propagation; onnxruntime's NCHWc
transformer does the same), b = the target's vector lanes.

Why: a convolution kernel keeps output channels in its vector lanes. With an NCHW output
every accumulator vector is written back as b scalar stores, b planes apart; in NCHW{b}c it is
one contiguous vector store, and the next layer reads b contiguous channels of a pixel. On a
1x1 16->64 layer at 55x55 the scattered write-back cost about as much as the arithmetic.

What converts (static shapes only, in functions with at least MIN_CONVS convolutions; anything
else keeps NCHW):
- conv2d, groups 1, NCHW/OIHW, a constant weight, output channels a multiple of b: the weight
  is re-laid out now (OIHW{i}i{b}o); the data is taken in NCHW{i}c with i = b when the input
  channels allow it, else the largest divisor of the channels up to b (3 for an RGB image);
- element-wise operators of one tensor (relu, sigmoid, ...);
- add, subtract, multiply, divide of two same-shaped tensors, or of a tensor and a constant
  per channel ([C, 1, 1] or [1, C, 1, 1], re-laid out now) or a scalar;
- batch_norm (inference, constant statistics) as a multiply-add by constants per channel;
- max_pool2d and avg_pool2d; concat along the channels when every part is blocked.

Each other use of a converted value gets the NCHW value back through one `layout_transform`
(made once, where first needed), and so does a function output."""

from __future__ import annotations

import numpy as np

from schedlab.ir.function import IRModule
from schedlab.ir.transform import Pass, module_pass

from .. import expr as X
from ..functor import ExprMutator
from ..op import get_op
from ..struct_info import TensorStructInfo
from ._util import map_functions, used_vars

# A lone convolution keeps NCHW: its two layout transforms cost more than its scattered
# write-back (make bench-cpu's 3x3 layers, each a one-conv model: 0.87-0.95x onnxruntime in
# NCHW16c, 0.92-1.02x in NCHW; Zen 5, 2 cores).
MIN_CONVS = 2
_ARITHMETIC = ("relax.add", "relax.subtract", "relax.multiply", "relax.divide")
_POOLS = ("relax.nn.max_pool2d", "relax.nn.avg_pool2d")


def ConvertToBlockedLayout(block: int) -> Pass:  # noqa: N802 - TVM-style pass factory
    """The pass (see the module docstring) with channel block `block` (vector lanes)."""
    if not isinstance(block, int) or isinstance(block, bool) or block < 2:
        raise ValueError(f"ConvertToBlockedLayout: block must be an int >= 2, got {block!r}")

    @module_pass(name="ConvertToBlockedLayout")
    def convert_blocked_layout(mod: IRModule) -> IRModule:
        return map_functions(mod, lambda func: _convert_function(func, block))

    return convert_blocked_layout


def _convertible_conv(call) -> bool:
    """A float32 NCHW/OIHW conv2d, groups 1, whose weight is a constant."""
    if not isinstance(call, X.Call) or call.op != "relax.nn.conv2d":
        return False
    weight, attrs = call.args[1], call.attrs
    return (attrs.get("groups", 1) == 1 and attrs.get("data_layout", "NCHW") == "NCHW"
            and attrs.get("kernel_layout", "OIHW") == "OIHW"
            and (attrs.get("out_layout") or "NCHW") == "NCHW"
            and attrs.get("out_dtype") in (None, "", "float32")
            and isinstance(weight, X.Constant) and weight.data.dtype == np.float32
            and weight.data.ndim == 4)  # fmt: skip


def _convert_function(func: X.Function, block: int) -> X.Function:
    body = func.body
    if not isinstance(body, X.SeqExpr):
        return func
    convs = sum(_convertible_conv(b.value) for bs in body.blocks for b in bs.bindings)
    if convs < MIN_CONVS:
        return func
    blocks, changed = [], False
    for bindings in body.blocks:
        if isinstance(bindings, X.DataflowBlock):
            new = _Converter(block).convert(bindings)
            changed |= new is not bindings
            blocks.append(new)
        else:
            blocks.append(bindings)
    if not changed:
        return func
    return X.Function(func.params, X.SeqExpr(tuple(blocks), body.body), func.ret_struct_info,
                      func.attrs)  # fmt: skip


def _static_shape(expr) -> tuple[int, ...] | None:
    sinfo = expr.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        return None
    dims = [getattr(d, "value", None) for d in sinfo.shape]
    return None if None in dims else tuple(int(d) for d in dims)


def _dtype(expr) -> str | None:
    sinfo = expr.struct_info
    return str(sinfo.dtype) if isinstance(sinfo, TensorStructInfo) else None


class _Converter:
    """One dataflow block: `blocked[var]` is the NCHW{b}c value of an NCHW `var` (b = its
    block); `plain[var]` the NCHW value to use for `var` (itself unless it was converted)."""

    def __init__(self, block: int):
        self.block = block
        self.out: list[X.Binding] = []
        self.blocked: dict[X.Var, tuple[X.Var, int]] = {}
        self.plain: dict[X.Var, X.Var] = {}
        self.converted: set[X.Var] = set()  # bound only in the blocked layout
        # blocked values whose channels were padded up to whole blocks (1000 classes as 1008):
        # the padding lanes hold whatever the operators made of zeros; no operator that mixes
        # channels (a conv reading them, a concat) takes them, and going back to NCHW crops
        self.padded: set[X.Var] = set()

    def convert(self, bindings: X.DataflowBlock) -> X.DataflowBlock:
        for binding in bindings.bindings:
            if not (isinstance(binding, X.VarBinding) and self._rewrite(binding)):
                self._keep(binding)
        if not self.converted:
            return bindings
        # a converted value visible after the block is bound again in NCHW, under its name
        for var in [v for v in self.converted if not isinstance(v, X.DataflowVar)]:
            self._emit(self._to_plain_call(var), var)
        return X.DataflowBlock(tuple(self.out))

    # -- emitting -----------------------------------------------------------------------------
    def _emit(self, value: X.Expr, var: X.Var | None = None, hint: str = "lv") -> X.Var:
        if var is None:
            var = X.DataflowVar(hint, value.struct_info)
        self.out.append(X.VarBinding(var, value))
        return var

    def _keep(self, binding: X.Binding) -> None:
        """`binding` as it is, reading the NCHW value of every converted var it uses."""
        needed = [v for v in used_vars(binding.value) if v in self.converted]
        if needed:
            mutator = ExprMutator()
            mutator.var_remap.update({v: self._plain(v) for v in needed})
            value = mutator.visit(binding.value)
            if isinstance(binding, X.MatchCast):
                binding = X.MatchCast(binding.var, value, binding.struct_info)
            else:
                binding = X.VarBinding(binding.var, value)
        self.out.append(binding)

    def _to_plain_call(self, var: X.Var) -> X.Call:
        value, b = self.blocked[var]
        attrs = {"src_layout": f"NCHW{b}c", "dst_layout": "NCHW"}
        if var in self.padded:
            attrs["channels"] = _static_shape(var)[1]
        return X.Call("relax.layout_transform", (value,), attrs)

    def _plain(self, var: X.Var) -> X.Var:
        if var not in self.plain:
            self.plain[var] = self._emit(self._to_plain_call(var), hint=f"{var.name_hint}_nchw")
        return self.plain[var]

    def _blocked_value(self, expr: X.Expr, b: int) -> X.Expr | None:
        """`expr` (an NCHW tensor) in NCHW{b}c: its converted value, or a transform of it."""
        if (isinstance(expr, X.Var) and expr in self.blocked and self.blocked[expr][1] == b
                and expr not in self.padded):  # fmt: skip
            return self.blocked[expr][0]
        if not isinstance(expr, X.Var):
            return None
        shape = _static_shape(expr)
        if shape is None or len(shape) != 4 or shape[1] % b:
            return None
        source = self._plain(expr) if expr in self.converted else expr
        value = X.Call("relax.layout_transform", (source,),
                       {"src_layout": "NCHW", "dst_layout": f"NCHW{b}c"})  # fmt: skip
        var = self._emit(value, hint=f"{expr.name_hint}_nchw{b}c")
        if expr not in self.blocked:
            self.blocked[expr] = (var, b)
        return var

    def _define(self, var: X.Var, value: X.Expr) -> bool:
        """Bind `var`'s blocked value to `value` (the original binding disappears)."""
        self.blocked[var] = (self._emit(value, hint=f"{var.name_hint}_c"), self.block)
        self.converted.add(var)
        if _static_shape(var)[1] % self.block:
            self.padded.add(var)
        return True

    # -- rewriting ----------------------------------------------------------------------------
    def _rewrite(self, binding: X.VarBinding) -> bool:
        call = binding.value
        if not isinstance(call, X.Call) or not isinstance(call.op, str):
            return False
        shape = _static_shape(binding.var)
        if _dtype(binding.var) != "float32" or shape is None or len(shape) != 4:
            return False
        if call.op == "relax.nn.conv2d":
            return self._conv2d(binding.var, call)
        if call.op in _ARITHMETIC:
            return self._arithmetic(binding.var, call)
        if call.op == "relax.nn.batch_norm":
            return self._batch_norm(binding.var, call)
        if call.op in _POOLS:
            return self._pool(binding.var, call)
        if call.op == "relax.concat":
            return self._concat(binding.var, call)
        if call.op == "relax.mean":
            return self._mean(binding.var, call)
        try:
            spec = get_op(call.op)
        except KeyError:  # not a graph operator (call_tir of a kernel, ...): left as it is
            return False
        if spec.pattern == "elemwise" and len(call.args) == 1:
            data = self._converted_input(call.args[0])
            return data is not None and self._define(binding.var, X.Call(call.op, (data,),
                                                                         call.attrs))  # fmt: skip
        return False

    def _converted_input(self, expr: X.Expr) -> X.Var | None:
        """The blocked value of `expr` when it already has one (converting an input only for
        an element-wise operator would add a copy and save nothing)."""
        if isinstance(expr, X.Var) and expr in self.blocked and self.blocked[expr][1] == self.block:
            return self.blocked[expr][0]
        return None

    def _conv2d(self, var: X.Var, call: X.Call) -> bool:
        if not _convertible_conv(call):
            return False
        data, weight = call.args
        attrs = call.attrs
        channels = int(weight.data.shape[1])
        inner = max(d for d in range(1, min(self.block, channels) + 1) if channels % d == 0)
        if isinstance(data, X.Var) and data in self.blocked and channels % self.block == 0:
            inner = self.block
        blocked_data = self._blocked_value(data, inner)
        if blocked_data is None:
            return False
        w, b = weight.data, self.block
        o = self._padded(w.shape[0])  # output channels padded with zero filters
        w = np.concatenate([w, np.zeros((o - w.shape[0], *w.shape[1:]), w.dtype)])
        packed = w.reshape(o // b, b, channels // inner, inner, *w.shape[2:])
        packed = np.ascontiguousarray(packed.transpose(0, 2, 4, 5, 3, 1))
        new_attrs = {**attrs, "data_layout": f"NCHW{inner}c", "kernel_layout":
                     f"OIHW{inner}i{b}o", "out_layout": f"NCHW{b}c"}  # fmt: skip
        return self._define(var, X.Call(call.op, (blocked_data, X.Constant(packed)), new_attrs))

    def _per_channel(self, const: X.Constant, channels: int, fill: float = 0.0):
        """A constant broadcast against [N, C, H, W], in NCHW{b}c (padded channels `fill`);
        None when it is not per channel or scalar."""
        data = const.data
        if data.size == 1:
            return X.Constant(data.reshape(()))
        squeezed = data.reshape(-1) if data.size == channels else None
        per_channel = data.ndim in (3, 4) and data.shape[-3] == channels and data.shape[-2:] == (
            1, 1) and (data.ndim == 3 or data.shape[0] == 1)  # fmt: skip
        if squeezed is None or not per_channel:
            return None
        return X.Constant(self._blocked_channels(squeezed, fill))

    def _padded(self, channels: int) -> int:
        """The channel count of a blocked tensor: `channels` when whole blocks, else padded to
        an even number of blocks (register tiles take two blocks at a time: light_squeezenet's
        1000 classes as 1024 ran its 512 -> 1000 conv at 249 GFLOP/s, as 1008 at 208)."""
        b = self.block
        return channels if channels % b == 0 else -(-channels // (2 * b)) * 2 * b

    def _blocked_channels(self, values: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """Per-channel `values` as [1, C / b, 1, 1, b] (padded with `fill` to whole blocks)."""
        b = self.block
        padded = self._padded(values.size)
        full = np.full(padded, fill, values.dtype)
        full[: values.size] = values
        return full.reshape(1, padded // b, 1, 1, b)

    def _arithmetic(self, var: X.Var, call: X.Call) -> bool:
        lhs, rhs = call.args
        shape = _static_shape(var)
        operands = []
        for expr in (lhs, rhs):
            if isinstance(expr, X.Constant):
                fill = 1.0 if call.op == "relax.divide" else 0.0  # no 0 / 0 in the padding
                operands.append(self._per_channel(expr, shape[1], fill))
            elif _static_shape(expr) == shape:
                operands.append(expr)
            else:
                return False
        if None in operands:
            return False
        if not any(self._converted_input(e) is not None for e in operands):
            return False  # nothing blocked flows in: converting would only add copies
        values = [e if isinstance(e, X.Constant) else self._operand(e) for e in operands]
        return None not in values and self._define(var, X.Call(call.op, tuple(values),
                                                               call.attrs))  # fmt: skip

    def _operand(self, expr: X.Expr) -> X.Expr | None:
        """An element-wise operand in NCHW{b}c: its blocked value (padded or not), or a
        transform of it."""
        converted = self._converted_input(expr)
        return converted if converted is not None else self._blocked_value(expr, self.block)

    def _batch_norm(self, var: X.Var, call: X.Call) -> bool:
        data, *stats = call.args
        data_value = self._converted_input(data)
        channels = _static_shape(var)[1]
        if (data_value is None or call.attrs.get("axis", 1) != 1 or len(stats) != 4
                or not all(isinstance(s, X.Constant) and s.data.shape == (channels,)
                           for s in stats)):  # fmt: skip
            return False
        gamma, beta, mean, variance = (s.data.astype(np.float64) for s in stats)
        scale = gamma / np.sqrt(variance + float(call.attrs.get("epsilon", 1e-5)))
        shift = beta - mean * scale
        as_blocked = [X.Constant(self._blocked_channels(v.astype(np.float32)))
                      for v in (scale, shift)]  # fmt: skip
        scaled = self._emit(X.Call("relax.multiply", (data_value, as_blocked[0])),
                            hint=f"{var.name_hint}_scale")  # fmt: skip
        return self._define(var, X.Call("relax.add", (scaled, as_blocked[1])))

    def _pool(self, var: X.Var, call: X.Call) -> bool:
        data = self._converted_input(call.args[0])
        attrs = call.attrs
        if data is None or attrs.get("layout", "NCHW") != "NCHW" or (
                attrs.get("out_layout") or "NCHW") != "NCHW":  # fmt: skip
            return False
        layout = f"NCHW{self.block}c"
        return self._define(var, X.Call(call.op, (data,), {**attrs, "layout": layout,
                                                           "out_layout": layout}))  # fmt: skip

    def _concat(self, var: X.Var, call: X.Call) -> bool:
        tupled = len(call.args) == 1 and isinstance(call.args[0], X.Tuple)
        parts = call.args[0].fields if tupled else call.args
        if call.attrs.get("axis") not in (1, -3):
            return False
        values = [self._converted_input(p) for p in parts]
        if None in values or any(p in self.padded for p in parts):
            return False
        args = (X.Tuple(tuple(values)),) if tupled else tuple(values)
        return self._define(var, X.Call(call.op, args, {**call.attrs, "axis": 1}))

    def _mean(self, var: X.Var, call: X.Call) -> bool:
        """A mean over the image (global average pooling), keeping its dimensions."""
        data = self._converted_input(call.args[0])
        axes = call.attrs.get("axis")
        if data is None or not call.attrs.get("keepdims") or axes is None:
            return False
        if sorted(a % 4 for a in axes) != [2, 3]:
            return False
        return self._define(var, X.Call(call.op, (data,), {**call.attrs, "axis": [2, 3]}))
