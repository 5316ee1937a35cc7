"""`schedlab bench-gpu` (`make bench-gpu`): the code the default Dlight GPU rules make, next to
cuBLAS (through cupy), timed interleaved in one process on the GPU it runs on.

Cases and goals (issue #13, on an H200; TVM Dlight's own figures there in brackets):
  gemm fp32      4096^3, Matmul rule: >= 0.8x cuBLAS (TVM Dlight 0.37x)
  gemm fp16 NN   4096^3 on tensor cores: >= 0.7x cuBLAS (TVM Dlight 0.11x)
  gemm fp16 NT   the same with B stored (N, K): >= 0.7x cuBLAS (TVM Dlight 0.37x)
  gemv fp16      1 x 4096 x 4096, GEMV rule: >= 4.3 TB/s of memory traffic (TVM Dlight 4.3)
The fp16 gemms are built by the MatmulTensorization rule (ldmatrix + mma.sync; compile- and
interpreter-checked, never run on a GPU so far) when the size is a multiple of 32. A case the
rules cannot make (an fp16 gemm whose PTX has no mma instruction, fp16 without the CUDA
headers) is reported as "not supported yet" with the reason, never as a number; the GEMV then
runs in fp32 and says so. Every result is checked against cupy's matmul before it is timed.

Without a GPU (no cupy, or no CUDA device) every kernel it would run is compiled to PTX through
NVRTC, to show that they build, and no figure is measured (exit status 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from schedlab.errors import CompileError, ToolchainMissingError
from schedlab.target import Target

GEMM_GOALS = {"gemm fp32": (0.8, 0.37), "gemm fp16 NN": (0.7, 0.11), "gemm fp16 NT": (0.7, 0.37)}
GEMV_GOAL_TBS, GEMV_TVM_TBS = 4.3, 4.3
FALLBACK_TARGET = "h200"  # the GPU, when none is here to detect


def add_bench_gpu_parser(commands) -> None:
    bench = commands.add_parser(
        "bench-gpu", help="Dlight GPU kernels (fp32/fp16 gemm, fp16 GEMV) next to cuBLAS; "
        "without a GPU: compiled to PTX only",
    )  # fmt: skip
    bench.add_argument("--target", default=None,
                       help="a CUDA target (e.g. sm_90, h200; default: the GPU found, or "
                       f"{FALLBACK_TARGET} without one)")  # fmt: skip
    bench.add_argument("--size", type=int, default=4096, help="M = N = K (default 4096)")
    bench.add_argument("--repeat", type=int, default=10, help="interleaved measurements")


@dataclass
class Case:
    """One kernel to run: `kernel` is None when the rules cannot make it (`note` says why)."""

    name: str
    kind: str  # "gemm" or "gemv"
    dtype: str
    layout: str  # "NN" or "NT" (B stored (N, K))
    kernel: object | None
    note: str = ""


def run_gpu_bench(args) -> int:
    """Build the cases, then time them against cuBLAS (or, without a GPU, show they compile)."""
    cupy, missing = cupy_device()
    target = Target(args.target) if args.target else detect_target(cupy)
    if target.kind != "cuda":
        raise ValueError(f"--target: bench-gpu runs CUDA targets, got {target.kind!r}")
    detected = "" if args.target or cupy else f" (no GPU to detect: the {FALLBACK_TARGET} preset)"
    print(f"target: {target.describe()}{detected}")
    cases = build_cases(target, args.size)
    if cupy is None:
        from schedlab.backend.cuda.runtime import INSTALL_HINT

        print(f"\nno GPU here: {missing}; {INSTALL_HINT}")
        print("every kernel it would run, compiled to PTX through NVRTC:")
        for case in cases:
            print(f"  {case.name:<14} {_built(case)}")
        print("no figures were measured (no GPU)")
        return 0
    print("reference: cuBLAS through cupy.matmul" + (" (CUPY_TF32 set: TF32!)"
                                                    if _tf32() else ""))  # fmt: skip
    failed = False
    for case in cases:
        if case.kernel is None:
            print(f"{case.name:<14} not supported yet ({case.note})")
            continue
        failed |= not measure(cupy, case, args.size, args.repeat)
    return 1 if failed else 0


def cupy_device():
    """(cupy, None) when cupy and a CUDA device are here, else (None, why not)."""
    try:
        import cupy
    except ImportError:
        return None, "cupy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None, "no CUDA device"
    except Exception as err:  # no driver
        return None, f"no CUDA device: {err}"
    return cupy, None


def detect_target(cupy) -> Target:
    """The preset of the GPU found (H200, H100, A100; else its compute capability)."""
    if cupy is None:
        return Target(FALLBACK_TARGET)
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return target_for_device(name, props["major"], props["minor"])


def target_for_device(name: str, major: int, minor: int) -> Target:
    for preset in ("h200", "h100", "a100"):
        if preset in name.lower():
            return Target(preset)
    arch = f"sm_{major}{minor}"
    if arch in ("sm_90", "sm_80"):
        return Target(arch)
    return Target("cuda", arch=arch, model=f"{name} (detected)")


# -- the kernels -----------------------------------------------------------------------------


def gemm_func(size: int, dtype: str, layout: str):
    """C = A @ B (NN) or A @ B^T with B stored (N, K) (NT), all sides `size`."""
    from schedlab import te, workloads

    if layout == "NN":
        return workloads.get("gemm", M=size, N=size, K=size, dtype=dtype)[0]
    A = te.placeholder((size, size), dtype, name="A")
    B = te.placeholder((size, size), dtype, name="B")
    k = te.reduce_axis((0, size), name="k")
    C = te.compute((size, size), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def default_build(func, target: Target | str):
    """The function scheduled by the default GPU rules and built (CUDA C -> PTX for cuda)."""
    target = Target(target)
    import schedlab
    from schedlab import dlight
    from schedlab.dlight import gpu
    from schedlab.ir.function import IRModule

    mod = dlight.ApplyDefaultSchedule(*gpu.default_rules(), target=target)(
        IRModule.from_expr(func, "main")
    )
    return schedlab.build(mod["main"], target)


def build_cases(target: Target, size: int) -> list[Case]:
    """fp32 gemm, fp16 NN/NT gemm (tensor cores), and the GEMV (fp16, else fp32)."""
    from schedlab import workloads

    cases = [Case("gemm fp32", "gemm", "float32", "NN",
                  default_build(gemm_func(size, "float32", "NN"), target))]  # fmt: skip
    for layout in ("NN", "NT"):
        kernel, note = _fp16_build(gemm_func(size, "float16", layout), target, tensor_cores=True)
        cases.append(Case(f"gemm fp16 {layout}", "gemm", "float16", layout, kernel, note))
    gemv = workloads.get("gemv", M=size, K=size, dtype="float16")[0]
    kernel, note = _fp16_build(gemv, target, tensor_cores=False)
    if kernel is not None:
        cases.append(Case("gemv fp16", "gemv", "float16", "NN", kernel))
    else:
        fp32 = default_build(workloads.get("gemv", M=size, K=size)[0], target)
        cases.append(Case("gemv fp32", "gemv", "float32", "NN", fp32,
                          f"fp32: fp16 is not supported yet ({note})"))  # fmt: skip
    return cases


def _fp16_build(func, target: Target, tensor_cores: bool):
    """(kernel, "") or (None, why the rules cannot make it yet)."""
    try:
        kernel = default_build(func, target)
    except CompileError as err:
        first = next((line.strip() for line in str(err).splitlines() if "error" in line),
                     str(err).splitlines()[0])  # fmt: skip
        return None, f"the fp16 CUDA C does not compile: {first}"
    except ToolchainMissingError as err:  # NVRTC without the CUDA headers (cuda_fp16.h)
        return None, str(err)
    if tensor_cores and "mma" not in kernel.ptx:
        return None, "the Matmul rule uses no tensor cores (no mma instruction in the PTX)"
    return kernel, ""


def _built(case: Case) -> str:
    if case.kernel is None:
        return f"not supported yet ({case.note})"
    entries = [line.split("(")[0].split()[-1] for line in case.kernel.ptx.splitlines()
               if ".entry" in line]  # fmt: skip
    launches = ", ".join(f"grid {g} block {b}" for g, b in
                         (launch.sizes({}) for launch in case.kernel.launches))  # fmt: skip
    built = f"PTX {len(case.kernel.ptx)} bytes, entry {', '.join(entries)}; {launches}"
    return built + (f"; {case.note}" if case.note else "")


# -- measuring (a GPU machine only) ----------------------------------------------------------


def measure(cupy, case: Case, size: int, repeat: int) -> bool:
    """Check the case against cupy.matmul, then time both interleaved; False if it is wrong."""
    rng = np.random.default_rng(0)
    host = _host_args(rng, case, size)
    device = [cupy.asarray(a) for a in host]
    ours = device_call(case.kernel, host, device)
    A, B, out = device
    B_ref = B.T if case.layout == "NT" else B

    def theirs():
        return cupy.matmul(A, B_ref)

    ours()
    reference = theirs()
    cupy.cuda.Device().synchronize()
    diff = float(cupy.abs(out.astype("float32") - reference.astype("float32")).max())
    scale = float(cupy.abs(reference.astype("float32")).max())
    tolerance = (1e-3 if case.dtype == "float32" else 1e-2) * max(scale, 1.0)
    if not diff <= tolerance:
        print(f"{case.name:<14} WRONG: max abs diff {diff:.3g} > {tolerance:.3g} vs cupy.matmul")
        return False
    times = time_interleaved(cupy, {"schedlab": ours, "cuBLAS": theirs}, repeat)
    _report(case, size, times, diff)
    return True


def _host_args(rng, case: Case, size: int) -> list[np.ndarray]:
    A = rng.standard_normal((size, size)).astype(case.dtype)
    if case.kind == "gemv":
        return [A, rng.standard_normal(size).astype(case.dtype), np.zeros(size, case.dtype)]
    B = rng.standard_normal((size, size)).astype(case.dtype)
    return [A, B, np.zeros((size, size), case.dtype)]


def device_call(kernel, host: list, device: list):
    """A callable that launches `kernel`'s kernels on the device arrays (no copies)."""
    bound = kernel.bind(host)
    env = dict(bound.var_values)
    handles = dict(enumerate(device))
    spaces = kernel._workspace(env)
    table = bound.values_by_id()
    plans = [(launch, *launch.sizes(env), kernel._args(launch, bound, table, handles, spaces))
             for launch in kernel.launches]  # fmt: skip

    def call():
        for launch, grid, block, args in plans:
            kernel.device.run(launch, grid, block, args)

    return call


def time_interleaved(cupy, fns: dict, repeat: int, min_repeat_ms: float = 50.0) -> dict:
    """Seconds per call of each callable, by CUDA events, interleaved (A, B, A, B, ...)."""
    from schedlab.timing import Timings

    def run(fn, number: int) -> float:
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / 1e3 / number

    numbers = {name: max(1, math.ceil(min_repeat_ms / 1e3 / run(fn, 3))) for name, fn in
               fns.items()}  # fmt: skip
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            samples[name].append(run(fn, numbers[name]))
    return {name: Timings.from_samples(samples[name], numbers[name]) for name in fns}


def _report(case: Case, size: int, times: dict, diff: float) -> None:
    ours, theirs = times["schedlab"], times["cuBLAS"]
    ratio = theirs.median / ours.median
    if case.kind == "gemm":
        goal, tvm = GEMM_GOALS[case.name]
        tflops = [2 * size**3 / t / 1e12 for t in (ours.min, ours.median, theirs.median)]
        print(f"{case.name:<14} {ratio:.2f}x cuBLAS (goal {goal}x, TVM Dlight {tvm}x): "
              f"{'met' if ratio >= goal else 'missed'}; schedlab min {ours.min * 1e3:.3f} ms, "
              f"median {ours.median * 1e3:.3f} ms ({tflops[1]:.1f} TFLOP/s), cuBLAS min "
              f"{theirs.min * 1e3:.3f} ms, median {theirs.median * 1e3:.3f} ms "
              f"({tflops[2]:.1f} TFLOP/s); max abs diff {diff:.2g}")  # fmt: skip
        return
    nbytes = (size * size + 2 * size) * np.dtype(case.dtype).itemsize
    tbs = nbytes / ours.median / 1e12
    print(f"{case.name:<14} {tbs:.2f} TB/s (goal {GEMV_GOAL_TBS} TB/s in fp16, TVM Dlight "
          f"{GEMV_TVM_TBS}): {'met' if tbs >= GEMV_GOAL_TBS else 'missed'}; schedlab min "
          f"{ours.min * 1e6:.1f} us, median {ours.median * 1e6:.1f} us, cuBLAS "
          f"{nbytes / theirs.median / 1e12:.2f} TB/s ({ratio:.2f}x); max abs diff {diff:.2g}"
          + (f"; {case.note}" if case.note else ""))  # fmt: skip


def _tf32() -> bool:
    import os

    return os.environ.get("CUPY_TF32", "0") not in ("", "0")


__all__ = ["add_bench_gpu_parser", "run_gpu_bench", "build_cases", "target_for_device"]
