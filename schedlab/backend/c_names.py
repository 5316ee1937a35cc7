"""Readable, unique, C-safe identifiers for IR variables and buffers, with block scoping.

A name is taken from the IR name (`i`, `C_local`), made C-safe, and suffixed (`i_1`) only when it
would clash with a name visible in the same C block, a C keyword, or a library function. Names
are released when their C block closes, so two sibling loop nests can both use `i`.
"""

from __future__ import annotations

import re

C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if
inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic
_Noreturn _Static_assert _Thread_local bool true false NULL main asm typeof
""".split())  # fmt: skip

# Functions, macros and types the generated code may refer to.
C_LIBRARY = frozenset("""
abs fabs fabsf exp expf exp2 exp2f log logf log2 log2f log10 log10f log1p log1pf sqrt sqrtf
tanh tanhf erf erff floor floorf ceil ceilf round roundf nearbyint nearbyintf trunc truncf
sin sinf cos cosf tan tanf asin asinf acos acosf atan atanf sinh sinhf cosh coshf pow powf
fmod fmodf atan2 atan2f isnan isinf isfinite fmin fmax fminf fmaxf malloc free memcpy memset
aligned_alloc printf size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t
INFINITY NAN errno min max threadIdx blockIdx blockDim gridDim omp_get_wtime clock_gettime
timespec
""".split())  # fmt: skip

RESERVED_PREFIXES = ("sl_", "__")

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def c_safe(name: str) -> str:
    """`name` with every non-identifier character replaced by `_` (never empty, never starting
    with a digit, never using the generated code's reserved prefixes)."""
    text = _UNSAFE.sub("_", name) or "v"
    if text[0].isdigit():
        text = "v" + text
    if text.startswith(RESERVED_PREFIXES):
        text = "v" + text
    return text


class NameTable:
    """Scoped C names for IR objects (keyed by identity)."""

    def __init__(self, reserved: frozenset[str] | set[str] = frozenset()):
        """`reserved`: names never handed out (the target language's keywords, entry points)."""
        self._reserved = set(reserved)
        self._scopes: list[list[int]] = [[]]
        self._by_object: dict[int, list[str]] = {}  # a stack: inner blocks may re-bind
        self._keepalive: dict[int, object] = {}
        self._visible: set[str] = set()

    def push_scope(self) -> None:
        self._scopes.append([])

    def pop_scope(self) -> None:
        for key in reversed(self._scopes.pop()):
            stack = self._by_object[key]
            self._visible.discard(stack.pop())
            if not stack:
                del self._by_object[key]
                del self._keepalive[key]

    def taken(self, name: str) -> bool:
        """Is `name` reserved or visible now?"""
        return name in self._reserved or name in self._visible

    def reserve(self, name: str) -> None:
        """Keep `name` unused for the rest of the function (helper and entry-point names)."""
        self._reserved.add(name)

    def declare(self, obj: object, hint: str, *, internal: bool = False) -> str:
        """A fresh name for `obj` in the current scope; it must not be declared already.
        `internal` names (the generator's own temporaries) may use the reserved `sl_` prefix."""
        if self.declared_here(obj):
            raise ValueError(f"{hint} is declared twice in the same C scope")
        base = hint if internal else c_safe(hint)
        name, counter = base, 0
        while name in self._reserved or name in self._visible:
            counter += 1
            name = f"{base}_{counter}"
        self._bind(obj, name)
        return name

    def _bind(self, obj: object, name: str) -> None:
        key = id(obj)
        self._by_object.setdefault(key, []).append(name)
        self._keepalive[key] = obj  # ids stay unique while the name lives
        self._visible.add(name)
        self._scopes[-1].append(key)

    def declared_here(self, obj: object) -> bool:
        """Is `obj` declared in the innermost scope (C forbids declaring it again there)?"""
        return id(obj) in self._scopes[-1]

    def fresh(self, hint: str) -> str:
        """A fresh temporary name in the current scope (not tied to an IR object)."""
        return self.declare(object(), hint, internal=True)

    def alias(self, obj: object, name: str) -> None:
        """Make `obj` render as the already declared `name` (a handle param and its buffer's
        data pointer are one C variable)."""
        self._bind(obj, name)

    def lookup(self, obj: object) -> str | None:
        stack = self._by_object.get(id(obj))
        return stack[-1] if stack else None

    def __contains__(self, obj: object) -> bool:
        return id(obj) in self._by_object
