"""`schedlab.workloads`: standard operator workloads, each a PrimFunc factory plus a numpy
reference.

    func, reference = schedlab.workloads.get("gemm", M=64, N=48, K=80)
    args = schedlab.workloads.make_args(func)
    schedlab.interpret(func, *args)
    np.testing.assert_allclose(args[-1], reference(*args[:-1]), rtol=1e-5)
"""

# importing a family registers its workloads; names() lists them in this order
from . import matmul  # isort: skip
from . import conv, conv_special, norm, reduce, elemwise  # isort: skip
from .registry import (
    NUM_OUTPUTS_ATTR,
    Workload,
    get,
    load_plugins,
    make_args,
    names,
    register,
    spec,
)  # fmt: skip

__all__ = [
    "NUM_OUTPUTS_ATTR", "Workload", "get", "load_plugins", "make_args", "names", "register",
    "spec",
]  # fmt: skip
