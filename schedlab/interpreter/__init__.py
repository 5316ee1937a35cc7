"""`schedlab.interpret`: the reference interpreter of the loop IR (its semantics).

    schedlab.interpret(func, A, B, C)   # runs func on numpy arrays, writing outputs in place

Each PrimFunc is translated once into Python/numpy source and cached; loop nests that are
provably free of cross-iteration dependences (and reductions) run as numpy array code, the rest
as plain Python loops. `source(func)` shows the generated code; `scalar_mode()` turns the
vectorizer off (tests compare both).
"""

from .api import get_translation, interpret, scalar_mode, source
from .exprgen import TranslateError

__all__ = ["interpret", "source", "scalar_mode", "get_translation", "TranslateError"]
