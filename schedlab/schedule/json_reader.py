"""Reading the instruction list of a trace's JSON form, as data only."""

from __future__ import annotations

import json
import re

from .errors import TraceError
from .handles import BlockRV, ExprRV, LoopRV
from .instruction import INSTRUCTION_KINDS, _load_primitives
from .values import decode_value

_HANDLE_NAME = re.compile(r"^([blv])(\d+)$")
_HANDLE_TYPES = {"b": BlockRV, "l": LoopRV, "v": ExprRV}
_TVM_NAMES = {"GetSBlock": "GetBlock"}  # TVM 0.27 renamed blocks "SBlock"


# Deeper than any trace schedlab or TVM writes (about 8 levels), far below the depth at which
# the recursive readers here (and `repr` in messages) would hit Python's recursion limit.
MAX_NESTING = 64
_PARTS = {1: "inputs", 2: "attrs", 3: "outputs"}


def check_nesting(data) -> None:
    """Raise TraceError naming where `data` (parsed trace JSON) nests deeper than MAX_NESTING.
    Iterative, so it cannot itself run out of stack."""
    stack = [(data, 0)] if isinstance(data, (list, dict)) else []
    while stack:  # depths only: this runs on every trace read, paths only for the message
        value, depth = stack.pop()
        items = value.values() if isinstance(value, dict) else value
        if depth >= MAX_NESTING:
            path = _deep_path(data)
            shown = "".join(f"[{json.dumps(key)}]" for key in path[:6])
            raise TraceError(
                f"trace JSON: {_where(data, path)}: nested more than {MAX_NESTING} levels deep "
                f"(at {shown}...)"
            )
        stack.extend((item, depth + 1) for item in items if isinstance(item, (list, dict)))


def _deep_path(data) -> tuple:
    """The keys leading to the first container (in document order) nested too deeply."""
    stack = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) >= MAX_NESTING:
            return path
        items = list(value.items() if isinstance(value, dict) else enumerate(value))
        stack.extend((v, path + (k,)) for k, v in reversed(items) if isinstance(v, (list, dict)))
    return ()


def _where(data, path: tuple) -> str:
    """`path` in words: "instruction 3 (Split), inputs", "decision 0", "'workload'"."""
    if path[0] == "insts" and isinstance(path[1], int):
        entry = data["insts"][path[1]]
        named = isinstance(entry, list) and entry and isinstance(entry[0], str)
        kind = f" ({entry[0]})" if named else ""
        part = _PARTS.get(path[2]) if isinstance(entry, list) else None
        return f"instruction {path[1]}{kind}" + (f", {part}" if part else "")
    if path[0] == "decisions" and isinstance(path[1], int):
        return f"decision {path[1]}"
    return repr(path[0])


def nesting_position(text: str) -> tuple[int, int] | None:
    """(line, column), 1-based, where JSON text first nests deeper than MAX_NESTING, or None:
    for text too deep for `json.loads` itself (its error says no position)."""
    depth, line, column, in_string, escaped = 0, 1, 0, False, False
    for char in text:
        column += 1
        if in_string:
            in_string = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return line, column
        elif char in "]}":
            depth -= 1
        elif char == "\n":
            line, column = line + 1, 0
    return None


def read_instructions(insts, decisions):
    from .trace import Instruction

    _load_primitives()
    if not isinstance(insts, list):
        raise TraceError("trace JSON: 'insts' must be a list")
    defined: dict[str, object] = {}
    result = []
    for index, entry in enumerate(insts):
        if not (isinstance(entry, list) and len(entry) == 4):
            raise TraceError(
                f"trace JSON: instruction {index} must be [kind, inputs, attrs, outputs]"
            )
        kind, inputs, attrs, outputs = entry
        kind = _TVM_NAMES.get(kind, kind) if isinstance(kind, str) else kind
        if not isinstance(kind, str) or kind not in INSTRUCTION_KINDS:
            raise TraceError(f"trace JSON: instruction {index} has unknown kind {kind!r}")
        if not all(isinstance(part, list) for part in (inputs, attrs, outputs)):
            raise TraceError(
                f"trace JSON: instruction {index} ({kind}): inputs, attrs and outputs must be lists"
            )
        try:
            decoded_inputs = _gather(INSTRUCTION_KINDS[kind], [_input(v, defined) for v in inputs])
            decoded_attrs = tuple(decode_value(v) for v in attrs)
            decoded_outputs = tuple(_define(name, defined) for name in outputs)
        except TraceError as err:
            raise TraceError(f"trace JSON: instruction {index} ({kind}): {err}") from None
        result.append(Instruction(kind, decoded_inputs, decoded_attrs, decoded_outputs))
    return result, _decisions(decisions, result)


def _gather(kind, inputs: list) -> tuple:
    """Inputs by parameter: a spread last input (see InstructionKind.spreads_last_input) is
    collected back into one list; the nested form is accepted too."""
    count = len(kind.inputs)
    nested = len(inputs) == count and inputs and isinstance(inputs[-1], list)
    if kind.spreads_last_input and not nested:
        if len(inputs) < count - 1:
            raise TraceError(f"expected at least {count - 1} inputs, got {len(inputs)}")
        inputs = inputs[: count - 1] + [inputs[count - 1 :]]
    if len(inputs) != count:
        raise TraceError(f"expected {count} inputs ({', '.join(kind.inputs)}), got {len(inputs)}")
    return tuple(inputs)


def _define(name, defined):
    match = _HANDLE_NAME.match(name) if isinstance(name, str) else None
    if not match:
        raise TraceError(f"output {name!r} is not a handle name like b0, l1, v2")
    if name in defined:
        raise TraceError(f"handle {name} is defined twice")
    handle = _HANDLE_TYPES[match.group(1)](name)
    defined[name] = handle
    return handle


def _input(value, defined):
    if isinstance(value, list):
        return [_input(v, defined) for v in value]
    if isinstance(value, str):
        if value == "None":
            return None
        if _HANDLE_NAME.match(value):
            if value not in defined:
                raise TraceError(f"handle {value} is used before it is defined")
            return defined[value]
        if value.startswith('"'):
            try:
                return json.loads(value)
            except json.JSONDecodeError:
                raise TraceError(f"malformed quoted string {value!r}") from None
        raise TraceError(f"unexpected input {value!r} (strings among inputs are JSON-quoted)")
    return decode_value(value)


def _decisions(decisions, insts):
    if not isinstance(decisions, list):
        raise TraceError("trace JSON: 'decisions' must be a list")
    result = {}
    for entry in decisions:
        if not (isinstance(entry, list) and len(entry) == 2 and type(entry[0]) is int):
            raise TraceError(f"trace JSON: decision {entry!r} must be [instruction index, value]")
        index, value = entry
        if not 0 <= index < len(insts):
            raise TraceError(f"trace JSON: decision for instruction {index}, which does not exist")
        result[insts[index]] = decode_value(value)
    return result
