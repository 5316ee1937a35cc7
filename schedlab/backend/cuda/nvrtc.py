"""NVRTC through ctypes: CUDA C -> PTX on any machine (no GPU, no CUDA toolkit needed).

libnvrtc comes from the pip wheel `nvidia-cuda-nvrtc-cu12` (the `cuda` extra:
`pip install 'schedlab[cuda]'`); $SCHEDLAB_NVRTC names another library file. PTX is cached
on disk like the CPU libraries: `$SCHEDLAB_CACHE_DIR/cuda/<sha256>.ptx`, keyed by the source,
the options and the NVRTC version.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from functools import cache
from pathlib import Path

from schedlab.errors import CompileError, ToolchainMissingError

INSTALL_HINT = (
    "install NVRTC with `pip install 'schedlab[cuda]'` (the nvidia-cuda-nvrtc-cu12 wheel), or "
    "set SCHEDLAB_NVRTC to a libnvrtc.so"
)
_LOCK = threading.Lock()


@cache
def library_path() -> Path:
    """The libnvrtc shared library to load (ToolchainMissingError when there is none)."""
    named = os.environ.get("SCHEDLAB_NVRTC")
    if named:
        return Path(named)
    try:
        import nvidia.cuda_nvrtc as wheel  # the pip wheel: a namespace package with lib/
    except ImportError:
        raise ToolchainMissingError(f"NVRTC is not installed: {INSTALL_HINT}") from None
    for root in list(getattr(wheel, "__path__", [])):
        found = sorted(Path(root, "lib").glob("libnvrtc.so*"))
        found = [p for p in found if "builtins" not in p.name and "alt" not in p.name]
        if found:
            return found[0]
    raise ToolchainMissingError(f"the NVRTC wheel has no libnvrtc.so: {INSTALL_HINT}")


@cache
def _lib() -> ctypes.CDLL:
    path = library_path()
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as err:
        raise ToolchainMissingError(
            f"cannot load NVRTC from {path}: {err}; {INSTALL_HINT}"
        ) from None
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def available() -> bool:
    """Whether NVRTC can be loaded here."""
    try:
        _lib()
    except ToolchainMissingError:
        return False
    return True


@cache
def version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def arch_option(arch: str) -> str:
    """`--gpu-architecture=compute_90` for "sm_90": PTX for the virtual architecture, which
    the driver compiles for the exact GPU when the module is loaded."""
    digits = "".join(ch for ch in str(arch) if ch.isdigit())
    if not digits:
        raise CompileError(f"CUDA target arch {arch!r}: expected a name such as 'sm_80'")
    return f"--gpu-architecture=compute_{digits}"


HEADERS_HINT = (
    "the CUDA headers (cuda_fp16.h) are not found: `pip install nvidia-cuda-runtime-cu12` "
    "(part of the `cuda` extra), or set SCHEDLAB_CUDA_INCLUDE (or CUDA_HOME) to a CUDA "
    "toolkit's include folder"
)


@cache
def include_dir() -> Path | None:
    """A folder holding cuda_fp16.h for NVRTC (which ships no headers): $SCHEDLAB_CUDA_INCLUDE,
    $CUDA_HOME/include, the nvidia-cuda-runtime-cu12 wheel's, then /usr/local/cuda*."""
    candidates = [os.environ.get("SCHEDLAB_CUDA_INCLUDE")]
    candidates += (
        [str(Path(os.environ["CUDA_HOME"], "include"))] if "CUDA_HOME" in os.environ else []
    )
    try:
        import nvidia.cuda_runtime as wheel
    except ImportError:
        wheel = None
    candidates += [str(Path(root, "include")) for root in getattr(wheel, "__path__", [])]
    candidates += [
        "/usr/local/cuda/include",
        *sorted(map(str, Path("/usr/local").glob("cuda-*/include")), reverse=True),
    ]
    for folder in candidates:
        if folder and Path(folder, "cuda_fp16.h").is_file():
            return Path(folder)
    return None


def _header_options(source: str) -> tuple[str, ...]:
    """`-I` the CUDA headers when the source includes one of them (float16 kernels)."""
    if "#include <cuda_" not in source:
        return ()
    folder = include_dir()
    if folder is None:
        raise ToolchainMissingError(HEADERS_HINT)
    return (f"--include-path={folder}",)


def compile_to_ptx(source: str, arch: str = "sm_80", name: str = "kernel.cu") -> str:
    """The PTX of `source` for `arch` (cached on disk); CompileError with NVRTC's log."""
    options = (arch_option(arch), "--std=c++14", *_header_options(source))
    key = hashlib.sha256("\0".join((source, *options, str(version()))).encode()).hexdigest()
    cached = _cache_dir() / f"{key}.ptx"
    if cached.exists():
        return cached.read_text()
    ptx = _compile(source, options, name)
    _write_atomic(cached, ptx)
    return ptx


def _compile(source: str, options: tuple[str, ...], name: str) -> str:
    lib = _lib()
    program = ctypes.c_void_p()
    with _LOCK:
        _check(
            lib.nvrtcCreateProgram(
                ctypes.byref(program), source.encode(), name.encode(), 0, None, None
            ),  # fmt: skip
            "nvrtcCreateProgram",
        )
        try:
            argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            status = lib.nvrtcCompileProgram(program, len(options), argv)
            if status != 0:
                raise CompileError(_failure(source, _log(lib, program), options))
            size = ctypes.c_size_t()
            _check(lib.nvrtcGetPTXSize(program, ctypes.byref(size)), "nvrtcGetPTXSize")
            buffer = ctypes.create_string_buffer(size.value)
            _check(lib.nvrtcGetPTX(program, buffer), "nvrtcGetPTX")
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(program))
    return buffer.value.decode()


def _log(lib, program) -> str:
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    buffer = ctypes.create_string_buffer(max(size.value, 1))
    lib.nvrtcGetProgramLog(program, buffer)
    return buffer.value.decode(errors="replace")


def _failure(source: str, log: str, options) -> str:
    lines = source.splitlines()
    shown = []
    for line in log.splitlines():
        shown.append(line)
        number = _line_number(line)
        if number is not None and 1 <= number <= len(lines):
            shown.append(f"    {number:5d} | {lines[number - 1]}")
    return f"NVRTC ({' '.join(options)}) rejected the generated CUDA C:\n" + "\n".join(shown[:40])


def _line_number(line: str) -> int | None:
    head = line.split(":", 1)[0]
    if "(" in head and head.endswith(")"):
        text = head[head.rindex("(") + 1 : -1]
        return int(text) if text.isdigit() else None
    return None


def _check(status: int, what: str) -> None:
    if status != 0:
        message = _lib().nvrtcGetErrorString(status).decode()
        raise CompileError(f"{what} failed: {message} (NVRTC status {status})")


def _cache_dir() -> Path:
    root = os.environ.get("SCHEDLAB_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "schedlab"
    path = base / "cuda"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_atomic(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(temp, path)


__all__ = ["available", "compile_to_ptx", "library_path", "version", "arch_option",
           "include_dir", "INSTALL_HINT", "HEADERS_HINT"]  # fmt: skip
