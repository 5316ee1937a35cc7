"""Source text as highlighted HTML lines (pygments), in the explorer's line format.

Each source line becomes `<span class="sl-line" data-line="N">…</span>` followed by "\\n"
(N 1-based), its tokens wrapped in `<span class="k">…</span>` with pygments' short class
names. The front end wraps the lines in a `<pre class="sl-code">` and styles them with `css()`.

    lines_html("for i in range(4):\\n    pass\\n", "python")
    diff_html(unified_diff_text)          # + lines: sl-add, - lines: sl-del, @@/headers: sl-hunk
    write_css()                           # regenerates schedlab/ui/static/highlight.css
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

LANGUAGES = ("python", "c", "cuda", "text")
CSS_PATH = Path(__file__).resolve().parent.parent / "static" / "highlight.css"
SCOPE = ".sl-code"

# Diff line colours (GitHub-like, light enough that token colours stay readable).
_DIFF_CSS = f"""\
{SCOPE} .sl-add {{ background-color: #e6ffec; }}
{SCOPE} .sl-del {{ background-color: #ffebe9; }}
{SCOPE} .sl-hunk {{ background-color: #ddf4ff; color: #57606a; }}
"""

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def _escape(text: str) -> str:
    return text.translate(_ESCAPES)


def _require_pygments():
    try:
        import pygments  # noqa: F401
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "highlighting needs pygments: install the explorer extra, pip install 'schedlab[ui]'"
        ) from err


# -- lexing ------------------------------------------------------------------------------------
# Pygments' RegexLexers try their rules one by one at every position: ~15 ms for 200 lines of C
# and more per line of TVMScript, too slow to re-render on every schedule step. The scanners
# below match one compiled alternation per token instead (several times faster) and emit
# pygments token types, so the classes and the stylesheet are pygments' own; the word lists
# come from pygments' lexers. tests/ui/test_views.py checks the result agrees with pygments.

_C_KEYWORDS = frozenset(
    "auto break case const continue default do else enum extern for goto if register return "
    "sizeof static struct switch typedef union volatile while asm _Alignas _Alignof "
    "_Atomic _Generic _Noreturn _Static_assert _Thread_local".split()
)
_C_RESERVED = frozenset("inline restrict __restrict __restrict__ __inline __attribute__".split())
_C_TYPES = frozenset(
    "int long float short double char unsigned signed void bool _Bool _Complex".split()
)
_C_CLASS_INTRO = frozenset(("struct", "union", "enum"))

_C_RULES = (
    ("comment1", r"//[^\n]*"),
    ("commentm", r"/\*(?s:.*?)(?:\*/|\Z)"),
    ("preproc", r"(?<![^\n])[ \t]*\#(?:\\\n|[^\n])*"),
    ("string", r'"(?:[^"\\\n]|\\.)*"?'),
    ("char", r"'(?:[^'\\\n]|\\.)*'?"),
    ("hex", r"0[xX][0-9a-fA-F]+[uUlL]*"),
    ("float", r"(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fFlL]?|\d+[eE][+-]?\d+[fFlL]?"),
    ("int", r"\d+[uUlL]*"),
    ("word", r"[A-Za-z_]\w*"),
    ("space", r"[ \t\f\v]+"),
    ("newline", r"\n"),
    ("operator", r"[-+*/%=<>!&|^~?:]+"),
    ("punct", r"[()\[\]{},;.]+"),
    ("other", r"."),
)
_PY_RULES = (
    ("comment1", r"\#[^\n]*"),
    ("decorator", r"@[A-Za-z_]\w*"),
    ("string3", r"(?i:[rbuf]{0,2})(?:\"\"\"(?s:.*?)(?:\"\"\"|\Z)|'''(?s:.*?)(?:'''|\Z))"),
    ("string2", r'(?i:[rbuf]{0,2})"(?:[^"\\\n]|\\.)*"?'),
    ("string1", r"(?i:[rbuf]{0,2})'(?:[^'\\\n]|\\.)*'?"),
    ("hex", r"0[xX][0-9a-fA-F_]+"),
    ("float", r"(?:\d[\d_]*\.[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?j?|\d[\d_]*[eE][+-]?\d+j?"),
    ("int", r"\d[\d_]*"),
    ("word", r"[A-Za-z_]\w*"),
    ("space", r"[ \t\f\v]+|\\\n"),
    ("newline", r"\n"),
    ("operator", r"[-+*/%@&|^~<>=!.]+"),
    ("punct", r"[()\[\]{},:;]+"),
    ("other", r"."),
)
_INCLUDE = re.compile(r"([ \t]*\#[ \t]*include)([ \t]*)(<[^>\n]*>|\"[^\"\n]*\")(.*)", re.S)


def _compile(rules) -> re.Pattern:
    return re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in rules))


@cache
def _tables(language: str):
    """(scanner, token type per rule, token type per word, type of the word after a word)."""
    _require_pygments()
    from pygments.lexers.c_cpp import CLexer
    from pygments.lexers.c_like import CudaLexer
    from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text

    types = {
        "comment1": Comment.Single, "commentm": Comment.Multiline, "preproc": Comment.Preproc,
        "string": String, "char": String.Char, "hex": Number.Hex, "float": Number.Float,
        "int": Number.Integer, "space": Text.Whitespace, "newline": Text.Whitespace,
        "operator": Operator, "punct": Punctuation, "other": Text, "decorator": Name.Decorator,
        "string3": String.Double, "string2": String.Double, "string1": String.Single,
    }  # fmt: skip
    if language == "python":
        import builtins
        import keyword

        constants = ("True", "False", "None")
        words = {w: Name.Builtin for w in dir(builtins) if not w.startswith("_")}
        words.update({w: Name.Exception for w in dir(builtins) if w.endswith(("Error", "Warning"))})
        words.update({w: Name.Builtin.Pseudo for w in ("self", "cls")})
        words.update({w: Keyword for w in keyword.kwlist})
        words.update({w: Keyword.Constant for w in constants})
        words.update({w: Operator.Word for w in ("in", "is", "and", "or", "not")})
        words.update({w: Keyword.Namespace for w in ("import", "from")})
        after = {"def": Name.Function, "class": Name.Class}
        return _compile(_PY_RULES), types, words, after
    words = {w: Keyword for w in _C_KEYWORDS}
    words.update({w: Keyword.Reserved for w in _C_RESERVED})
    words.update({w: Keyword.Type for w in _C_TYPES | CLexer.stdlib_types | CLexer.c99_types})
    if language == "cuda":
        qualifiers = (*CudaLexer.variable_qualifiers, *CudaLexer.vector_types)
        words.update({w: Keyword.Type for w in qualifiers})
        words.update({w: Name.Builtin for w in CudaLexer.variables})
        words.update({w: Keyword.Reserved for w in CudaLexer.function_qualifiers})
        words.update({w: Name.Function for w in CudaLexer.functions})
    after = {w: Name.Class for w in _C_CLASS_INTRO}
    return _compile(_C_RULES), types, words, after


def _tokens(text: str, language: str):
    """(pygments token type, text) pairs covering `text`."""
    from pygments.token import Comment, Name, Text

    if language == "text":
        yield Text, text
        return
    if language not in LANGUAGES:
        raise ValueError(f"lines_html: unknown language {language!r}; expected one of {LANGUAGES}")
    scanner, types, words, after = _tables(language)
    pending = None  # the type the next word takes ("def" -> a function name)
    for match in scanner.finditer(text):
        rule, value = match.lastgroup, match.group()
        if rule == "word":
            yield pending or words.get(value, Name), value
            pending = after.get(value)
        elif rule == "preproc" and (include := _INCLUDE.fullmatch(value)):
            directive, gap, filename, rest = include.groups()
            yield Comment.Preproc, directive
            yield Text.Whitespace, gap
            yield Comment.PreprocFile, filename
            yield Comment.Preproc, rest
        else:
            if rule not in ("space", "newline"):
                pending = None
            yield types[rule], value


@cache
def _css_class(ttype) -> str:
    """The short class pygments' HTML formatter uses for a token type ("" for plain text)."""
    from pygments.token import STANDARD_TYPES

    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    return STANDARD_TYPES[ttype]


def _split_lines(text: str) -> list[str]:
    """The text's lines without their newlines ("a\\nb\\n" and "a\\nb" both have 2)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _line(number: int, inner: str, extra_class: str = "") -> str:
    cls = f"sl-line {extra_class}" if extra_class else "sl-line"
    return f'<span class="{cls}" data-line="{number}">{inner}</span>\n'


def _token_lines(text: str, language: str) -> list[list[str]]:
    """The lexed text as HTML fragments per line; a token spanning lines is split per line."""
    lines: list[list[str]] = [[]]
    for ttype, value in _tokens(text, language):
        cls = _css_class(ttype)
        # Whitespace is unstyled in practice; leaving it bare keeps the HTML small.
        plain = cls in ("", "w")
        pieces = value.split("\n")
        for index, piece in enumerate(pieces):
            if index:
                lines.append([])
            if piece:
                escaped = _escape(piece)
                lines[-1].append(escaped if plain else f'<span class="{cls}">{escaped}</span>')
    return lines


def lines_html(text: str, language: str) -> str:
    """`text` highlighted as `language` ("python" for TVMScript, "c", "cuda" or "text"), one
    `sl-line` span per source line."""
    lines = _split_lines(text)
    if not lines:
        return ""
    fragments = _token_lines("\n".join(lines) + "\n", language)
    # The lexer ends every text with a newline, so there is one (empty) list past the last line.
    return "".join(_line(n, "".join(fragments[n - 1])) for n in range(1, len(lines) + 1))


def _diff_classes(lines: list[str]) -> list[str]:
    """The class of each unified-diff line. Inside a hunk (counted from its @@ header) "+"/"-"
    lines are changes even when they look like "---"/"+++" file headers."""
    classes = []
    old_left = new_left = 0
    for line in lines:
        match = _HUNK.match(line)
        in_hunk = old_left > 0 or new_left > 0
        if match:
            old_left = int(match.group(1) or 1)
            new_left = int(match.group(2) or 1)
            classes.append("sl-hunk")
        elif in_hunk and line.startswith("+"):
            new_left -= 1
            classes.append("sl-add")
        elif in_hunk and line.startswith("-"):
            old_left -= 1
            classes.append("sl-del")
        elif in_hunk and not line.startswith("\\"):  # context ("\ No newline" is meta)
            old_left, new_left = old_left - 1, new_left - 1
            classes.append("")
        elif line.startswith(("---", "+++", "diff ", "index ", "\\")):
            classes.append("sl-hunk")
        elif line.startswith("+"):  # a diff without hunk headers
            classes.append("sl-add")
        elif line.startswith("-"):
            classes.append("sl-del")
        else:
            classes.append("")
    return classes


def diff_html(diff_text: str) -> str:
    """A unified diff as `sl-line` spans: added lines `sl-add`, removed `sl-del`, hunk headers
    and file headers `sl-hunk`."""
    lines = _split_lines(diff_text)
    classes = _diff_classes(lines)
    return "".join(
        _line(n, _escape(line), cls) for n, (line, cls) in enumerate(zip(lines, classes), 1)
    )


def css() -> str:
    """Pygments' default style scoped under `.sl-code`, plus the diff line colours."""
    _require_pygments()
    from pygments.formatters import HtmlFormatter

    rules = HtmlFormatter(style="default").get_style_defs(SCOPE).splitlines()
    # Drop the unscoped line-number rules (pre, td.linenos, ...): the explorer has none and
    # they would restyle every <pre> on the page.
    scoped = [rule for rule in rules if rule.startswith(SCOPE)]
    header = "/* Generated by schedlab.ui.views.highlight.write_css(); do not edit. */\n"
    return header + "\n".join(scoped) + "\n" + _DIFF_CSS


def write_css(path: str | Path = CSS_PATH) -> Path:
    """Regenerate the highlight stylesheet (static/highlight.css by default)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(css(), encoding="utf-8")
    return path
