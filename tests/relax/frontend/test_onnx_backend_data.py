"""onnx's shipped test models (onnx/backend/test/data/pytorch-converted, pytorch-operator and
simple): import each model.onnx, run test_data_set_0 and compare with its outputs.
Prints the pass rate and every failure; no rate is asserted yet (coverage is still growing).
Run with `-s` to see the report."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import numpy_helper  # noqa: E402

from schedlab.relax.frontend.onnx import from_onnx  # noqa: E402
from schedlab.relax.interpreter import run  # noqa: E402

SUITES = ("pytorch-converted", "pytorch-operator", "simple")


def _cases() -> list[str]:
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    return sorted(
        case for suite in SUITES for case in glob.glob(os.path.join(root, suite, "test_*"))
    )


def _load(paths) -> list[np.ndarray]:
    out = []
    for path in sorted(paths):
        tensor = onnx.TensorProto()
        with open(path, "rb") as handle:
            tensor.ParseFromString(handle.read())
        out.append(numpy_helper.to_array(tensor))
    return out


def run_case(case: str) -> str | None:
    """None when the case passes, else a one-line reason."""
    data = os.path.join(case, "test_data_set_0")
    inputs = _load(glob.glob(os.path.join(data, "input_*.pb")))
    expected = _load(glob.glob(os.path.join(data, "output_*.pb")))
    try:
        mod = from_onnx(os.path.join(case, "model.onnx"))
        got = run(mod, *inputs[: len(mod["main"].params)])
    except Exception as err:  # reported, not raised: this test measures coverage
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    got = got if isinstance(got, tuple) else (got,)
    for k, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or not np.allclose(g, e, rtol=1e-3, atol=1e-4, equal_nan=True):
            return f"output {k} differs (shape {g.shape} vs {e.shape})"
    return None


def test_onnx_shipped_pytorch_models_report():
    cases = _cases()
    if not cases:
        pytest.skip("onnx ships no backend test data here")
    failures = {}
    for case in cases:
        reason = run_case(case)
        if reason is not None:
            failures[os.path.basename(case)] = reason
    passed = len(cases) - len(failures)
    print(f"\nONNX shipped test models: {passed}/{len(cases)} pass "
          f"({100 * passed / len(cases):.0f}%)")  # fmt: skip
    for name, reason in sorted(failures.items()):
        print(f"  FAIL {name}: {reason}")
