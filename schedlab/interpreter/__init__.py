"""`schedlab.interpret`: the reference interpreter of the loop IR (its semantics).

    schedlab.interpret(func, A, B, C)   # runs func on numpy arrays, writing outputs in place

Each PrimFunc is translated once into Python/numpy source and cached; loop nests that are
provably free of cross-iteration dependences (and reductions) run as numpy array code, the rest
as plain Python loops. `source(func)` shows the generated code; `scalar_mode()` turns the
vectorizer off (tests compare both).

Semantics, where C leaves a choice or none:
- integers wrap around in their dtype; `Div`/`Mod` truncate, `FloorDiv`/`FloorMod` floor;
- floats are computed in their dtype (float16, bfloat16 and float32 round after every
  operation); vectorized reductions re-associate float sums and products (integers stay exact);
- `Min`/`Max` of floats propagate NaN (numpy's minimum/maximum); `round` rounds half to even;
- `Select` evaluates both values, `if_then_else` only the one it picks (masked lanes never load);
- a block's `init` runs when every reduce iter var is at its domain minimum, before the body;
- every loop kind (parallel, vectorized, unrolled, thread-bound) runs in order;
- out-of-bounds accesses raise IndexError; float intermediates start as NaN, others as zero;
- undefined in C, deterministic here: float-to-int conversion out of range follows numpy; an
  integer division by zero raises in scalar code and gives 0 in array code.
"""

from .api import get_translation, interpret, scalar_mode, source
from .exprgen import TranslateError

__all__ = ["interpret", "source", "scalar_mode", "get_translation", "TranslateError"]
