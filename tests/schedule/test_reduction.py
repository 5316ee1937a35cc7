"""Reductions: decompose_reduction, rfactor, and the reduction analysis they share."""

import pytest

from schedlab import te, workloads
from schedlab.ir import ForKind
from schedlab.schedule import (
    DependencyError,
    HandleError,
    LoopKindError,
    NotReductionBlockError,
    NotSingleChildError,
    Schedule,
)
from schedlab.schedule.analysis.reduction import (
    REDUCERS,
    check_reduction_block,
    find_reduction,
    match_reduction,
)
from schedlab.schedule.primitives.reduction import (
    FactorAxisError,
    LoopHeightError,
    LoopPositionError,
    RepeatedReductionError,
    RFactorLoopError,
)
from schedlab.script import from_source

from .helpers import (
    assert_error_keeps_state,
    assert_same_numerics,
    assert_script_equal,
    assert_trace_roundtrip,
)

RTOL = 1e-4  # rfactor changes the order of floating-point sums


def _gemm(m=13, n=7, k=11):
    return workloads.get("gemm", M=m, N=n, K=k)[0]


# -- the reduction analysis ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,block,reducer",
    [
        ("gemm", "C", "sum"),
        ("reduce_max", "A_red", "max"),
        ("softmax", "T_softmax_expsum", "sum"),
        ("max_pool2d_nchw", "pool_max", "max"),
        ("norm", "T_sq_sum", "sum"),
    ],
)
def test_match_reduction_recognises_workload_reducers(name, block, reducer):
    sch = Schedule(workloads.get(name)[0])
    node = sch.get(sch.get_block(block))
    assert match_reduction(node).reducer.name == reducer
    check_reduction_block(sch.state, node)  # raises when it is not one


def test_match_reduction_recognises_min_and_product():
    assert find_reduction(_block(MIN_REDUCE, "B")).reducer.name == "min"
    update = match_reduction(_block(PRODUCT, "B"))
    assert update.reducer.name == "product" and update.buffer.name == "B"
    assert [r.name for r in REDUCERS] == ["sum", "product", "max", "min"]


def test_match_reduction_explains_what_does_not_fit():
    with pytest.raises(NotReductionBlockError, match="no init"):
        match_reduction(_block(ELEMENTWISE, "B"))
    with pytest.raises(NotReductionBlockError, match="do not match a known reducer"):
        match_reduction(_block(WRONG_IDENTITY, "B"))
    assert find_reduction(_block(ELEMENTWISE, "B")) is None


def _block(text, name):
    sch = Schedule(from_source(text))
    return sch.get(sch.get_block(name))


ELEMENTWISE = """
@T.prim_func
def f(A: T.Buffer((5, 9), "float32"), B: T.Buffer((5, 9), "float32")):
    for i, j in T.grid(5, 9):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(B[vi, vj])
            B[vi, vj] = A[vi, vj] * T.float32(2)
"""

PRODUCT = """
@T.prim_func
def f(A: T.Buffer((5, 9), "float32"), B: T.Buffer((5,), "float32")):
    for i, k in T.grid(5, 9):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(B[vi])
            with T.init():
                B[vi] = T.float32(1)
            B[vi] = A[vi, vk] * B[vi]
"""

WRONG_IDENTITY = PRODUCT.replace("A[vi, vk] * B[vi]", "B[vi] + A[vi, vk]")

MIN_REDUCE = """
@T.prim_func
def f(A: T.Buffer((5, 9), "int32"), B: T.Buffer((5,), "int32")):
    for i, k in T.grid(5, 9):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(B[vi])
            with T.init():
                B[vi] = T.int32(2147483647)
            B[vi] = T.min(B[vi], A[vi, vk])
"""


# -- decompose_reduction ------------------------------------------------------------------------
def test_decompose_reduction_at_the_outer_loop():
    func = _gemm()
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    init = sch.decompose_reduction(block, i)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i_init, j_init in T.grid(13, 7):
        with T.block("C_init"):
            vi_init, vj_init = T.axis.remap("SS", [i_init, j_init])
            T.reads()
            T.writes(C[vi_init, vj_init])
            C[vi_init, vj_init] = T.float32(0)
    for i, j, k in T.grid(13, 7, 11):
        with T.block("C_update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert sch.get(init).name_hint == "C_init"
    assert sch.get(block).name_hint == "C_update" and sch.get(block).init is None
    assert [sch.get(x).loop_var.name for x in sch.get_loops(block)] == ["i", "j", "k"]
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)
    assert sch.trace.as_json()["insts"][2] == ["DecomposeReduction", ["b0", "l1"], [], ["b4"]]


def test_decompose_reduction_at_the_reduction_loop():
    func = _gemm()
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.decompose_reduction(block, k)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i, j in T.grid(13, 7):
        with T.block("C_init"):
            vi_init, vj_init = T.axis.remap("SS", [i, j])
            T.reads()
            T.writes(C[vi_init, vj_init])
            C[vi_init, vj_init] = T.float32(0)
        for k in range(11):
            with T.block("C_update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)


# i, k, j order with the rows tiled by 4 (as split/reorder leave it): the init goes before k,
# under a copy of j only; the row predicate goes with it.
TILED_GEMM = """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i0, i1, k, j in T.grid(4, 4, 11, 7):
        with T.block("C"):
            vi = T.axis.spatial(13, i0 * 4 + i1)
            vj = T.axis.spatial(7, j)
            vk = T.axis.reduce(11, k)
            T.where(i0 * 4 + i1 < 13)
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def test_decompose_reduction_of_a_tiled_gemm_keeps_the_spatial_predicate():
    func = from_source(TILED_GEMM)
    sch = Schedule(func)
    block = sch.get_block("C")
    i0, i1, k, j = sch.get_loops(block)
    sch.parallel(i0)
    sch.vectorize(j)
    init = sch.decompose_reduction(block, k)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 11), "float32"), B: T.Buffer((11, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i0 in T.parallel(4):
        for i1 in range(4):
            for j_init in T.vectorized(7):
                with T.block("C_init"):
                    vi_init = T.axis.spatial(13, i0 * 4 + i1)
                    vj_init = T.axis.spatial(7, j_init)
                    T.where(i0 * 4 + i1 < 13)
                    T.reads()
                    T.writes(C[vi_init, vj_init])
                    C[vi_init, vj_init] = T.float32(0)
            for k in range(11):
                for j in T.vectorized(7):
                    with T.block("C_update"):
                        vi = T.axis.spatial(13, i0 * 4 + i1)
                        vj = T.axis.spatial(7, j)
                        vk = T.axis.reduce(11, k)
                        T.where(i0 * 4 + i1 < 13)
                        T.reads(C[vi, vj], A[vi, vk], B[vk, vj])
                        T.writes(C[vi, vj])
                        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
""",
    )
    assert sch.get(sch.get_loops(init)[-1]).kind == ForKind.VECTORIZED
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func)
    source = _source(sch.func)
    assert "#pragma omp parallel for" in source


def _source(func):
    import schedlab

    return schedlab.build(func, target="cpu").source


def test_parallel_after_decompose_reduction():
    func = _gemm()
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    init = sch.decompose_reduction(block, j)
    sch.parallel(i)
    sch.vectorize(sch.get_loops(init)[-1])
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


REDUCTION_WORKLOADS = [
    ("gemm", {"M": 13, "N": 7, "K": 11}),
    ("batch_matmul", {"batch": 3, "M": 5, "N": 7, "K": 9}),
    ("softmax", {"M": 5, "N": 9}),
    ("layer_norm", {"M": 5, "N": 9}),
    ("norm", {"M": 5, "N": 9}),
    ("conv2d_nchw", {"N": 1, "CI": 3, "H": 7, "W": 9, "CO": 5, "kernel": 3}),
    ("max_pool2d_nchw", {"N": 1, "C": 3, "H": 9, "W": 7}),
    ("avg_pool2d_nchw", {"N": 1, "C": 3, "H": 9, "W": 7}),
    ("gemv", {"M": 7, "K": 9}),
]


def _reduction_blocks(sch):
    blocks = sch.get_child_blocks(sch.get_block("root"))
    return [b for b in blocks if sch.get(b).init is not None]


@pytest.mark.parametrize("where", ["outer", "first_reduce"])
@pytest.mark.parametrize("name,sizes", REDUCTION_WORKLOADS, ids=[w[0] for w in REDUCTION_WORKLOADS])
def test_decompose_reduction_numerics_on_workloads(name, sizes, where):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    blocks = _reduction_blocks(sch)
    assert blocks
    for block in blocks:
        loops = sch.get_loops(block)
        if where == "outer":
            sch.decompose_reduction(block, loops[0])
        else:
            sch.decompose_reduction(block, _first_reduce_loop(sch, block, loops))
    assert_same_numerics(func, sch.func, rtol=RTOL)
    assert_trace_roundtrip(sch, func)


def _first_reduce_loop(sch, block, loops):
    realize = sch.state.realize_of(sch.get(block))
    reduce_vars = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if iv.iter_type == "reduce":
            reduce_vars |= {id(v) for v in _vars(value)}
    return next(x for x in loops if id(sch.get(x).loop_var) in reduce_vars)


def _vars(expr):
    from schedlab.ir import collect_vars

    return collect_vars(expr)


def test_decompose_reduction_needs_a_reduction_block():
    sch = Schedule(from_source(ELEMENTWISE))
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    assert_error_keeps_state(
        sch, lambda: sch.decompose_reduction(block, i), NotReductionBlockError, "no init"
    )


def test_decompose_reduction_needs_a_loop_above_the_block():
    sch = Schedule(workloads.get("softmax", M=5, N=9)[0])
    block = sch.get_block("T_softmax_expsum")
    other = sch.get_loops(sch.get_block("T_softmax_exp"))[0]
    assert_error_keeps_state(
        sch, lambda: sch.decompose_reduction(block, other), LoopPositionError, "not above"
    )


def test_decompose_reduction_refuses_a_loop_inside_the_reduction():
    sch = Schedule(from_source(TILED_GEMM))
    block = sch.get_block("C")
    i0, i1, k, j = sch.get_loops(block)
    err = assert_error_keeps_state(
        sch, lambda: sch.decompose_reduction(block, j), LoopHeightError, "inside loop k"
    )
    assert "^^^" in str(err)


def _layer_norm_var_sum_under_sum_k():
    """layer_norm with T_var_sum moved under T_sum's k loop: it does not depend on k, so every
    iteration of k recomputes it from its init (the result is that of the last iteration)."""
    func = workloads.get("layer_norm", M=3, N=7)[0]
    sch = Schedule(func, debug=True)
    var_sum = sch.get_block("T_var_sum")
    i, k = sch.get_loops(sch.get_block("T_sum"))
    sch.reverse_compute_at(var_sum, k, preserve_unit_loops=True)
    return func, sch, var_sum


@pytest.mark.parametrize("where", [0, 1])
def test_decompose_reduction_refuses_to_hoist_the_init_above_a_repeating_loop(where):
    # Regression: placed before i (or k), the init ran once per i while k repeats the whole
    # reduction 7 times, so the repeats accumulated into each other (wrong numerics).
    func, sch, var_sum = _layer_norm_var_sum_under_sum_k()
    loop = sch.get_loops(var_sum)[where]
    err = assert_error_keeps_state(
        sch, lambda: sch.decompose_reduction(var_sum, loop), RepeatedReductionError,
        "does not depend on loop k of extent 7",
    )  # fmt: skip
    assert "loop ax0 is the outermost loop where it can go" in str(err)
    assert "^^^" in str(err)
    assert_same_numerics(func, sch.func)


def test_decompose_reduction_under_a_repeating_loop_at_the_suggested_loop():
    func, sch, var_sum = _layer_norm_var_sum_under_sum_k()
    i, k, ax0, ax1 = sch.get_loops(var_sum)
    sch.decompose_reduction(var_sum, ax0)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def layer_norm(A: T.Buffer((3, 7), "float32"), gamma: T.Buffer((7,), "float32"),
               beta: T.Buffer((7,), "float32"), T_layer_norm: T.Buffer((3, 7), "float32")):
    T_sum = T.alloc_buffer((3,), "float32")
    T_var_sum = T.alloc_buffer((3,), "float32")
    for i, k in T.grid(3, 7):
        with T.block("T_sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(T_sum[vi])
            with T.init():
                T_sum[vi] = T.float32(0)
            T_sum[vi] = T_sum[vi] + A[vi, vk]
        with T.block("T_var_sum_init"):
            vi_init = T.axis.spatial(3, i)
            T.reads()
            T.writes(T_var_sum[vi_init])
            T_var_sum[vi_init] = T.float32(0)
        for ax0, ax1 in T.grid(1, 7):
            with T.block("T_var_sum_update"):
                vi_1, vk_1 = T.axis.remap("SR", [i, ax1])
                T.reads(T_var_sum[vi_1], A[vi_1, vk_1], T_sum[vi_1])
                T.writes(T_var_sum[vi_1])
                T_var_sum[vi_1] = T_var_sum[vi_1] + (A[vi_1, vk_1] - T_sum[vi_1] / T.float32(7)) \
                    * (A[vi_1, vk_1] - T_sum[vi_1] / T.float32(7))
    for i_1, j in T.grid(3, 7):
        with T.block("T_layer_norm"):
            vi_2, vj = T.axis.remap("SS", [i_1, j])
            T.reads(A[vi_2, vj], T_sum[vi_2], T_var_sum[vi_2], gamma[vj], beta[vj])
            T.writes(T_layer_norm[vi_2, vj])
            T_layer_norm[vi_2, vj] = (A[vi_2, vj] - T_sum[vi_2] / T.float32(7)) \
                * T.rsqrt(T_var_sum[vi_2] / T.float32(7) + T.float32(1e-05)) * gamma[vj] \
                + beta[vj]
""",
    )
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


# Each output row is reduced twice (x = 2 * vi and 2 * vi + 1), each time from its init: the
# block's binding is affine (a reduction block) but not one-to-one under x.
TWICE_PER_ROW = """
@T.prim_func
def f(A: T.Buffer((3, 5), "float32"), B: T.Buffer((3,), "float32")):
    for x, k in T.grid(6, 5):
        with T.block("B"):
            vi = T.axis.spatial(3, x // 2)
            vk = T.axis.reduce(5, k)
            T.reads(A[vi, vk])
            T.writes(B[vi])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""


def test_decompose_reduction_refuses_a_binding_that_repeats_an_element():
    func = from_source(TWICE_PER_ROW)
    sch = Schedule(func)
    block = sch.get_block("B")
    x, k = sch.get_loops(block)
    assert_error_keeps_state(
        sch, lambda: sch.decompose_reduction(block, x), RepeatedReductionError,
        "same element more than once within one iteration of loop x",
    )  # fmt: skip
    sch.decompose_reduction(block, k)  # one reduction per iteration of x: fine
    assert_same_numerics(func, sch.func)
    assert_trace_roundtrip(sch, func)


TWO_WRITERS = """
@T.prim_func
def f(A: T.Buffer((5, 9), "float32"), B: T.Buffer((5,), "float32")):
    for i in range(5):
        with T.block("B0"):
            vi = T.axis.spatial(5, i)
            T.reads()
            T.writes(B[vi])
            B[vi] = T.float32(1)
    for i, k in T.grid(5, 9):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(B[vi])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""


def test_decompose_reduction_needs_the_only_writer_of_its_output():
    sch = Schedule(from_source(TWO_WRITERS))
    block = sch.get_block("B")
    i, k = sch.get_loops(block)
    assert_error_keeps_state(
        sch, lambda: sch.decompose_reduction(block, i), NotReductionBlockError, "only writer"
    )


def test_decompose_reduction_argument_types():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    assert_error_keeps_state(
        sch, lambda: sch.decompose_reduction(i, block), Exception, "must be a block handle"
    )


# -- rfactor ------------------------------------------------------------------------------------
def test_rfactor_of_the_only_reduction_loop():
    func = workloads.get("reduce_sum", M=5, N=9)[0]
    sch = Schedule(func)
    block = sch.get_block("A_red")
    i, k = sch.get_loops(block)
    rf = sch.rfactor(k, 0)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def reduce_sum(A: T.Buffer((5, 9), "float32"), A_red: T.Buffer((5,), "float32")):
    A_red_rf = T.alloc_buffer((9, 5), "float32")
    for i, k in T.grid(5, 9):
        with T.block("A_red_rf"):
            vk, vi = T.axis.remap("SS", [k, i])
            T.reads(A[vi, vk])
            T.writes(A_red_rf[vk, vi])
            A_red_rf[vk, vi] = A[vi, vk]
    for i, k in T.grid(5, 9):
        with T.block("A_red"):
            vk, vi = T.axis.remap("RS", [k, i])
            T.reads(A_red_rf[vk, vi])
            T.writes(A_red[vi])
            with T.init():
                A_red[vi] = T.float32(0)
            A_red[vi] = A_red[vi] + A_red_rf[vk, vi]
""",
    )
    assert sch.get(rf).name_hint == "A_red_rf"
    assert sch.get(block).name_hint == "A_red"  # the handle now is the write-back block
    assert sch.get(k).loop_var.name == "k"  # the rfactor loop stays in the write-back
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func, rtol=RTOL)
    assert sch.trace.as_json()["insts"][-1] == ["RFactor", ["l2"], [0], ["b3"]]


SPLIT_K_GEMM = """
@T.prim_func
def gemm(A: T.Buffer((13, 13), "float32"), B: T.Buffer((13, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    for i, j, k0, k1 in T.grid(13, 7, 4, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            vk = T.axis.reduce(13, k0 * 4 + k1)
            T.where(k0 * 4 + k1 < 13)
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""


def test_rfactor_of_the_inner_part_of_a_split_reduction():
    func = from_source(SPLIT_K_GEMM)
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k0, k1 = sch.get_loops(block)
    rf = sch.rfactor(k1, 2)
    assert_script_equal(
        sch.func,
        """
@T.prim_func
def gemm(A: T.Buffer((13, 13), "float32"), B: T.Buffer((13, 7), "float32"),
         C: T.Buffer((13, 7), "float32")):
    C_rf = T.alloc_buffer((13, 7, 4), "float32")
    for i, j, k0, k1 in T.grid(13, 7, 4, 4):
        with T.block("C_rf"):
            vk1, vi, vj, vk0 = T.axis.remap("SSSR", [k1, i, j, k0])
            T.where(k0 * 4 + k1 < 13)
            T.reads(A[vi, vk0 * 4 + vk1], B[vk0 * 4 + vk1, vj])
            T.writes(C_rf[vi, vj, vk1])
            with T.init():
                C_rf[vi, vj, vk1] = T.float32(0)
            C_rf[vi, vj, vk1] = C_rf[vi, vj, vk1] + A[vi, vk0 * 4 + vk1] * B[vk0 * 4 + vk1, vj]
    for i, j, k1 in T.grid(13, 7, 4):
        with T.block("C"):
            vk1, vi, vj = T.axis.remap("RSS", [k1, i, j])
            T.reads(C_rf[vi, vj, vk1])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + C_rf[vi, vj, vk1]
""",
    )
    assert sch.get(rf).name_hint == "C_rf"
    with pytest.raises(HandleError, match="removed by rfactor"):
        sch.get(k0)
    assert_trace_roundtrip(sch, func)
    assert_same_numerics(func, sch.func, rtol=RTOL)


def test_rfactor_of_the_outer_part_then_parallel_and_vectorize():
    func = from_source(SPLIT_K_GEMM)
    sch = Schedule(func)
    i, j, k0, k1 = sch.get_loops(sch.get_block("C"))
    rf = sch.rfactor(k0, -1)
    rf_loops = sch.get_loops(rf)
    sch.parallel(rf_loops[2])  # k0 is a spatial loop of the rf block now
    sch.vectorize(rf_loops[1])
    assert sch.get(rf).iter_vars[0].iter_type == "spatial"
    assert_same_numerics(func, sch.func, rtol=RTOL)
    assert_trace_roundtrip(sch, func)


def test_rfactor_with_a_spatial_predicate_keeps_it_in_the_write_back():
    text = """
@T.prim_func
def f(A: T.Buffer((13, 9), "float32"), B: T.Buffer((13,), "float32")):
    for i0, i1, k in T.grid(4, 4, 9):
        with T.block("B"):
            vi = T.axis.spatial(13, i0 * 4 + i1)
            vk = T.axis.reduce(9, k)
            T.where(i0 * 4 + i1 < 13)
            T.reads(A[vi, vk])
            T.writes(B[vi])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""
    func = from_source(text)
    sch = Schedule(func)
    i0, i1, k = sch.get_loops(sch.get_block("B"))
    sch.rfactor(k, 0)
    assert str(sch.state.realize_of(sch.get(sch.get_block("B"))).predicate) == "i0 * 4 + i1 < 13"
    assert_same_numerics(func, sch.func, rtol=RTOL)
    assert_trace_roundtrip(sch, func)


RFACTOR_CASES = [
    ("gemm", {"M": 13, "N": 7, "K": 11}, "C", -1),
    ("reduce_max", {"M": 5, "N": 9}, "A_red", -1),
    ("norm", {"M": 5, "N": 9}, "T_sq_sum", -1),
    ("norm", {"M": 5, "N": 9}, "T_sq_sum", -2),
    ("softmax", {"M": 5, "N": 9}, "T_softmax_maxelem", -1),
    ("softmax", {"M": 5, "N": 9}, "T_softmax_expsum", -1),
    ("layer_norm", {"M": 5, "N": 9}, "T_var_sum", -1),
    ("max_pool2d_nchw", {"N": 1, "C": 3, "H": 9, "W": 7}, "pool_max", -2),
    ("conv2d_nchw", {"N": 1, "CI": 3, "H": 7, "W": 9, "CO": 5, "kernel": 3}, "conv2d_nchw", -3),
]


@pytest.mark.parametrize("name,sizes,block_name,loop_index", RFACTOR_CASES)
def test_rfactor_numerics_on_workloads(name, sizes, block_name, loop_index):
    func = workloads.get(name, **sizes)[0]
    sch = Schedule(func)
    block = sch.get_block(block_name)
    loop = sch.get_loops(block)[loop_index]
    ndim = len(sch.get(block).writes[0].buffer.shape)
    for axis in sorted({0, ndim}):
        trial = sch.copy()
        rf = trial.rfactor(loop, axis)
        assert trial.get(rf).name_hint == f"{block_name}_rf"
        assert_same_numerics(func, trial.func, rtol=RTOL)
        assert_trace_roundtrip(trial, func)


def test_rfactor_of_product_and_min_reductions():
    for text, name in ((PRODUCT, "B"), (MIN_REDUCE, "B")):
        func = from_source(text)
        sch = Schedule(func)
        i, k = sch.get_loops(sch.get_block(name))
        sch.rfactor(k, 1)
        assert_same_numerics(func, sch.func, rtol=RTOL)
        assert_trace_roundtrip(sch, func)


def test_rfactor_of_a_te_min_reduction():
    A = te.placeholder((5, 9), "float32", name="A")
    k = te.reduce_axis((0, 9), name="k")
    B = te.compute((5,), lambda i: te.min(A[i, k], axis=k), name="B")
    func = te.create_prim_func([A, B])
    sch = Schedule(func)
    i, kk = sch.get_loops(sch.get_block("B"))
    sch.rfactor(kk, 0)
    assert_same_numerics(func, sch.func)


def test_rfactor_needs_a_single_block_under_the_loop():
    text = """
@T.prim_func
def f(A: T.Buffer((5, 9), "float32"), B: T.Buffer((5,), "float32"),
      C: T.Buffer((5, 9), "float32")):
    for i, k in T.grid(5, 9):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, vk])
            T.writes(B[vi])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
        with T.block("C"):
            vi, vk = T.axis.remap("SS", [i, k])
            T.reads(A[vi, vk])
            T.writes(C[vi, vk])
            C[vi, vk] = A[vi, vk]
"""
    sch = Schedule(from_source(text))
    i, k = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(k, 0), NotSingleChildError, "exactly one")


def test_rfactor_needs_a_reduction_block():
    sch = Schedule(from_source(ELEMENTWISE))
    i, j = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(j, 0), NotReductionBlockError, "no init")


def test_rfactor_needs_a_known_reducer():
    sch = Schedule(from_source(WRONG_IDENTITY))
    i, k = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(
        sch, lambda: sch.rfactor(k, 0), NotReductionBlockError, "known reducer"
    )


def test_rfactor_needs_a_serial_loop():
    sch = Schedule(workloads.get("reduce_sum", M=5, N=9)[0])
    i, k = sch.get_loops(sch.get_block("A_red"))
    sch.unroll(k)
    assert_error_keeps_state(sch, lambda: sch.rfactor(k, 0), LoopKindError, "serial")


def test_rfactor_needs_a_reduction_loop():
    sch = Schedule(workloads.get("reduce_sum", M=5, N=9)[0])
    i, k = sch.get_loops(sch.get_block("A_red"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(i, 0), RFactorLoopError, "a spatial")


FUSED_SPATIAL_REDUCE = """
@T.prim_func
def f(A: T.Buffer((4, 12), "float32"), B: T.Buffer((4,), "float32")):
    for f, k1 in T.grid(12, 4):
        with T.block("B"):
            vi = T.axis.spatial(4, f // 3)
            vk = T.axis.reduce(12, f % 3 * 4 + k1)
            T.reads(A[vi, vk])
            T.writes(B[vi])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
"""


def test_rfactor_refuses_a_loop_used_by_spatial_and_reduce_iters():
    sch = Schedule(from_source(FUSED_SPATIAL_REDUCE))
    f, k1 = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(k1, 0), RFactorLoopError, "both spatial")


PRODUCER_FIRST = """
@T.prim_func
def f(A: T.Buffer((5, 9), "float32"), C: T.Buffer((5,), "float32")):
    B = T.alloc_buffer((5, 9), "float32")
    for i in range(5):
        for j in range(9):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for k in range(9):
            with T.block("C"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(B[vi, vk])
                T.writes(C[vi])
                with T.init():
                    C[vi] = T.float32(0)
                C[vi] = C[vi] + B[vi, vk]
"""


def test_rfactor_needs_the_block_first_under_its_outer_loop():
    sch = Schedule(from_source(PRODUCER_FIRST))
    i, k = sch.get_loops(sch.get_block("C"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(k, 0), RFactorLoopError, "first block")


OTHER_BLOCK_IN_REDUCTION = """
@T.prim_func
def f(A: T.Buffer((5, 8), "float32"), C: T.Buffer((5,), "float32"),
      D: T.Buffer((5, 2), "float32")):
    for i, k0 in T.grid(5, 2):
        for k1 in range(4):
            with T.block("C"):
                vi = T.axis.spatial(5, i)
                vk = T.axis.reduce(8, k0 * 4 + k1)
                T.reads(A[vi, vk])
                T.writes(C[vi])
                with T.init():
                    C[vi] = T.float32(0)
                C[vi] = C[vi] + A[vi, vk]
        with T.block("D"):
            vi, vk0 = T.axis.remap("SS", [i, k0])
            T.reads(A[vi, vk0])
            T.writes(D[vi, vk0])
            D[vi, vk0] = A[vi, vk0]
"""


def test_rfactor_needs_the_reduction_loops_to_hold_only_the_block():
    sch = Schedule(from_source(OTHER_BLOCK_IN_REDUCTION))
    i, k0, k1 = sch.get_loops(sch.get_block("C"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(k1, 0), RFactorLoopError, "only block")


OVERWRITE_AFTER = """
@T.prim_func
def f(A: T.Buffer((5, 9), "float32"), C: T.Buffer((5,), "float32")):
    for i in range(5):
        for k in range(9):
            with T.block("C"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.reads(A[vi, vk])
                T.writes(C[vi])
                with T.init():
                    C[vi] = T.float32(0)
                C[vi] = C[vi] + A[vi, vk]
        for j in range(9):
            with T.block("A"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(C[vi])
                T.writes(A[vi, vj])
                A[vi, vj] = C[vi]
"""


def test_rfactor_refuses_when_a_later_block_overwrites_the_input():
    sch = Schedule(from_source(OVERWRITE_AFTER))
    i, k = sch.get_loops(sch.get_block("C"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(k, 0), DependencyError, "writes A")


def test_rfactor_with_a_consumer_after_it_in_the_same_loop():
    text = (
        OVERWRITE_AFTER.replace(
            'C: T.Buffer((5,), "float32"))',
            'C: T.Buffer((5,), "float32"), D: T.Buffer((5, 9), "float32"))',
        )
        .replace("T.writes(A[vi, vj])", "T.writes(D[vi, vj])")
        .replace("A[vi, vj] = C[vi]", "D[vi, vj] = C[vi]")
    )
    func = from_source(text)
    sch = Schedule(func)
    i, k = sch.get_loops(sch.get_block("C"))
    sch.rfactor(k, 0)
    assert_same_numerics(func, sch.func, rtol=RTOL)
    assert_trace_roundtrip(sch, func)


@pytest.mark.parametrize("axis", [2, -3, 1.0, True])
def test_rfactor_factor_axis_must_be_in_range(axis):
    sch = Schedule(workloads.get("reduce_sum", M=5, N=9)[0])
    i, k = sch.get_loops(sch.get_block("A_red"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(k, axis), FactorAxisError, "factor_axis")


def test_rfactor_refuses_a_predicate_that_can_skip_a_whole_partial():
    text = SPLIT_K_GEMM.replace("T.where(k0 * 4 + k1 < 13)", "T.where(k0 * 4 + k1 >= 2)")
    sch = Schedule(from_source(text))
    i, j, k0, k1 = sch.get_loops(sch.get_block("C"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(k1, 0), RFactorLoopError, "predicate")


def test_rfactor_needs_a_loop_starting_at_zero():
    text = """
@T.prim_func
def f(A: T.Buffer((5, 9), "float32"), B: T.Buffer((5,), "float32")):
    for i in range(5):
        for k in T.serial(2, 9):
            with T.block("B"):
                vi = T.axis.spatial(5, i)
                vk = T.axis.reduce(9, k)
                T.reads(A[vi, vk])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
"""
    sch = Schedule(from_source(text))
    i, k = sch.get_loops(sch.get_block("B"))
    assert_error_keeps_state(sch, lambda: sch.rfactor(k, 0), RFactorLoopError, "start at 0")


@pytest.mark.skipif(not hasattr(Schedule, "split"), reason="split is not available")
def test_rfactor_after_a_non_divisible_split_then_parallel():
    func = workloads.get("reduce_sum", M=5, N=37)[0]
    sch = Schedule(func)
    block = sch.get_block("A_red")
    i, k = sch.get_loops(block)
    k0, k1 = sch.split(k, [None, 8])
    rf = sch.rfactor(k1, 0)
    rf_loops = sch.get_loops(rf)
    sch.parallel(rf_loops[-1])  # k1: spatial in the rf block
    assert_same_numerics(func, sch.func, rtol=RTOL)
    assert_trace_roundtrip(sch, func)
    outer = Schedule(func)
    i, k = outer.get_loops(outer.get_block("A_red"))
    k0, k1 = outer.split(k, [None, 8])
    outer.rfactor(k0, 1)
    assert_same_numerics(func, outer.func, rtol=RTOL)
