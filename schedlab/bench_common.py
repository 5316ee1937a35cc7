"""What the goal benchmarks (`schedlab bench-cpu`, `schedlab bench-tune`) share: a result row
with its goal, the summary table, the BLAS note, and the onnx package's light models with
random weights."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class CaseResult:
    """One benchmark case: its ratio to the reference (>1: schedlab is faster) and goal."""

    name: str
    ratio: float
    goal: float
    tuning_s: float
    detail: str

    @property
    def met(self) -> bool:
        return self.ratio >= self.goal


def blas_note() -> None:
    blas = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if blas:
        print(f"note: {blas} is set and slows OpenBLAS; unset it for this command to compare")


def randomized_weights(source: Path, dest: Path, seed: int = 0) -> Path:
    """A copy of the model with random weights that keep activations alive (the onnx package's
    light models build every weight with ConstantOfShape, one value per tensor, and random
    weights of the wrong scale overflow or die out: either hides wrong results behind equal
    outputs).

    Each float weight, whether an initializer or a ConstantOfShape of a constant shape, gets
    values by its role: conv/gemm/matmul weights He-normal (std sqrt(2 / fan_in)), their biases
    and batch-norm shifts and means small, batch-norm variances in [0.5, 1.5] and scales in
    [0.1, 0.4]."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    rng = np.random.default_rng(seed)
    inits = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    roles = _weight_roles(graph)
    fresh: dict[str, np.ndarray] = {}
    kept_nodes = []
    for node in graph.node:
        shape_name = node.input[0] if node.op_type == "ConstantOfShape" and node.input else None
        if shape_name in inits and node.output[0] in roles:
            value = _fill_value(node)
            if value.dtype.kind == "f":
                shape = tuple(int(d) for d in inits[shape_name])
                fresh[node.output[0]] = _random_weight(rng, shape, value.dtype,
                                                       roles[node.output[0]])  # fmt: skip
                continue
        kept_nodes.append(node)
    for name, array in inits.items():
        if array.dtype.kind == "f" and name in roles:
            fresh[name] = _random_weight(rng, array.shape, array.dtype, roles[name])
    del graph.node[:]
    graph.node.extend(kept_nodes)
    used = {name for node in kept_nodes for name in node.input} | {o.name for o in graph.output}
    # the shapes the removed ConstantOfShape nodes read are used by nothing now
    kept_inits = [i for i in graph.initializer if i.name not in fresh and i.name in used]
    kept_names = {i.name for i in kept_inits} | set(fresh)
    dropped = {i.name for i in graph.initializer} - kept_names
    kept_inputs = [i for i in graph.input if i.name not in dropped]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    del graph.initializer[:]
    graph.initializer.extend(kept_inits)
    graph.initializer.extend(numpy_helper.from_array(a, name) for name, a in fresh.items())
    if model.ir_version < 4:  # before IR 4, every initializer is also a graph input
        listed = {inp.name for inp in graph.input}
        graph.input.extend(
            onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype),
                                               a.shape)
            for name, a in fresh.items() if name not in listed
        )  # fmt: skip
    dest.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dest))
    return dest


# (op type, input position) -> role of the weight found there
_ROLES = {
    ("Conv", 1): "weight", ("Conv", 2): "bias", ("Gemm", 1): "weight", ("Gemm", 2): "bias",
    ("MatMul", 1): "weight", ("BatchNormalization", 1): "gamma",
    ("BatchNormalization", 2): "bias", ("BatchNormalization", 3): "bias",
    ("BatchNormalization", 4): "scale",
}  # fmt: skip


def _weight_roles(graph) -> dict[str, tuple[str, str, bool]]:
    """{tensor name: (role, op type, transposed)} for the tensors some node reads as a weight."""
    roles = {}
    for node in graph.node:
        trans_b = any(a.name == "transB" and a.i for a in node.attribute)
        for position, name in enumerate(node.input):
            role = _ROLES.get((node.op_type, position))
            if role is not None:
                roles[name] = (role, node.op_type, trans_b)
    return roles


def _fill_value(node) -> np.ndarray:
    from onnx import numpy_helper

    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
    return np.zeros(1, "float32")  # ConstantOfShape's default: float 0


def _random_weight(rng, shape, dtype, role: tuple[str, str, bool]) -> np.ndarray:
    kind, op, trans_b = role
    if kind == "weight":
        if op == "Conv" or (op == "Gemm" and trans_b):
            fan_in = int(np.prod(shape[1:]))
        else:
            fan_in = int(shape[0])
        values = rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))
    elif kind == "scale":
        values = rng.uniform(0.5, 1.5, shape)
    elif kind == "gamma":  # small: a residual network's sums stay in range, its softmax soft
        values = rng.uniform(0.1, 0.4, shape)
    else:
        values = rng.standard_normal(shape) * 0.1
    return values.astype(dtype)


def model_path(name: str) -> Path:
    """The onnx package's copy of a model of its backend test data ("light" set)."""
    import onnx

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"{name}.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"{name}: not found at {path} (is the onnx package installed?)")
    return path


def print_results(results: list[CaseResult]) -> None:
    print("\ncase               ratio   goal   result  detail")
    for r in results:
        print(f"{r.name:<18} {r.ratio:5.2f}x {r.goal:5.2f}x  {'met' if r.met else 'missed':<6}  "
              f"{r.detail}")  # fmt: skip
    print("(ratio = reference median / schedlab median, measured interleaved; >1 is faster)")
