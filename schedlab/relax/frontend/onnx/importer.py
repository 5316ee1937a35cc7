"""Reading an ONNX model into a graph function "main": graph inputs become parameters,
initializers become Constants, and each node goes through its converter (`registry.py`).
Calls whose inputs are all constants are evaluated at import time (shape computations of
exported models: Shape -> Gather -> Concat -> Reshape)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import numpy as np

from schedlab.errors import SchedlabError
from schedlab.ir.expr import IntImm, SizeVar
from schedlab.ir.function import IRModule
from schedlab.relax import expr as X
from schedlab.relax.block_builder import BlockBuilder
from schedlab.relax.struct_info import TensorStructInfo

from .registry import CONVERTERS

_FOLD_LIMIT = 1 << 16  # fold constant-only calls up to this many output elements


class OnnxImportError(SchedlabError, ValueError):
    """The model cannot be read or converted (the message names the node or file)."""


def from_onnx(model_or_path, shape_dict: Mapping | None = None) -> IRModule:
    """Import an ONNX model (a ModelProto, a file path or bytes) as an IRModule whose "main"
    takes the graph inputs (initializers excluded) and returns the graph output(s).
    `shape_dict` maps input names to shapes, overriding or filling in dynamic dims; dims still
    unknown become SizeVars (named after the ONNX dim_param when there is one)."""
    model = _load(model_or_path)
    opset = _opset(model)
    _check_supported(model.graph)
    return _Importer(model.graph, opset, dict(shape_dict or {})).run()


def _load(model_or_path):
    import onnx

    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    what = "the model bytes"
    try:
        if isinstance(model_or_path, (bytes, bytearray)):
            model = onnx.load_from_string(bytes(model_or_path))
        elif isinstance(model_or_path, (str, os.PathLike)):
            what = os.fspath(model_or_path)
            if os.path.isdir(what):  # "no such file" would be wrong: it exists
                raise OnnxImportError(
                    f"from_onnx: {what!r} is a directory; expected the path of an .onnx model file"
                )
            if not os.path.isfile(what):
                raise OnnxImportError(f"from_onnx: no such file {what!r}")
            model = onnx.load(what)
        else:
            raise TypeError(f"expected a ModelProto, a path or bytes, got {type(model_or_path)}")
        onnx.checker.check_model(model)
    except OnnxImportError:
        raise
    except Exception as err:  # protobuf DecodeError, checker errors: one line, no traceback
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise OnnxImportError(
            f"from_onnx: {what} is not a valid ONNX model ({type(err).__name__}: {first})"
        ) from None
    return model


def _opset(model) -> int:
    for item in model.opset_import:
        if item.domain in ("", "ai.onnx"):
            return int(item.version)
    return 1


def _check_supported(graph) -> None:
    """Raise one error listing every unsupported op type and the nodes that use it."""
    missing: dict[str, list[str]] = {}
    for k, node in enumerate(graph.node):
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        if node.domain not in ("", "ai.onnx") or node.op_type not in CONVERTERS:
            missing.setdefault(key, []).append(node.name or f"#{k}")
    if missing:
        parts = [f"{op} (nodes: {', '.join(nodes)})" for op, nodes in sorted(missing.items())]
        raise OnnxImportError(
            f"from_onnx: {len(missing)} unsupported ONNX op type(s): {'; '.join(parts)}"
        )


def _var_name(name: str) -> str:
    clean = re.sub(r"\W", "_", name) or "v"
    return f"v{clean}" if clean[0].isdigit() else clean


def attributes(node) -> dict:
    """A node's attributes as Python values (strings decoded, tensors as numpy arrays)."""
    from onnx import helper, numpy_helper

    out = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode()
        elif hasattr(value, "raw_data") and hasattr(value, "dims"):  # a TensorProto
            value = numpy_helper.to_array(value)
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        out[attr.name] = value
    return out


class _Importer:
    def __init__(self, graph, opset: int, shape_dict: dict):
        self.graph, self.opset, self.shape_dict = graph, opset, shape_dict
        self.values: dict[str, X.Expr] = {}
        self.bb = BlockBuilder()
        self.dim_vars: dict[str, SizeVar] = {}

    def run(self) -> IRModule:
        from onnx import numpy_helper

        for init in self.graph.initializer:
            self.values[init.name] = X.Constant(numpy_helper.to_array(init))
        unknown = sorted(set(self.shape_dict) - {inp.name for inp in self.graph.input})
        if unknown:
            raise OnnxImportError(f"from_onnx: shape_dict names no graph input: {unknown}")
        params = [self._param(inp) for inp in self.graph.input if inp.name not in self.values]
        with self.bb.function("main", params):
            with self.bb.dataflow():
                for k, node in enumerate(self.graph.node):
                    self._convert(node, k)
                outputs = [self._output(out.name) for out in self.graph.output]
                result = outputs[0] if len(outputs) == 1 else X.Tuple(tuple(outputs))
                gv = self.bb.emit_output(result, "output")
            self.bb.emit_func_output(gv)
        return self.bb.get()

    def _param(self, inp) -> X.Var:
        from onnx import helper

        ttype = inp.type.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(ttype.elem_type))
        given = self.shape_dict.get(inp.name)
        if given is None and not ttype.HasField("shape"):
            raise OnnxImportError(
                f"from_onnx: input {inp.name!r} has unknown rank; give its shape in shape_dict"
            )
        dims = list(ttype.shape.dim)
        if given is not None and dims and len(given) != len(dims):
            raise OnnxImportError(
                f"from_onnx: shape_dict[{inp.name!r}] has rank {len(given)}, the model's "
                f"input has rank {len(dims)}"
            )
        n = len(given) if given is not None else len(dims)
        shape = [self._dim(inp.name, k, dims[k] if k < len(dims) else None, given)
                 for k in range(n)]  # fmt: skip
        var = X.Var(_var_name(inp.name), TensorStructInfo(tuple(shape), str(dtype)))
        self.values[inp.name] = var
        return var

    def _dim(self, name: str, k: int, dim, given):
        if given is not None and given[k] is not None and not _is_unknown(given[k]):
            return given[k]
        if dim is not None and dim.HasField("dim_value") and dim.dim_value > 0:
            return int(dim.dim_value)
        label = dim.dim_param if dim is not None and dim.dim_param else f"{name}_dim{k}"
        label = _var_name(label)
        if label not in self.dim_vars:
            self.dim_vars[label] = SizeVar(label)
        return self.dim_vars[label]

    def _output(self, name: str) -> X.Expr:
        if name not in self.values:
            raise OnnxImportError(f"from_onnx: graph output {name!r} is produced by no node")
        return self.values[name]

    def _convert(self, node, k: int) -> None:
        label = f"node {node.name or '#' + str(k)} ({node.op_type})"
        inputs = []
        for name in node.input:
            if name and name not in self.values:
                raise OnnxImportError(f"from_onnx: {label}: input {name!r} is not defined")
            inputs.append(self.values[name] if name else None)
        ctx = Context(self.bb, label)
        try:
            result = CONVERTERS[node.op_type](ctx, node, inputs, attributes(node), self.opset)
        except OnnxImportError:
            raise
        except (SchedlabError, TypeError, ValueError, KeyError, IndexError) as err:
            message = err.args[0] if isinstance(err, KeyError) and err.args else err
            raise OnnxImportError(f"from_onnx: {label}: {message}") from None
        results = result if isinstance(result, tuple) else (result,)
        outputs = [name for name in node.output]
        if len(results) < len([o for o in outputs if o]):
            raise OnnxImportError(
                f"from_onnx: {label}: {len(outputs)} outputs requested, only {len(results)} "
                f"supported"
            )
        for name, value in zip(outputs, results):
            if name:
                self.values[name] = value


def _is_unknown(value) -> bool:
    return isinstance(value, int) and value < 0


class Context:
    """What a converter uses: emit operators (constant inputs are folded), read constant
    inputs as numpy arrays, and look at shapes and dtypes. Errors name the node."""

    def __init__(self, bb: BlockBuilder, label: str):
        self.bb, self.label = bb, label

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(f"from_onnx: {self.label}: {message}")

    def emit(self, op_name: str, *args: X.Expr, **attrs) -> X.Expr:
        """Bind a call of the registered operator `op_name` (or fold it into a Constant when
        every input is a small constant)."""
        call = X.Call(op_name, tuple(args), attrs)
        call = self.bb.normalize(call, self.label)
        if all(isinstance(a, X.Constant) for a in args) and _small(call.struct_info):
            from schedlab.relax.interpreter import run_op

            value = run_op(op_name, [a.data for a in args], attrs)
            if isinstance(value, tuple):
                return tuple(X.Constant(v) for v in value)
            return X.Constant(value)
        var = self.bb.emit(call)
        sinfo = call.struct_info
        if hasattr(sinfo, "fields"):
            return tuple(self.bb.emit(X.TupleGetItem(var, i)) for i in range(len(sinfo.fields)))
        return var

    @staticmethod
    def const(value, dtype=None) -> X.Constant:
        return X.Constant(np.asarray(value, dtype=dtype))

    def value(self, expr: X.Expr | None, what: str) -> np.ndarray:
        """The numpy value of a constant input (shapes, axes, pads must be constants)."""
        if not isinstance(expr, X.Constant):
            raise self.error(f"{what} must be a constant (an initializer or Constant node)")
        return expr.data

    def shape(self, expr: X.Expr) -> tuple:
        """The shape: ints where static, PrimExprs where symbolic."""
        sinfo = expr.struct_info
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
            raise self.error(f"needs an input of known shape, got {sinfo}")
        return tuple(d.value if isinstance(d, IntImm) else d for d in sinfo.shape)

    def static_shape(self, expr: X.Expr, what: str = "the input") -> tuple[int, ...]:
        shape = self.shape(expr)
        if not all(isinstance(d, int) for d in shape):
            raise self.error(f"{what} must have a static shape, got {shape}")
        return shape

    def ndim(self, expr: X.Expr) -> int:
        return len(self.shape(expr))

    def dtype(self, expr: X.Expr) -> str:
        return str(expr.struct_info.dtype)


def _small(sinfo) -> bool:
    fields = sinfo.fields if hasattr(sinfo, "fields") else (sinfo,)
    for field in fields:
        shape = field.static_shape() if isinstance(field, TensorStructInfo) else None
        if shape is None or int(np.prod(shape)) > _FOLD_LIMIT:
            return False
    return True
