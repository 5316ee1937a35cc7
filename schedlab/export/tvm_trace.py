"""Traces to and from Apache TVM (0.27): TVM's trace JSON and a TVM Schedule script.

schedlab's instruction kinds are TVM's, and its trace JSON already follows TVM's layout
(`[kind, inputs, attrs, outputs]`, handles `b0`/`l1`/`v2`, `"None"`, JSON-quoted strings,
split factors and `*loops` spread). What differs, kind by kind:

- GetBlock is GetSBlock, and its function name `null` is the one TVM looks in ("main");
- CacheRead / CacheWrite: consumer_blocks not given is `[]`, not `"None"`;
- ComputeAt / ReverseComputeAt, Fuse, LoopPartition write their flags as integers 0/1;
- ReIndex attrs `[["read", 1], null]` are `[1, 0]` (index; 0 read, 1 write);
- TransformLayout: inputs `[block, graph]`, attrs `[index, 0|1, pad graph or null, injective]`;
- TransformBlockLayout: inputs `[block]`, attrs `[graph]`;
- an annotation value recorded with its dtype (`T.int32(4)`) is a plain number.

An index map travels as TVM's JSON node graph text (see `tvm_json_graph`). SetAxisSeparator
has no TVM 0.27 schedule primitive and is refused on export; TVM kinds without a schedlab
primitive (RollingBuffer, DecomposePadding, ...) are refused on import, naming the first one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from schedlab.schedule.errors import TraceError
from schedlab.schedule.index_map import IndexMap
from schedlab.schedule.trace import POSTPROC_MARKER, Trace
from schedlab.schedule.values import decode_value

from . import tvm_json_graph as G
from .errors import TVMExportError, TVMImportError

# TVM 0.27's instruction kinds that schedlab has a primitive for (TVM's names)
TVM_KINDS = frozenset({
    "GetSBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers", "Split",
    "LoopPartition", "Fuse", "Merge", "Reorder", "AddUnitLoop", "Parallel", "Vectorize",
    "Unroll", "Bind", "CacheRead", "CacheWrite", "ReIndex", "ComputeAt", "ReverseComputeAt",
    "ComputeInline", "ReverseComputeInline", "DecomposeReduction", "RFactor", "Blockize",
    "Tensorize", "Annotate", "Unannotate", "SetScope", "StorageAlign", "TransformLayout",
    "TransformBlockLayout", "PadEinsum", "SamplePerfectTile", "SampleCategorical",
    "SampleComputeLocation", "EnterPostproc",
})  # fmt: skip
_INDEX_TYPES = {"read": 0, "write": 1}
_INDEX_NAMES = {0: "read", 1: "write"}


# ---------------------------------------------------------------------------------------------
# export: schedlab's JSON instruction -> TVM's
# ---------------------------------------------------------------------------------------------
def _buffer_spec(value, kind: str) -> tuple[int, int]:
    """(index, 0 read / 1 write) from schedlab's ("read"|"write", i)."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and value[0] in _INDEX_TYPES
        and type(value[1]) is int
    ):
        return value[1], _INDEX_TYPES[value[0]]
    raise TVMExportError(
        f"{kind}: buffer {value!r} must be ('read'|'write', index) for TVM (a buffer name "
        "needs the block's regions to resolve: record the instruction with an index)"
    )


def _index_map(value, kind: str) -> IndexMap:
    imap = decode_value(value)
    if not isinstance(imap, IndexMap):
        raise TVMExportError(f"{kind}: expected an index map, got {value!r}")
    return imap


@dataclass(frozen=True)
class _Context:
    func_name: str
    func: object = None  # the PrimFunc the trace schedules, when known


def _out_get_block(inputs, attrs, context):
    name = attrs[1] if attrs[1] is not None else context.func_name
    return "GetSBlock", inputs, [attrs[0], name]


def _out_cache(inputs, attrs, context):
    consumers = [] if inputs[1] == "None" else inputs[1]
    return None, [inputs[0], consumers], attrs


def _out_int_flags(*positions):
    def convert(inputs, attrs, context):
        attrs = list(attrs)
        for k in positions:
            attrs[k] = int(attrs[k])
        return None, inputs, attrs

    return convert


def _out_reindex(inputs, attrs, context):
    index, kind = attrs
    if kind is None:
        return None, inputs, list(_buffer_spec(index, "ReIndex"))
    if kind not in (*_INDEX_TYPES, *_INDEX_NAMES) or type(index) is not int:
        raise TVMExportError(f"ReIndex: cannot write buffer {index!r} of type {kind!r} for TVM")
    return None, inputs, [index, _INDEX_TYPES.get(kind, kind)]


def _out_transform_layout(inputs, attrs, context):
    buffer, pad_value, injective = attrs
    imap = _index_map(inputs[1], "TransformLayout")
    index, kind = _buffer_spec(buffer, "TransformLayout")
    pad = None
    if pad_value is not None:
        pad_value = decode_value(pad_value)
        if isinstance(pad_value, bool) or not isinstance(pad_value, (int, float)):
            raise TVMExportError(f"TransformLayout: pad_value {pad_value!r} is not a number")
        dtype = _pad_dtype(pad_value, context.func)
        pad = G.constant_map_to_graph(pad_value, len(imap.final_indices), dtype)
    graph = G.index_map_to_graph(imap)
    return None, [inputs[0], graph], [index, kind, pad, bool(injective)]


def _pad_dtype(value, func) -> str:
    """TVM's JSON types a pad value like the buffer, which a trace does not name: the dtype
    of `func`'s buffers of the value's kind when they share one, else float32 / int32."""
    want_float = isinstance(value, float)
    default = "float32" if want_float else "int32"
    if func is None:
        return default
    from schedlab.ir.functor import post_order_visit

    dtypes = {str(b.dtype) for b in func.buffers}

    def visit(node):
        dtypes.update(str(b.dtype) for b in getattr(node, "alloc_buffers", ()))

    post_order_visit(func.body, visit)
    kind = {d for d in dtypes if d.startswith(("float", "bfloat")) == want_float}
    if len(kind) > 1:
        raise TVMExportError(
            f"TransformLayout: the pad value's dtype is one of {sorted(kind)}, which the trace "
            "does not say; trace_to_tvm_python writes it for TVM to type"
        )
    return kind.pop() if kind else default


def _out_transform_block_layout(inputs, attrs, context):
    imap = _index_map(inputs[1], "TransformBlockLayout")
    return None, [inputs[0]], [G.index_map_to_graph(imap)]


def _out_annotate(inputs, attrs, context):
    return None, [inputs[0], _constant_value(inputs[1])], attrs


def _constant_value(value):
    """A constant recorded with its dtype (T.int32(4)) is a plain number in TVM's JSON."""
    if isinstance(value, dict) and value.get("__type__") in ("IntImm", "FloatImm"):
        return value["value"]["value"]
    if isinstance(value, dict) and "__type__" in value:
        raise TVMExportError(f"annotation value {value!r} has no TVM JSON form")
    if isinstance(value, list):
        return [_constant_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _constant_value(v) for k, v in value.items()}
    return value


def _out_refused(reason: str):
    def refuse(inputs, attrs, context):
        raise TVMExportError(reason)

    return refuse


_EXPORT: dict[str, Callable] = {
    "GetBlock": _out_get_block,
    "CacheRead": _out_cache,
    "CacheWrite": _out_cache,
    "ComputeAt": _out_int_flags(0),
    "ReverseComputeAt": _out_int_flags(0),
    "Fuse": _out_int_flags(0),
    "LoopPartition": _out_int_flags(0),
    "ReIndex": _out_reindex,
    "Annotate": _out_annotate,
    "TransformLayout": _out_transform_layout,
    "TransformBlockLayout": _out_transform_block_layout,
    "SetAxisSeparator": _out_refused(
        "SetAxisSeparator has no TVM 0.27 schedule primitive (TVM sets axis separators "
        "through transform_layout's IndexMap.AXIS_SEPARATOR)"
    ),
}


def trace_to_tvm_json(trace: Trace, *, func=None, func_name: str = "main",
                      remove_postproc: bool = False) -> list:  # fmt: skip
    """`trace` as TVM's `Trace.as_json()` structure `[insts, decisions]`, which
    `tvm.s_tir.Trace.apply_json_to_schedule(json, sch)` replays on a `tvm.s_tir.Schedule` of
    the function exported with `to_tvm_script` (and MetaSchedule records hold).

    `func_name` is the function blocks are looked up in (TVM names a lone function "main";
    instructions that name a function keep it). `func`, the function the trace schedules, is
    needed only to type a `transform_layout` pad value for buffers that are not float32 /
    int32. Raises TVMExportError naming the first instruction TVM cannot take."""
    context = _Context(func_name, func)
    data = trace.as_tvm_json(remove_postproc=remove_postproc)
    insts = []
    for index, (kind, inputs, attrs, outputs) in enumerate(data[0]):
        name, convert = kind, _EXPORT.get(kind)
        if convert is not None:
            try:
                renamed, inputs, attrs = convert(inputs, attrs, context)
            except TVMExportError as err:
                raise TVMExportError(f"instruction {index} ({kind}): {err}") from None
            name = renamed or kind
        if name not in TVM_KINDS:
            raise TVMExportError(
                f"instruction {index} ({kind}) is not one of TVM's instruction kinds "
                "(an extension's primitive?)"
            )
        insts.append([name, inputs, attrs, outputs])
    return [insts, data[1]]


# ---------------------------------------------------------------------------------------------
# import: TVM's JSON instruction -> schedlab's
# ---------------------------------------------------------------------------------------------
def _flag(value) -> bool:
    return bool(value)


def _in_get_block(inputs, attrs):
    return "GetBlock", inputs, attrs


def _in_cache(inputs, attrs):
    consumers = inputs[1] if len(inputs) > 1 else []
    return None, [inputs[0], consumers if consumers else "None"], attrs


def _in_bool_flags(*positions):
    def convert(inputs, attrs):
        attrs = list(attrs)
        for k in positions:
            attrs[k] = _flag(attrs[k])
        return None, inputs, attrs

    return convert


def _in_reindex(inputs, attrs):
    index, kind = attrs
    if kind not in _INDEX_NAMES:
        raise TVMImportError(f"buffer_index_type {kind!r} is neither 0 (read) nor 1 (write)")
    return None, inputs, [[_INDEX_NAMES[kind], index], None]


def _in_transform_layout(inputs, attrs):
    index, kind, pad, injective = attrs
    if kind not in _INDEX_NAMES:
        raise TVMImportError(f"buffer_index_type {kind!r} is neither 0 (read) nor 1 (write)")
    imap = G.index_map_from_graph(inputs[1])
    pad_value = None if pad is None else G.constant_from_graph(pad)
    value = {"__type__": "IndexMap", "value": _map_json(imap)}
    return None, [inputs[0], value], [[_INDEX_NAMES[kind], index], pad_value, _flag(injective)]


def _in_transform_block_layout(inputs, attrs):
    imap = G.index_map_from_graph(attrs[0])
    return None, [inputs[0], {"__type__": "IndexMap", "value": _map_json(imap)}], []


def _map_json(imap: IndexMap) -> dict:
    return {"lambda": imap.to_text(), "index_dtype": str(imap.index_dtype)}


_IMPORT: dict[str, Callable] = {
    "GetSBlock": _in_get_block,
    "GetBlock": _in_get_block,  # TVM before the SBlock rename
    "CacheRead": _in_cache,
    "CacheWrite": _in_cache,
    "ComputeAt": _in_bool_flags(0),
    "ReverseComputeAt": _in_bool_flags(0),
    "Fuse": _in_bool_flags(0),
    "LoopPartition": _in_bool_flags(0),
    "Split": _in_bool_flags(0, 1),
    "Blockize": _in_bool_flags(0),
    "Tensorize": _in_bool_flags(1),
    "ReIndex": _in_reindex,
    "TransformLayout": _in_transform_layout,
    "TransformBlockLayout": _in_transform_block_layout,
}


def supported_tvm_kinds() -> list[str]:
    """The TVM instruction kinds a TVM trace may hold to become a schedlab trace."""
    from schedlab.schedule.instruction import all_kinds

    registered = {k.name for k in all_kinds()} | {"GetSBlock"}
    return sorted(TVM_KINDS & registered)


def trace_from_tvm_json(data) -> Trace:
    """A schedlab Trace from TVM's trace JSON `[insts, decisions]`: text, parsed JSON, or the
    object `tvm.s_tir.Trace.as_json()` returns (converted as data, without importing TVM).

    Every instruction kind must have a schedlab counterpart (`supported_tvm_kinds()`); the
    first that has none is named in a TVMImportError, as is malformed data. Reading never
    executes code."""
    data = _plain(_loads(data))
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], list)):
        raise TVMImportError("TVM trace JSON: expected [instructions, decisions]")
    kinds = supported_tvm_kinds()
    supported = set(kinds)
    insts = []
    for index, entry in enumerate(data[0]):
        if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)):
            raise TVMImportError(
                f"TVM trace JSON: instruction {index} must be [kind, inputs, attrs, outputs]"
            )
        kind, inputs, attrs, outputs = entry
        if kind not in supported and kind not in _IMPORT:
            raise TVMImportError(
                f"TVM trace: instruction {index} ({kind}) has no schedlab counterpart; "
                f"schedlab replays {', '.join(kinds)}"
            )
        convert = _IMPORT.get(kind)
        if convert is not None:
            try:
                name, inputs, attrs = convert(inputs, attrs)
            except (TVMImportError, ValueError, TypeError, IndexError) as err:
                raise TVMImportError(f"TVM trace: instruction {index} ({kind}): {err}") from None
            kind = name or kind
        insts.append([kind, inputs, attrs, outputs])
    try:
        return Trace.from_json([insts, data[1]])
    except TraceError as err:
        raise TVMImportError(f"TVM trace: {err}") from None


def _loads(data):
    if isinstance(data, (str, bytes)):
        try:
            return json.loads(data)
        except ValueError as err:
            raise TVMImportError(f"TVM trace JSON is malformed: {err}") from None
    return data


def _plain(value, depth: int = 0):
    """Plain JSON data from TVM's FFI containers and constants (Array, Map, String, IntImm,
    FloatImm), recognised by shape, so that TVM need not be imported."""
    if depth > 64:
        raise TVMImportError("TVM trace JSON is nested too deeply")
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, Sequence) or type(value).__name__ == "Array":
        return [_plain(v, depth + 1) for v in value]
    inner = getattr(value, "value", None)
    if isinstance(inner, (bool, int, float)):  # IntImm / FloatImm
        return inner
    raise TVMImportError(f"TVM trace JSON: unexpected value {value!r}")


__all__ = [
    "TVM_KINDS",
    "trace_to_tvm_json",
    "trace_from_tvm_json",
    "supported_tvm_kinds",
    "POSTPROC_MARKER",
]
