"""`schedlab bench-cpu` (`make bench-cpu`): the code schedlab makes without tuning, next to numpy
and onnxruntime, side by side in this one process, as ratios, on the machine it runs on
(whatever its ISA: the target it detected is printed first).

Cases and goals (ratio = reference median / schedlab median; > 1 is faster):
  gemm     gemm 1024^3 fp32: the shipped trace `gemm_1024_cpu` >= 0.6x numpy, the default
           (dlight) schedule >= 0.4x numpy
  conv     resnet-style 3x3 conv + ReLU layers through the default pipeline (64 channels at
           56x56 is the goal case, >= 0.5x onnxruntime; 128@28, 256@14 and 512@7 reported)
  models   the onnx package's light_squeezenet and light_resnet50 (weights randomized) through
           the default pipeline: <= 3x onnxruntime's latency (ratio >= 0.33)
  layers   each distinct conv layer of light_squeezenet alone (reported, no goal): where the
           model's time goes
Every result is checked against numpy or onnxruntime before it is timed.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedlab.bench_common import (
    CaseResult,
    blas_note,
    model_path,
    print_results,
    randomized_weights,
)
from schedlab.target import Target

CASES = ("gemm", "conv", "models", "layers")
GEMM_GOALS = {"schedlab (trace)": 0.6, "schedlab (default schedule)": 0.4}
# (channels, height = width) of resnet-style 3x3 layers; the first is the goal case
CONV_LAYERS = ((64, 56), (128, 28), (256, 14), (512, 7))
CONV_GOAL = 0.5
MODELS = ("light_squeezenet", "light_resnet50")
MODEL_GOAL = 1 / 3  # at most 3x onnxruntime's latency


def add_bench_cpu_parser(commands) -> None:
    bench = commands.add_parser(
        "bench-cpu", help="untuned CPU code (shipped and default gemm schedules, conv layers, "
        "two CNNs) next to numpy/onnxruntime in one run",
    )  # fmt: skip
    bench.add_argument("--only", default=",".join(CASES),
                       help=f"comma-separated cases: {', '.join(CASES)}")  # fmt: skip
    bench.add_argument("--target", default="cpu",
                       help="the host (cpu, default) or a CPU preset the host can run, e.g. "
                       "zen3 for AVX2 code on an AVX-512 machine")  # fmt: skip


def run_cpu_bench(args) -> int:
    """Run the chosen cases and print the goal table; returns 0 (a benchmark reports)."""
    cases = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise ValueError(f"--only: unknown case(s) {', '.join(unknown)}; known: "
                         f"{', '.join(CASES)}")  # fmt: skip
    target = Target(getattr(args, "target", "cpu"))
    print(f"target: {target.describe()}")
    blas_note()
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="schedlab-bench-cpu-") as scratch:
        for case in cases:
            if case == "gemm":
                results += bench_gemm(target)
            elif case == "conv":
                results += [bench_conv_layer(c, hw, target, Path(scratch), goal=index == 0)
                            for index, (c, hw) in enumerate(CONV_LAYERS)]  # fmt: skip
            elif case == "layers":
                results += bench_model_layers(MODELS[0], target, Path(scratch))
            else:
                results += [bench_model(name, target, Path(scratch)) for name in MODELS]
    print_results(results)
    return 0


def bench_gemm(target: Target) -> list[CaseResult]:
    """gemm 1024: the shipped trace and the default schedule next to numpy (one timed run)."""
    from schedlab.bench import run_bench

    print("\n== gemm 1024^3: shipped trace gemm_1024_cpu, default schedule, numpy")
    started = time.perf_counter()
    rows = run_bench("gemm", "1024", target=target, naive=False,
                     trace="gemm_1024_cpu", default_schedule=True)  # fmt: skip
    seconds = time.perf_counter() - started
    numpy_row = next(r for r in rows if r.name == "numpy")
    results = []
    for label, goal in GEMM_GOALS.items():
        row = next(r for r in rows if r.name == label)
        ratio = numpy_row.timings.median / row.timings.median
        detail = (f"{row.gflops[1]:.1f} GFLOP/s, numpy {numpy_row.gflops[1]:.1f} "
                  "GFLOP/s (medians)")  # fmt: skip
        name = "gemm shipped" if "trace" in label else "gemm default"
        results.append(CaseResult(name, ratio, goal, seconds, detail))
    return results


@dataclass(frozen=True)
class ConvShape:
    """A Conv + bias + ReLU layer: channels in and out, image size, kernel, stride, padding."""

    cin: int
    cout: int
    size: int
    kernel: int = 3
    stride: int = 1
    pad: int = 1

    @property
    def out_size(self) -> int:
        return (self.size + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def flops(self) -> int:
        return 2 * self.cin * self.cout * self.kernel**2 * self.out_size**2

    def __str__(self) -> str:
        stride = f"/{self.stride}" if self.stride > 1 else ""
        return f"{self.kernel}x{self.kernel}{stride} {self.cin}->{self.cout}@{self.size}"


def conv_model(path: Path, shape: ConvShape, seed: int = 0) -> Path:
    """An onnx Conv (bias, `shape`) + Relu with random weights, saved at `path`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    k = shape.kernel
    weight = rng.standard_normal((shape.cout, shape.cin, k, k)).astype("float32")
    weight /= np.sqrt(shape.cin * k * k)
    bias = rng.standard_normal(shape.cout).astype("float32")
    out = [1, shape.cout, shape.out_size, shape.out_size]
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k],
                            pads=[shape.pad] * 4, strides=[shape.stride] * 2)  # fmt: skip
    graph = helper.make_graph(
        [conv, helper.make_node("Relu", ["y"], ["z"])], f"conv_{shape.cin}_{shape.cout}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, shape.cin, shape.size,
                                                                shape.size])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, out)],
        initializer=[numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def model_conv_shapes(path: Path) -> list[ConvShape]:
    """The distinct square NCHW Conv layers (groups 1) of the onnx model at `path`, in order."""
    import onnx
    from onnx import helper, shape_inference

    model = shape_inference.infer_shapes(onnx.load(str(path)))
    graph = model.graph
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in [*graph.value_info, *graph.input, *graph.output]}  # fmt: skip
    weights = {t.name: list(t.dims) for t in graph.initializer}
    found: list[ConvShape] = []
    for node in graph.node:
        if node.op_type != "Conv":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        data = dims.get(node.input[0])
        weight = weights.get(node.input[1]) or dims.get(node.input[1])  # or a computed one
        if not data or not weight or attrs.get("group", 1) != 1 or data[2] != data[3]:
            continue
        pads, strides = attrs.get("pads", [0] * 4), attrs.get("strides", [1, 1])
        if len(set(pads)) != 1 or strides[0] != strides[1] or weight[2] != weight[3]:
            continue
        shape = ConvShape(weight[1], weight[0], data[2], weight[2], strides[0], pads[0])
        if shape not in found:
            found.append(shape)
    return found


def bench_conv_layer(channels: int, size: int, target: Target, scratch: Path,
                     goal: bool) -> CaseResult:  # fmt: skip
    """One 3x3 layer through the default pipeline next to onnxruntime."""
    print(f"\n== conv 3x3 + ReLU, {channels} channels at {size}x{size}")
    shape = ConvShape(channels, channels, size)
    return _conv_case(shape, f"conv3x3 {channels}@{size}", target, scratch,
                      CONV_GOAL if goal else 0.0)  # fmt: skip


def bench_model_layers(name: str, target: Target, scratch: Path) -> list[CaseResult]:
    """Each distinct conv layer of model `name` alone (+ bias + ReLU, random weights) through
    the default pipeline next to onnxruntime: where the model's time goes, layer by layer."""
    print(f"\n== the conv layers of {name}, one by one")
    return [_conv_case(shape, f"{name[6:]} {shape}", target, scratch, 0.0)
            for shape in model_conv_shapes(model_path(name))]  # fmt: skip


def _conv_case(shape: ConvShape, name: str, target: Target, scratch: Path,
               goal: float) -> CaseResult:  # fmt: skip
    """A Conv + bias + ReLU layer of `shape` through the default pipeline next to onnxruntime,
    checked against it first."""
    from schedlab.run import run_model

    path = conv_model(scratch / f"conv_{shape.cin}_{shape.cout}_{shape.size}_{shape.kernel}"
                      f"_{shape.stride}.onnx", shape)  # fmt: skip
    started = time.perf_counter()
    report = run_model(str(path), target)
    _check_close(report)
    ours, theirs = report.schedlab.median, report.onnxruntime.median
    detail = (f"{shape.flops / ours / 1e9:.1f} GFLOP/s, onnxruntime "
              f"{shape.flops / theirs / 1e9:.1f} GFLOP/s (medians), max abs diff "
              f"{report.max_abs_diff:.2g}")  # fmt: skip
    if not goal:
        detail += "; reported, no goal"
    return CaseResult(name, theirs / ours, goal, time.perf_counter() - started, detail)


def bench_model(name: str, target: Target, scratch: Path) -> CaseResult:
    """A light model with random weights through the default pipeline next to onnxruntime."""
    from schedlab.run import run_model

    print(f"\n== {name} (random weights), default pipeline")
    path = randomized_weights(model_path(name), scratch / f"{name}_random_weights.onnx")
    started = time.perf_counter()
    report = run_model(str(path), target)
    _check_close(report, tolerance=1e-5)  # class probabilities, ~1e-3 each
    ours, theirs = report.schedlab.median, report.onnxruntime.median
    detail = (f"schedlab {ours * 1e3:.2f} ms, onnxruntime {theirs * 1e3:.2f} ms (medians; "
              f"{ours / theirs:.2f}x its latency), max abs diff "
              f"{report.max_abs_diff:.2g}")  # fmt: skip
    return CaseResult(name, theirs / ours, MODEL_GOAL, time.perf_counter() - started, detail)


def _check_close(report, tolerance: float = 1e-3) -> None:
    """Fail loudly when schedlab's outputs are not onnxruntime's (NaN in one only counts)."""
    if report.max_abs_diff is None:
        raise RuntimeError("onnxruntime is not installed: nothing to compare with")
    if report.max_abs_diff > tolerance:
        raise AssertionError(f"{report.model}: schedlab and onnxruntime differ by "
                             f"{report.max_abs_diff:.3g} (> {tolerance})")  # fmt: skip
