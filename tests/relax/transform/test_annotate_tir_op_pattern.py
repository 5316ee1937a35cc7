"""AnnotateTIROpPattern: PrimFuncs get "op_pattern"; LegalizeOps' recorded kinds are kept and
emit_te PrimFuncs are analysed from their blocks."""

from schedlab import te
from schedlab.ir.function import IRModule
from schedlab.relax import BlockBuilder, TensorStructInfo, Var
from schedlab.relax.transform import AnnotateTIROpPattern, LegalizeOps, analyze_op_pattern

from ._graphs import mlp_module


def _func(build):
    return te.create_prim_func(build())


def test_analysis_kinds():
    a, b = te.placeholder((4, 5), name="a"), te.placeholder((5,), name="b")
    c = te.placeholder((5, 6), name="c")
    ew = te.compute((4, 5), lambda i, j: a[i, j] * 2.0, name="ew")
    bc = te.compute((4, 5), lambda i, j: a[i, j] + b[j], name="bc")
    inj = te.compute((5, 4), lambda i, j: a[j, i], name="inj")
    k = te.reduce_axis((0, 5), "k")
    red = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="red")
    k2 = te.reduce_axis((0, 5), "k2")
    mm = te.compute((4, 6), lambda i, j: te.sum(a[i, k2] * c[k2, j], axis=k2), name="mm")
    kinds = [
        analyze_op_pattern(te.create_prim_func(args))
        for args in ([a, ew], [a, b, bc], [a, inj], [a, red], [a, c, mm])
    ]
    assert kinds == [0, 1, 2, 3, 4]


def test_multi_stage_takes_largest_kind():
    a = te.placeholder((4, 5), name="a")
    ew = te.compute((4, 5), lambda i, j: a[i, j] * 2.0, name="ew")
    k = te.reduce_axis((0, 5), "k")
    red = te.compute((4,), lambda i: te.sum(ew[i, k], axis=k), name="red")
    assert analyze_op_pattern(te.create_prim_func([a, red])) == 3


def test_pass_annotates_emit_te_functions():
    x = Var("x", TensorStructInfo((3, 4), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit_te(lambda t: te.compute(t.shape, lambda i, j: t[j % 3, i % 3]), x)
        bb.emit_func_output(y)
    mod = AnnotateTIROpPattern()(bb.get())
    (name,) = [n for n in mod if n != "main"]
    assert mod[name].attrs["op_pattern"] == 2


def test_legalized_patterns_kept_and_idempotent():
    legal = LegalizeOps()(mlp_module())
    mod = AnnotateTIROpPattern()(legal)
    assert mod is legal  # every PrimFunc already has its pattern
    stripped = IRModule(
        {n: f if n == "main" else f.replace(attrs={"global_symbol": n}) for n, f in legal.items()}
    )
    again = AnnotateTIROpPattern()(stripped)
    assert again["nn_relu"].attrs["op_pattern"] == 0
    assert again["matmul"].attrs["op_pattern"] == 4
    assert again["sum"].attrs["op_pattern"] == 3
