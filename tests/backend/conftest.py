"""Backend tests build into a private cache directory (never ~/.cache/schedlab)."""

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory):
    previous = os.environ.get("SCHEDLAB_CACHE_DIR")
    os.environ["SCHEDLAB_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel-cache"))
    yield
    if previous is None:
        os.environ.pop("SCHEDLAB_CACHE_DIR", None)
    else:
        os.environ["SCHEDLAB_CACHE_DIR"] = previous
