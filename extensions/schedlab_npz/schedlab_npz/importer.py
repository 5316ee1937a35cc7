"""The graph JSON and its constants as a schedlab graph module (relax.BlockBuilder)."""

from __future__ import annotations

from schedlab import relax


def import_graph(graph: dict, constants: dict, shapes: dict):
    from . import NpzGraphError

    if not isinstance(graph, dict) or not {"inputs", "nodes", "outputs"} <= set(graph):
        raise NpzGraphError('the graph must be an object with "inputs", "nodes" and "outputs"')
    unknown = sorted(set(shapes) - {i.get("name") for i in graph["inputs"]})
    if unknown:
        raise NpzGraphError(f"shape_dict names {unknown}, which are not inputs of the graph")
    params = [_input(spec, shapes) for spec in graph["inputs"]]
    values = {p.name_hint: p for p in params}
    values.update({name: relax.const(array) for name, array in constants.items()})
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            for index, node in enumerate(graph["nodes"]):
                values[_output(node, index)] = bb.emit(_call(node, index, values))
            outs = [_value(values, name, "outputs") for name in graph["outputs"]]
            out = bb.emit_output(outs[0] if len(outs) == 1 else relax.Tuple(outs))
        bb.emit_func_output(out)
    return bb.get()


def _input(spec: dict, shapes: dict):
    from . import NpzGraphError

    try:
        name, shape, dtype = spec["name"], spec["shape"], spec.get("dtype", "float32")
    except (KeyError, TypeError):
        raise NpzGraphError(f'an input needs "name" and "shape", got {spec!r}') from None
    shape = shapes.get(name, shape)
    return relax.Var(name, relax.TensorStructInfo(tuple(int(d) for d in shape), dtype))


def _output(node: dict, index: int) -> str:
    from . import NpzGraphError

    name = node.get("output") if isinstance(node, dict) else None
    if not isinstance(name, str) or not name:
        raise NpzGraphError(f'node {index}: needs an "output" name, got {node!r}')
    return name


def _value(values: dict, name, where: str):
    from . import NpzGraphError

    if name not in values:
        raise NpzGraphError(f"{where}: {name!r} is neither an input, a constant nor the output "
                            f"of an earlier node; known: {', '.join(values)}")  # fmt: skip
    return values[name]


def _call(node: dict, index: int, values: dict):
    from schedlab.relax.op import get_op, list_ops

    from . import NpzGraphError

    op = f"relax.{node.get('op')}"
    try:
        get_op(op)
    except KeyError:
        ops = ", ".join(name.removeprefix("relax.") for name in list_ops())
        raise NpzGraphError(f"node {index} ({node.get('output')}): unknown op "
                            f"{node.get('op')!r}; the ops: {ops}") from None  # fmt: skip
    args = [_value(values, name, f"node {index} ({node['output']})")
            for name in node.get("inputs", [])]  # fmt: skip
    try:
        return relax.call(op, *args, **node.get("attrs", {}))
    except (TypeError, ValueError) as err:
        raise NpzGraphError(f"node {index} ({node['output']}, {node['op']}): {err}") from None
