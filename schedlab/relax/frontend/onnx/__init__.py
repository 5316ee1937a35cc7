"""The ONNX importer: `from_onnx(model_or_path, shape_dict=None) -> IRModule`.

    mod = from_onnx("model.onnx", shape_dict={"x": (1, 3, 32, 32)})
    out = schedlab.relax.interpreter.run(mod, x)

Each ONNX op type has one converter (`CONVERTERS`: op_type -> converter(ctx, node, inputs,
attrs, opset)) mapping it onto the registered graph operators.
"""

from . import _math, _nn, _resize, _shape  # noqa: F401 - converter families register here
from .importer import OnnxImportError, from_onnx
from .registry import CONVERTERS, supported_ops

__all__ = ["CONVERTERS", "OnnxImportError", "from_onnx", "supported_ops"]
