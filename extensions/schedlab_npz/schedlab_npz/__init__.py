"""Models as one numpy .npz file, imported into schedlab's graph IR.

The file holds the graph as JSON text under the key "__graph__" and every constant (weights,
biases) as an array under its own name:

    {"inputs": [{"name": "x", "shape": [4, 16], "dtype": "float32"}],
     "nodes": [{"op": "matmul", "inputs": ["x", "w"], "output": "h"},
               {"op": "nn.relu", "inputs": ["h"], "output": "y"},
               {"op": "nn.softmax", "inputs": ["y"], "attrs": {"axis": -1}, "output": "p"}],
     "outputs": ["p"]}

A node's "op" is any schedlab graph operator without its "relax." prefix (`matmul`, `add`,
`nn.conv2d`, `permute_dims`, ...: `schedlab.relax.op.list_ops()`), its "attrs" that operator's
attributes. `save(path, ...)` writes such a file; once this package is installed,
`schedlab.relax.frontend.from_file("model.npz")` and `schedlab.explore("model.npz")` read it.
Reading never unpickles: arrays load with allow_pickle=False, the graph is parsed as JSON.
"""

from __future__ import annotations

import json
import os

import numpy as np

__version__ = "0.1.0"
GRAPH_KEY = "__graph__"


class NpzGraphError(ValueError):
    """A malformed graph file: the message names the node or field and what was expected."""


def save(path, inputs: dict, nodes: list[dict], outputs: list[str], constants: dict) -> str:
    """Write a model: `inputs` {name: (shape, dtype)}, `nodes` as in the module docstring,
    `outputs` the names returned, `constants` {name: array}. Returns the path."""
    graph = {
        "inputs": [{"name": n, "shape": list(s), "dtype": str(d)} for n, (s, d) in inputs.items()],
        "nodes": nodes,
        "outputs": list(outputs),
    }
    if GRAPH_KEY in constants:
        raise NpzGraphError(f"save: {GRAPH_KEY!r} is reserved for the graph")
    arrays = {name: np.asarray(value) for name, value in constants.items()}
    with open(path, "wb") as file:
        np.savez(file, **{GRAPH_KEY: np.array(json.dumps(graph))}, **arrays)
    return os.fspath(path)


def load(path, shape_dict=None):
    """Import the model file at `path` as an IRModule whose "main" takes the graph inputs.
    `shape_dict` {input name: shape} replaces the shapes the file records."""
    from .importer import import_graph

    with np.load(path, allow_pickle=False) as data:
        if GRAPH_KEY not in data.files:
            raise NpzGraphError(f"{os.fspath(path)}: no {GRAPH_KEY!r} entry; is it a model "
                                "written by schedlab_npz.save?")  # fmt: skip
        try:
            graph = json.loads(str(data[GRAPH_KEY]))
        except json.JSONDecodeError as err:
            raise NpzGraphError(f"{os.fspath(path)}: the graph is not JSON: {err}") from None
        constants = {name: data[name] for name in data.files if name != GRAPH_KEY}
    return import_graph(graph, constants, dict(shape_dict or {}))


def register() -> None:
    """Entry point of group `schedlab.frontends`."""
    from schedlab.relax.frontend import register_frontend

    doc = "numpy .npz graphs (schedlab_npz: weights as arrays, graph as JSON)"
    register_frontend("npz", load, suffixes=(".npz",), doc=doc)
