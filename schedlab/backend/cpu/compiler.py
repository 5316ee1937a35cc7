"""gcc driver: C source -> shared library, with an on-disk cache.

Flags: `-O3 -march=native -fopenmp -fPIC -shared -std=c11 -ffp-contract=fast` plus
`-fno-math-errno` (lets gcc inline and vectorize sqrt; numerics are unchanged) and
`-Werror=implicit-function-declaration` (an unknown function is an error here, not at load
time). `-ffast-math` only when the target asks for it (`Target("cpu", fast_math=True)`).

Built libraries live in `$SCHEDLAB_CACHE_DIR` (default `~/.cache/schedlab`) under `cpu/`, named
by sha256 of (source, flags, compiler version, host CPU): a second build of the same kernel does
not run gcc. Writes are atomic (build in a private temporary directory, then `os.replace`), so
processes building the same kernel at once never see a half-written file.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from schedlab.errors import CompileError, ToolchainMissingError

BASE_FLAGS = ("-O3", "-fPIC", "-shared", "-std=c11", "-ffp-contract=fast", "-fno-math-errno",
              "-Werror=implicit-function-declaration")  # fmt: skip
LINK_FLAGS = ("-lm",)
# gcc only: one register-allocation region per function. The default regional allocator kept
# loaded weight vectors in stack slots inside register-tiled loops with registers to spare (a
# 3x3 64->64 conv at 56x56 in NCHW16c with a batch-norm epilogue: 147 -> 249 GFLOP/s, Zen 5,
# one thread; gemm 1024 and the NCHW conv rule unchanged).
GCC_FLAGS = ("-fira-region=one",)
# x86 only: no native half-precision arithmetic. float16 values are computed in float and
# rounded after every operation (c_prelude); with AVX512-FP16 (Sapphire Rapids and newer) gcc
# narrows each rounded float op to a half op and then fuses a product into the next add
# (vfmsub231sh under -ffp-contract=fast), skipping a rounding numpy does. F16C/AVX-512F
# conversions are kept.
X86_FLAGS = ("-mno-avx512fp16",)
INSTALL_HINT = (
    "install a C compiler with OpenMP: `apt-get install gcc` (Debian/Ubuntu), "
    "`dnf install gcc` (Fedora/RHEL), `apk add gcc musl-dev` (Alpine), or set SCHEDLAB_CC "
    "to the compiler to use"
)
_ERROR_LINE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?error: ")
_CONTEXT = 2  # source lines shown before and after each error
_MAX_ERRORS = 8


def compiler_command() -> str:
    """The C compiler to run: $SCHEDLAB_CC, else gcc."""
    return os.environ.get("SCHEDLAB_CC", "gcc")


def cache_dir() -> Path:
    """Where built libraries are kept: $SCHEDLAB_CACHE_DIR or ~/.cache/schedlab."""
    root = os.environ.get("SCHEDLAB_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "schedlab"
    return base / "cpu"


def flags_for(target=None) -> tuple[str, ...]:
    """Compiler flags for a cpu Target (march, OpenMP, fast-math, extra cflags)."""
    attrs = getattr(target, "attrs", {}) or {}
    flags = list(BASE_FLAGS)
    flags.insert(1, f"-march={attrs.get('march', 'native')}")
    if attrs.get("openmp", True):
        flags.append("-fopenmp")
    if attrs.get("fast_math", False):
        flags.append("-ffast-math")
    if _is_gcc(compiler_command()):
        flags.extend(GCC_FLAGS)
    if platform.machine().lower() in ("x86_64", "amd64"):
        flags.extend(f for f in X86_FLAGS if _accepts(compiler_command(), f))
    flags.extend(attrs.get("cflags", ()))
    return tuple(flags)


def _is_gcc(command: str) -> bool:
    """Whether `command` is gcc (not clang, which has no -fira-* options); False when it is
    not installed (building then fails with the install hint)."""
    try:
        version = compiler_version(command)
    except ToolchainMissingError:
        return False
    text = version.lower()
    return "gcc" in text and "clang" not in text


@cache
def _accepts(command: str, flag: str) -> bool:
    """Whether the compiler takes `flag` (gcc before 12 has no -mno-avx512fp16); asked once."""
    try:
        path = _resolve(command)
    except ToolchainMissingError:
        return False
    probe = [path, flag, "-E", "-x", "c", os.devnull]
    return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0


def _resolve(command: str) -> str:
    path = shutil.which(command)
    if path is None:
        raise ToolchainMissingError(f"C compiler {command!r} not found on PATH; {INSTALL_HINT}")
    return path


@cache
def compiler_version(command: str) -> str:
    """The compiler's full version text (part of the cache key); asked once per process."""
    path = _resolve(command)
    result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    return f"{path}\n{result.stdout.strip()}"


@cache
def _host_identity() -> str:
    """What `-march=native` depends on: the CPU model and feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags", "Features"))]
    return "\n".join(sorted(set(keep)))


def cache_key(source: str, flags: tuple[str, ...], command: str) -> str:
    digest = hashlib.sha256()
    for part in (source, "\0".join(flags), compiler_version(command), _host_identity()):
        digest.update(part.encode())
        digest.update(b"\0\1")
    return digest.hexdigest()


def compile_source(source: str, target=None, name: str = "kernel") -> Path:
    """Compile C `source` into a shared library (or reuse the cached one); returns its path.
    Raises CompileError (compiler message plus the numbered source lines around each error) or
    ToolchainMissingError."""
    _check_host_runs(target)
    command = compiler_command()
    flags = flags_for(target)
    key = cache_key(source, flags, command)
    directory = cache_dir()
    library = directory / f"{key}.so"
    if library.exists():
        return library
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=directory) as scratch:
        c_file = Path(scratch) / f"{_file_stem(name)}.c"
        c_file.write_text(source)
        built = Path(scratch) / "lib.so"
        # relative names: messages read `gemm.c:12:5: error: ...`
        argv = [_resolve(command), *flags, c_file.name, "-o", built.name, *LINK_FLAGS]
        run_compiler(argv, source, scratch)
        os.replace(c_file, directory / f"{key}.c")  # kept beside the library for reading
        os.replace(built, library)
    return library


def _check_host_runs(target) -> None:
    """Kernels are built to run here: a target of another architecture (a preset such as
    neoverse-v2 on an x86 host) is refused with what to do instead."""
    arch = (getattr(target, "attrs", {}) or {}).get("arch")
    host = platform.machine()
    if arch and host and arch != host and {arch, host} != {"aarch64", "arm64"}:
        raise CompileError(
            f"target {target.describe()} is {arch}, this host is {host}: kernels are built to "
            f"run here. Schedule and predict for it here; build on an {arch} machine"
        )


def _file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "kernel"


def run_compiler(argv: list[str], source: str, cwd: str | None = None) -> None:
    """Run the compiler; a failure becomes a CompileError. (Tests patch this to count runs.)"""
    env = {**os.environ, "LC_ALL": "C"}  # plain ASCII messages, whatever the user's locale
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
    except FileNotFoundError as err:
        raise ToolchainMissingError(f"C compiler {argv[0]!r} not found; {INSTALL_HINT}") from err
    if result.returncode != 0:
        raise _compile_error(argv, result.stderr, source)


def _compile_error(argv: list[str], stderr: str, source: str) -> Exception:
    if "omp.h" in stderr or "-lgomp" in stderr or "libgomp" in stderr:
        return ToolchainMissingError(
            f"the C compiler has no OpenMP support ({stderr.strip().splitlines()[-1]}); "
            f"install it: `apt-get install libgomp1` / your distro's gcc OpenMP runtime, or "
            f"build with Target('cpu', openmp=False)"
        )
    lines = source.splitlines()
    shown: list[str] = []
    errors = [m for m in map(_ERROR_LINE.match, stderr.splitlines()) if m][:_MAX_ERRORS]
    for match in errors:
        shown.append(_excerpt(lines, int(match.group("line"))))
    message = [f"{Path(argv[0]).name} failed compiling generated C.",
               "compiler output:", _indent(stderr.strip())]  # fmt: skip
    if shown:
        message += ["offending source lines:", *shown]
    error = CompileError("\n".join(message))
    error.stderr = stderr
    error.source = source
    error.lines = tuple(int(m.group("line")) for m in errors)
    return error


def _excerpt(lines: list[str], line: int) -> str:
    start, stop = max(1, line - _CONTEXT), min(len(lines), line + _CONTEXT)
    width = len(str(stop))
    rows = []
    for number in range(start, stop + 1):
        marker = ">" if number == line else " "
        rows.append(f"  {marker} {number:>{width}} | {lines[number - 1]}")
    return "\n".join(rows)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
