"""The text form of the loop IR (TVMScript style).

- `script(node)` prints a PrimFunc, IRModule, statement or expression (also `node.script()`);
- `from_source(text)` parses such text back, without executing it;
- `tir` (`T`) and `ir` (`I`) are the namespaces the text is written in: `@T.prim_func` and
  `@I.ir_module` turn hand-written Python functions and classes into IR.
"""

from . import ir, tir
from .parser import from_source
from .printer import expr_text, script, to_html

__all__ = ["from_source", "script", "expr_text", "to_html", "tir", "ir"]
