"""Test-wide settings: names for the doctests in schedlab's docstrings (the primitives'
before/after examples) and the hypothesis profile for CI."""

import os

import numpy as np
import pytest
from hypothesis import settings

# CI runs the property tests on a fixed, reproducible set of examples (a red CI then always means
# a real regression, and reruns show the same case); local runs and `make soak` explore fresh ones.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    import schedlab
    from schedlab import te, tir, workloads
    from schedlab.schedule import Schedule
    from schedlab.script import tir as T

    doctest_namespace.update(
        np=np, schedlab=schedlab, te=te, tir=tir, workloads=workloads, Schedule=Schedule, T=T
    )
