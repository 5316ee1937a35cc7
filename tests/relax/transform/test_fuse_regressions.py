"""Fusion regressions: FuseTIR merging two copies of one PrimFunc (fresh loop/iter variables per
copy), LegalizeOps binding nested calls (Normalize) so FuseOps sees producer and consumer, and
constant arguments joining a group. Numerics through the graph interpreter and the compiled VM."""

import numpy as np
import pytest

import schedlab
from schedlab.ir.expr import Var as TirVar
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import post_order_visit
from schedlab.ir.stmt import Block, For
from schedlab.ir.verify import verify
from schedlab.relax import BlockBuilder, R, TensorStructInfo, Var
from schedlab.relax import expr as X
from schedlab.relax.interpreter import run
from schedlab.relax.transform import (
    AnnotateTIROpPattern,
    DeadCodeElimination,
    FuseOps,
    FuseTIR,
    LegalizeOps,
)  # fmt: skip
from schedlab.relax.transform.normalize import Normalize, normalize_function


def _fused(mod):
    mod = DeadCodeElimination()(AnnotateTIROpPattern()(LegalizeOps()(mod)))
    return DeadCodeElimination()(FuseTIR()(FuseOps()(mod)))


def _prim_funcs(mod) -> dict:
    return {n: f for n, f in mod.items() if isinstance(f, PrimFunc)}


def _vm_run(mod, *arrays):
    return schedlab.relax.VirtualMachine(schedlab.compile(mod, target="cpu"))["main"](*arrays)


def _add_chain_module(rows: int, cols: int):
    """main(x, y, z) = (x + y) + z: both adds legalize to the same PrimFunc "add"."""
    sinfo = TensorStructInfo((rows, cols), "float32")
    x, y, z = (Var(n, sinfo) for n in "xyz")
    bb = BlockBuilder()
    with bb.function("main", [x, y, z]):
        with bb.dataflow():
            out = bb.emit_output(R.add(bb.emit(R.add(x, y)), z))
        bb.emit_func_output(out)
    return bb.get()


def _defined_vars(prim: PrimFunc) -> list:
    found = []

    def record(node):
        if isinstance(node, For):
            found.append(node.loop_var)
        elif isinstance(node, Block):
            found.extend(iv.var for iv in node.iter_vars)

    post_order_visit(prim.body, record)
    return found


def test_fuse_tir_two_copies_of_one_primfunc():
    before = _add_chain_module(5, 7)
    assert len(_prim_funcs(LegalizeOps()(before))) == 1  # one shared "add"
    after = _fused(before)
    (prim,) = _prim_funcs(after).values()
    verify(prim)  # used to fail: loop and iter variables defined twice
    defined = _defined_vars(prim)
    assert all(isinstance(v, TirVar) for v in defined)
    assert len({id(v) for v in defined}) == len(defined) == 8  # 2 loops + 2 iters, per copy
    uids = []
    post_order_visit(prim.body, lambda n: uids.append(n.uid) if isinstance(n, (For, Block)) else 0)
    assert len(set(uids)) == len(uids)
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((5, 7)).astype("float32") for _ in range(3)]
    want = arrays[0] + arrays[1] + arrays[2]
    np.testing.assert_allclose(run(after, *arrays), want, rtol=1e-6)
    np.testing.assert_allclose(_vm_run(before, *arrays), want, rtol=1e-6)


def _nested_mlp(rows: int = 3, din: int = 5, dout: int = 6):
    """main(x, w, b) = relu(add(matmul(x, w), b)) written as one nested expression."""
    x = Var("x", TensorStructInfo((rows, din), "float32"))
    w = Var("w", TensorStructInfo((din, dout), "float32"))
    b = Var("b", TensorStructInfo((dout,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.relu(R.add(R.matmul(x, w), b)))
        bb.emit_func_output(out)
    return bb.get()


def _bindings(func):
    return [b for blk in func.body.blocks for b in blk.bindings]


def test_normalize_binds_nested_calls():
    mod = _nested_mlp()
    normalized = Normalize()(mod)
    bindings = _bindings(normalized["main"])
    assert [b.value.op for b in bindings] == ["relax.matmul", "relax.add", "relax.nn.relu"]
    for binding in bindings[:-1]:
        assert isinstance(binding.var, X.DataflowVar)
    assert all(isinstance(a, X.Var) for b in bindings for a in b.value.args)
    assert len({b.var.name_hint for b in bindings}) == 3
    assert normalize_function(normalized["main"]) is normalized["main"]  # already normal
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s).astype("float32") for s in [(3, 5), (5, 6), (6,)]]
    np.testing.assert_allclose(run(normalized, *arrays), run(mod, *arrays), rtol=1e-6)


def test_nested_matmul_bias_relu_fuse_into_one_kernel():
    mod = _nested_mlp()
    legalized = LegalizeOps()(mod)
    assert len(_bindings(legalized["main"])) == 3  # each nested call has its own binding
    after = _fused(mod)
    assert list(_prim_funcs(after)) == ["fused_matmul_add_nn_relu"]
    verify(after["fused_matmul_add_nn_relu"])
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in [(3, 5), (5, 6), (6,)])
    want = np.maximum(x @ w + b, 0)
    np.testing.assert_allclose(run(after, x, w, b), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_vm_run(mod, x, w, b), want, rtol=1e-5, atol=1e-6)


def test_constant_arguments_join_the_group():
    """add(matmul(x, W), B) with constant W and B still fuses; constants become parameters."""
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((4, 3)).astype("float32"), rng.standard_normal(3).astype("float32")
    x = Var("x", TensorStructInfo((2, 4), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(R.matmul(x, X.Constant(w)))
            out = bb.emit_output(R.sigmoid(R.add(h, X.Constant(b))))
        bb.emit_func_output(out)
    mod = bb.get()
    after = _fused(mod)
    assert list(_prim_funcs(after)) == ["fused_matmul_add_sigmoid"]
    (call,) = [b.value for b in _bindings(after["main"])]
    assert sum(isinstance(a, X.Constant) for a in call.args[1].fields) == 2
    data = rng.standard_normal((2, 4)).astype("float32")
    want = 1 / (1 + np.exp(-(data @ w + b)))
    np.testing.assert_allclose(run(after, data), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_vm_run(mod, data), want, rtol=1e-5, atol=1e-6)


def test_onnx_mlp_compiles_to_fewer_kernels():
    """The ONNX MLP (MatMul, Add, Relu, Gemm, Sigmoid): two fused kernels instead of one per
    operator, still matching onnxruntime."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from schedlab.relax.frontend.onnx import from_onnx
    from tests.relax.test_end_to_end import input_arrays, mlp_model

    model = mlp_model()
    mod = from_onnx(model)
    unfused = len(_prim_funcs(LegalizeOps()(mod)))
    ex = schedlab.compile(mod, target="cpu")
    assert unfused == 7 and len(ex.kernels) == 2, sorted(ex.kernels)
    feeds = input_arrays(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, feeds)
    got = schedlab.relax.VirtualMachine(ex)["main"](*feeds.values())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run(mod, *feeds.values()), want, rtol=1e-4, atol=1e-5)
