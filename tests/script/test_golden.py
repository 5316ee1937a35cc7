"""Golden text for a gemm, and hand-written `@T.prim_func` / `@I.ir_module` code parsed and
checked against hand-built IR."""

from schedlab.ir import IRModule, assert_structural_equal
from schedlab.script import from_source, script
from schedlab.script import ir as I  # noqa: E741 - TVMScript's name
from schedlab.script import tir as T

from .script_helpers import gemm

GEMM_TEXT = """\
# from schedlab.script import tir as T

@T.prim_func
def gemm(A: T.Buffer((64, 80), "float32"), B: T.Buffer((80, 48), "float32"), C: T.Buffer((64, 48), "float32")):
    T.func_attr({"global_symbol": "gemm", "tir.noalias": True})
    for i, j, k in T.grid(64, 48, 80):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]"""  # noqa: E501


def test_gemm_golden_text():
    assert gemm().script() == GEMM_TEXT
    assert script(gemm(), show_header=False) == GEMM_TEXT.split("\n", 2)[2]
    assert_structural_equal(from_source(GEMM_TEXT), gemm())


def test_gemm_from_te_prints_the_golden_text():
    from schedlab import te

    A = te.placeholder((64, 80), name="A")
    B = te.placeholder((80, 48), name="B")
    k = te.reduce_axis((0, 80), name="k")
    C = te.compute((64, 48), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    assert te.create_prim_func([A, B, C], name="gemm").script() == GEMM_TEXT


@T.prim_func
def gemm_by_hand(
    A: T.Buffer((64, 80), "float32"),
    B: T.Buffer((80, 48), "float32"),
    C: T.Buffer((64, 48), "float32"),
):
    """A docstring is allowed."""
    T.func_attr({"global_symbol": "gemm", "tir.noalias": True})
    for i, j, k in T.grid(64, 48, 80):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = 0.0  # a bare number takes the buffer's dtype
            C[vi, vj] += A[vi, vk] * B[vk, vj]


def test_hand_written_prim_func_matches_hand_built():
    assert_structural_equal(gemm_by_hand, gemm())


@T.prim_func
def gemm_inferred_regions(
    A: T.Buffer((64, 80), "float32"),
    B: T.Buffer((80, 48), "float32"),
    C: T.Buffer((64, 48), "float32"),
):
    T.func_attr({"global_symbol": "gemm", "tir.noalias": True})
    for i in range(64):
        for j in range(48):
            for k in range(80):
                with T.block("C"):
                    vi = T.axis.spatial(64, i)
                    vj = T.axis.spatial(48, j)
                    vk = T.axis.reduce(80, k)
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_missing_reads_writes_are_inferred():
    """Without T.reads/T.writes the regions come from schedlab.arith's region analysis."""
    func = gemm_inferred_regions
    block = func.body.block.body.body.body.body.block
    assert [r.buffer.name for r in block.writes] == ["C"]
    assert sorted(r.buffer.name for r in block.reads) in (["A", "B"], ["A", "B", "C"])


@I.ir_module
class Module:
    I.module_attrs({"origin": "test"})

    @T.prim_func
    def gemm(
        A: T.Buffer((64, 80), "float32"),
        B: T.Buffer((80, 48), "float32"),
        C: T.Buffer((64, 48), "float32"),
    ):
        T.func_attr({"global_symbol": "gemm", "tir.noalias": True})
        for i, j, k in T.grid(64, 48, 80):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(A[vi, vk], B[vk, vj])
                T.writes(C[vi, vj])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def scale(a: T.handle, s: T.float32):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        for i in range(n):
            A[i] = A[i] * s


def test_hand_written_ir_module():
    assert isinstance(Module, IRModule)
    assert list(Module) == ["gemm", "scale"] and Module.attrs == {"origin": "test"}
    assert_structural_equal(Module["gemm"], gemm())
    scale = Module["scale"]
    assert scale.params[1].dtype == "float32" and scale.buffers[0].shape[0].name == "n"
    assert_structural_equal(from_source(script(Module)), Module)
    expected_head = (
        "# from schedlab.script import ir as I\n# from schedlab.script import tir as T\n\n"
        '@I.ir_module\nclass Module:\n    I.module_attrs({"origin": "test"})\n\n'
        "    @T.prim_func\n    def gemm("
    )
    assert script(Module).startswith(expected_head)
