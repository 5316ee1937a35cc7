"""Frame statements (`T.reads`, `T.axis.*`, `T.alloc_buffer`, `T.match_buffer`, `T.func_attr`,
`with T.init()`, ...) and the buffer-declaring calls they share."""

from __future__ import annotations

import ast

from schedlab.ir import expr as E
from schedlab.ir.buffer import Buffer, MatchBufferRegion
from schedlab.ir.dtype import float32, handle
from schedlab.ir.stmt import IterVar

from . import names as N
from ._parse_stmt import BlockFrame, FuncFrame, StmtParser


def frame_stmt(p: StmtParser, node: ast.stmt, kind: str, frame) -> None:
    if kind == N.AXIS:
        return _axis(p, node, frame)
    if kind == N.INIT:
        return _init(p, node, frame)
    if kind in (N.ALLOC_BUFFER, N.MATCH_BUFFER):
        return _buffer_stmt(p, node, kind, frame)
    call = node.value
    if kind in (N.READS, N.WRITES):
        return _regions(p, call, kind, frame)
    if call.keywords or len(call.args) != 1:
        raise p.fail(call, f"T.{kind} takes one argument")
    if kind == N.WHERE:
        _once(p, call, frame.predicate, kind)
        frame.predicate = p.expr(call.args[0])
        return None
    value = p.literal(call.args[0])
    if not isinstance(value, dict):
        raise p.fail(call.args[0], f"T.{kind} takes a dict")
    if kind == N.FUNC_ATTR:
        _once(p, call, frame.attrs, kind)
        frame.attrs = value
    else:
        _once(p, call, frame.annotations, kind)
        frame.annotations = value
    return None


def _once(p: StmtParser, node: ast.AST, previous, kind: str) -> None:
    if previous is not None:
        raise p.fail(node, f"T.{kind} is given twice")


def _regions(p: StmtParser, call: ast.Call, kind: str, frame: BlockFrame) -> None:
    if call.keywords:
        raise p.fail(call, f"T.{kind} takes regions only")
    items = call.args
    if len(items) == 1 and isinstance(items[0], (ast.List, ast.Tuple)):
        items = items[0].elts
    regions = [p.region(item) for item in items]
    _once(p, call, getattr(frame, kind), kind)
    setattr(frame, kind, regions)


def _init(p: StmtParser, node: ast.With, frame: BlockFrame) -> None:
    call = node.items[0].context_expr
    if call.args or call.keywords or node.items[0].optional_vars is not None:
        raise p.fail(call, "write `with T.init():`")
    if frame.init is not None:
        raise p.fail(node, "a block has one T.init()")
    frame.init = p.scoped_body(node.body)


# ---------------------------------------------------------------------------------------------
# block axes
# ---------------------------------------------------------------------------------------------
def _axis(p: StmtParser, node: ast.Assign, frame: BlockFrame) -> None:
    call = node.value
    kind = p.call_name(call)[len(N.AXIS) + 1 :]
    if len(node.targets) != 1:
        raise p.fail(node, "expected names on the left of `=`")
    target = node.targets[0]
    names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
    for name in names:
        if not isinstance(name, ast.Name):
            raise p.fail(name, "a block axis must be a plain name")
    if kind == N.REMAP:
        pairs = _remap(p, call, names)
    elif kind in N.AXIS_KIND_BY_NAME:
        if len(names) != 1:
            raise p.fail(target, f"T.axis.{kind} defines one axis, got {len(names)} names")
        pairs = [_explicit_axis(p, call, names[0].id, N.AXIS_KIND_BY_NAME[kind])]
    else:
        known = ", ".join([*N.AXIS_KIND_BY_NAME, N.REMAP])
        raise p.fail(call, f"unknown T.axis.{kind}; expected one of {known}")
    for iter_var, value in pairs:
        p.define(iter_var.var.name, iter_var.var)
        frame.iter_vars.append(iter_var)
        frame.values.append(value)


def _remap(p: StmtParser, call: ast.Call, names: list[ast.Name]) -> list:
    """`vi, vk = T.axis.remap("SR", [i, k])`: each axis spans its loop's range."""
    if len(call.args) != 2 or call.keywords:
        raise p.fail(call, 'T.axis.remap takes (kinds, [loop vars]), e.g. ("SSR", [i, j, k])')
    kinds = p.str_arg(call.args[0], "T.axis.remap kinds")
    values_node = call.args[1]
    if not isinstance(values_node, (ast.List, ast.Tuple)):
        raise p.fail(values_node, "T.axis.remap takes a list of loop variables")
    values = values_node.elts
    if len(kinds) != len(values):
        raise p.fail(
            call, f"T.axis.remap: {len(kinds)} kind(s) {kinds!r} for {len(values)} value(s)"
        )
    if len(names) != len(values):
        raise p.fail(call, f"T.axis.remap: {len(names)} name(s) for {len(values)} value(s)")
    pairs = []
    for letter, name, value_node in zip(kinds, names, values):
        iter_type = N.REMAP_KIND_BY_LETTER.get(letter)
        if iter_type is None:
            raise p.fail(call.args[0], f"T.axis.remap: unknown kind {letter!r}; use S or R")
        value = p.expr(value_node)
        bounds = p.loop_ranges.get(id(value))
        if bounds is None:
            raise p.fail(value_node, f"T.axis.remap: {ast.unparse(value_node)} is not a loop var")
        var = E.Var(name.id, value.dtype)
        pairs.append((IterVar(var, E.Range(*bounds), iter_type), value))
    return pairs


def _explicit_axis(p: StmtParser, call: ast.Call, name: str, iter_type) -> tuple:
    """`vi = T.axis.spatial(extent_or_(start, stop), value)`."""
    if len(call.args) != 2 or call.keywords:
        raise p.fail(call, f"T.axis.{N.AXIS_KINDS[iter_type]} takes (domain, value)")
    dom_node, value = call.args[0], p.expr(call.args[1])
    if isinstance(dom_node, ast.Tuple):
        if len(dom_node.elts) != 2:
            raise p.fail(dom_node, "an axis domain is an extent or a (start, stop) pair")
        start, stop = (p.typed(e, value.dtype) for e in dom_node.elts)
        dom = E.Range(*p.bounds_to_range(dom_node, start, stop))
    else:
        extent = p.typed(dom_node, value.dtype)
        dom = E.Range(p.build(dom_node, E.IntImm, extent.dtype, 0), extent)
    return IterVar(E.Var(name, value.dtype), dom, iter_type), value


# ---------------------------------------------------------------------------------------------
# buffers
# ---------------------------------------------------------------------------------------------
def _buffer_stmt(p: StmtParser, node: ast.Assign, kind: str, frame) -> None:
    name = p.single_target(node)
    call = node.value
    buffer, _ = buffer_call(p, call, name, kind)
    if kind == N.ALLOC_BUFFER:
        frame.allocs.append(buffer)
    elif isinstance(frame, FuncFrame):
        param = p.expr(call.args[0]) if call.args else None
        if not any(param is v for v in frame.params) or param.dtype != handle:
            raise p.fail(call, "T.match_buffer at function level takes a T.handle parameter")
        if param in frame.buffer_map:
            raise p.fail(call, f"parameter {param.name} already has a buffer")
        frame.buffer_map[param] = buffer
    else:
        source = p.region(call.args[0])
        frame.matches.append(p.build(call, MatchBufferRegion, buffer, source))
    p.define(name, buffer)


_POSITIONAL = {
    N.BUFFER: ("shape", "dtype"),
    N.ALLOC_BUFFER: ("shape", "dtype"),
    N.ALLOCATE: ("shape", "dtype", "scope"),
    N.MATCH_BUFFER: ("source", "shape", "dtype"),
}


def buffer_call(p: StmtParser, call: ast.Call, name: str, kind: str) -> tuple[Buffer, dict]:
    """The buffer a T.Buffer/T.alloc_buffer/T.match_buffer/T.allocate call declares, and the
    `annotations` of T.allocate."""
    slots = _POSITIONAL[kind]
    if len(call.args) > len(slots):
        raise p.fail(call, f"T.{kind} takes at most {len(slots)} positional arguments")
    given = dict(zip(slots, call.args))
    allowed = {*slots, *N.BUFFER_KWARGS} | ({"annotations"} if kind == N.ALLOCATE else set())
    for keyword in call.keywords:
        if keyword.arg not in allowed or keyword.arg in given:
            raise p.fail(keyword, f"T.{kind}: unexpected keyword argument {keyword.arg!r}")
        given[keyword.arg] = keyword.value
    if "shape" not in given:
        raise p.fail(call, f"T.{kind} needs a shape")
    fields = finish_data(_buffer_fields(p, given), name)
    buffer = p.build(call, Buffer, name=name, **fields)
    annotations = p.literal(given["annotations"]) if "annotations" in given else {}
    return buffer, annotations


def _buffer_fields(p: StmtParser, given: dict) -> dict:
    fields = {
        "shape": tuple(p.exprs(given["shape"])),
        "dtype": p.dtype_arg(given["dtype"]) if "dtype" in given else float32,
        "data": None,
    }
    if "data" in given:
        data = p.expr(given["data"])
        if not isinstance(data, E.Var) or data.dtype != handle:
            raise p.fail(given["data"], "data= must be a handle variable such as A.data")
        fields["data"] = data
    if "strides" in given:
        fields["strides"] = tuple(p.exprs(given["strides"]))
    if "elem_offset" in given:
        fields["elem_offset"] = p.expr(given["elem_offset"])
    if "scope" in given:
        fields["scope"] = p.str_arg(given["scope"], "scope")
    for key in ("data_alignment", "offset_factor"):
        if key in given:
            fields[key] = p.int_arg(given[key], key)
    if "axis_separators" in given:
        node = given["axis_separators"]
        items = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
        fields["axis_separators"] = tuple(p.int_arg(i, "axis_separators") for i in items)
    return fields


def finish_data(fields: dict, name: str) -> dict:
    if fields["data"] is None:
        fields["data"] = E.Var(name, handle)
    return fields
