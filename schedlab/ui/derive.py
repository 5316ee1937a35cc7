"""What a step shows, computed from its IR: generated code, predicted latency, script diffs."""

from __future__ import annotations

import difflib
import importlib
import json

from schedlab.errors import SchedlabError
from schedlab.ir.function import IRModule, PrimFunc
from schedlab.target import Target

from .results import GeneratedCode, PredictionResult


def diff_text(a: str, b: str, name_a: str, name_b: str) -> str:
    lines = difflib.unified_diff(a.splitlines(), b.splitlines(), name_a, name_b, lineterm="")
    return "\n".join(lines)


def target_mismatch(recorded: str, current: str) -> str:
    """Why a trace recorded for target `recorded` does not fit `current` (both Target texts):
    the kinds when they differ, else the attributes that differ."""
    old, new = _target_dict(recorded), _target_dict(current)
    if old.get("kind") != new.get("kind"):
        return (
            f"this trace is for target {old.get('kind', recorded)!r}, the explorer's target is "
            f"{new.get('kind', current)!r}"
        )
    keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    shown = ", ".join(f"{k}: {old.get(k)!r} vs {new.get(k)!r}" for k in keys[:5])
    return f"this trace is for another {new.get('kind')!r} target (trace vs explorer: {shown})"


def _target_dict(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {"kind": text}
    return value if isinstance(value, dict) else {"kind": text}


def generate_code(func: PrimFunc, name: str, target: Target) -> GeneratedCode:
    """Render (without compiling) the function's code for `target`."""
    from schedlab.transform import lower

    try:
        lowered = lower(IRModule({name: func}), target)
        if target.kind == "cpu":
            from schedlab.backend.cpu.codegen import CpuRenderer

            rendered = CpuRenderer(target).render(lowered)
            return GeneratedCode(str(target.kind), rendered.source,
                                 dict(rendered.functions[name].loop_lines))  # fmt: skip
        if target.is_gpu:
            return _render_gpu(lowered, target)
        import schedlab

        kernel = schedlab.build(func, target)
        return GeneratedCode(str(target.kind), kernel.source,
                             dict(getattr(kernel, "loop_lines", {})))  # fmt: skip
    except SchedlabError as err:
        return GeneratedCode(str(target.kind), error=str(err))


GPU_LANGUAGES = {"cuda": "CUDA C", "rocm": "HIP"}  # other GPU kinds (opencl, adreno): OpenCL C


def _render_gpu(lowered: IRModule, target: Target) -> GeneratedCode:
    """The GPU dialect's source (CUDA C, HIP, OpenCL C), rendered, not compiled: NVRTC, hipcc
    or an OpenCL driver need not be here; the loops of every kernel of the function mapped."""
    from schedlab.backend.gpu import CudaRenderer, HipRenderer, OpenCLRenderer

    renderer = {"cuda": CudaRenderer, "rocm": HipRenderer}.get(target.kind, OpenCLRenderer)
    rendered = renderer(target).render(lowered)
    lines = {uid: span for info in rendered.functions.values()
             for uid, span in info.loop_lines.items()}  # fmt: skip
    language = GPU_LANGUAGES.get(target.kind, "OpenCL C")
    return GeneratedCode(f"{target.kind} {target.attrs.get('arch', '')}, {language}",
                         rendered.source, lines)  # fmt: skip


def predict(func: PrimFunc, target: Target) -> PredictionResult:
    """Ask schedlab.cost (imported lazily: it may not be installed or written yet)."""
    try:
        if target.is_gpu:  # the per-SM roofline with occupancy (schedlab/cost/gpu.py)
            predict = importlib.import_module("schedlab.cost.gpu").predict_gpu
        else:
            predict = importlib.import_module("schedlab.cost").predict
    except (ImportError, AttributeError) as err:
        return PredictionResult(False, reason=f"no cost model available ({err})")
    try:
        result = predict(func, target)
    except Exception as err:  # the model failing is shown, never replaced by a guess
        return PredictionResult(False, reason=f"prediction failed: {type(err).__name__}: {err}")
    seconds = getattr(result, "seconds", None)
    if seconds is None:
        return PredictionResult(False, reason="the cost model gave no seconds", details=result)
    return PredictionResult(True, float(seconds), details=result)
