"""Operators registered by the graph-IR core tests only ("test.add", "test.mul"), so those tests
do not depend on the operator families written elsewhere."""

from schedlab import te
from schedlab.ir.structural import structural_equal
from schedlab.relax.op import OpTypeError, TensorInfo, describe, list_ops, register_op


def _elementwise(name: str, combine):
    def infer(inputs, attrs):
        a, b = inputs
        same = a.ndim == b.ndim and all(structural_equal(x, y) for x, y in zip(a.shape, b.shape))
        if not same or a.dtype != b.dtype:
            raise OpTypeError(f"{name}: inputs must match exactly, got {describe(inputs)}")
        return TensorInfo(a.shape, a.dtype)

    def legalize(tensors, attrs):
        a, b = tensors
        return te.compute(a.shape, lambda *i: combine(a[i], b[i]), name=name.split(".")[-1])

    return infer, legalize


def ensure_test_ops() -> None:
    """Register the test operators once per process."""
    known = set(list_ops())
    for name, combine in (("test.add", lambda x, y: x + y), ("test.mul", lambda x, y: x * y)):
        if name not in known:
            infer, legalize = _elementwise(name, combine)
            register_op(name, num_inputs=2, pattern="elemwise", infer=infer, legalize=legalize,
                        attrs={"scale": 1.0}, doc="test operator")  # fmt: skip


def test_test_ops_register_once():
    ensure_test_ops()
    ensure_test_ops()
    assert {"test.add", "test.mul"} <= set(list_ops())
