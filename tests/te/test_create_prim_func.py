"""te.create_prim_func produces the TensorIR form of COMMON/DESIGN, stage by stage."""

import numpy as np
import pytest

from schedlab import te
from schedlab.ir import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IterType,
    IterVar,
    PrimFunc,
    Range,
    Select,
    Var,
    assert_structural_equal,
    const,
    decl_buffer,
    verify,
)  # fmt: skip

GEMM_TEXT = """
@T.prim_func
def gemm(
    A: T.Buffer((6, 5), "float32"), B: T.Buffer((5, 4), "float32"), C: T.Buffer((6, 4), "float32")
):
    T.func_attr({"global_symbol": "gemm", "tir.noalias": True})
    for i, j, k in T.grid(6, 4, 5):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def te_gemm(m=6, n=4, k=5, name="gemm"):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    rk = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, rk] * B[rk, j], axis=rk), name="C")
    return te.create_prim_func([A, B, C], name=name)


def hand_gemm(m=6, n=4, k=5):
    A = decl_buffer((m, k), "float32", "A")
    B = decl_buffer((k, n), "float32", "B")
    C = decl_buffer((m, n), "float32", "C")
    i, j, kk = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    block = Block(
        iter_vars=(
            IterVar(vi, Range(0, m)),
            IterVar(vj, Range(0, n)),
            IterVar(vk, Range(0, k), IterType.REDUCE),
        ),
        reads=(A.region((vi, 1), (vk, 1)), B.region((vk, 1), (vj, 1))),
        writes=(C.region((vi, 1), (vj, 1)),),
        name_hint="C",
        body=BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj)),
        init=BufferStore(C, const(0.0, "float32"), (vi, vj)),
    )
    realize = BlockRealize((i, j, kk), const(True), block)
    nest = For(i, 0, m, "serial", For(j, 0, n, "serial", For(kk, 0, k, "serial", realize)))
    root = BlockRealize((), const(True), Block((), (), (), "root", nest))
    params = tuple(Var(x, "handle") for x in "ABC")
    attrs = {"global_symbol": "gemm", "tir.noalias": True}
    return PrimFunc(params, root, dict(zip(params, (A, B, C))), attrs)


def stage_blocks(func):
    """(loops, realize) of each stage under the root block, in order."""
    root = func.body.block
    stmts = root.body.seq if hasattr(root.body, "seq") else (root.body,)
    result = []
    for stmt in stmts:
        loops = []
        while isinstance(stmt, For):
            loops.append(stmt)
            stmt = stmt.body
        result.append((loops, stmt))
    return result


def test_gemm_matches_hand_built():
    func = te_gemm()
    verify(func)
    assert_structural_equal(func, hand_gemm())


def test_gemm_names_follow_the_axes():
    func = te_gemm()
    assert [p.name for p in func.params] == ["A", "B", "C"]
    assert all(p.dtype == "handle" for p in func.params)
    assert [b.name for b in func.buffers] == ["A", "B", "C"]
    assert func.attrs == {"global_symbol": "gemm", "tir.noalias": True}
    root = func.body
    assert isinstance(root, BlockRealize) and root.block.name_hint == "root"
    assert root.block.iter_vars == () and root.block.alloc_buffers == ()
    [(loops, realize)] = stage_blocks(func)
    assert [loop.loop_var.name for loop in loops] == ["i", "j", "k"]
    assert all(loop.kind == "serial" for loop in loops)
    assert [iv.var.name for iv in realize.block.iter_vars] == ["vi", "vj", "vk"]
    assert all(v is loop.loop_var for v, loop in zip(realize.iter_values, loops))


def test_gemm_matches_tvmscript_text():
    script = pytest.importorskip("schedlab.script")
    assert_structural_equal(te_gemm(), script.from_source(GEMM_TEXT))


def test_multi_stage_intermediates_and_order():
    A = te.placeholder((5, 3), name="A")
    B = te.compute((5, 3), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((3, 5), lambda i, j: B[j, i] + 1.0, name="C")
    D = te.compute((3, 5), lambda i, j: C[i, j] + A[j, i], name="D")
    func = te.create_prim_func([A, D])
    verify(func)
    assert [b.name for b in func.buffers] == ["A", "D"]
    assert [b.name for b in func.body.block.alloc_buffers] == ["B", "C"]
    names = [realize.block.name_hint for _, realize in stage_blocks(func)]
    assert names == ["B", "C", "D"]
    last = stage_blocks(func)[-1][1].block
    assert [r.buffer.name for r in last.reads] == ["C", "A"]
    assert [w.buffer.name for w in last.writes] == ["D"]
    assert last.init is None


def test_listed_intermediate_becomes_a_param():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((4,), lambda i: B[i] * 3.0, name="C")
    func = te.create_prim_func([A, B, C])
    assert [b.name for b in func.buffers] == ["A", "B", "C"]
    assert func.body.block.alloc_buffers == ()


def test_reduction_with_where_guards_the_update():
    A = te.placeholder((6, 7), name="A")
    k = te.reduce_axis((0, 7), name="k")
    B = te.compute((6,), lambda i: te.sum(A[i, k], axis=k, where=k < i), name="B")
    func = te.create_prim_func([A, B])
    verify(func)
    block = stage_blocks(func)[0][1].block
    assert isinstance(block.body.value, Select)
    assert block.init.value.value == 0.0
    a = np.random.default_rng(0).standard_normal((6, 7)).astype("float32")
    expected = np.array([a[i, :i].sum() for i in range(6)], dtype="float32")
    _check_interpret(func, [a], expected)


def test_comm_reducer_product():
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: const(1, t), name="prod")
    A = te.placeholder((3, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((3,), lambda i: prod(A[i, k], axis=k), name="B")
    func = te.create_prim_func([A, B])
    verify(func)
    block = stage_blocks(func)[0][1].block
    assert block.init.value.value == 1.0
    assert type(block.body.value).__name__ == "Mul"
    a = np.random.default_rng(1).uniform(0.5, 1.5, (3, 5)).astype("float32")
    _check_interpret(func, [a], a.prod(axis=1))


def test_max_min_identities_and_direct_combination():
    A = te.placeholder((4, 5), "int32", name="A")
    k = te.reduce_axis((0, 5), name="k")
    hi = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="hi")
    lo = te.compute((4,), lambda i: te.min(A[i, k], axis=k), name="lo")
    f_hi, f_lo = te.create_prim_func([A, hi]), te.create_prim_func([A, lo])
    assert stage_blocks(f_hi)[0][1].block.init.value.value == -(2**31)
    assert stage_blocks(f_lo)[0][1].block.init.value.value == 2**31 - 1
    x = te.placeholder((3,), name="x")
    y = te.compute((3,), lambda i: te.max(x[i], 0.0, -1.0), name="y")
    assert type(y.op.body).__name__ == "Max"
    assert te.min_value("float32").value == float(np.finfo("float32").min)


def test_reduce_axis_with_offset_binds_loop_plus_min():
    A = te.placeholder((10,), name="A")
    k = te.reduce_axis((2, 7), name="k")
    B = te.compute((), lambda: te.sum(A[k], axis=k), name="B")
    func = te.create_prim_func([A, B])
    verify(func)
    [(loops, realize)] = stage_blocks(func)
    assert loops[0].min.value == 0 and loops[0].extent.value == 5
    iv = realize.block.iter_vars[0]
    assert iv.dom.min.value == 2 and iv.dom.extent.value == 5
    assert type(realize.iter_values[0]).__name__ == "Add"
    a = np.arange(10, dtype="float32")
    _check_interpret(func, [a], np.array(a[2:7].sum(), dtype="float32"))


def test_scalar_tensors():
    A = te.placeholder((), name="A")
    B = te.compute((), lambda: A[()] * 3.0 + 1.0, name="B")
    func = te.create_prim_func([A, B])
    verify(func)
    [(loops, realize)] = stage_blocks(func)
    assert loops == [] and realize.block.iter_vars == ()
    assert func.buffers[1].shape == ()
    _check_interpret(func, [np.array(2.0, dtype="float32")], np.array(7.0, dtype="float32"))


def test_symbolic_shapes():
    n, m = te.size_var("n"), te.size_var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((m, n), lambda i, j: A[j, i] + 1.0, name="B")
    func = te.create_prim_func([A, B])
    verify(func)
    a_buf, b_buf = func.buffers
    assert a_buf.shape[0] is n and a_buf.shape[1] is m and b_buf.shape[0] is m
    loops, _ = stage_blocks(func)[0]
    assert loops[0].extent is m and loops[1].extent is n
    a = np.random.default_rng(2).standard_normal((3, 5)).astype("float32")
    _check_interpret(func, [a], a.T + 1.0)


def test_scalar_var_param():
    n = te.var("scale", "float32")
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * n, name="B")
    func = te.create_prim_func([A, n, B])
    verify(func)
    assert func.params[1] is n and n not in func.buffer_map


def test_axis_names_from_fcompute_and_varargs():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.compute(A.shape, lambda *idx: A[idx] + 1.0, name="B")
    C = te.compute(A.shape, lambda b, row, col: B[b, row, col], name="C")
    func = te.create_prim_func([A, C])
    (loops_b, realize_b), (loops_c, realize_c) = stage_blocks(func)
    assert [x.loop_var.name for x in loops_b] == ["i0", "i1", "i2"]
    assert [iv.var.name for iv in realize_b.block.iter_vars] == ["vi0", "vi1", "vi2"]
    assert [x.loop_var.name for x in loops_c] == ["b", "row", "col"]


def test_attrs_become_block_annotations():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i], name="B", attrs={"schedule_rule": "copy"})
    block = stage_blocks(te.create_prim_func([A, B]))[0][1].block
    assert block.annotations == {"schedule_rule": "copy"}


def test_duplicate_names_are_made_unique():
    A = te.placeholder((4,))
    B = te.placeholder((4,))
    C = te.compute((4,), lambda i: A[i] + B[i], name="C")
    D = te.compute((4,), lambda i: C[i] * 2.0, name="C")
    func = te.create_prim_func([A, B, D])
    assert [b.name for b in func.buffers] == ["placeholder", "placeholder_1", "C"]
    assert [b.name for b in func.body.block.alloc_buffers] == ["C_1"]
    assert [r.block.name_hint for _, r in stage_blocks(func)] == ["C_1", "C"]


def test_tensor_api():
    A = te.placeholder((3, 4), "float16", name="A")
    i = te.var("i")
    assert A.ndim == 2 and A.dtype == "float16" and A.name == "A"
    assert [int(s) for s in A.shape] == [3, 4]
    assert isinstance(A.op, te.PlaceholderOp)
    load = A[i][1]
    assert load.buffer is A.buffer and load.indices[0] is i and load.dtype == "float16"
    assert A(i, 2).indices[1].value == 2
    B = te.compute((3,), lambda r: A[r, 0] + A[r, 1], name="B")
    assert isinstance(B.op, te.ComputeOp) and B.op.input_tensors == [A]


# -- errors ------------------------------------------------------------------------------------
def test_missing_placeholder_is_named():
    A = te.placeholder((4,), name="A")
    weights = te.placeholder((4,), name="weights")
    B = te.compute((4,), lambda i: A[i] * weights[i], name="B")
    with pytest.raises(ValueError, match="placeholder 'weights' is read by 'B'"):
        te.create_prim_func([A, B])


@pytest.mark.parametrize("shape", [(3.5, 2), ("4",), (te.var("x", "float32"),), (True,), (-1,)])
def test_non_integer_shapes(shape):
    with pytest.raises(ValueError, match="shape"):
        te.placeholder(shape, name="A")
    with pytest.raises(ValueError, match="shape"):
        te.compute(shape, lambda *i: const(0.0), name="B")


def test_reduction_only_at_top_level():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) * 2.0, name="B")


def test_reduce_axis_not_reduced_over():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="reduce axis 'k'"):
        te.compute((4,), lambda i: A[i, k], name="B")


def test_fcompute_arity_mismatch():
    with pytest.raises(ValueError, match="2 dimension"):
        te.compute((4, 4), lambda i: const(0.0), name="B")


def test_unlisted_scalar_var():
    s = te.var("s", "float32")
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * s, name="B")
    with pytest.raises(ValueError, match="variable 's'"):
        te.create_prim_func([A, B])


def test_bad_list_items():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match=r"tensors\[1\]"):
        te.create_prim_func([A, "B"])
    with pytest.raises(ValueError, match="listed twice"):
        te.create_prim_func([A, A])


def test_bad_index():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(ValueError, match="2 dimension"):
        A(1, 2, 3)
    with pytest.raises(TypeError, match="index 1"):
        A[1, 2.5]


def _check_interpret(func, inputs, expected):
    import schedlab

    out = np.zeros(expected.shape, dtype=expected.dtype)
    schedlab.interpret(func, *inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_each_function_gets_its_own_buffers():
    A = te.placeholder((4,), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((), lambda: te.sum(A[k], axis=k), name="B")
    C = te.compute((), lambda: te.max(A[k], axis=k), name="C")  # the same axis, another stage
    first, second = te.create_prim_func([A, B]), te.create_prim_func([A, B])
    assert first.buffers[0] is not second.buffers[0] and first.buffers[0] is not A.buffer
    assert_structural_equal(first, second)
    verify(te.create_prim_func([A, B, C]))
