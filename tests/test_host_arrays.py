"""Cache-line aligned host arrays: the VM's weights and storage, the tuner's inputs."""

import numpy as np
import pytest

from schedlab import workloads
from schedlab.host_arrays import CACHE_LINE, aligned, aligned_empty, aligned_zeros, is_aligned


@pytest.mark.parametrize("shape", [(), 7, (3, 5), (1, 4, 7, 7, 16)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "float64"])
def test_aligned_arrays_have_the_asked_shape_and_dtype(shape, dtype):
    for _ in range(8):  # numpy's own allocations land at 16-byte offsets most of the time
        array = aligned_empty(shape, dtype)
        assert array.ctypes.data % CACHE_LINE == 0
        assert array.shape == ((shape,) if isinstance(shape, int) else shape)
        assert array.dtype == np.dtype(dtype) and array.flags.c_contiguous
    assert not aligned_zeros(shape, dtype).any()


def test_aligned_copies_only_what_needs_it():
    raw = np.arange(100, dtype=np.float32)
    offset = raw[1:65]  # 4 bytes past wherever raw starts: never on a cache line
    copy = aligned(offset)
    assert is_aligned(copy) and copy is not offset
    np.testing.assert_array_equal(copy, offset)
    assert aligned(copy) is copy
    transposed = aligned(aligned_empty((4, 6), np.float32).T)
    assert transposed.flags.c_contiguous
    frozen = raw[1:65].copy()
    frozen.flags.writeable = False
    assert not aligned(frozen).flags.writeable  # a read-only weight stays read-only


def test_make_args_are_aligned():
    func = workloads.get("gemm", M=33, N=17, K=9)[0]
    assert all(is_aligned(a) for a in workloads.make_args(func, seed=3))
