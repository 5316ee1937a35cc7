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
