"""gcc driver: flags, CompileError content, missing toolchain, the disk cache (hits, atomic
concurrent builds, damaged entries)."""

import threading
import uuid

import numpy as np
import pytest

from schedlab.backend.cpu import CpuRenderer, build_module, compiler
from schedlab.errors import CompileError, ToolchainMissingError
from schedlab.ir import BufferStore, Call, Var
from schedlab.target import Target

from ._lowered import Params, build, f32, loop, rand


def _scale(name="scale", factor=2.0):
    p = Params()
    A, C = p.buf("A", 9), p.buf("C", 9)
    i = Var("i")
    return p.func(loop(i, 9, BufferStore(C, A[i] * f32(factor), (i,))), name)


def test_default_flags():
    flags = compiler.flags_for(Target("cpu"))
    for flag in ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c11",
                 "-ffp-contract=fast"):  # fmt: skip
        assert flag in flags
    assert "-ffast-math" not in flags
    assert "-ffast-math" in compiler.flags_for(Target("cpu", fast_math=True))
    assert "-fopenmp" not in compiler.flags_for(Target("cpu", openmp=False))
    assert compiler.flags_for(Target("cpu", cflags=["-DX=1"]))[-1] == "-DX=1"


def test_register_allocation_flag_only_for_gcc(monkeypatch):
    assert "-fira-region=one" in compiler.flags_for(Target("cpu"))  # the toolchain here: gcc
    monkeypatch.setattr(compiler, "compiler_version", lambda command: "Debian clang 14.0.6")
    assert "-fira-region=one" not in compiler.flags_for(Target("cpu"))


def test_compile_error_shows_message_and_numbered_lines():
    source = "int ok(void) { return 0; }\n\nint broken(void) {\n  return nope;\n}\n"
    with pytest.raises(CompileError) as info:
        compiler.compile_source(source, name="broken")
    text = str(info.value)
    assert "'nope' undeclared" in text
    assert "offending source lines:" in text
    assert "broken.c:4:" in text
    assert "> 4 |   return nope;" in text
    assert "  3 | int broken(void) {" in text
    assert info.value.lines == (4,)


def test_unknown_function_in_ir_is_a_compile_error():
    p = Params()
    A = p.buf("A", 4)
    i = Var("i")
    value = Call("float32", "no_such_function", (A[i],))
    with pytest.raises(CompileError, match="no_such_function") as info:
        build(p.func(loop(i, 4, BufferStore(A, value, (i,))), "calls_unknown"))
    assert "A[i] = no_such_function(A[i]);" in str(info.value)


class _Broken(CpuRenderer):
    """A test hook: injects invalid C after each function."""

    def after_function(self, info):
        return [*super().after_function(info), "this is not C;"]


def test_injected_invalid_c_through_a_renderer_hook():
    with pytest.raises(CompileError, match="this is not C"):
        build_module(_scale("injected"), "cpu", renderer=_Broken(Target("cpu")))


def test_missing_compiler_says_how_to_install(monkeypatch):
    monkeypatch.setenv("SCHEDLAB_CC", "/nonexistent/bin/gcc-missing")
    with pytest.raises(ToolchainMissingError, match="apt-get install gcc"):
        compiler.compile_source("int f(void) { return 1; }\n")


def test_second_build_hits_the_cache(monkeypatch):
    calls = []
    real = compiler.run_compiler
    monkeypatch.setattr(compiler, "run_compiler", lambda *a: (calls.append(a), real(*a)))
    func = _scale("cached", factor=3.0 + uuid.uuid4().int % 1000)
    first = build(func)
    assert len(calls) == 1
    second = build(func)
    assert len(calls) == 1, "the second build must not run the compiler"
    assert second.library_path == first.library_path
    assert first.library_path.with_suffix(".c").read_text() == first.source
    build(func, Target("cpu", cflags=["-DSL_OTHER_FLAGS"]))
    assert len(calls) == 2, "other flags are another cache entry"


def test_concurrent_builds_of_one_kernel_do_not_clash():
    source = f"// {uuid.uuid4()}\nint answer(void) {{ return 42; }}\n"
    paths, errors = [], []

    def work():
        try:
            paths.append(compiler.compile_source(source, name="answer"))
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(paths)) == 1
    import ctypes

    assert ctypes.CDLL(str(paths[0])).answer() == 42
    leftovers = [p for p in paths[0].parent.iterdir() if p.name.startswith("build-")]
    assert leftovers == []


def test_damaged_cache_entry_is_rebuilt():
    func = _scale("damaged", factor=5.0 + uuid.uuid4().int % 1000)
    source = CpuRenderer(Target("cpu")).render(func).source
    key = compiler.cache_key(source, compiler.flags_for(Target("cpu")), compiler.compiler_command())
    compiler.cache_dir().mkdir(parents=True, exist_ok=True)
    (compiler.cache_dir() / f"{key}.so").write_bytes(b"not a shared library")
    kernel = build(func)
    a, c = rand(9), np.zeros(9, "float32")
    kernel(a, c)
    np.testing.assert_allclose(c, a * np.float32(func.body.body.value.b.value), rtol=1e-6)
