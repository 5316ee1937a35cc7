"""`schedlab.build` end to end (te -> lower -> C -> gcc -> ctypes) and the Kernel API:
argument checking, benchmark timings, allocation failure, module selection."""

import numpy as np
import pytest

import schedlab
from schedlab import te
from schedlab.backend import get_backend
from schedlab.ir import Allocate, BufferStore, IRModule, Var
from schedlab.ir.buffer import decl_buffer
from schedlab.ir.transform import PassContext, PassRecorder
from schedlab.timing import Timings

from ._lowered import Params, build, f32, i32, loop, seq


def _te_gemm(m, n, k, name="gemm"):
    A = te.placeholder((m, k), "float32", "A")
    B = te.placeholder((k, n), "float32", "B")
    r = te.reduce_axis((0, k), "k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C]).with_attr("global_symbol", name)


@pytest.fixture(scope="module")
def gemm_kernel():
    return schedlab.build(_te_gemm(17, 23, 29), target="cpu")


def _gemm_arrays(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((17, 29), dtype="float32")
    b = rng.standard_normal((29, 23), dtype="float32")
    return a, b, np.zeros((17, 23), "float32")


def test_build_te_gemm_matches_numpy(gemm_kernel):
    a, b, c = _gemm_arrays()
    gemm_kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert "int32_t gemm(" in gemm_kernel.source
    assert "gemm" in gemm_kernel.lowered and gemm_kernel.target == schedlab.Target("cpu")
    assert repr(gemm_kernel) == "<Kernel gemm(A, B, C) for cpu>"


def test_hoisted_init_leaves_the_k_loop_branch_free(gemm_kernel):
    source = gemm_kernel.source
    k_loop = source[source.index("// loop k") :]
    assert "if (" not in k_loop[: k_loop.index("}")]


def test_lowering_passes_are_recorded():
    recorder = PassRecorder()
    with PassContext(instruments=[recorder]):
        schedlab.build(_te_gemm(5, 6, 7, "recorded"))
    names = [record.name for record in recorder.records]
    assert "FlattenBuffer" in names and "LowerInitBlock" in names


@pytest.mark.parametrize(
    "args,match",
    [
        (lambda a, b, c: (a, b), r"expected 3 argument\(s\) \(A, B, C\), got 2"),
        (lambda a, b, c: (a.astype("float64"), b, c), r"argument A dtype: expected float32"),
        (lambda a, b, c: (a[:, :28], b, c), r"argument A.*expected 29, got 28"),
        (lambda a, b, c: (a, b, np.zeros((23, 17), "float32")), r"argument C shape\[0\]"),
        (lambda a, b, c: (np.asfortranarray(a), b, c), r"argument A layout"),
        (lambda a, b, c: (a, b, [[0.0]]), r"argument C: expected a numpy array"),
    ],
)
def test_argument_errors_name_parameter_expected_and_actual(gemm_kernel, args, match):
    with pytest.raises(ValueError, match=match):
        gemm_kernel(*args(*_gemm_arrays()))


def test_read_only_output_is_rejected(gemm_kernel):
    a, b, c = _gemm_arrays()
    c.flags.writeable = False
    with pytest.raises(ValueError, match="argument C: expected a writable array"):
        gemm_kernel(a, b, c)


def test_overlapping_arguments_are_rejected():
    p = Params()
    A, C = p.buf("A", 8), p.buf("C", 8)
    i = Var("i")
    kernel = build(p.func(loop(i, 8, BufferStore(C, A[i] + f32(1.0), (i,))), "overlap"))
    data = np.zeros(8, "float32")
    with pytest.raises(ValueError, match="arguments C and A overlap in memory"):
        kernel(data, data)
    base = np.zeros(16, "float32")
    kernel(base[:8], base[8:])  # disjoint views of one array are fine
    np.testing.assert_array_equal(base[8:], 1.0)


def test_benchmark_returns_timings(gemm_kernel):
    timings = gemm_kernel.benchmark(*_gemm_arrays(), repeat=3, min_repeat_ms=2)
    assert isinstance(timings, Timings)
    assert len(timings.all) == 3 and timings.number >= 1
    assert 0 < timings.min <= timings.median <= max(timings.all)
    assert gemm_kernel.time_per_call == timings.median
    fixed = gemm_kernel.benchmark(*_gemm_arrays(), number=4, repeat=2)
    assert fixed.number == 4 and len(fixed.all) == 2
    with pytest.raises(ValueError, match="repeat must be >= 1"):
        gemm_kernel.benchmark(*_gemm_arrays(), repeat=0)


def test_failed_scratch_allocation_raises_memory_error():
    p = Params()
    A = p.buf("A", 1)
    n = p.scalar("n", "int64")
    scratch = decl_buffer((n,), "float32", "scratch")
    first = i32(0).astype("int64")
    body = Allocate(
        scratch,
        seq(BufferStore(scratch, f32(7.0), (first,)), BufferStore(A, scratch[first], (i32(0),))),
    )
    kernel = build(p.func(body, "huge_scratch"))
    a = np.zeros(1, "float32")
    kernel(a, 16)
    assert a[0] == 7.0
    with pytest.raises(MemoryError, match="could not allocate"):
        kernel(a, 2**60)


def test_build_selects_a_function_of_a_module():
    mod = IRModule({"first": _te_gemm(3, 4, 5, "first"), "second": _te_gemm(4, 3, 2, "second")})
    with pytest.raises(ValueError, match="pass name= to choose one"):
        schedlab.build(mod)
    kernel = schedlab.build(mod, name="second")
    a, b, c = np.ones((4, 2), "float32"), np.ones((2, 3), "float32"), np.zeros((4, 3), "float32")
    kernel(a, b, c)
    np.testing.assert_array_equal(c, 2.0)


def test_unknown_target_and_missing_backend():
    with pytest.raises(ValueError, match="valid kinds"):
        schedlab.build(_te_gemm(2, 2, 2), target="vulkan")
    assert get_backend("cuda").__name__ == "schedlab.backend.cuda"
    assert get_backend("adreno").__name__ == "schedlab.backend.opencl"


def test_checked_once_launch_checks_each_new_signature_and_every_overlap(gemm_kernel):
    """The VM's launch path: equal results, a changed shape or dtype gets the full check (and
    its clear error), overlapping arrays are refused on every call."""
    a, b, c = _gemm_arrays()
    gemm_kernel.call_checked_once((a, b, c))
    first = c.copy()
    c[:] = 0
    gemm_kernel.call_checked_once((a, b, c))  # signature known: the fast launch
    np.testing.assert_array_equal(c, first)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="argument A shape"):
        gemm_kernel.call_checked_once((a[:, :5].copy(), b, c))
    with pytest.raises(ValueError, match="argument B dtype"):
        gemm_kernel.call_checked_once((a, b.astype("float64"), c))
    p = Params()
    A, C = p.buf("A", 8), p.buf("C", 8)
    i = Var("i")
    kernel = build(p.func(loop(i, 8, BufferStore(C, A[i] + f32(1.0), (i,))), "overlap2"))
    out = np.zeros(8, "float32")
    kernel.call_checked_once((np.ones(8, "float32"), out))  # remembered: a dead array ...
    kernel.call_checked_once((np.full(8, 2, "float32"), out))  # ... is never taken for a new one
    np.testing.assert_array_equal(out, np.full(8, 3, "float32"))
    base = np.zeros(16, "float32")
    kernel.call_checked_once((base[8:], base[:8]))
    with pytest.raises(ValueError, match="arguments C and A overlap in memory"):
        kernel.call_checked_once((base[:8], base[:8]))


def test_checked_once_launch_keeps_no_argument_alive(gemm_kernel):
    """The launch remembered for the next call holds its arrays weakly: a caller's arrays die
    with the caller's last reference."""
    import weakref

    a, b, c = _gemm_arrays()
    gemm_kernel.call_checked_once((a, b, c))
    gemm_kernel.call_checked_once((a, b, c))  # the remembered launch
    gone = weakref.ref(c)
    del c
    assert gone() is None
