"""The graph IR's text form: printed, parsed back (never executed), structurally equal."""

import numpy as np
import pytest

from schedlab.errors import ScriptError
from schedlab.ir.expr import IntImm, SizeVar
from schedlab.ir.function import IRModule
from schedlab.ir.structural import assert_structural_equal, structural_hash
from schedlab.relax import (
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    Function,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    TensorStructInfo,
    Tuple,
    Var,
    VarBinding,
)  # fmt: skip
from schedlab.relax import struct_info as S
from schedlab.script import from_source

from .test_block_builder import build_mlp, evaluate
from .test_r1_ops import ensure_test_ops


@pytest.fixture(autouse=True)
def _ops():
    ensure_test_ops()


def round_trip(node):
    text = node.script()
    parsed = from_source(text)
    assert_structural_equal(parsed, node)
    assert structural_hash(parsed) == structural_hash(node)
    assert parsed.script() == text
    return parsed, text


def test_mlp_module_round_trip_and_still_runs():
    mod = build_mlp()
    parsed, text = round_trip(mod)
    assert "@R.function" in text and "@T.prim_func" in text
    assert 'R.call_tir(cls.dense, (x, w1), out_sinfo=R.Tensor((n, 7), dtype="float32"))' in text
    assert 'R.call("test.add", lv2, lv2)' in text and "R.output(gv)" in text
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") for s in [(3, 5), (5, 7), (7,), (7, 3)]]
    np.testing.assert_allclose(evaluate(parsed, "main", *args), evaluate(mod, "main", *args))


def _kitchen_sink() -> Function:
    n, m = SizeVar("n"), SizeVar("m", "int64")
    x = Var("x", TensorStructInfo((n, 3), "float32"))
    flag = Var("flag", TensorStructInfo((), "bool"))
    shape = Var("s", S.ShapeStructInfo(ndim=2))
    lv = DataflowVar("lv", TensorStructInfo((n, 3), "float32"))
    c = Constant(np.array([[1.5, -np.inf, np.nan]], "float32"))
    tup = Var("tup", S.TupleStructInfo((lv.struct_info_, c.struct_info)))
    dyn = Var("dyn", TensorStructInfo((m,), "float32"))
    misc = Var("misc", S.TupleStructInfo((S.ShapeStructInfo((n, 3)), S.PrimStructInfo("int64"),
                                          S.ObjectStructInfo())))  # fmt: skip
    branch = Var("r", TensorStructInfo((n, 3), "float32"))
    inner = Var("t", TensorStructInfo((n, 3), "float32"))
    flow = DataflowBlock((
        VarBinding(lv, Call("test.mul", (x, x), {"scale": 0.5})),
        VarBinding(tup, Tuple((lv, c))),
    ))  # fmt: skip
    rest = BindingBlock((
        MatchCast(dyn, x, TensorStructInfo((m,), "float32")),
        VarBinding(misc, Tuple((ShapeExpr((n, 3)), PrimValue(IntImm("int64", 7)),
                                StringImm("hi")))),
        VarBinding(branch, If(flag, SeqExpr((BindingBlock((VarBinding(inner, tup[0]),)),), inner),
                              SeqExpr((), x))),
    ))  # fmt: skip
    body = SeqExpr((flow, rest), Tuple((branch, tup[1])))
    return Function((x, flag, shape), body, None, {"global_symbol": "sink", "k": [1, 2]})


def test_every_node_kind_round_trips():
    func = _kitchen_sink()
    parsed, text = round_trip(func)
    assert isinstance(parsed, Function)
    assert 'R.const([[1.5, float("-inf"), float("nan")]], "float32")' in text
    assert 'R.match_cast(x, R.Tensor((m,), dtype="float32"))' in text
    assert "if flag:" in text and "m = T.int64(is_size_var=True)" in text
    assert 'R.call("test.mul", x, x, scale=0.5)' in text


def test_module_with_two_graph_functions_and_a_call():
    x = Var("x", TensorStructInfo((4,), "float32"))
    helper = Function((x,), SeqExpr((), x))
    y = Var("y", TensorStructInfo((4,), "float32"))
    out = Var("out", TensorStructInfo((4,), "float32"))
    from schedlab.relax import GlobalVar

    call = Call(GlobalVar("helper"), (y,))
    main = Function((y,), SeqExpr((BindingBlock((VarBinding(out, call),)),), out))
    mod = IRModule({"helper": helper, "main": main}, {"origin": "test"})
    _, text = round_trip(mod)
    assert "cls.helper(y)" in text and 'I.module_attrs({"origin": "test"})' in text.replace(
        "'", '"'
    )


HAND_WRITTEN = """
from schedlab.script import ir as I
from schedlab.script import tir as T
from schedlab.relax import R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 2), dtype="float32")) -> R.Tensor((n, 2), dtype="float32"):
        n = T.int32(is_size_var=True)
        with R.dataflow():
            lv = R.call("test.add", x, x)
            gv = R.call("test.mul", lv, x, scale=2.0)
            R.output(gv)
        return gv
"""


def test_hand_written_text_infers_struct_info():
    mod = from_source(HAND_WRITTEN)
    main = mod["main"]
    lv, gv = (b.var for b in main.body.blocks[0].bindings)
    assert type(lv) is DataflowVar and type(gv) is Var
    assert str(gv.struct_info) == "Tensor((n, 2), float32)"
    assert main.body.blocks[0].bindings[1].value.attrs == {"scale": 2.0}


@pytest.mark.parametrize(
    "snippet, message",
    [
        ('lv = R.call("test.add", x, nope)', "unknown graph variable 'nope'"),
        ('lv = R.call("no.such", x, x)', "unknown operator 'no.such'"),
        ("lv = __import__('os').system('false')", "unknown callee"),
        ("lv = R.call_tir(cls.missing, (x,), out_sinfo=R.Tensor((2,)))", "no function 'missing'"),
        (
            'lv: R.Tensor((n, 2), dtype="float32") = '
            'R.call("test.add", x, R.const([1.0], "float32"))',
            "",
        ),
    ],
)
def test_bad_text_is_a_script_error(snippet, message):
    text = HAND_WRITTEN.replace('lv = R.call("test.add", x, x)', snippet)
    if not message:  # an explicit annotation is trusted; inference of the value is not run
        from_source(text)
        return
    with pytest.raises(ScriptError, match=message) as info:
        from_source(text)
    assert info.value.line == 12


def test_mismatch_in_text_names_the_binding():
    text = HAND_WRITTEN.replace(
        'R.call("test.mul", lv, x, scale=2.0)', 'R.call("test.mul", lv, R.const([1.0], "float32"))'
    )
    with pytest.raises(ScriptError, match=r"binding 'gv'.*test\.mul.*\(n, 2\).*\(1,?\)"):
        from_source(text)


def test_reserved_and_duplicate_names_are_renamed():
    x = Var("cls", TensorStructInfo((3,), "float32"))
    first = Var("if", TensorStructInfo((3,), "float32"))
    second = Var("if", TensorStructInfo((3,), "float32"))
    block = BindingBlock((VarBinding(first, Call("test.add", (x, x))), VarBinding(second, first)))
    func = Function((x,), SeqExpr((block,), second))
    _, text = round_trip(func)
    assert "def main(cls_: R.Tensor" in text and "if__1: R.Tensor" in text


def test_graph_nodes_print_alone():
    x = Var("x", TensorStructInfo((2, 3), "int8"))
    assert str(x) == "x"
    assert str(Call("test.add", (x, x))) == 'R.call("test.add", x, x)'
    assert str(TensorStructInfo((2, 3), "int8").script()) == 'R.Tensor((2, 3), dtype="int8")'
    assert str(VarBinding(x, Tuple(()))) == 'x: R.Tensor((2, 3), dtype="int8") = R.tuple()'
