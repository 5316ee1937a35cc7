"""simplify_stmt / simplify_prim_func: loop ranges known while descending, proven branches go."""

from schedlab.arith import Analyzer, simplify_prim_func, simplify_stmt
from schedlab.ir import (
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IterVar,
    LetStmt,
    PrimFunc,
    Range,
    Var,
    const,
    decl_buffer,
)
from schedlab.ir import expr as E
from schedlab.ir.structural import assert_structural_equal

from .arith_text import text

A = decl_buffer((64,), "float32", "A")
i, j, t = Var("i"), Var("j"), Var("t")


def _store(index):
    return BufferStore(A, const(1.0), (index,))


def test_loop_ranges_are_known_inside():
    body = _store(
        E.Add(
            E.Mul(E.FloorDiv(E.Add(E.Mul(i, const(4)), j), const(4)), const(4)),
            E.FloorMod(E.Add(E.Mul(i, const(4)), j), const(4)),
        )
    )
    loop = For(i, 0, 16, "serial", For(j, 0, 4, "serial", body))
    result = simplify_stmt(loop)
    assert text(result.body.body.indices[0]) == "i*4 + j"
    assert result.uid == loop.uid and result.body.uid == loop.body.uid


def test_proven_branches_are_removed():
    inner = IfThenElse(j < 4, _store(j), _store(j + 1))
    loop = For(j, 0, 4, "serial", inner)
    assert isinstance(simplify_stmt(loop).body, BufferStore)
    never = For(j, 0, 4, "serial", IfThenElse(j >= 4, _store(j)))
    body = simplify_stmt(never).body
    assert isinstance(body, Evaluate)


def test_branch_conditions_are_assumed():
    cond = IfThenElse(i < 8, _store(E.Min(i, const(10))), _store(E.Max(i, const(8))))
    result = simplify_stmt(cond)
    assert text(result.then_case.indices[0]) == "i"
    assert text(result.else_case.indices[0]) == "i"


def test_let_and_block_iter_vars():
    v = Var("v")
    block = Block(
        (IterVar(v, Range(0, 4)),),
        (A.region((E.Add(v, const(0)), 1)),),
        (),
        "b",
        _store(E.FloorDiv(v, const(4))),
    )
    realize = BlockRealize((E.Add(i, const(0)),), const(True), block)
    result = simplify_stmt(For(i, 0, 4, "serial", realize))
    inner = result.body.block
    assert text(inner.body.indices[0]) == "0"
    assert text(inner.reads[0].region[0].min) == "v"
    assert text(result.body.iter_values[0]) == "i"
    let = LetStmt(t, E.Add(i, const(2)), _store(E.Sub(t, const(2))))
    assert text(simplify_stmt(let).body.indices[0]) == "t - 2"


def test_unchanged_statements_are_shared():
    loop = For(i, 0, 4, "serial", _store(i))
    assert simplify_stmt(loop, Analyzer()) is loop


def test_simplify_prim_func():
    param = Var("A", "handle")
    body = For(
        i, 0, 8, "serial", _store(E.Sub(E.Add(E.Mul(i, const(23)), const(1)), E.Mul(i, const(23))))
    )
    func = PrimFunc((param,), body, {param: A}, {"global_symbol": "f"})
    result = simplify_prim_func(func)
    assert text(result.body.body.indices[0]) == "1"
    expected = PrimFunc(
        (param,), For(i, 0, 8, "serial", _store(const(1))), {param: A}, {"global_symbol": "f"}
    )
    assert_structural_equal(result, expected)
    assert simplify_prim_func(result) is result
