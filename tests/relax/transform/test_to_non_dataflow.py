"""ToNonDataflow: no DataflowBlock / DataflowVar is left; numerics preserved."""

from schedlab.ir.functor import post_order_visit
from schedlab.relax import BindingBlock, DataflowBlock, DataflowVar
from schedlab.relax.transform import LegalizeOps, ToNonDataflow

from ._graphs import assert_same_results, mlp_inputs, mlp_module


def _count(node, cls):
    found = []
    post_order_visit(node, lambda n: found.append(n) if isinstance(n, cls) else None)
    return len(found)


def test_blocks_and_vars_converted():
    before = LegalizeOps()(mlp_module())
    after = ToNonDataflow()(before)
    main = after["main"]
    assert _count(before["main"], DataflowBlock) == 1
    assert _count(main, DataflowBlock) == 0 and _count(main, DataflowVar) == 0
    assert [type(b) for b in main.body.blocks] == [BindingBlock]
    names = [b.var.name_hint for b in main.body.blocks[0].bindings]
    assert names == [b.var.name_hint for b in before["main"].body.blocks[0].bindings]
    assert_same_results(before, after, *mlp_inputs(4))


def test_uses_follow_definitions():
    after = ToNonDataflow()(mlp_module())
    bindings = after["main"].body.blocks[0].bindings
    defined = {b.var for b in bindings}
    used = []
    post_order_visit(bindings[1].value, used.append)
    assert bindings[0].var in used and bindings[0].var in defined


def test_idempotent():
    once = ToNonDataflow()(mlp_module())
    twice = ToNonDataflow()(once)
    assert twice["main"] is once["main"]
