"""dlight.gpu.MatmulTensorization and the CUDA tensor-core intrinsics (schedlab.ir.mma,
schedlab.schedule.intrinsics.cuda, schedlab.backend.gpu.mma).

No GPU here: the tensorized schedules are checked numerically by the interpreter (which runs
each warp-level call by its numpy emulation on whole 16 x 16 tiles), and their CUDA C is
compiled to PTX by NVRTC and by `nvcc -arch=sm_90 -ptx`, whose output must hold the mma.sync
and ldmatrix instructions. Nothing here runs on a GPU."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

import schedlab
from schedlab import bench_gpu, te, workloads
from schedlab.backend.gpu import CudaRenderer, HipRenderer
from schedlab.dlight import gpu
from schedlab.dlight.base import schedule_func
from schedlab.errors import LoweringError
from schedlab.schedule.intrinsics import cuda as cuda_intrin
from schedlab.schedule.tensor_intrin import TensorIntrin
from schedlab.target import Target
from schedlab.transform import lower

from ..backend.test_gpu_fp16 import nvcc_ptx
from .test_gpu_rules import H100, needs_nvrtc

A100 = Target("a100")
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def gemm(M, N, K, layout="NN", out="float16", batch=None):
    """C = A @ B (NN) or A @ B^T with B stored (N, K) (NT); fp16 inputs; `out` float32: the
    products cast to fp32 and summed in fp32."""
    lead = (batch,) if batch else ()
    A = te.placeholder((*lead, M, K), "float16", name="A")
    B = te.placeholder((*lead, K, N) if layout == "NN" else (*lead, N, K), "float16", name="B")
    k = te.reduce_axis((0, K), name="k")

    def product(*idx):
        *b, i, j = idx
        a = A[(*b, i, k)]
        w = B[(*b, k, j)] if layout == "NN" else B[(*b, j, k)]
        if out == "float32":
            a, w = a.astype("float32"), w.astype("float32")
        return te.sum(a * w, axis=k)

    C = te.compute((*lead, M, N), product, name="C")
    return te.create_prim_func([A, B, C])


def reference(a, b, layout):
    b = b.astype(np.float32)
    return a.astype(np.float32) @ (b if layout == "NN" else np.swapaxes(b, -1, -2))


def operands(M, N, K, layout, batch=None, seed=0):
    rng = np.random.default_rng(seed)
    lead = (batch,) if batch else ()
    a = rng.uniform(-1, 1, (*lead, M, K)).astype(np.float16)
    b_shape = (*lead, K, N) if layout == "NN" else (*lead, N, K)
    return a, rng.uniform(-1, 1, b_shape).astype(np.float16)


def schedule(func, target=H100):
    sch, fired = schedule_func(func, gpu.default_rules(), target)
    return sch.func, fired


# -- the intrinsics -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in TensorIntrin.names() if n.startswith("cuda_mma")])
def test_each_intrinsics_implementation_computes_its_description(name):
    """The interpreter runs the description's loops and the implementation's warp-level call
    on the same inputs: moves are exact, a 16 x 16 x 16 product agrees to fp16 rounding."""
    intrin = TensorIntrin.get(name)
    rng = np.random.default_rng(1)
    arrays = [rng.uniform(-1, 1, [s.value for s in b.shape]).astype(b.dtype.numpy)
              for b in intrin.desc.buffers]  # fmt: skip
    by_desc, by_impl = [a.copy() for a in arrays], [a.copy() for a in arrays]
    schedlab.interpret(intrin.desc, *by_desc)
    schedlab.interpret(intrin.impl, *by_impl)
    tol = 2e-2 if "sync" in name and name.endswith("f16") else 1e-5
    for want, got in zip(by_desc, by_impl):
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=tol)
    assert not all(np.array_equal(a, b) for a, b in zip(arrays, by_desc))  # it did something


def test_the_intrinsic_set_covers_both_layouts_and_accumulator_types():
    names = set(TensorIntrin.names())
    assert {cuda_intrin.LOAD_A, *cuda_intrin.LOAD_B.values()} <= names
    assert set(cuda_intrin.SYNC.values()) | set(cuda_intrin.FILL.values()) <= names
    assert set(cuda_intrin.STORE.values()) <= names


# -- the rule: which blocks it takes --------------------------------------------------------------
@pytest.mark.parametrize(
    "M, N, K, layout, out, batch",
    [(128, 128, 64, "NN", "float16", None), (256, 128, 96, "NT", "float16", None),
     (64, 96, 48, "NN", "float32", None), (128, 64, 32, "NT", "float32", None),
     (64, 64, 32, "NN", "float16", 3)],
)  # fmt: skip
def test_tensorized_gemm_interpreted_matches_numpy(M, N, K, layout, out, batch):
    func, fired = schedule(gemm(M, N, K, layout, out, batch))
    assert fired == {"C": "MatmulTensorization"}
    text = func.script()
    for op in ("mma_load_a", "mma_load_b", "mma_sync", "mma_fill", "mma_store"):
        assert f'"{op}"' in text
    a, b = operands(M, N, K, layout, batch)
    c = np.zeros((*a.shape[:-1], N), out)
    schedlab.interpret(func, a, b, c)
    want = reference(a, b, layout)
    # fp32 accumulation in both: the only difference left is the final rounding to fp16
    tol = 1e-2 if out == "float16" else 1e-4
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "case, target",
    [("odd sizes", H100), ("fp32", H100), ("sm_75", Target("cuda", arch="sm_75")),
     ("rocm", Target("mi300x")), ("A stored [k, m]", H100)],
)  # fmt: skip
def test_other_blocks_fall_through_to_matmul(case, target):
    if case == "odd sizes":
        func = gemm(128, 120, 64)  # N is not a multiple of 32
    elif case == "fp32":
        func = workloads.get("gemm", M=128, N=128, K=64)[0]
    elif case == "A stored [k, m]":
        A = te.placeholder((64, 128), "float16", name="A")
        B = te.placeholder((64, 128), "float16", name="B")
        k = te.reduce_axis((0, 64), name="k")
        C = te.compute((128, 128), lambda i, j: te.sum(A[k, i] * B[k, j], axis=k), name="C")
        func = te.create_prim_func([A, B, C])
    else:
        func = gemm(128, 128, 64)
    _, fired = schedule(func, target)
    assert fired == {"C": "Matmul"}


def test_the_rule_comes_before_matmul_in_the_default_rules():
    names = [rule.name for rule in gpu.default_rules()]
    assert names.index("MatmulTensorization") == names.index("Matmul") - 1


# -- CUDA C and PTX ---------------------------------------------------------------------------
def test_cuda_source_keeps_fragments_in_registers():
    func, _ = schedule(gemm(128, 128, 64))
    source = CudaRenderer(H100).render(lower(func, H100)).source
    # 2 x 2 warps of 64 x 64: 16 accumulator tiles x 8 floats per lane; 4 A and 4 B tiles
    assert "float C_mma_accumulator[128];" in source
    assert "uint32_t A_shared_mma_matrix_a[16];" in source
    # the second B tile of a warp: 16 columns on, rows 128 apart, stored [k, n] (.trans)
    load_b = r"sl_mma_load_b\(\(B_shared_mma_matrix_b \+ 4\), \(B_shared \+ \(k_1 \* 2048 \+ " \
        r"\w+ \* 64 \+ 16\)\), 128, 1\);"  # fmt: skip
    assert re.search(load_b, source)
    assert "sl_mma_store_f16((C + (" in source and "__syncthreads();" in source
    assert "__launch_bounds__(128)" in source
    assert "// launch: grid (1, 1, 1), block (32, 2, 2)" in source


def test_other_dialects_refuse_fragments():
    func, _ = schedule(gemm(64, 64, 32))
    with pytest.raises(LoweringError, match="exist only in CUDA"):
        HipRenderer(Target("mi300x")).render(lower(func, H100))


@needs_nvrtc
@pytest.mark.parametrize(
    "M, N, K, layout, out, target",
    [(128, 128, 64, "NN", "float16", H100), (256, 128, 96, "NT", "float16", H100),
     (64, 96, 48, "NN", "float32", A100)],
)  # fmt: skip
def test_nvrtc_and_nvcc_compile_to_mma_sync_and_ldmatrix(M, N, K, layout, out, target, tmp_path):
    func, _ = schedule(gemm(M, N, K, layout, out), target)
    kernel = schedlab.build(func, target)
    assert MMA in kernel.ptx
    assert "ldmatrix.sync.aligned.m8n8.x4" + (".trans" if layout == "NN" else "") in kernel.ptx
    if shutil.which("nvcc"):
        ptx = nvcc_ptx(kernel.source, tmp_path)
        assert ".target sm_90" in ptx and MMA in ptx and "ldmatrix.sync.aligned" in ptx


@needs_nvrtc
def test_bench_gpu_builds_the_fp16_cases_on_tensor_cores():
    cases = {case.name: case for case in bench_gpu.build_cases(Target("h200"), 256)}
    for name in ("gemm fp16 NN", "gemm fp16 NT"):
        case = cases[name]
        assert case.kernel is not None, case.note
        assert MMA in case.kernel.ptx and case.note == ""


# -- the lane layouts of the CUDA helpers, against the PTX ISA's fragment layouts -----------------
def _ldmatrix(tile, addresses, ld, trans):
    """ldmatrix.sync.aligned.m8n8.x4(.trans).b16 as the PTX ISA defines it: lanes 8q..8q+7 give
    the row addresses of matrix q; lane l receives, per matrix, the pair at row l / 4, columns
    2 (l % 4) + {0, 1} (with .trans: rows 2 (l % 4) + {0, 1}, column l / 4)."""
    flat = tile.reshape(-1)
    rows = [[flat[addresses[8 * q + r] : addresses[8 * q + r] + 8] for r in range(8)]
            for q in range(4)]  # fmt: skip
    regs = np.zeros((32, 4, 2), tile.dtype)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for q in range(4):
            m = np.array(rows[q])
            regs[lane, q] = m[2 * t : 2 * t + 2, g] if trans else m[g, 2 * t : 2 * t + 2]
    return regs


def _helper_address(name: str, **values) -> int:
    """Evaluate the address expression the helper `name` passes to sl_mma_ldmatrix (its C
    text, integer division for `/`)."""
    from schedlab.backend.gpu.mma import MMA_HELPERS

    body = MMA_HELPERS.split(f"void {name}(")[1].split("\n}")[0]
    found = re.findall(r"sl_mma_ldmatrix\(frag, s \+ (.+?), (\d)\);", body)
    which = values.pop("which", 0)
    return eval(found[which][0].replace("/", "//"), {}, values)  # the C text, as Python


@pytest.mark.parametrize("kn", [1, 0])
def test_helper_lane_layouts_compose_to_the_tile_product(kn):
    """A model of one warp running sl_mma_load_a, sl_mma_load_b, sl_mma_sync and
    sl_mma_store_*: the address arithmetic is the helpers' own C text, ldmatrix and
    mma.m16n8k16 follow the PTX ISA's fragment layouts (A: a0a1 (g, 2t), a2a3 (g + 8, 2t),
    a4a5 (g, 2t + 8), a6a7 (g + 8, 2t + 8); B: b0b1 (k 2t, n g), b2b3 (k 2t + 8, n g); C: c0c1
    (g, 2t), c2c3 (g + 8, 2t)). The stored tile must be A @ B. A check of the layout
    reasoning, not of the hardware: nothing here has run on a GPU."""
    rng = np.random.default_rng(2)
    a = rng.integers(-4, 4, (16, 16)).astype(np.float32)
    b = rng.integers(-4, 4, (16, 16)).astype(np.float32)  # [k, n]
    ld = 16
    a_regs = _ldmatrix(a, [_helper_address("sl_mma_load_a", lane=lane, ld=ld)
                           for lane in range(32)], ld, trans=False)  # fmt: skip
    stored_b = b if kn else b.T.copy()
    b_addr = [_helper_address("sl_mma_load_b", which=0 if kn else 1, q=lane // 8, r=lane % 8,
                              ld=ld) for lane in range(32)]  # fmt: skip
    b_regs = _ldmatrix(stored_b, b_addr, ld, trans=bool(kn))
    out = np.full((16, 16), np.nan, np.float32)
    for half in range(2):  # the two m16n8k16 of sl_mma_sync: columns 0-7, 8-15
        A = np.zeros((16, 16), np.float32)
        B = np.zeros((16, 8), np.float32)
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for reg, (row, col) in enumerate([(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8),
                                              (g + 8, 2 * t + 8)]):  # fmt: skip
                A[row, col : col + 2] = a_regs[lane, reg]
            for reg, k in enumerate([2 * t, 2 * t + 8]):
                B[k : k + 2, g] = b_regs[lane, 2 * half + reg]
        D = A @ B  # m16n8k16 with these fragments
        for lane in range(32):  # sl_mma_store_*: c[4h + i] to (g or g + 8, h * 8 + 2t + 0/1)
            g, t = lane // 4, lane % 4
            c = [D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]]
            col = half * 8 + t * 2
            for i, (row, dc) in enumerate([(g, 0), (g, 1), (g + 8, 0), (g + 8, 1)]):
                out[row, col + dc] = c[i]
    np.testing.assert_array_equal(out, a @ b)
