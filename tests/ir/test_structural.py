import pytest

from schedlab.ir import (
    For,
    Var,
    assert_structural_equal,
    const,
    structural_equal,
    structural_hash,
)  # fmt: skip

from .conftest import make_gemm


def test_alpha_equivalent_functions_are_equal_and_hash_equal():
    a, b = make_gemm(), make_gemm(names=("x", "y", "z"))
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)


def test_different_shapes_or_names_of_blocks_differ():
    a = make_gemm()
    assert not structural_equal(a, make_gemm(m=9))
    renamed = a.with_body(a.body.replace(block=a.body.block.replace(name_hint="other")))
    assert not structural_equal(a, renamed)
    assert structural_hash(a) != structural_hash(make_gemm(m=9))


def test_bijection_is_enforced():
    i, j = Var("i"), Var("j")
    body = For(i, 0, 4, "serial", For(j, 0, 4, "serial", _store(i, j)))
    swapped = For(j, 0, 4, "serial", For(i, 0, 4, "serial", _store(i, j)))
    assert not structural_equal(body, swapped)


def _store(i, j):
    from schedlab.ir import BufferStore, decl_buffer

    buf = _store.buffer = getattr(_store, "buffer", decl_buffer((4, 4), "int32", "X"))
    return BufferStore(buf, i + j * 2, (i, j))


def test_free_variables():
    x, y = Var("x"), Var("y")
    assert not structural_equal(x + 1, y + 1)
    assert structural_equal(x + 1, y + 1, map_free_vars=True)
    assert structural_equal(x + 1, x + 1)


def test_assert_structural_equal_names_the_path():
    with pytest.raises(AssertionError, match=r"root\.buffer_map\[0\]\.shape\[1\]"):
        assert_structural_equal(make_gemm(), make_gemm(k=7))


def test_uid_is_ignored_but_kept_by_replace():
    i = Var("i")
    loop = For(i, 0, 4, "serial", _store(i, const(0)))
    copy = loop.replace(extent=const(4))
    assert copy.uid == loop.uid
    fresh = For(i, 0, 4, "serial", loop.body)
    assert fresh.uid != loop.uid and structural_equal(loop, fresh)


def test_modules_and_functions_pickle_to_structurally_equal_copies():
    import pickle

    from schedlab.ir import IRModule

    func = make_gemm()
    mod = IRModule({"main": func}, attrs={"note": 1})
    copy = pickle.loads(pickle.dumps(mod))
    assert list(copy) == ["main"] and copy.attrs == {"note": 1}
    assert structural_equal(copy["main"], func)
    assert structural_equal(pickle.loads(pickle.dumps(func)), func)
