"""`schedlab.te`: tensor expressions (as `tvm.te`) and their conversion to TensorIR PrimFuncs.

A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
k = te.reduce_axis((0, K), name="k")
C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
func = te.create_prim_func([A, B, C])
"""

from schedlab.ir.op import (
    abs,
    acos,
    all,
    any,
    asin,
    atan,
    atan2,
    cast,
    ceil,
    ceildiv,
    const,
    cos,
    cosh,
    div,
    erf,
    exp,
    exp2,
    exp10,
    floor,
    floordiv,
    floormod,
    fmod,
    if_then_else,
    isfinite,
    isinf,
    isnan,
    log,
    log1p,
    log2,
    log10,
    pow,
    round,
    rsqrt,
    select,
    sigmoid,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)  # fmt: skip

from .create import create_prim_func
from .reduction import CommReducer, Reduce, comm_reducer, max, max_value, min, min_value, sum
from .tensor import (
    AxisVar,
    ComputeOp,
    Operation,
    PlaceholderOp,
    Tensor,
    compute,
    placeholder,
    reduce_axis,
    size_var,
    var,
)  # fmt: skip

power = pow
indexdiv = floordiv
indexmod = floormod

__all__ = [name for name in dir() if not name.startswith("_")]
