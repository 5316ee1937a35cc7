"""Shared by the tuner's tests: a private kernel cache, and a kernel that really crashes."""

import os

import pytest

# a store whose address grows by 4 MiB per iteration: the first pages past the heap fault
SEGV = """
@T.prim_func
def segv(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    T.func_attr({"global_symbol": "segv"})
    for i in range(T.int64(1099511627776)):
        B[i * T.int64(1048576)] = A[0]
"""


@pytest.fixture(scope="session", autouse=True)
def _private_kernel_cache(tmp_path_factory):
    # builders, runners and dask workers inherit the environment when they start, so it is set
    # before any of them starts
    previous = os.environ.get("SCHEDLAB_CACHE_DIR")
    os.environ["SCHEDLAB_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel-cache"))
    yield
    if previous is None:
        os.environ.pop("SCHEDLAB_CACHE_DIR", None)
    else:
        os.environ["SCHEDLAB_CACHE_DIR"] = previous
