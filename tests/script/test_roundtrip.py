"""print -> parse -> structurally equal, over hand-built IR covering every node, dtype and loop
kind, symbolic shapes and the lowered form."""

import pytest

from schedlab.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    Allocate,
    And,
    Block,
    BlockRealize,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    DataType,
    Div,
    Evaluate,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    IfThenElse,
    IntImm,
    IRModule,
    IterType,
    IterVar,
    Let,
    LetStmt,
    MatchBufferRegion,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    Ramp,
    Range,
    Select,
    SeqStmt,
    SizeVar,
    StringImm,
    Sub,
    Var,
    const,
    decl_buffer,
)  # fmt: skip
from schedlab.ir.dtype import ALL_SCALAR_TYPES
from schedlab.ir.intrin import INTRINSICS

from .script_helpers import TRUE, gemm, make_func, roundtrip


def _store_func(value, dtype=None, scalars=()):
    """`B[0] = value` in a function over buffer B (and scalar parameters)."""
    B = decl_buffer((1,), dtype or value.dtype, "B")
    return make_func(BufferStore(B, value, (const(0),)), (B,), scalars=scalars)


# ---------------------------------------------------------------------------------------------
# the TensorIR form
# ---------------------------------------------------------------------------------------------
def test_gemm_roundtrip():
    roundtrip(gemm())


def test_gemm_odd_sizes_and_int64_loops():
    roundtrip(gemm(17, 23, 29))
    A = decl_buffer((const(7, "int64"),), "float32", "A")
    i = Var("i", "int64")
    loop = For(i, const(0, "int64"), const(7, "int64"), "serial", BufferStore(A, A[i] + 1.0, (i,)))
    text = roundtrip(make_func(loop, (A,)))
    assert "for i in range(T.int64(7)):" in text


@pytest.mark.parametrize("dtype", [str(t) for t in ALL_SCALAR_TYPES])
def test_every_dtype(dtype):
    t = DataType(dtype)
    A = decl_buffer((4,), dtype, "A")
    i = Var("i")
    if t.is_bool:
        value = And(A[i], LT(i, const(3)))
        constant = const(True)
    elif t.is_float:
        value = Add(A[i], FloatImm(t, 0.5))
        constant = FloatImm(t, -1.25)
    else:
        value = Mul(A[i], IntImm(t, 3))
        constant = IntImm(t, t.max_value())
    body = SeqStmt(
        (
            BufferStore(A, value, (i,)),
            BufferStore(A, constant, (i,)),
            BufferStore(A, Cast(t, Cast("float64", A[i])), (i,)),
        )
    )
    text = roundtrip(make_func(For(i, 0, 4, "serial", body), (A,)))
    assert f'"{dtype}"' in text


def test_float_constants_keep_their_exact_value():
    values = [0.1, -0.0, 1e-30, 3.4028234663852886e38, 2.5e20, float("inf"), -float("inf"), 7.0]
    for value in values:
        text = roundtrip(_store_func(FloatImm("float32", value)))
        assert "T.float32(" in text


def test_block_with_explicit_axes_predicate_and_opaque_iter_vars():
    A = decl_buffer((30,), "float32", "A")
    io, ii = Var("io"), Var("ii")
    v, w, o = Var("v"), Var("w"), Var("o")
    block = Block(
        iter_vars=(
            IterVar(v, Range(0, 30)),
            IterVar(w, Range(const(2), const(5)), IterType.REDUCE),
            IterVar(o, Range(0, 8), IterType.OPAQUE),
        ),
        reads=(A.region((0, 30)),),
        writes=(A.region((v, 1)),),
        name_hint="split",
        body=BufferStore(A, A[v] * 2.0, (v,)),
        annotations={
            "schedule_rule": "none",
            "meta": [1, 2.5, None, True, float("-inf"), ("t",)],
            "n": const(3),
        },
    )
    realize = BlockRealize((io * 4 + ii, io + 2, ii), LT(io * 4 + ii, const(30)), block)
    nest = For(io, 0, 8, "serial", For(ii, 0, 4, "serial", realize))
    text = roundtrip(make_func(nest, (A,), root_allocs=()))
    assert "T.where(io * 4 + ii < 30)" in text
    assert "T.axis.reduce((2, 7), io + 2)" in text
    assert "T.axis.opaque(8, ii)" in text


def test_partial_remap_runs_and_scan_axes():
    A = decl_buffer((4, 5, 6), "float32", "A")
    i, j, k = Var("i"), Var("j"), Var("k")
    vi, vj, vk, vs = Var("vi"), Var("vj"), Var("vk"), Var("vs")
    block = Block(
        (
            IterVar(vi, Range(0, 4)),
            IterVar(vj, Range(0, 5)),
            IterVar(vk, Range(0, 6), IterType.REDUCE),
            IterVar(vs, Range(0, 6), IterType.SCAN),
        ),
        (),
        (A.region((vi, 1), (vj, 1), (vk, 1)),),
        "b",
        BufferStore(A, A[vi, vj, vk], (vi, vj, vk)),
    )
    realize = BlockRealize((i, j, k, k), TRUE, block)
    nest = For(i, 0, 4, "serial", For(j, 0, 5, "serial", For(k, 0, 6, "serial", realize)))
    text = roundtrip(make_func(nest, (A,), root_allocs=()))
    assert 'vi, vj, vk = T.axis.remap("SSR", [i, j, k])' in text
    assert "vs = T.axis.scan(6, k)" in text
    assert "T.reads()" in text


def test_alloc_match_buffer_nested_blocks_and_init():
    A = decl_buffer((16, 16), "float32", "A")
    C = decl_buffer((16,), "float32", "C")
    local = decl_buffer((4,), "float32", "local", scope="local")
    sub = decl_buffer((4, 16), "float32", "sub", strides=(Var("s0"), 1))
    io, vo, ii, vii = Var("io"), Var("vo"), Var("ii"), Var("vii")
    inner = Block(
        (IterVar(vii, Range(0, 4)),),
        (sub.region((vii, 1), (0, 16)),),
        (local.region((vii, 1)),),
        "inner",
        BufferStore(local, local[vii] + sub[vii, const(3)], (vii,)),
        init=BufferStore(local, const(0.0, "float32"), (vii,)),
    )
    outer = Block(
        (IterVar(vo, Range(0, 4)),),
        (A.region((vo * 4, 4), (0, 16)),),
        (C.region((vo * 4, 4)),),
        "outer",
        SeqStmt(
            (
                For(ii, 0, 4, "serial", BlockRealize((ii,), TRUE, inner)),
                BufferStore(C, local[const(0)], (vo * 4,)),
            )
        ),
        alloc_buffers=(local,),
        match_buffers=(MatchBufferRegion(sub, A.region((vo * 4, 4), (0, 16))),),
    )
    nest = For(io, 0, 4, "serial", BlockRealize((io,), TRUE, outer))
    text = roundtrip(make_func(nest, (A, C), root_allocs=()))
    assert "T.match_buffer(A[vo * 4:vo * 4 + 4, 0:16], (4, 16)" in text
    assert 'local = T.alloc_buffer((4,), "float32", scope="local")' in text


def test_root_block_forms():
    A = decl_buffer((4,), "float32", "A")
    tmp = decl_buffer((4,), "float32", "tmp")
    i = Var("i")
    store = BufferStore(A, A[i] + tmp[i], (i,))
    # allocations but no blocks: the root stays implicit (function-level T.alloc_buffer)
    text = roundtrip(make_func(For(i, 0, 4, "serial", store), (A,), root_allocs=(tmp,)))
    assert "with T.block" not in text
    # a root with annotations must print explicitly
    root = Block((), (), (), "root", For(i, 0, 4, "serial", Evaluate(0)), annotations={"a": 1})
    text = roundtrip(make_func(BlockRealize((), TRUE, root), (A,)))
    assert 'with T.block("root"):' in text
    # a root around plain loops without allocations prints explicitly too
    bare = Block((), (), (), "root", For(i, 0, 4, "serial", Evaluate(0)))
    roundtrip(make_func(BlockRealize((), TRUE, bare), (A,)))


# ---------------------------------------------------------------------------------------------
# loops
# ---------------------------------------------------------------------------------------------
def test_every_loop_kind_with_annotations():
    A = decl_buffer((64,), "float32", "A")
    vars_ = [Var(n) for n in ("a", "b", "c", "d", "e", "f")]
    store = BufferStore(A, A[vars_[0]], (vars_[0],))
    body = For(vars_[5], const(1), const(3), "serial", store, annotations={"x": 1.5})
    body = For(vars_[4], 0, 2, "unrolled", body)
    body = For(vars_[3], 0, 4, "vectorized", body, annotations={"pragma": "simd"})
    body = For(vars_[2], 0, 8, "thread_binding", body, thread_tag="threadIdx.x")
    body = For(vars_[1], 0, 2, "parallel", body)
    body = For(vars_[0], 0, 64, "thread_binding", body, thread_tag="blockIdx.x",
               annotations={"pragma_auto_unroll_max_step": 16, "list": [1, "s", None]})  # fmt: skip
    text = roundtrip(make_func(body, (A,)))
    for piece in (
        'T.thread_binding(64, thread="blockIdx.x", annotations=',
        "T.parallel(2)",
        'T.thread_binding(8, thread="threadIdx.x")',
        'T.vectorized(4, annotations={"pragma": "simd"})',
        "T.unroll(2)",
        'T.serial(1, 4, annotations={"x": 1.5})',
    ):
        assert piece in text


def test_loop_bounds_forms():
    A = decl_buffer((64,), "float32", "A")
    n, m = Var("n"), Var("m")
    i, j, k = Var("i"), Var("j"), Var("k")
    store = BufferStore(A, A[k], (k,))
    body = For(k, n, Sub(m, n), "serial", store)
    body = For(j, const(2), n, "serial", body)
    body = For(i, const(3), const(5), "serial", body)
    text = roundtrip(make_func(body, (A,), scalars=(n, m)))
    assert "for i in range(3, 8):" in text
    assert "for j in range(2, 2 + n):" in text
    assert "for k in range(n, n + (m - n)):" in text


def test_grid_folding_stops_at_dependent_extent():
    A = decl_buffer((8, 8), "float32", "A")
    i, j, k = Var("i"), Var("j"), Var("k")
    store = BufferStore(A, A[i, j], (i, j))
    nest = For(i, 0, 8, "serial", For(j, 0, Add(i, const(1)), "serial", store))
    text = roundtrip(make_func(nest, (A,)))
    assert "for i in range(8):" in text and "for j in range(i + 1):" in text
    nest = For(i, 0, 8, "serial", For(j, 0, 8, "parallel", For(k, 0, 2, "serial", store)))
    assert "T.grid" not in roundtrip(make_func(nest, (A,)))


# ---------------------------------------------------------------------------------------------
# expressions
# ---------------------------------------------------------------------------------------------
def test_every_expression_node():
    x = Var("x", "float32")
    i = Var("i")
    b = Var("b", "bool")
    t = Var("t")
    A = decl_buffer((8,), "float32", "A")
    exprs = [
        Select(b, x, FloatImm("float32", 1.0)),
        Call("float32", "if_then_else", (LT(i, const(3)), A[i], x)),
        Cast("float32", Add(i, const(1))),
        Let(t, Mul(i, const(2)), Cast("float32", Add(t, t))),
        Min(x, Max(x, A[i])),
        Div(x, A[const(0)]),
        Cast("float32", Div(i, const(3))),
        Cast("float32", Mod(i, const(3))),
        Cast("float32", FloorDiv(i, const(3))),
        Cast("float32", FloorMod(Sub(const(0), i), const(-3))),
        Select(Or(Not(b), And(GE(i, const(1)), NE(i, const(5)))), x, x),
        Select(EQ(LE(i, const(2)), GT(i, const(0))), x, x),
        Call("float32", "pow", (x, FloatImm("float32", 2.0))),
        Cast("float32", Call("float16", "exp", (x,))),  # dtype differs from the inferred one
        Call("float32", "my_extern", (StringImm('name\n"q"'), x)),
    ]
    body = SeqStmt(tuple(BufferStore(A, e, (i,)) for e in exprs))
    text = roundtrip(make_func(For(i, 0, 8, "serial", body), (A,), scalars=(x, b)))
    assert "T.if_then_else(i < 3, A[i], x)" in text
    assert 'T.Let(T.Cast("float32", t + t), where={t: i * 2})' in text
    assert "T.truncdiv(i, 3)" in text and "T.truncmod(i, 3)" in text
    assert "(0 - i) % -3" in text
    assert "not b or i >= 1 and i != 5" in text
    assert "(i <= 2) == (i > 0)" in text
    assert 'T.call_intrin("float16", "exp", x)' in text


@pytest.mark.parametrize("name", sorted(INTRINSICS))
def test_every_intrinsic(name):
    spec = INTRINSICS[name]
    x, c = Var("x", "float32"), Var("c", "bool")
    args = {1: (x,), 2: (x, x), 3: (c, x, x), None: (x, x, x)}[spec.arity]  # None: variadic
    if name == "likely":
        args = (c,)
    call = Call(spec.result_dtype(args), name, args)
    text = roundtrip(_store_func(call, scalars=(x, c)))
    assert f"T.{name}(" in text


def test_vector_expressions_ramp_broadcast():
    A = decl_buffer((64,), "float32", "A")
    i = Var("i")
    index = Ramp(Mul(i, const(4)), const(1), 4)
    value = Add(BufferLoad(A, (index,)), Broadcast(FloatImm("float32", 1.0), 4))
    v = Var("v", "float32x4")
    body = LetStmt(v, value, BufferStore(A, Mul(v, v), (index,)))
    text = roundtrip(make_func(For(i, 0, 16, "serial", body), (A,)))
    assert "v: T.float32x4 = A[T.Ramp(i * 4, 1, 4)] + T.Broadcast(T.float32(1), 4)" in text


def test_negative_and_wide_constants():
    i = Var("i", "int64")
    A = decl_buffer((4,), "int64", "A")
    values = [
        IntImm("int64", -(2**63)),
        Sub(i, IntImm("int64", -5)),
        Mul(IntImm("int64", -1), i),
        Add(i, IntImm("int64", 2**40)),
    ]
    body = SeqStmt(tuple(BufferStore(A, v, (const(0),)) for v in values))
    text = roundtrip(make_func(body, (A,), scalars=(i,)))
    assert "T.int64(-9223372036854775808)" in text
    int32_values = [IntImm("int32", -7), Sub(const(3), IntImm("int32", -2))]
    for value in int32_values:
        roundtrip(_store_func(value))


# ---------------------------------------------------------------------------------------------
# statements of the lowered form
# ---------------------------------------------------------------------------------------------
def test_lowered_form_allocate_let_if_evaluate():
    A = decl_buffer((64,), "float32", "A")
    B = decl_buffer((64,), "float32", "B")
    i, j, j2, n = Var("i"), Var("j"), Var("j"), Var("n")
    local = decl_buffer((4,), "float32", "A_local", scope="local")
    fill = For(j, 0, 4, "unrolled", BufferStore(local, A[i * 4 + j], (j,)))
    use = For(j2, 0, 4, "vectorized", BufferStore(B, local[j2] * 2.0, (i * 4 + j2,)))
    branch = IfThenElse(
        LT(n, const(3)),
        Evaluate(Call("float32", "my_extern", (StringImm("x"),))),
        IfThenElse(
            GT(n, const(5)), Evaluate(const(0)), BufferStore(B, const(0.0, "float32"), (i,))
        ),
    )
    body = SeqStmt((Allocate(local, SeqStmt((fill, use)), annotations={"k": 1}), branch))
    body = LetStmt(n, Add(i, const(1)), body)
    text = roundtrip(make_func(For(i, 0, 16, "parallel", body), (A, B)))
    assert "with T.allocate((4,)" in text  # not the last statement of its list
    assert "n: T.int32 = i + 1" in text
    assert "elif n > 5:" in text
    assert "T.evaluate(0)" in text and "T.my_extern" not in text


def test_tail_allocate_and_non_tail_let():
    A = decl_buffer((8,), "float32", "A")
    tmp = decl_buffer((8,), "float32", "tmp")
    x, i = Var("x"), Var("i")
    let = LetStmt(x, const(3), BufferStore(A, A[x], (x,)))
    body = Allocate(tmp, SeqStmt((let, BufferStore(tmp, A[i], (i,)))))
    text = roundtrip(make_func(For(i, 0, 8, "serial", body), (A,)))
    assert 'tmp = T.allocate((8,), "float32")' in text
    assert "with T.LetStmt(3) as x:" in text


def test_buffer_fields_and_shared_data():
    n = SizeVar("n")
    data = Var("A", "handle")
    fields = {"strides": (8, 1), "elem_offset": const(2), "axis_separators": (1,)}
    A = Buffer(data, "float32", (16, 4), "A", data_alignment=16, offset_factor=4, **fields)
    flat = Buffer(data, "float32", (64,), "A_flat")
    B = decl_buffer((n,), "float16", "B", scope="shared", elem_offset=Var("off"))
    i = Var("i")
    body = SeqStmt(
        (
            BufferStore(flat, A[i, const(1)], (i,)),
            BufferStore(B, Cast("float16", flat[i]), (i,)),
        )
    )
    func = make_func(For(i, 0, 16, "serial", body), (A, B))
    text = roundtrip(func, map_free_vars=True)  # A_flat is declared by no construct
    assert "axis_separators=[1]" in text and "data_alignment=16" in text
    assert 'A_flat = T.Buffer((64,), "float32", data=A.data)' in text
    assert "n = T.int32(is_size_var=True)" in text
    assert "B = T.match_buffer(var_B, (n,)" in text


def test_symbolic_shapes():
    n, m = SizeVar("n"), Var("m")
    A = decl_buffer((n, 64), "float32", "A")
    B = decl_buffer((m,), "float32", "B")
    i, j = Var("i"), Var("j")
    body = For(i, 0, n, "serial", For(j, 0, m, "serial", BufferStore(B, A[i, j], (j,))))
    text = roundtrip(make_func(body, (A, B), scalars=(m,)))
    assert "B: T.Buffer((m,)" in text and "A = T.match_buffer(var_A, (n, 64)" in text


def test_free_variables_are_declared():
    n = Var("n")
    A = decl_buffer((8,), "float32", "A")
    func = make_func(BufferStore(A, Cast("float32", n), (const(0),)), (A,))
    text = roundtrip(func, map_free_vars=True)
    assert "n = T.int32()" in text


def test_ir_module_roundtrip():
    mod = IRModule({"gemm": gemm(), "small": gemm(3, 4, 5, "small")}, {"version": 2})
    text = roundtrip(mod)
    assert text.startswith("# from schedlab.script import ir as I")
    assert '@I.ir_module\nclass Module:\n    I.module_attrs({"version": 2})' in text


def test_empty_module_and_handle_params_without_buffers():
    assert "    pass" in roundtrip(IRModule({}))
    a = Var("a", "handle")
    n = SizeVar("n", "int64")
    func = make_func(Evaluate(Call("int32", "my_extern", (a, n))), scalars=(a, n))
    text = roundtrip(func)
    assert "def main(a: T.handle, n: T.int64(is_size_var=True)):" in text
    assert 'T.call_intrin("int32", "my_extern", a, n)' in text
