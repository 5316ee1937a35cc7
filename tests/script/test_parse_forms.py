"""Forms people write by hand that the printer never emits: imports, other aliases, bare numbers,
`+=`, chained comparisons, full slices, region lists, `x = value` lets."""

from schedlab.ir import (
    LT,
    And,
    BufferStore,
    Call,
    Cast,
    FloatImm,
    For,
    IntImm,
    IRModule,
    LetStmt,
    PrimFunc,
    Var,
    assert_structural_equal,
    decl_buffer,
)  # fmt: skip
from schedlab.script import from_source


def test_imports_and_aliases():
    text = '''\
"""A module docstring."""
from __future__ import annotations
from schedlab.script import tir as TT
import schedlab.script.ir as II

@II.ir_module
class Module:
    @TT.prim_func
    def f(A: TT.Buffer((4,), TT.float16)):
        A[0] = TT.float16(1)
'''
    mod = from_source(text)
    assert isinstance(mod, IRModule) and mod["f"].buffers[0].dtype == "float16"
    assert from_source("from tvm.script import tir as T\n" + _body("A[0] = A[1]")).params


def _body(*lines: str, params: str = 'A: T.Buffer((8,), "float32")') -> str:
    return "@T.prim_func\ndef f(" + params + "):\n" + "".join(f"    {ln}\n" for ln in lines)


def test_bare_numbers_take_the_dtype_around_them():
    func = from_source(_body("for i in range(8):", "    A[i] = A[i] * 2 + 1", "    A[i] = 0"))
    A = func.buffers[0]
    seq = func.body.body.seq
    one, two = seq[0].value.b, seq[0].value.a.b
    assert isinstance(one, FloatImm) and (one.dtype, one.value) == ("float32", 1.0)
    assert isinstance(two, FloatImm) and (two.dtype, two.value) == ("float32", 2.0)
    assert isinstance(seq[1].value, FloatImm) and seq[1].value.dtype == A.dtype
    i64 = from_source(_body("for i in range(T.int64(4)):", "    A[i + 1] = A[i]"))
    index_one = i64.body.body.indices[0].b
    assert isinstance(index_one, IntImm) and index_one.dtype == "int64"


def test_augmented_assignment_and_chained_comparison():
    func = from_source(_body("for i in range(8):", "    if 0 < i < 4:", "        A[i] -= A[0]"))
    branch = func.body.body
    assert isinstance(branch.condition, And) and isinstance(branch.condition.b, LT)
    store = branch.then_case
    assert isinstance(store, BufferStore) and store.value.a.buffer is store.buffer


def test_region_lists_full_slices_and_let_without_annotation():
    text = _body(
        "for i in range(8):",
        '    with T.block("b"):',
        "        vi = T.axis.spatial(8, i)",
        "        T.reads([B[vi, :], B[vi, 2:]])",
        "        T.writes(A[vi])",
        "        A[vi] = B[vi, 0]",
        "x = 3",
        "A[x] = T.Cast('float32', x)",
        params='A: T.Buffer((8,), "float32"), B: T.Buffer((8, 6), "float32")',
    )
    func = from_source(text)
    root = func.body.block.body
    block = root.seq[0].body.block
    full, tail = block.reads
    assert full.region[1].extent.value == 6 and tail.region[1].min.value == 2
    assert tail.region[1].extent.value == 4
    let = root.seq[1]
    assert isinstance(let, LetStmt) and let.var.dtype == "int32"
    assert isinstance(let.body.value, Cast)


def test_same_func_written_two_ways():
    long_form = _body("for i in T.serial(0, 8):", "    A[i] = T.exp(A[i])")
    short_form = _body("for i in range(8):", "    A[i] = T.exp(A[i])")
    assert_structural_equal(from_source(long_form), from_source(short_form))
    A = decl_buffer((8,), "float32", "A")
    i = Var("i")
    body = For(i, 0, 8, "serial", BufferStore(A, Call("float32", "exp", (A[i],)), (i,)))
    handle = Var("A", "handle")
    assert_structural_equal(from_source(short_form), PrimFunc((handle,), body, {handle: A}))
