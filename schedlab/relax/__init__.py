"""The graph IR (Relax style): struct info, expressions and bindings, the BlockBuilder, the
`R` construction namespace, and operators with shape inference and legalization to tensor
expressions (`schedlab.relax.op`). Passes, pipelines and the VM build on these."""

from . import op
from ._namespace import R, call, const
from .block_builder import BlockBuilder, BlockBuilderError, call_tir
from .expr import (
    Binding,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    Function,
    GlobalVar,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)  # fmt: skip
from .functor import ExprMutator
from .infer import GraphTypeError, infer_struct_info
from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)  # fmt: skip

__all__ = [
    "op", "R", "call", "const", "BlockBuilder", "BlockBuilderError", "call_tir", "Binding",
    "BindingBlock", "Call", "Constant", "DataflowBlock", "DataflowVar", "Expr", "Function",
    "GlobalVar", "If", "MatchCast", "PrimValue", "SeqExpr", "ShapeExpr", "StringImm", "Tuple",
    "TupleGetItem", "Var", "VarBinding", "GraphTypeError", "infer_struct_info",
    "FuncStructInfo", "ObjectStructInfo", "PrimStructInfo", "ShapeStructInfo", "StructInfo",
    "TensorStructInfo", "TupleStructInfo", "ExprMutator",
]  # fmt: skip

from .pipeline import get_default_pipeline, get_pipeline  # noqa: E402
from .vm import Executable, VirtualMachine  # noqa: E402

__all__ += ["get_pipeline", "get_default_pipeline", "Executable", "VirtualMachine"]


def __getattr__(name: str):
    # `relax.frontend` (model importers: `relax.frontend.from_onnx`, as in TVM) loads on first
    # use, so importing the graph IR does not load the importers' converter tables
    if name == "frontend":
        import importlib

        return importlib.import_module(".frontend", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "frontend"])
