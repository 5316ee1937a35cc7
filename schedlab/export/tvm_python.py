"""A trace as a TVM Schedule script: `def apply(sch):` calling `tvm.s_tir.Schedule` methods.

The script is written from the TVM trace JSON (`trace_to_tvm_json`), one call per instruction
with TVM's method and parameter names, as TVM's own `print(trace)` does; variables are the JSON
handle names (b0, l1, v2). Index maps become lambdas, decisions are passed inline.

    >>> from schedlab import workloads
    >>> from schedlab.schedule import Schedule
    >>> sch = Schedule(workloads.get("gemm", M=8, N=8, K=8)[0])
    >>> i, j, k = sch.get_loops(sch.get_block("C"))
    >>> sch.parallel(sch.fuse(i, j))
    >>> print(trace_to_tvm_python(sch.trace))
    from tvm import s_tir
    <BLANKLINE>
    <BLANKLINE>
    def apply(sch: s_tir.Schedule) -> None:
        b0 = sch.get_sblock(name="C", func_name="main")
        l1, l2, l3 = sch.get_loops(block=b0)
        l4 = sch.fuse(l1, l2, preserve_unit_iters=True)
        sch.parallel(loop=l4)
    <BLANKLINE>
"""

from __future__ import annotations

import json
import re

from schedlab.schedule.trace import Trace

from . import tvm_json_graph as G
from .errors import TVMExportError
from .tvm_trace import trace_to_tvm_json

_HANDLE = re.compile(r"^[blv]\d+$")

# kind -> (method, names of the inputs, names of the attrs, outputs: None / "one" / "many");
# "*" names a spread list (split factors, *loops)
_SIGNATURES: dict[str, tuple[str, tuple, tuple, str | None]] = {
    "GetSBlock": ("get_sblock", (), ("name", "func_name"), "one"),
    "GetLoops": ("get_loops", ("block",), (), "many"),
    "GetChildBlocks": ("get_child_blocks", ("block_or_loop",), (), "many"),
    "GetProducers": ("get_producers", ("block",), (), "many"),
    "GetConsumers": ("get_consumers", ("block",), (), "many"),
    "Split": ("split", ("loop", "*factors"), ("preserve_unit_iters", "disable_predication"),
              "many"),
    "LoopPartition": ("loop_partition", ("loop", "*factors"), ("preserve_unit_iters",), "many"),
    "Fuse": ("fuse", ("*",), ("preserve_unit_iters",), "one"),
    "Merge": ("merge", ("*",), (), "one"),
    "Reorder": ("reorder", ("*",), (), None),
    "AddUnitLoop": ("add_unit_loop", ("block_or_loop",), (), "one"),
    "Parallel": ("parallel", ("loop",), (), None),
    "Vectorize": ("vectorize", ("loop",), (), None),
    "Unroll": ("unroll", ("loop",), (), None),
    "Bind": ("bind", ("loop",), ("thread_axis",), None),
    "CacheRead": ("cache_read", ("block", "consumer_blocks"),
                  ("read_buffer_index", "storage_scope"), "one"),
    "CacheWrite": ("cache_write", ("block", "consumer_blocks"),
                   ("write_buffer_index", "storage_scope"), "one"),
    "ComputeAt": ("compute_at", ("block", "loop"), ("preserve_unit_loops", "index"), None),
    "ReverseComputeAt": ("reverse_compute_at", ("block", "loop"),
                         ("preserve_unit_loops", "index"), None),
    "ComputeInline": ("compute_inline", ("block",), (), None),
    "ReverseComputeInline": ("reverse_compute_inline", ("block",), (), None),
    "DecomposeReduction": ("decompose_reduction", ("block", "loop"), (), "one"),
    "RFactor": ("rfactor", ("loop",), ("factor_axis",), "one"),
    "Blockize": ("blockize", ("target",), ("preserve_unit_iters",), "one"),
    "Tensorize": ("tensorize", ("block_or_loop",), ("tensor_intrin", "preserve_unit_iters"),
                  None),
    "Annotate": ("annotate", ("block_or_loop", "ann_val"), ("ann_key",), None),
    "Unannotate": ("unannotate", ("block_or_loop",), ("ann_key",), None),
    "SetScope": ("set_scope", ("block",), ("buffer_index", "storage_scope"), None),
    "StorageAlign": ("storage_align", ("block",), ("buffer_index", "axis", "factor", "offset"),
                     None),
    "PadEinsum": ("pad_einsum", ("block",), ("padding",), None),
    "SamplePerfectTile": ("sample_perfect_tile", ("loop",), ("n", "max_innermost_factor"),
                          "many"),
    "SampleCategorical": ("sample_categorical", (), ("candidates", "probs"), "one"),
    "SampleComputeLocation": ("sample_compute_location", ("block",), (), "one"),
    "EnterPostproc": ("enter_postproc", (), (), None),
}  # fmt: skip
# keyword order of TVM's signature where it is not inputs-then-attrs
_ORDER = {
    "Annotate": ("block_or_loop", "ann_key", "ann_val"),
    "CacheRead": ("block", "read_buffer_index", "storage_scope", "consumer_blocks"),
    "CacheWrite": ("block", "write_buffer_index", "storage_scope", "consumer_blocks"),
}
_BOOL_ATTRS = {"preserve_unit_iters", "disable_predication", "preserve_unit_loops"}
_BUFFER_TYPES = {0: "read", 1: "write"}


def trace_to_tvm_python(trace: Trace, *, func_name: str = "main",
                        remove_postproc: bool = False) -> str:  # fmt: skip
    """`trace` as a Python module defining `apply(sch)`, which replays it on a
    `tvm.s_tir.Schedule` of the function exported with `to_tvm_script` (`func_name` as in
    `trace_to_tvm_json`; TVM types a pad value itself here). Raises TVMExportError naming the
    first instruction TVM cannot take."""
    insts, decisions = trace_to_tvm_json(
        trace, func_name=func_name, remove_postproc=remove_postproc
    )
    return tvm_json_to_python(insts, decisions)


def tvm_json_to_python(insts: list, decisions: list) -> str:
    """TVM trace JSON (instructions and decisions, TVM's spelling) as the `apply` script."""
    decided = dict((index, value) for index, value in decisions)
    body = [_call(index, inst, decided) for index, inst in enumerate(insts)] or ["pass"]
    imports = ["from tvm import s_tir"]
    if any("T." in line for line in body):  # index-map lambdas using T.min, T.truncdiv ...
        imports.append("from tvm.script import tirx as T")
    lines = [*imports, "", "", "def apply(sch: s_tir.Schedule) -> None:"]
    return "\n".join(lines + [f"    {line}" for line in body]) + "\n"


def _call(index: int, inst: list, decided: dict) -> str:
    kind, inputs, attrs, outputs = inst
    if kind in ("ReIndex", "TransformLayout", "TransformBlockLayout"):
        method, args = _layout_call(kind, inputs, attrs)
    elif kind in _SIGNATURES:
        method, args = _plain_call(kind, inputs, attrs)
    else:
        raise TVMExportError(f"instruction {index} ({kind}) has no TVM Schedule method here")
    if index in decided:
        args.append(f"decision={_py(decided[index])}")
    call = f"sch.{method}({', '.join(args)})"
    many = _SIGNATURES.get(kind, (None, None, None, None))[3] == "many"
    if not outputs:
        return call
    target = ", ".join(outputs) + ("," if many and len(outputs) == 1 else "")
    return f"{target} = {call}"


def _plain_call(kind: str, inputs: list, attrs: list) -> tuple[str, list[str]]:
    method, input_names, attr_names, _ = _SIGNATURES[kind]
    positional, named = [], {}
    for k, name in enumerate(input_names):
        if name == "*":  # *loops: positional
            positional += [_py(v) for v in inputs[k:]]
        elif name.startswith("*"):  # a spread list, written back as one list
            named[name[1:]] = f"[{', '.join(_py(v) for v in inputs[k:])}]"
        elif name == "consumer_blocks" and inputs[k] in ([], "None"):
            continue  # TVM's default: every consumer
        else:
            named[name] = _py(inputs[k])
    for name, value in zip(attr_names, attrs):
        value = bool(value) if name in _BOOL_ATTRS else value
        named[name] = _py(value, quoted_strings=False)
    order = _ORDER.get(kind, tuple(named))
    return method, positional + [f"{n}={named[n]}" for n in order if n in named]


def _layout_call(kind: str, inputs: list, attrs: list) -> tuple[str, list[str]]:
    block = _py(inputs[0])
    if kind == "ReIndex":
        return "reindex", [f"block={block}", f"buffer={_buffer(attrs[0], attrs[1])}"]
    if kind == "TransformBlockLayout":
        imap = G.index_map_from_graph(attrs[0]).to_text()
        return "transform_block_layout", [f"block={block}", f"index_map={imap}"]
    index, buffer_type, pad, injective = attrs
    imap = G.index_map_from_graph(inputs[1]).to_text()
    args = [f"block={block}", f"buffer={_buffer(index, buffer_type)}", f"index_map={imap}"]
    pad_value = None if pad is None else G.constant_from_graph(pad)
    args += [f"pad_value={pad_value!r}", f"assume_injective_transform={bool(injective)}"]
    return "transform_layout", args


def _buffer(index: int, buffer_type: int) -> str:
    return f'("{_BUFFER_TYPES[buffer_type]}", {index})'


def _py(value, quoted_strings: bool = True) -> str:
    """Python text of a JSON value: handle names stay names, "None" is None, JSON-quoted
    strings (TVM's inputs) are strings; attrs hold plain strings."""
    if isinstance(value, str):
        if value == "None" and quoted_strings:
            return "None"
        if quoted_strings and _HANDLE.match(value):
            return value
        if quoted_strings and value.startswith('"'):
            return json.dumps(json.loads(value))
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_py(v, quoted_strings) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(k)}: {_py(v, False)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return repr(value)
