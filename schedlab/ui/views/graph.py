"""Graphviz drawings (inline SVG) of a graph function and of one kernel's dataflow.

    module_graph_svg(mod)        # main's bindings: tensors -> ops / PrimFunc calls -> output
    primfunc_graph_svg(func)     # buffers -> blocks -> buffers (reads / writes)

Layout runs in-process through pygraphviz (its wheel bundles Graphviz; there is no `dot`
executable to shell out to). Node ids carry identity into the browser: a `<g class="node">`
with id "fn:NAME" is a call of PrimFunc NAME, "block:UID" is the block with that uid.

Graphviz keeps process-wide state (cgraph's attribute tables, the layout engines) and is not
thread-safe, while `schedlab serve` renders sessions' graphs on a thread pool: one drawing at a
time, from the first node to the freed graph (two at once aborted the server in cgraph).
"""

from __future__ import annotations

import functools
import threading

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.functor import pre_order_visit
from schedlab.ir.stmt import Block, BlockRealize, IterType
from schedlab.relax import expr as X
from schedlab.relax.struct_info import TensorStructInfo

CALL_TIR = "relax.call_tir"

# Fill colours by node kind.
COLORS = {
    "param": "#cfe3ff",  # function inputs
    "const": "#eeeeee",  # weights and other constants
    "prim": "#ffe2b0",  # calls of a PrimFunc (clickable)
    "op": "#d9f0d3",  # graph operators before lowering
    "value": "#f5f5f5",  # shapes, scalars, tuple fields
    "output": "#f7c8c8",  # the function's result
    "block": "#ffe2b0",  # blocks of a kernel (clickable)
    "buffer_in": "#cfe3ff",
    "buffer_out": "#f7c8c8",
    "buffer_local": "#eeeeee",
}
_GRAPH_ATTRS = {"rankdir": "TB", "nodesep": "0.3", "ranksep": "0.35", "bgcolor": "transparent"}
_NODE_ATTRS = {"fontname": "Helvetica", "fontsize": "12", "style": "filled", "penwidth": "1"}
_EDGE_ATTRS = {"color": "#555555", "arrowsize": "0.7"}
_GRAPHVIZ = threading.Lock()


def _one_at_a_time(draw):
    """Hold the Graphviz lock for the whole of `draw` (building, layout, freeing)."""

    @functools.wraps(draw)
    def locked(*args, **kwargs):
        with _GRAPHVIZ:
            return draw(*args, **kwargs)

    return locked


def _agraph(name: str):
    try:
        import pygraphviz
    except ImportError as err:
        raise ImportError(
            "the graph view needs pygraphviz: install the explorer extra, "
            "pip install 'schedlab[ui]'"
        ) from err
    graph = pygraphviz.AGraph(directed=True, strict=False, name=name)
    graph.graph_attr.update(_GRAPH_ATTRS)
    graph.node_attr.update(_NODE_ATTRS)
    graph.edge_attr.update(_EDGE_ATTRS)
    return graph


_DRAWN: dict[str, str] = {}  # DOT text -> its SVG (most schedule steps leave the graph as it
_DRAWN_MAX = 256  # was: a split or a reorder changes no block or buffer), for all sessions


def _render(graph) -> str:
    """Lay out and draw in memory; the SVG without Graphviz's XML prolog and DOCTYPE (inline
    SVG in HTML, and Panel's SVG pane, want it to start at "<svg"). A graph drawn before (the
    same DOT text) is not laid out again. Called under the Graphviz lock."""
    try:
        dot = graph.string()
        svg = _DRAWN.get(dot)
        if svg is None:
            svg = graph.draw(format="svg", prog="dot").decode("utf-8")
            svg = svg[svg.index("<svg") :]
            if len(_DRAWN) >= _DRAWN_MAX:
                _DRAWN.clear()
            _DRAWN[dot] = svg
    finally:
        graph.close()  # now, under the lock, not whenever the garbage collector gets to it
    return svg


def _shape_text(sinfo) -> str:
    if isinstance(sinfo, TensorStructInfo):
        dims = "?" if sinfo.shape is None else ", ".join(str(d) for d in sinfo.shape)
        return f"({dims}) {sinfo.dtype}"
    return str(sinfo)


class _ModuleGraph:
    """Builds the Graphviz graph of one graph function, one binding at a time."""

    def __init__(self, mod: IRModule, func: X.Function, name: str):
        self.mod = mod
        self.graph = _agraph(name)
        self.count = 0
        self.env: dict[int, list[str]] = {}  # id(Var) -> the graph nodes that produce it
        for param in func.params:
            node = self._node("param", f"param:{param.name_hint}",
                              f"{param.name_hint}\n{_shape_text(param.struct_info_)}")  # fmt: skip
            self.env[id(param)] = [node]
        body = func.body
        blocks = body.blocks if isinstance(body, X.SeqExpr) else ()
        result = body.body if isinstance(body, X.SeqExpr) else body
        for block in blocks:
            for binding in block.bindings:
                self._bind(binding)
        out = self._node("output", "output", f"output\n{_shape_text(result.struct_info)}")
        for source in self._sources(result):
            self.graph.add_edge(source, out)

    def _node(self, kind: str, node_id: str, label: str, **attrs) -> str:
        name = f"n{self.count}"
        self.count += 1
        shape = "box" if kind in ("prim", "op") else "ellipse"
        if kind == "output":
            shape = "doubleoctagon"
        self.graph.add_node(name, id=node_id, label=label, shape=shape,
                            fillcolor=COLORS[kind], **attrs)  # fmt: skip
        return name

    def _bind(self, binding) -> None:
        var, value = binding.var, binding.value
        if isinstance(binding, X.MatchCast):
            node = self._node("op", f"op:{var.name_hint}", f"match_cast\n{binding.struct_info}")
            self._edges(value, node)
            self.env[id(var)] = [node]
        elif isinstance(value, X.Var | X.Tuple):
            # Aliases and tuples are transparent: edges go straight to what produced them.
            self.env[id(var)] = self._sources(value)
        else:
            self.env[id(var)] = self._sources(value, var)

    def _sources(self, expr, var=None) -> list[str]:
        """The graph nodes whose values `expr` is made of (creating nodes for calls and
        constants; `var`, when given, is the variable the value is bound to)."""
        if isinstance(expr, X.Var):
            if id(expr) not in self.env:  # a free variable: draw it as an input
                self.env[id(expr)] = [self._node("param", f"param:{expr.name_hint}",
                                                 expr.name_hint)]  # fmt: skip
            return self.env[id(expr)]
        if isinstance(expr, X.Tuple):
            return [node for field in expr.fields for node in self._sources(field)]
        if isinstance(expr, X.TupleGetItem):
            fields = self._sources(expr.tuple_value)
            if isinstance(expr.tuple_value, X.Tuple | X.Var) and expr.index < len(fields) > 1:
                return [fields[expr.index]]
            node = self._node("value", f"value:{self.count}", f"[{expr.index}]")
            for source in fields:
                self.graph.add_edge(source, node)
            return [node]
        if isinstance(expr, X.Constant):
            data = expr.data
            text = f"{data.item():g}" if data.size == 1 else _shape_text(expr.struct_info)
            return [self._node("const", f"const:{self.count}", f"const {text}", fontsize="10")]
        if isinstance(expr, X.Call):
            return [self._call(expr, var)]
        return [self._node("value", f"value:{self.count}", type(expr).__name__)]

    def _call(self, call: X.Call, var) -> str:
        name = var.name_hint if var is not None else "value"
        shape = _shape_text(var.struct_info if var is not None else call.struct_info)
        args = call.args
        callee = args[0] if call.op == CALL_TIR and args else None
        prim = callee.name_hint if isinstance(callee, X.GlobalVar) else None
        if prim is not None and isinstance(self.mod.get(prim), PrimFunc):
            node = self._node("prim", f"fn:{prim}", f"{prim}\n{shape}",
                              tooltip=f"{name} = call_tir {prim}")  # fmt: skip
            args = args[1:]
        else:
            op = call.op if isinstance(call.op, str) else call.op.name_hint
            node = self._node("op", f"op:{name}", f"{op.removeprefix('relax.')}\n{shape}")
        self._edges(X.Tuple(args), node)
        return node

    def _edges(self, expr, target: str) -> None:
        for source in self._sources(expr):
            self.graph.add_edge(source, target)


@_one_at_a_time
def module_graph_svg(mod: IRModule, func_name: str = "main") -> str:
    """The dataflow of graph function `func_name` as SVG: parameters and constants (tensor
    nodes), one node per binding (PrimFunc calls: id "fn:<prim name>"; other calls: the op
    name), edges from the values each uses, and the function's output."""
    if not isinstance(mod, IRModule):
        raise TypeError(f"module_graph_svg: expected an IRModule, got {type(mod).__name__}")
    func = mod.get(func_name)
    if not isinstance(func, X.Function):
        graph_funcs = [name for name, f in mod.items() if isinstance(f, X.Function)]
        raise ValueError(
            f"module_graph_svg: no graph function {func_name!r}; graph functions: {graph_funcs}"
        )
    return _render(_ModuleGraph(mod, func, func_name).graph)


# TVMScript's axis letters (T.axis.remap("SSR", ...)).
_ITER_LETTER = {
    IterType.SPATIAL: "S", IterType.REDUCE: "R", IterType.SCAN: "C", IterType.OPAQUE: "O",
}  # fmt: skip


def _blocks(func: PrimFunc) -> tuple[Block | None, list[Block]]:
    """The implicit root block (None when the body has none) and the other blocks, preorder."""
    root = None
    if isinstance(func.body, BlockRealize) and not func.body.block.iter_vars:
        root = func.body.block
    found: list[Block] = []
    pre_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return root, [block for block in found if block is not root]


@_one_at_a_time
def primfunc_graph_svg(func: PrimFunc) -> str:
    """One kernel's dataflow as SVG: its buffers (parameters and allocations) and blocks
    (id "block:<uid>"), with an edge from each buffer a block reads and to each it writes."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"primfunc_graph_svg: expected a PrimFunc, got {type(func).__name__}")
    graph = _agraph(func.name)
    root, blocks = _blocks(func)
    written = {id(region.buffer) for block in blocks for region in block.writes}
    nodes: dict[int, str] = {}  # id(Buffer) -> node name

    def buffer_node(buffer, kind: str | None = None) -> str:
        if id(buffer) not in nodes:
            if kind is None:
                kind = "buffer_out" if id(buffer) in written else "buffer_in"
            dims = ", ".join(str(d) for d in buffer.shape)
            scope = "" if buffer.scope == "global" else f" {buffer.scope}"
            nodes[id(buffer)] = name = f"b{len(nodes)}"
            graph.add_node(name, id=f"buffer:{buffer.name}", shape="ellipse",
                           label=f"{buffer.name}\n({dims}) {buffer.dtype}{scope}",
                           fillcolor=COLORS[kind])  # fmt: skip
        return nodes[id(buffer)]

    for buffer in func.buffers:
        buffer_node(buffer)
    for block in ([root] if root is not None else []) + blocks:
        for buffer in block.alloc_buffers:
            buffer_node(buffer, "buffer_local")
    for block in blocks:
        name = f"k{block.uid}"
        iters = " ".join(f"{iv.var.name}:{_ITER_LETTER[iv.iter_type]}" for iv in block.iter_vars)
        label = f"{block.name_hint}\n{iters}" if iters else block.name_hint
        graph.add_node(name, id=f"block:{block.uid}", shape="box", label=label,
                       fillcolor=COLORS["block"])  # fmt: skip
        writes = {id(region.buffer) for region in block.writes}
        for region in block.reads:
            # A reduction reads the buffer it accumulates into; that edge is not dataflow
            # between blocks and would only draw a cycle.
            if id(region.buffer) not in writes:
                graph.add_edge(buffer_node(region.buffer), name)
        for region in block.writes:
            graph.add_edge(name, buffer_node(region.buffer))
    return _render(graph)
