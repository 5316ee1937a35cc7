"""TVM's JSON node graph (`tvm.ir.save_json`), for the few objects traces hold: index maps.

TVM writes an `IndexMap` in trace JSON (TransformLayout, TransformBlockLayout) as the text of
its node graph: `{"root_index": r, "nodes": [...]}`, where each node is
`{"type": key, "data": ...}` and references are node indices:

    {"type": "ir.Var", "data": {"span": 0, "ty": 1, "name": 2}}     (ir.PrimType, ffi.String)
    {"type": "ir.IntImm", "data": {"span": 0, "ty": 1, "value": 7}}  (value: an "int" node)
    {"type": "ir.FloatImm", "data": {"span": 0, "ty": 9, "value": 0.5}}  (value inline)
    {"type": "prim.FloorDiv", "data": {"span": 0, "ty": 1, "a": 3, "b": 8}}
    {"type": "tirx.IndexMap", "data": {"initial_indices": 6, "final_indices": 9,
                                       "inverse_index_map": 0}}       0 -> {"type": "None"}

This writes TVM 0.27's graphs and reads those of 0.25 and 0.26 too (their type keys are
`tirx.FloorDiv`, `tirx.Var`; their integer values inline). Only integer index arithmetic is
written and read (variables, constants, + - * floordiv floormod truncdiv truncmod min max,
comparisons, and/or/not, select); anything else raises TVMExportError / TVMImportError naming
the node. A workload's module graph is only searched for its function names
(`function_names`), never rebuilt.
"""

from __future__ import annotations

import base64
import json

from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType, bool_
from schedlab.schedule.index_map import IndexMap, IndexMapError

from .errors import TVMExportError, TVMImportError

_BINARY = {
    E.Add: "prim.Add", E.Sub: "prim.Sub", E.Mul: "prim.Mul", E.Div: "prim.Div",
    E.Mod: "prim.Mod", E.FloorDiv: "prim.FloorDiv", E.FloorMod: "prim.FloorMod",
    E.Min: "prim.Min", E.Max: "prim.Max", E.EQ: "prim.EQ", E.NE: "prim.NE", E.LT: "prim.LT",
    E.LE: "prim.LE", E.GT: "prim.GT", E.GE: "prim.GE", E.And: "prim.And", E.Or: "prim.Or",
}  # fmt: skip
_BINARY_BY_KEY = {key: cls for cls, key in _BINARY.items()}


class _Writer:
    """Appends nodes, sharing one node per type, string, variable and constant."""

    def __init__(self):
        self.nodes: list[dict] = [{"type": "None"}]
        self.memo: dict = {}

    def add(self, node: dict, memo_key=None) -> int:
        if memo_key is not None and memo_key in self.memo:
            return self.memo[memo_key]
        self.nodes.append(node)
        index = len(self.nodes) - 1
        if memo_key is not None:
            self.memo[memo_key] = index
        return index

    def prim_type(self, dtype: DataType) -> int:
        data = {"span": 0, "dtype": str(dtype)}
        return self.add({"type": "ir.PrimType", "data": data}, ("type", str(dtype)))

    def array(self, items: list[int]) -> int:
        return self.add({"type": "ffi.Array", "data": items})

    def expr(self, expr) -> int:
        if isinstance(expr, E.Var):
            name = self.add({"type": "ffi.String", "data": expr.name})
            data = {"span": 0, "ty": self.prim_type(expr.dtype), "name": name}
            return self.add({"type": "ir.Var", "data": data}, ("var", id(expr)))
        if isinstance(expr, E.IntImm):  # the value is a reference to an "int" node
            value = self.add({"type": "int", "data": int(expr.value)})
            data = {"span": 0, "ty": self.prim_type(expr.dtype), "value": value}
            return self.add({"type": "ir.IntImm", "data": data})
        if isinstance(expr, E.FloatImm):  # the value is inline
            data = {"span": 0, "ty": self.prim_type(expr.dtype), "value": float(expr.value)}
            return self.add({"type": "ir.FloatImm", "data": data})
        key = _BINARY.get(type(expr))
        if key is not None:
            a, b = self.expr(expr.a), self.expr(expr.b)
            data = {"span": 0, "ty": self.prim_type(expr.dtype), "a": a, "b": b}
            return self.add({"type": key, "data": data})
        if isinstance(expr, E.Not):
            data = {"span": 0, "ty": self.prim_type(expr.dtype), "a": self.expr(expr.a)}
            return self.add({"type": "prim.Not", "data": data})
        if isinstance(expr, E.Select):
            parts = [self.expr(p) for p in (expr.condition, expr.true_value, expr.false_value)]
            data = {"span": 0, "ty": self.prim_type(expr.dtype)}
            data.update(zip(("condition", "true_value", "false_value"), parts))
            return self.add({"type": "prim.Select", "data": data})
        raise TVMExportError(
            f"an index map holding a {type(expr).__name__} has no TVM JSON form here "
            "(integer arithmetic, comparisons and select only)"
        )

    def text(self, root: int) -> str:
        return json.dumps({"root_index": root, "nodes": self.nodes}, indent=2)


def index_map_to_graph(index_map: IndexMap) -> str:
    """`index_map` as TVM's JSON graph text (what TVM's trace JSON holds)."""
    writer = _Writer()
    initial = writer.array([writer.expr(v) for v in index_map.initial_indices])
    final = writer.array([writer.expr(v) for v in index_map.final_indices])
    data = {"initial_indices": initial, "final_indices": final, "inverse_index_map": 0}
    return writer.text(writer.add({"type": "tirx.IndexMap", "data": data}))


def constant_map_to_graph(value, ndim: int, dtype: DataType) -> str:
    """TVM's form of a `pad_value`: an index map from the `ndim` new indices to the constant."""
    from schedlab.ir.op import const

    writer = _Writer()
    names = [E.Var(f"i{k}", DataType("int32")) for k in range(ndim)]
    initial = writer.array([writer.expr(v) for v in names])
    final = writer.array([writer.expr(const(value, dtype))])
    data = {"initial_indices": initial, "final_indices": final, "inverse_index_map": 0}
    return writer.text(writer.add({"type": "tirx.IndexMap", "data": data}))


class _Reader:
    def __init__(self, text, what: str):
        self.what = what
        try:
            graph = json.loads(text) if isinstance(text, str) else text
            self.nodes = graph["nodes"]
            self.root = graph["root_index"]
        except (ValueError, TypeError, KeyError) as err:
            raise TVMImportError(f"{what}: not a TVM JSON node graph ({err})") from None
        self.memo: dict[int, object] = {}

    def node(self, index: int) -> dict:
        if not (isinstance(index, int) and 0 <= index < len(self.nodes)):
            raise TVMImportError(f"{self.what}: node reference {index!r} is out of range")
        node = self.nodes[index]
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise TVMImportError(f"{self.what}: node {index} is malformed: {node!r}")
        return node

    def data(self, index: int, kind: str):
        node = self.node(index)
        if node["type"] != kind:
            raise TVMImportError(f"{self.what}: node {index} is a {node['type']}, expected {kind}")
        return node.get("data")

    def dtype(self, data: dict) -> DataType:
        """The dtype of an expression node: its `ty` (TVM 0.26+) or `dtype` field (0.25)."""
        if "ty" in data:
            return DataType(self.data(data["ty"], "ir.PrimType")["dtype"])
        return DataType(data["dtype"])

    def int_value(self, value) -> int:
        """An IntImm's value: a reference to an "int" node (TVM 0.27) or inline (earlier)."""
        if isinstance(value, int) and 0 <= value < len(self.nodes):
            node = self.nodes[value]
            if isinstance(node, dict) and node.get("type") == "int":
                return int(node["data"])
        return int(value)

    def expr(self, index: int):
        if index not in self.memo:
            self.memo[index] = self._expr(index)
        return self.memo[index]

    def _expr(self, index: int):
        node = self.node(index)
        kind, data = _canonical(node["type"]), node.get("data") or {}
        try:
            if kind == "ir.Var":
                return E.Var(self.data(data["name"], "ffi.String"), self.dtype(data))
            if kind == "ir.IntImm":
                return E.IntImm(self.dtype(data), self.int_value(data["value"]))
            if kind == "ir.FloatImm":
                return E.FloatImm(self.dtype(data), float(data["value"]))
            if kind in _BINARY_BY_KEY:
                return _BINARY_BY_KEY[kind](self.expr(data["a"]), self.expr(data["b"]))
            if kind == "prim.Not":
                return E.Not(self.expr(data["a"]))
            if kind == "prim.Select":
                parts = (data["condition"], data["true_value"], data["false_value"])
                return E.Select(*(self.expr(p) for p in parts))
        except (KeyError, TypeError, ValueError) as err:
            raise TVMImportError(
                f"{self.what}: node {index} ({kind}) is malformed ({err})"
            ) from None
        raise TVMImportError(
            f"{self.what}: node {index} is a {kind}, which schedlab does not read in index maps"
        )

    def array(self, index: int) -> list:
        items = self.data(index, "ffi.Array")
        if not isinstance(items, list):
            raise TVMImportError(f"{self.what}: node {index} is not an array")
        return [self.expr(i) for i in items]

    def index_map(self) -> IndexMap:
        data = self.data(self.root, "tirx.IndexMap")
        try:
            initial = self.array(data["initial_indices"])
            final = self.array(data["final_indices"])
            return IndexMap(initial, final)
        except (KeyError, TypeError) as err:
            raise TVMImportError(f"{self.what}: malformed IndexMap node ({err})") from None
        except IndexMapError as err:
            raise TVMImportError(f"{self.what}: {err}") from None


def _canonical(kind: str) -> str:
    """TVM 0.27's type key for the same node of earlier versions (0.26 writes `tirx.FloorDiv`,
    0.25 also `tirx.Var`)."""
    for old in ("tirx.", "tir."):
        if kind.startswith(old):
            rest = kind[len(old) :]
            return "ir.Var" if rest == "Var" else f"prim.{rest}"
    return kind


def index_map_from_graph(text, what: str = "index map") -> IndexMap:
    """The IndexMap in TVM's JSON graph text."""
    return _Reader(text, what).index_map()


def constant_from_graph(text, what: str = "pad_value"):
    """The constant of a `pad_value` index map (a Python number)."""
    reader = _Reader(text, what)
    data = reader.data(reader.root, "tirx.IndexMap")
    try:
        final = reader.array(data["final_indices"])
    except (KeyError, TypeError) as err:
        raise TVMImportError(f"{what}: malformed IndexMap node ({err})") from None
    value = final[0] if len(final) == 1 else None
    if not isinstance(value, (E.IntImm, E.FloatImm)) or value.dtype == bool_:
        raise TVMImportError(f"{what}: only a constant pad value is read, got {final}")
    return value.value


def function_names(workload_b64: str) -> list[str]:
    """The function names of a MetaSchedule workload (base64 of an 8-byte length and the
    module's JSON graph), read without rebuilding the module."""
    try:
        raw = base64.b64decode(workload_b64, validate=True)
        length = int.from_bytes(raw[:8], "little")
        graph = json.loads(raw[8 : 8 + length].decode("utf-8"))
        nodes = graph["nodes"]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as err:
        raise TVMImportError(f"workload: not a base64 TVM module graph ({err})") from None
    names = []
    for node in nodes:
        if isinstance(node, dict) and node.get("type") == "ir.GlobalVar":
            ref = (node.get("data") or {}).get("name_hint")
            if isinstance(ref, int) and 0 <= ref < len(nodes):
                names.append(nodes[ref].get("data"))
    return [n for n in names if isinstance(n, str)]
