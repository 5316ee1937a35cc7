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
