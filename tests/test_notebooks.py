"""Every notebook under notebooks/ runs top to bottom in a real Jupyter kernel (nbclient,
headless), so the tutorials never drift from the API; the explorer notebook's widget state is
saved in the executed notebook, as JupyterLab would save it."""

from __future__ import annotations

import json
import pathlib

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def execute(path: pathlib.Path, out: pathlib.Path):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )  # fmt: skip
    client.execute()  # store_widget_state is on by default
    nbformat.write(notebook, out)
    return notebook


def assert_no_errors(notebook) -> None:
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]  # fmt: skip
    assert not errors, errors


EXPLORER = "02_explorer.ipynb"  # run (once) by the widget-state test below


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p.name != EXPLORER],
                         ids=lambda p: p.name)  # fmt: skip
def test_notebook_runs(path, tmp_path):
    assert_no_errors(execute(path, tmp_path / path.name))


def test_explorer_notebook_runs_and_saves_the_widget_state(tmp_path):
    path = next(p for p in NOTEBOOKS if p.name == EXPLORER)
    out = tmp_path / path.name
    notebook = execute(path, out)
    assert_no_errors(notebook)
    saved = nbformat.read(out, as_version=4)
    models = saved.metadata["widgets"][WIDGET_STATE]["state"]
    explorers = [
        m["state"] for m in models.values()
        if isinstance(m["state"].get("state"), dict) and "tree" in m["state"]["state"]
    ]  # fmt: skip
    assert explorers, "no explorer widget in the saved widget state"
    # the first explorer holds the schedule the notebook built, and its own front-end code
    state = max(explorers, key=lambda m: len(m["state"]["steps"]))
    labels = [s["label"] for s in state["state"]["steps"]]
    assert len(labels) >= 5 and any("split" in label for label in labels)
    assert "export default" in state["_esm"]  # a saved notebook carries the component
    # the measured step (before the notebook forked a branch) keeps its measurement
    measured = [p for m in explorers for p in m["state"]["latency"] if p["measured"]]
    assert measured and measured[0]["measured"] > 0
    assert any(m["model_name"] == "BokehModel" for m in models.values())
    # the outputs: the widget view and the printed error of the illegal parallel
    views = [o for c in notebook.cells for o in c.get("outputs", [])
             if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]  # fmt: skip
    assert views
    printed = "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", []))
    assert "parallel" in printed and "def apply_trace(sch)" in printed
    json.dumps(saved.metadata["widgets"])
