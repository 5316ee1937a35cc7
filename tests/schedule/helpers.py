"""Checks every primitive's tests use: numerics against the unscheduled function (interpreter
and compiled C), trace round trips (JSON and Python), and "a failed primitive changes nothing"."""

from __future__ import annotations

import json

import numpy as np
import pytest

import schedlab
from schedlab.ir import assert_structural_equal
from schedlab.schedule import Schedule, Trace
from schedlab.script import from_source
from schedlab.script import tir as T


def random_args(func, seed: int = 0) -> list[np.ndarray]:
    """Random arrays for every buffer parameter (outputs too: a kernel must overwrite them)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for param in func.params:
        buffer = func.buffer_map[param]
        shape = tuple(int(s) for s in buffer.shape)
        dtype = buffer.dtype
        if dtype.is_float:
            arrays.append(rng.uniform(-1, 1, shape).astype(dtype.numpy))
        else:
            arrays.append(rng.integers(-4, 5, shape).astype(dtype.numpy))
    return arrays


def assert_same_numerics(
    original,
    scheduled,
    compiled: bool = True,
    seed: int = 0,
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> None:
    """Run both functions on the same random inputs and compare every buffer afterwards, with
    the interpreter and (when `compiled`) with the C back end."""
    expected = random_args(original, seed)
    schedlab.interpret(original, *expected)
    runs = {"interpreter": lambda args: schedlab.interpret(scheduled, *args)}
    if compiled:
        kernel = schedlab.build(scheduled, target="cpu")
        runs["compiled"] = lambda args: kernel(*args)
    for name, run in runs.items():
        args = random_args(original, seed)
        run(args)
        for index, (got, want) in enumerate(zip(args, expected)):
            np.testing.assert_allclose(
                got, want, rtol=rtol, atol=atol,
                err_msg=f"{name}: buffer {scheduled.params[index].name} differs",
            )  # fmt: skip


def assert_trace_roundtrip(sch: Schedule, original) -> None:
    """The trace replays to the same IR through JSON and through its Python form."""
    data = json.loads(json.dumps(sch.trace.as_json()))
    replayed = Schedule(original)
    Trace.from_json(data).apply_to_schedule(replayed)
    assert_structural_equal(replayed.mod, sch.mod)
    namespace = {"T": T}
    exec(sch.trace.as_python(), namespace)  # our own generated text
    by_python = Schedule(original)
    namespace["apply_trace"](by_python)
    assert_structural_equal(by_python.mod, sch.mod)


def assert_error_keeps_state(sch: Schedule, call, error_type, match: str | None = None):
    """`call()` raises `error_type` and the schedule (IR, trace, step) is exactly as before."""
    mod, trace, steps = sch.mod, sch.trace, len(sch.history)
    with pytest.raises(error_type, match=match) as info:
        call()
    assert sch.mod is mod and sch.trace is trace and len(sch.history) == steps
    return info.value


def assert_script_equal(func, text: str) -> None:
    """`func` equals the PrimFunc written as TVMScript text."""
    expected = from_source(text)
    if not isinstance(expected, schedlab.PrimFunc):
        expected = expected[next(iter(expected))]
    assert_structural_equal(func.body, expected.body, map_free_vars=True)
