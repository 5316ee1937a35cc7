"""Every notebook under notebooks/ runs top to bottom (code cells in one namespace, in order),
so the tutorials never drift from the API."""

import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    notebook = json.loads(path.read_text())
    namespace = {"__name__": "__notebook__"}
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        code = compile(source, f"{path.name}[cell {index}]", "exec")
        exec(code, namespace)  # our own tutorial code, checked in this repository
