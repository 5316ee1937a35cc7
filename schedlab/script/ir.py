"""The `I` namespace of the text form: `from schedlab.script import ir as I`.

    @I.ir_module
    class Module:
        @T.prim_func
        def main(A: T.Buffer((8,), "float32")):
            ...

`@I.ir_module` parses the class's source into an IRModule (one entry per method); the class body
is never used.
"""

from __future__ import annotations

from schedlab.ir.function import IRModule


def ir_module(cls: type) -> IRModule:
    """Decorator: parse the decorated class's source into an IRModule."""
    from .parser import parse_object

    return parse_object(cls)


def module_attrs(attrs: dict) -> None:
    """Attributes of the module: `I.module_attrs({"key": "value"})` in the class body."""
    return None  # the class body runs when Python defines it; the parser reads the call
