"""Print/parse round trip for every registry workload (issue 2's "done when" item)."""

import pytest

from schedlab import workloads
from schedlab.ir import assert_structural_equal
from schedlab.script import from_source


@pytest.mark.parametrize("name", workloads.names())
def test_workload_roundtrip(name):
    func, _ = workloads.get(name)
    text = func.script()
    parsed = from_source(text)
    assert_structural_equal(func, parsed)
    assert parsed.script() == text


@pytest.mark.parametrize("name", workloads.names())
def test_lowered_workload_roundtrip(name):
    """The lowered form (flat buffers, Allocate, hoisted inits) prints and parses back too."""
    from schedlab.transform import lower

    lowered = lower(workloads.get(name)[0])
    assert_structural_equal(lowered, from_source(lowered.script()))
