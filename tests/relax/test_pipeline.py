"""Graph pipelines: get_pipeline("zero"/"default_build"), get_default_pipeline(target) with its
four phases, every pass visible to a PassRecorder, and the result still computing the same."""

import numpy as np
import pytest

from schedlab.backend.cpu import pipeline as cpu_pipeline
from schedlab.errors import LoweringError
from schedlab.ir.function import PrimFunc
from schedlab.ir.transform import PassContext, PassRecorder
from schedlab.relax import Function, get_default_pipeline, get_pipeline
from schedlab.relax.interpreter import run
from schedlab.relax.pipeline import PHASES
from schedlab.target import Target

from . import test_vm as graphs

ZERO = ["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR",
        "DeadCodeElimination", "AttachLayoutFreeBuffers"]  # fmt: skip


def test_zero_pipeline_passes_and_numerics():
    seq = get_pipeline("zero")
    assert [p.name for p in seq.passes] == ZERO
    mod = graphs.mlp_module()
    out = seq(mod)
    assert any(name.startswith("fused_") for name in out)
    arrays = graphs.inputs_for(mod)
    np.testing.assert_allclose(run(out, *arrays), run(mod, *arrays), rtol=1e-5, atol=1e-6)


def test_default_build_ends_in_vm_form():
    seq = get_pipeline("default_build")
    names = [p.name for p in seq.passes]
    assert names == [*ZERO, "ToNonDataflow", "CallTIRRewrite", "PlanConcatInPlace",
                     "StaticPlanBlockMemory"]  # fmt: skip
    main = seq(graphs.mlp_module())["main"]
    assert "planned_peak_bytes" in main.attrs


def test_unknown_pipeline_and_target(monkeypatch):
    with pytest.raises(ValueError, match=r"unknown pipeline 'fast'; known: zero, default_build"):
        get_pipeline("fast")
    assert "ApplyDefaultSchedule" in [p.name for p in get_default_pipeline("cuda").passes]

    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr("schedlab.relax.pipeline.importlib.import_module", missing)
    with pytest.raises(LoweringError, match="no graph pipeline for target kind 'rocm'"):
        get_default_pipeline(Target("rocm"))


def test_cpu_phases_are_flat_pass_lists():
    target = Target("cpu")
    for phase in PHASES:
        passes = getattr(cpu_pipeline, phase)(target)
        assert isinstance(passes, list)
        assert all(hasattr(p, "name") and not hasattr(p, "passes") for p in passes)
    legalize = [p.name for p in cpu_pipeline.legalize_passes(target)]
    # convolutions into NCHW{b}c first, b = the vector lanes (a CPU without vectors: none)
    assert legalize[:2] == ["ConvertToBlockedLayout", "LegalizeOps"]
    scalar = [p.name for p in cpu_pipeline.legalize_passes(Target("cpu", simd_width=32))]
    assert scalar[0] == "LegalizeOps"
    assert legalize[-3:] == ["ApplyDefaultSchedule", "FoldLayoutRewrite", "DeadCodeElimination"]
    expected = [p.name for phase in PHASES for p in getattr(cpu_pipeline, phase)(target)]
    assert [p.name for p in get_default_pipeline("cpu").passes] == expected


def test_recorder_sees_every_pass_with_ir_before_and_after():
    seq = get_default_pipeline("cpu")
    recorder = PassRecorder()
    mod = graphs.conv_bn_relu_module()
    with PassContext(instruments=[recorder]):
        out = seq(mod)
    inner = [r for r in recorder.records if r.depth == 1]
    assert [r.name for r in inner] == [p.name for p in seq.passes]
    assert recorder.records[-1].depth == 0 and recorder.records[-1].after is out
    assert inner[0].before is mod and inner[-1].after is out
    for prev, cur in zip(inner, inner[1:]):
        assert cur.before is prev.after
    assert next(r for r in inner if r.name == "LegalizeOps").changed


def test_default_pipeline_schedules_every_primfunc():
    out = get_default_pipeline("cpu")(graphs.norm_module())
    prims = [f for f in out.values() if isinstance(f, PrimFunc)]
    assert prims and all(f.attrs.get("tir.is_scheduled") for f in prims)
    assert all(f.attrs.get("global_symbol") == k for k, f in out.items())
    assert isinstance(out["main"], Function)
