"""RemoveNoOp: empty loops, Evaluate(0), constant branches disappear."""

from schedlab.ir import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    SeqStmt,
    Var,
    assert_structural_equal,
    const,
    decl_buffer,
)  # fmt: skip
from schedlab.transform import remove_no_op

from .tir_samples import plain_func as _func

ONE = const(1.0, "float32")


def test_debris_is_removed():
    A = decl_buffer((8,), "float32", "A")
    T = decl_buffer((4,), "float32", "T")
    i, j, k, n = Var("i"), Var("j"), Var("k"), Var("n")
    store = BufferStore(A, ONE, (i,))
    body = SeqStmt(
        (
            Evaluate(const(0)),
            For(j, 0, 0, "serial", BufferStore(A, ONE, (j,))),  # extent 0
            For(k, 0, 4, "serial", Evaluate(const(0))),  # empty body
            IfThenElse(const(False), BufferStore(A, ONE, (0,))),
            IfThenElse(const(True), store),
            IfThenElse(n < 3, Evaluate(const(0))),  # pure condition, nothing to do
            Allocate(T, Evaluate(const(0))),
            Evaluate(i + 1),  # a pure value evaluated for nothing
        )
    )
    after = remove_no_op(_func([A], For(i, 0, 8, "serial", body)))
    assert_structural_equal(after.body, For(i, 0, 8, "serial", store))


def test_empty_then_branch_becomes_a_negated_condition():
    A = decl_buffer((8,), "float32", "A")
    i = Var("i")
    store = BufferStore(A, ONE, (i,))
    after = remove_no_op(_func([A], IfThenElse(i < 3, Evaluate(const(0)), store)))
    assert isinstance(after.body, IfThenElse) and after.body.else_case is None
    assert str(after.body.condition) == str(~(i < 3))


def test_everything_gone_leaves_a_no_op_body():
    after = remove_no_op(_func([], For(Var("i"), 0, 4, "serial", Evaluate(const(0)))))
    assert isinstance(after.body, Evaluate)


def test_clean_function_is_unchanged():
    A = decl_buffer((8,), "float32", "A")
    i = Var("i")
    func = _func([A], For(i, 0, 8, "serial", BufferStore(A, ONE, (i,))))
    assert remove_no_op(func) is func
