"""`schedlab apply BUNDLE [--out DIR] [--check]`: rebuild a kernel from a schedule bundle alone
(docs/bundle.md), as a production build does: read and validate the bundle (its printed
function against its structural hash, the trace against the workload and target, the replayed
kernel against the exported one), compile it with the CPU back end and say what was built.

    kernel = apply_bundle("gemm.bundle.json", out="build", check=True)

`--out DIR` writes `<name>.c` (the generated source), `<name>.so` (the compiled library),
`<name>.tir.py` (the scheduled function as script text); with `--check`, the kernel runs on
seeded random inputs against the reference interpreter of the unscheduled function, and
`<name>.check.npz` keeps those inputs and the kernel's outputs.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .bundle import Bundle, BundleError, load_bundle

_RTOL, _ATOL = 1e-4, 1e-5  # float32 sums reassociated by a schedule (split, rfactor, vectors)


def apply_bundle(path, out=None, check: bool = False, seed: int = 0,
                 printer: Callable[[str], None] = print):  # fmt: skip
    """Load, validate and build the bundle at `path` (see the module doc); returns the
    Kernel. BundleError when the bundle does not match itself, is for another back end than
    the CPU's, or (with `check`) the kernel's outputs differ from the reference."""
    import schedlab

    bundle = load_bundle(path)
    if bundle.target.kind != "cpu":
        raise BundleError(
            f"target mismatch: {path}: the bundle is for target kind {bundle.target.kind!r}; "
            "schedlab apply builds with the CPU back end (target kind 'cpu')"
        )
    for line in _describe(bundle, path, schedlab.__version__):
        printer(line)
    kernel = bundle.build()
    lines = len(kernel.source.splitlines())
    printer(f"built:     {bundle.name}, {lines} lines of C -> {kernel.library_path}")
    arrays = _check(bundle, kernel, seed, printer) if check else None
    if out is not None:
        written = _write(bundle, kernel, Path(out), arrays)
        printer(f"wrote:     {', '.join(str(p) for p in written)}")
    return kernel


def _describe(bundle: Bundle, path, version: str) -> list[str]:
    versions = bundle.versions or {}
    made = versions.get("schedlab", "?")
    lines = [
        f"bundle:    {path} (schema {versions.get('schema')}, exported by schedlab {made})",
        f"kernel:    {_signature(bundle.func, bundle.name)}",
        f"workload:  {bundle.workload} (the printed function matches it)",
        f"target:    {bundle.target.describe()}",
        f"schedule:  {len(bundle.trace.get('insts', []))} instructions replayed; the kernel "
        f"matches the exported one ({bundle.scheduled_hash[:16]}...)",
    ]
    for m in bundle.measurements:
        source = f" ({m['source']})" if "source" in m else ""
        lines.append(f"measured:  {m['median_secs'] * 1e3:.4g} ms median{source}, when exported")
    if made != version:
        lines.append(f"note:      exported by schedlab {made}, rebuilt by {version}")
    return lines


def _signature(func, name: str) -> str:
    params = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            params.append(f"{param.name}: {param.dtype}")
        else:
            shape = ", ".join(str(extent) for extent in buffer.shape)
            params.append(f"{param.name}: {buffer.dtype}[{shape}]")
    return f"{name}({', '.join(params)})"


def _check(bundle: Bundle, kernel, seed: int, printer) -> dict[str, np.ndarray]:
    """Run the kernel and the reference interpreter on the same seeded inputs; compare."""
    import schedlab
    from schedlab.workloads import make_args

    args = make_args(bundle.func, seed=seed)
    expected = [a.copy() for a in args]
    kernel(*args)
    schedlab.interpret(bundle.func, *expected)
    worst = 0.0
    for param, got, want in zip(bundle.func.params, args, expected):
        if not np.allclose(got, want, rtol=_RTOL, atol=_ATOL, equal_nan=True):
            diff = float(np.nanmax(np.abs(got.astype("float64") - want.astype("float64"))))
            raise BundleError(
                f"check failed: {param.name} differs from the reference interpreter by up to "
                f"{diff:.3g} (rtol {_RTOL}, atol {_ATOL}, random inputs, seed {seed})"
            )
        if got.size:
            worst = max(worst, float(np.nanmax(np.abs(got.astype("float64") - want))))
    printer(f"check:     max abs difference {worst:.3g} from the reference interpreter "
            f"(random inputs, seed {seed})")  # fmt: skip
    return {param.name: array for param, array in zip(bundle.func.params, args)}


def _write(bundle: Bundle, kernel, out: Path, arrays) -> list[Path]:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BundleError(f"--out: cannot create {str(out)!r}: {err.strerror}") from None
    paths = [out / f"{bundle.name}.c", out / f"{bundle.name}.so", out / f"{bundle.name}.tir.py"]
    paths[0].write_text(kernel.source)
    shutil.copyfile(kernel.library_path, paths[1])
    paths[2].write_text(bundle.scheduled.script() + "\n")
    if arrays is not None:
        paths.append(out / f"{bundle.name}.check.npz")
        np.savez(paths[-1], **arrays)
    return paths


__all__ = ["apply_bundle"]
