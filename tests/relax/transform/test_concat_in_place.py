"""PlanConcatInPlace: a concatenation whose parts are aligned contiguous runs of its result is
elided (its parts become views of the result, written in place by their producers) and the
compiled graph computes what the interpreter does; the cases it must leave alone (unaligned
or strided parts, a part used twice, returned or nested in another concat) still compute right,
and a part read after the concat keeps its data (the memory plan sees views alias their base)."""

import numpy as np
import pytest

import schedlab
from schedlab.ir.transform import Sequential
from schedlab.relax import BlockBuilder, Call, GlobalVar, R, TensorStructInfo, Var
from schedlab.relax import transform as T
from schedlab.relax.interpreter import run
from schedlab.relax.transform.call_tir_rewrite import MEMORY_VIEW
from schedlab.relax.transform.concat_in_place import CONCAT_AXIS_ATTR

from .. import test_vm as graphs

PASSES = [T.LegalizeOps(), T.ToNonDataflow(), T.CallTIRRewrite(), T.PlanConcatInPlace(),
          T.StaticPlanBlockMemory()]  # fmt: skip


def _module(shapes, axis=1, *, twice=False, return_part=False, read_after=False, nest=False):
    """main(x0, x1, ...): part k = exp(x_k) or relu(x_k), concatenated along `axis`, then
    scaled (a kernel of its own reading the result); variants for the cases to leave alone."""
    params = [Var(f"x{k}", TensorStructInfo(shape, "float32")) for k, shape in enumerate(shapes)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            parts = [bb.emit(R.exp(x) if k % 2 else R.nn.relu(x)) for k, x in enumerate(params)]
            if twice:
                parts = [parts[0], parts[0]]
            if nest:
                parts = [bb.emit(R.concat(*parts[:2], axis=axis)), *parts[2:]]
            cat = bb.emit(R.concat(*parts, axis=axis))
            out = bb.emit(R.multiply(cat, R.const(np.float32(0.5))))
            if read_after:  # a part read once the concat is done
                out = bb.emit(R.tuple(out, bb.emit(R.add(parts[0], parts[0]))))
            if return_part:
                out = bb.emit(R.tuple(out, parts[-1]))
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def _kernel_calls(mod):
    return [b.value.op.name_hint for b in _bindings(mod["main"])
            if isinstance(b.value, Call) and isinstance(b.value.op, GlobalVar)]  # fmt: skip


def _views(mod):
    return [b for b in _bindings(mod["main"])
            if isinstance(b.value, Call) and b.value.op == MEMORY_VIEW]  # fmt: skip


def _check_runs_right(mod):
    arrays = graphs.inputs_for(mod)
    vm = schedlab.relax.VirtualMachine(schedlab.compile(mod, "cpu", pipeline=Sequential(PASSES)))
    want = run(mod, *arrays)
    for _ in range(2):  # the second call reuses the storage and the views
        got = vm["main"](*arrays)
        for g, w in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want)), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shapes", [
    [(1, 4, 3, 4), (1, 12, 3, 4)],  # 192 bytes, then 576: offsets 0 and 192
    [(1, 16, 5, 1), (1, 32, 5, 1), (1, 8, 5, 1)],  # three parts: 320, 640, 160 bytes
    [(1, 1, 16, 3), (1, 1, 16, 3)],
])  # fmt: skip
def test_aligned_contiguous_parts_are_written_in_place(shapes):
    mod = _module(shapes)
    lowered = Sequential(PASSES)(mod)
    assert not [name for name in _kernel_calls(lowered) if name.startswith("concat")]
    assert not [name for name, f in lowered.items() if CONCAT_AXIS_ATTR in f.attrs]
    views = _views(lowered)
    assert len(views) == len(shapes)
    sizes = [int(np.prod(s)) * 4 for s in shapes]
    assert [v.value.args[2].value.value for v in views] == list(np.cumsum([0, *sizes[:-1]]))
    _check_runs_right(mod)


@pytest.mark.parametrize("case", [
    {"shapes": [(1, 3, 5, 7), (1, 2, 5, 7)]},  # the second part starts at 420 bytes
    {"shapes": [(2, 4, 4, 1), (2, 4, 4, 1)]},  # batch 2: each part is two runs
    {"shapes": [(1, 4, 4, 4), (1, 4, 4, 4)], "axis": 3},  # strided along the last axis
    {"shapes": [(1, 16, 2, 2)], "twice": True},  # one tensor twice
    {"shapes": [(1, 16, 2, 2), (1, 16, 2, 2)], "return_part": True},  # a part returned too
])  # fmt: skip
def test_parts_that_cannot_be_views_keep_the_concat(case):
    mod = _module(**case)
    lowered = Sequential(PASSES)(mod)
    assert [name for name in _kernel_calls(lowered) if name.startswith("concat")]
    assert not _views(lowered)
    _check_runs_right(mod)


def test_nested_concats_elide_the_inner_one():
    """The inner result is a part of the outer concat: its storage is taken, so the outer one
    copies (and is not elided), the inner one is."""
    mod = _module([(1, 16, 2, 2), (1, 16, 2, 2), (1, 16, 2, 2)], nest=True)
    lowered = Sequential(PASSES)(mod)
    assert len([n for n in _kernel_calls(lowered) if n.startswith("concat")]) == 1
    assert len(_views(lowered)) == 2
    _check_runs_right(mod)


def test_a_part_read_after_the_concat_keeps_its_data():
    """add(part0, part0) runs after the concat and after the scaling that reads the result:
    the memory plan must not hand the result's storage to another tensor before then."""
    mod = _module([(1, 16, 4, 4), (1, 16, 4, 4)], read_after=True)
    lowered = Sequential(PASSES)(mod)
    assert len(_views(lowered)) == 2
    _check_runs_right(mod)


def test_the_default_pipeline_elides_a_fire_module_concat():
    """squeezenet's fire module: two convolutions concatenated along the channels, at batch 1,
    through the whole CPU pipeline (blocked layout included); tuning extracts no concat task."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper

    from schedlab.relax.frontend.onnx import from_onnx
    from tests.relax.frontend.test_onnx import make_model, rand

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["a"], ["ra"]),
        helper.make_node("Conv", ["x", "w3"], ["b"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["b"], ["rb"]),
        helper.make_node("Concat", ["ra", "rb"], ["cat"], axis=1),
        helper.make_node("Conv", ["cat", "w"], ["out"], kernel_shape=[1, 1]),
    ]
    inits = {"w1": rand(16, 8, 1, 1), "w3": rand(32, 8, 3, 3), "w": rand(5, 48, 1, 1)}
    model = make_model(nodes, [("x", [1, 8, 7, 9])], [("out", [1, 5, 7, 9])], inits)
    mod = from_onnx(model)
    ex = schedlab.compile(mod, "cpu")
    assert not [name for name in ex.kernels if "concat" in name]
    # so tuning leaves it out too: a task the compiled model never runs is waste
    from schedlab.tune.relax_integration import extract_tasks

    names = [task.name for task in extract_tasks(mod, "cpu")]
    assert names and not [n for n in names if "concat" in n], names
    x = np.random.default_rng(0).standard_normal((1, 8, 7, 9)).astype(np.float32)
    got = schedlab.relax.VirtualMachine(ex)["main"](x)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
    assert onnx  # imported for the model builders
