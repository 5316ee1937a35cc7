"""Graph IR nodes: struct info, inference through the registry, structural equality."""

import pickle

import numpy as np
import pytest

from schedlab.ir.expr import IntImm, SizeVar
from schedlab.ir.functor import Mutator, post_order_visit
from schedlab.ir.structural import assert_structural_equal, structural_equal, structural_hash
from schedlab.relax import (
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    Function,
    GlobalVar,
    GraphTypeError,
    ObjectStructInfo,
    PrimStructInfo,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    ShapeStructInfo,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VarBinding,
    call_tir,
)  # fmt: skip
from schedlab.relax.op import OpTypeError, list_ops, register_op

from .test_r1_ops import ensure_test_ops


@pytest.fixture(autouse=True)
def _ops():
    ensure_test_ops()


def tensor(shape, dtype="float32"):
    return TensorStructInfo(tuple(shape), dtype)


def test_tensor_struct_info_normalizes_dims():
    n = SizeVar("n")
    sinfo = tensor((n, 4))
    assert sinfo.ndim == 2 and sinfo.shape[0] is n
    assert isinstance(sinfo.shape[1], IntImm) and sinfo.shape[1].value == 4
    assert sinfo.static_shape() is None
    assert tensor((2, 3)).static_shape() == (2, 3)
    assert TensorStructInfo(None, "int8", ndim=3).ndim == 3
    with pytest.raises(ValueError, match="ndim=3"):
        TensorStructInfo((1, 2), "float32", ndim=3)
    with pytest.raises(TypeError, match=r"shape\[0\]"):
        TensorStructInfo(("a",), "float32")
    with pytest.raises(TypeError, match=r"fields\[1\]"):
        TupleStructInfo((tensor((1,)), 3))
    assert ShapeStructInfo((n, 2)).ndim == 2 and ShapeStructInfo(ndim=4).values is None


def test_leaf_struct_info():
    x = Var("x", tensor((3, 5)))
    assert x.struct_info is x.struct_info_
    assert isinstance(Var("o").struct_info, ObjectStructInfo)
    c = Constant(np.arange(6, dtype="int32").reshape(2, 3))
    assert_structural_equal(c.struct_info, tensor((2, 3), "int32"))
    pair = Tuple((x, c))
    assert_structural_equal(pair.struct_info, TupleStructInfo((tensor((3, 5)), c.struct_info)))
    assert_structural_equal(pair[1].struct_info, c.struct_info)
    with pytest.raises(GraphTypeError, match="out of range"):
        _ = TupleGetItem(pair, 2).struct_info
    assert ShapeExpr((2, 3)).struct_info.ndim == 2
    assert isinstance(PrimValue(IntImm("int64", 3)).struct_info, PrimStructInfo)


def test_constant_compares_by_value():
    a = Constant(np.array([1.0, 2.0], "float32"))
    assert structural_equal(a, Constant(np.array([1.0, 2.0], "float32")))
    assert not structural_equal(a, Constant(np.array([1.0, 3.0], "float32")))
    assert not structural_equal(a, Constant(np.array([1.0, 2.0], "float64")))
    with pytest.raises(ValueError):
        a.data[0] = 5.0  # constants are read-only


def test_constant_data_is_aligned_and_its_key_holds_a_digest_not_the_bytes():
    raw = np.zeros(4096 * 4 + 1, np.uint8)
    weight = raw[1:].view("float32").reshape(64, 64)  # misaligned, like an ONNX weight's view
    weight[...] = np.arange(64 * 64).reshape(64, 64)
    c = Constant(weight)
    assert c.data.ctypes.data % 64 == 0 and c.data.flags.c_contiguous
    np.testing.assert_array_equal(c.data, weight)
    assert not c.data.flags.writeable
    dtype, shape, digest = c.key
    assert (dtype, shape) == ("float32", (64, 64)) and len(digest) == 32
    assert structural_equal(c, Constant(weight.copy()))
    assert structural_hash(c) == structural_hash(Constant(weight.copy()))
    transposed = Constant(weight.T)  # not C-contiguous: copied in C order
    assert transposed.data.flags.c_contiguous and not structural_equal(c, transposed)
    np.testing.assert_array_equal(transposed.data, weight.T)
    for size in range(1000, 1016):  # unpickled, numpy's allocation is realigned
        again = pickle.loads(pickle.dumps(Constant(np.arange(size, dtype="float32"))))
        assert again.data.ctypes.data % 64 == 0 and not again.data.flags.writeable
        assert again.key == Constant(np.arange(size, dtype="float32")).key


def test_call_infers_through_registry():
    n = SizeVar("n")
    x, y = Var("x", tensor((n, 4))), Var("y", tensor((n, 4)))
    call = Call("test.add", (x, y))
    assert_structural_equal(call.struct_info, tensor((n, 4)))
    bad = Call("test.add", (x, Var("z", tensor((n, 5)))))
    with pytest.raises(OpTypeError, match=r"test\.add.*\(n, 4\).*\(n, 5\)"):
        _ = bad.struct_info
    with pytest.raises(TypeError, match="graph expression"):
        Call("test.add", (x, 3))


def test_call_tir_struct_info():
    x = Var("x", tensor((2, 3)))
    call = call_tir(GlobalVar("f"), [x], tensor((3, 2)))
    assert call.op == "relax.call_tir" and isinstance(call.args[1], Tuple)
    assert_structural_equal(call.struct_info, tensor((3, 2)))
    two = call_tir(GlobalVar("g"), x, [tensor((1,)), tensor((2,))])
    assert isinstance(two.struct_info, TupleStructInfo)


def _function(names=("x", "lv", "gv"), op="test.add"):
    n = SizeVar(names[0] + "_n")
    x = Var(names[0], tensor((n, 4)))
    lv = DataflowVar(names[1], tensor((n, 4)))
    gv = Var(names[2], tensor((n, 4)))
    block = DataflowBlock((VarBinding(lv, Call(op, (x, x))), VarBinding(gv, Call(op, (lv, x)))))
    return Function((x,), SeqExpr((block,), gv))


def test_alpha_equivalent_functions_are_equal():
    a, b = _function(), _function(("p", "t", "out"))
    assert_structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    assert not structural_equal(a, _function(op="test.mul"))
    assert structural_hash(a) != structural_hash(_function(op="test.mul"))
    assert_structural_equal(a.struct_info.ret, a.ret_struct_info)


def test_binding_order_matters():
    x = Var("x", tensor((4,)))
    a, b = Var("a", tensor((4,))), Var("b", tensor((4,)))
    one = Function((x,), SeqExpr((BindingBlock((VarBinding(a, x), VarBinding(b, a))),), b))
    a2, b2 = Var("a", tensor((4,))), Var("b", tensor((4,)))
    other = Function((x,), SeqExpr((BindingBlock((VarBinding(a2, x), VarBinding(b2, x))),), b2))
    assert not structural_equal(one, other)


def test_free_variables_must_match():
    x, y = Var("x", tensor((4,))), Var("x", tensor((4,)))
    assert not structural_equal(Call("test.add", (x, x)), Call("test.add", (y, y)))
    assert structural_equal(Call("test.add", (x, x)), Call("test.add", (y, y)), True)


def test_visitor_and_mutator_walk_graph_nodes():
    func = _function()
    calls = []
    post_order_visit(func, lambda node: calls.append(node) if isinstance(node, Call) else None)
    assert [c.op for c in calls] == ["test.add", "test.add"]

    class ToMul(Mutator):
        def visit_Call(self, node):
            node = self.generic_visit(node)
            return node.replace(op="test.mul")

    changed = ToMul().visit(func)
    assert_structural_equal(changed, _function(op="test.mul"))


def test_struct_info_is_not_stale_after_replace():
    x, y = Var("x", tensor((2, 3))), Var("y", tensor((5, 6)))
    call = Call("test.add", (x, x))
    assert call.struct_info.static_shape() == (2, 3)
    assert call.replace(args=(y, y)).struct_info.static_shape() == (5, 6)


def test_registry_test_ops_present():
    assert "test.add" in list_ops()
    with pytest.raises(ValueError, match="already registered"):
        register_op("test.add", num_inputs=2, pattern="elemwise", infer=None, legalize=None)


def test_expr_mutator_retypes_rebound_variables():
    from schedlab.relax import ExprMutator

    x = Var("x", tensor((2, 3)))
    y = Var("y", tensor((4, 3)))
    lv, gv = Var("lv", tensor((2, 3))), Var("gv", tensor((2, 3)))
    block = BindingBlock((VarBinding(lv, Call("test.add", (x, x))), VarBinding(gv, lv)))
    func = Function((x, y), SeqExpr((block,), gv))

    class UseY(ExprMutator):
        def visit_Call(self, node):
            return node.replace(args=(self.var_remap.get(y, y), y))

    new = UseY().visit(func)
    (first, second) = new.body.blocks[0].bindings
    assert first.var is not lv and first.var.struct_info_.static_shape() == (4, 3)
    assert second.value is first.var and new.ret_struct_info.static_shape() == (4, 3)
    assert UseY().visit(Function((x,), SeqExpr((), x))) is not None


def test_match_cast_defines_its_variable():
    from schedlab.relax import MatchCast

    def build(name):
        m = SizeVar(name)
        x = Var("x", TensorStructInfo(None, "float32", ndim=1))
        y = Var(name, tensor((m,)))
        block = BindingBlock((MatchCast(y, x, tensor((m,))),))
        return Function((x,), SeqExpr((block,), y))

    assert_structural_equal(build("a"), build("b"))
    assert structural_hash(build("a")) == structural_hash(build("b"))
