"""Shared by the tuner's tests: a private kernel cache, and a kernel that really crashes."""

# builders, runners and dask workers inherit the environment when they start: the backend tests'
# session-wide private cache is set before any of them starts
from ..backend.conftest import _private_kernel_cache  # noqa: F401 - a fixture, used by name

# a store whose address grows by 4 MiB per iteration: the first pages past the heap fault
SEGV = """
@T.prim_func
def segv(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"global_symbol": "segv"})
    for i in range(T.int64(1099511627776)):
        B[i * T.int64(1048576)] = A[0]
"""
