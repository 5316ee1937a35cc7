"""Names available to the doctests in schedlab's docstrings (primitives' before/after examples)."""

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    import schedlab
    from schedlab import te, tir, workloads
    from schedlab.schedule import Schedule
    from schedlab.script import tir as T

    doctest_namespace.update(
        np=np, schedlab=schedlab, te=te, tir=tir, workloads=workloads, Schedule=Schedule, T=T
    )
