import pytest

from schedlab.ir import (
    Block,
    BlockRealize,
    BufferLoad,
    BufferStore,
    For,
    IRModule,
    Mutator,
    PrimFunc,
    Var,
    VerifyError,
    collect_vars,
    const,
    decl_buffer,
    post_order_visit,
    substitute,
    verify,
)  # fmt: skip
from schedlab.ir.transform import PassContext, PassRecorder, Sequential, prim_func_pass

from .conftest import make_gemm


def test_mutator_shares_untouched_subtrees():
    func = make_gemm()

    class Nothing(Mutator):
        pass

    assert Nothing().visit(func.body) is func.body


def test_mutator_rewrites_and_keeps_uids():
    func = make_gemm()

    class Extents(Mutator):
        def visit_For(self, node):
            node = self.generic_visit(node)
            return node.replace(extent=node.extent)

    loops_before = []
    post_order_visit(func.body, lambda n: loops_before.append(n.uid) if isinstance(n, For) else 0)
    out = Extents().visit(func.body)
    loops_after = []
    post_order_visit(out, lambda n: loops_after.append(n.uid) if isinstance(n, For) else 0)
    assert loops_before == loops_after


def test_substitute_and_collect():
    i, j = Var("i"), Var("j")
    expr = substitute(i * 2 + j, {i: j + 1})
    assert [v.name for v in collect_vars(expr)] == ["j"]
    assert substitute(i, lambda v: None) is i


def test_verify_accepts_gemm_and_reports_problems():
    verify(make_gemm())
    A = decl_buffer((4,), "float32", "A")
    stray = decl_buffer((4,), "float32", "stray")
    i, free = Var("i"), Var("free")
    body = For(i, 0, 4, "serial", BufferStore(A, BufferLoad(stray, (i + free,)), (i,)))
    a = Var("A", "handle")
    with pytest.raises(VerifyError) as err:
        verify(PrimFunc((a,), body, {a: A}))
    text = str(err.value)
    assert "stray" in text and "free" in text and "2 problem" in text


def test_verify_rejects_loop_var_inside_block():
    A = decl_buffer((4,), "float32", "A")
    i = Var("i")
    inner = BlockRealize((), const(True), Block((), (), (), "b", BufferStore(A, const(1.0), (i,))))
    a = Var("A", "handle")
    with pytest.raises(VerifyError, match="inside a block"):
        verify(PrimFunc((a,), For(i, 0, 4, "serial", inner), {a: A}))


def test_pass_recorder_sees_nested_passes():
    @prim_func_pass(name="Touch")
    def touch(func):
        return func.with_attr("touched", True)

    @prim_func_pass(name="Keep")
    def keep(func):
        return func

    recorder = PassRecorder()
    mod = IRModule({"gemm": make_gemm()})
    with PassContext(instruments=[recorder]):
        out = Sequential([touch, Sequential([keep], name="Inner")], name="Outer")(mod)
    assert out["gemm"].attrs["touched"] is True
    names = [(r.name, r.depth, r.changed) for r in recorder.records]
    assert names == [
        ("Touch", 1, True),
        ("Keep", 2, False),
        ("Inner", 1, False),
        ("Outer", 0, True),
    ]
    assert recorder.records[0].before is mod
