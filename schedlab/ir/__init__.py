"""The loop IR (TensorIR style): dtypes, expressions, statements, buffers, functions, modules,
visitors, structural equality and the verifier."""

from . import op
from .buffer import Buffer, BufferRegion, MatchBufferRegion, decl_buffer
from .dtype import DataType, as_dtype
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Range,
    Select,
    SizeVar,
    StringImm,
    Sub,
    Var,
)  # fmt: skip
from .function import BaseFunc, IRModule, PrimFunc
from .functor import (
    Mutator,
    Visitor,
    collect_vars,
    ir_transform,
    post_order_visit,
    pre_order_visit,
    substitute,
)  # fmt: skip
from .intrin import INTRINSICS, register_intrinsic
from .node import Node
from .op import const
from .stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterType,
    IterVar,
    LetStmt,
    SeqStmt,
    Stmt,
)  # fmt: skip
from .structural import (
    assert_structural_equal,
    structural_equal,
    structural_fingerprint,
    structural_hash,
)  # fmt: skip
from .verify import VerifyError, verify

__all__ = [name for name in dir() if not name.startswith("_")]
