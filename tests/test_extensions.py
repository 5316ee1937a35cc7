"""The extension under extensions/ plugs in through the public entry point and works end to end
(interpreted and compiled against its numpy references)."""

import importlib.metadata

import numpy as np
import pytest

import schedlab
from schedlab import workloads

POOL = ("max_pool2d_nchw", "avg_pool2d_nchw")


def _installed() -> bool:
    entries = importlib.metadata.entry_points(group=workloads.registry.ENTRY_POINT_GROUP)
    return any(entry.value == "schedlab_pool" for entry in entries)


def test_extension_is_installed_and_discovered():
    # `make test` installs extensions/schedlab_pool; the registry finds it by entry point
    assert _installed(), "pip install -e extensions/schedlab_pool (make test does)"
    assert set(POOL) <= set(workloads.names())
    assert not set(POOL) & set(workloads.names(include_plugins=False))


@pytest.mark.parametrize("name", POOL)
@pytest.mark.parametrize("sizes", [dict(C=3, H=9, W=11, kernel=3, stride=2), dict(H=7, W=6)])
def test_pool_workloads_match_numpy(name, sizes):
    func, reference = workloads.get(name, **sizes)
    args = workloads.make_args(func, seed=5)
    expected = reference(args[0])
    schedlab.interpret(func, *args)
    np.testing.assert_allclose(args[1], expected, rtol=1e-5, atol=1e-6)
    out = np.zeros_like(args[1])
    schedlab.build(func)(args[0], out)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_broken_extension_is_named(monkeypatch):
    class Broken:
        name, value = "broken", "no_such_module_xyz"

        def load(self):
            raise ModuleNotFoundError("No module named 'no_such_module_xyz'")

    monkeypatch.setattr(workloads.registry, "_plugins_loaded", False)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [Broken()])
    with pytest.raises(ImportError, match="extension 'broken'"):
        workloads.load_plugins()
