"""The primitives reference page, generated from the registry: every primitive's method
signature, TVM instruction name, trace inputs/attributes and docstring, grouped by family.

    python -m schedlab.schedule.reference            # rewrite docs/primitives.md
    python -m schedlab.schedule.reference --check    # exit 1 when the page is out of date

A test runs the check, so the page in the repository always matches the code.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys
from pathlib import Path

from .instruction import InstructionKind, all_kinds, is_builtin

DEFAULT_OUTPUT = Path(__file__).resolve().parents[2] / "docs" / "primitives.md"
_RETURNS = {
    None: "None", "loop": "LoopRV", "loops": "list[LoopRV]", "block": "BlockRV",
    "blocks": "list[BlockRV]", "expr": "ExprRV", "exprs": "list[ExprRV]",
}  # fmt: skip
_HANDLES = {"Block": "BlockRV", "For": "LoopRV"}
_HANDLE_WORDS = re.compile(r"\b(Block|For)\b")
_PARAM = re.compile(r"^(\*{0,2}[A-Za-z_]\w*): (.*)$")
_HEADER = """\
# Schedule primitives

Generated from the primitive registry by `python -m schedlab.schedule.reference`; do not edit
by hand. Each entry is a `Schedule` method (`sch.<name>(...)`), the instruction name it has in
traces (TVM's name), the parameters a trace records as inputs (handles) and as attributes
(plain data), and its documentation: what it does, its preconditions and an example, which runs
as a doctest.
"""


def render_reference(kinds: list[InstructionKind] | None = None) -> str:
    """The Markdown page for `kinds` (default: every built-in primitive; an installed
    extension's primitives are its own to document)."""
    kinds = [k for k in all_kinds() if is_builtin(k)] if kinds is None else kinds
    families = _by_family(kinds)
    parts = [_HEADER, "## Contents\n"]
    for module, members in families.items():
        names = ", ".join(f"[`{k.method}`](#{_anchor(k.method)})" for k in members)
        parts.append(f"- **{_family_name(module)}**: {names}")
    for module, members in families.items():
        parts.append(f"\n## {_family_name(module)}\n")
        summary = _family_summary(module)
        if summary:
            parts.append(summary + "\n")
        parts.extend(_render_kind(kind) for kind in members)
    return "\n".join(parts).rstrip() + "\n"


def _by_family(kinds: list[InstructionKind]) -> dict[str, list[InstructionKind]]:
    """Kinds grouped by the module that defines them, families sorted by module name and
    primitives kept in registration order."""
    families: dict[str, list[InstructionKind]] = {}
    for kind in kinds:
        families.setdefault(kind.fn.__module__, []).append(kind)
    return dict(sorted(families.items(), key=lambda item: _family_name(item[0])))


def _family_name(module: str) -> str:
    return module.rsplit(".", 1)[-1]


def _family_summary(module: str) -> str:
    """The first paragraph of the family module's docstring."""
    doc = inspect.getdoc(importlib.import_module(module)) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _anchor(method: str) -> str:
    return method.replace("_", "-").lower()


def _render_kind(kind: InstructionKind) -> str:
    signature = f"sch.{kind.method}({_parameters(kind)}) -> {_RETURNS[kind.outputs]}"
    facts = [
        f"instruction `{kind.name}`",
        "inputs " + (", ".join(f"`{p}`" for p in kind.inputs) or "none"),
        "attributes " + (", ".join(f"`{p}`" for p in kind.attrs) or "none"),
    ]
    if kind.is_sampling or kind.is_pure:
        facts.append("sampling (its decision is recorded)" if kind.is_sampling else "pure")
    lines = [f"### {kind.method}\n", "```python", signature, "```\n", "; ".join(facts) + ".\n"]
    lines.append(_render_doc(kind.doc or "(undocumented)"))
    return "\n".join(lines) + "\n"


def _parameters(kind: InstructionKind) -> str:
    """The method's parameters as users pass them: the primitive receives IR nodes (For, Block)
    where the user passes handles (LoopRV, BlockRV)."""
    parts = []
    for param in kind.signature.parameters.values():
        star = "*" if param.kind is inspect.Parameter.VAR_POSITIONAL else ""
        text = star + param.name
        annotation = param.annotation
        if annotation is not inspect.Parameter.empty:
            if not isinstance(annotation, str):
                annotation = inspect.formatannotation(annotation)
            if param.name in kind.inputs:
                annotation = _HANDLE_WORDS.sub(lambda m: _HANDLES[m.group(0)], annotation)
            text += f": {annotation}"
        if param.default is not inspect.Parameter.empty:
            spaced = annotation is not inspect.Parameter.empty
            text += (" = " if spaced else "=") + repr(param.default)
        parts.append(text)
    return ", ".join(parts)


def _render_doc(doc: str) -> str:
    """Docstring text as Markdown: prose stays prose, doctest sessions become `pycon` blocks,
    indented bullet or `name: text` lists become Markdown lists, and other indented blocks
    (loop nests, code) become text blocks."""
    out: list[str] = []
    for kind, lines in _segments(doc.splitlines()):
        if kind == "pycon":
            out += ["```pycon", *lines, "```"]
        elif kind == "indented":
            margin = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
            out += _render_indented([line[margin:] for line in lines])
        else:
            out += lines
    return "\n".join(out)


def _segments(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Consecutive lines grouped as "pycon" (a doctest: prompts and their output, up to a
    blank line), "indented" (2+ spaces; blank lines inside kept) or "prose"."""
    segments: list[tuple[str, list[str]]] = []
    for index, line in enumerate(lines):
        previous = segments[-1][0] if segments else None
        if line.startswith(">>>") or (previous == "pycon" and line.strip()):
            kind = "pycon"
        elif line.startswith("  ") and _opens_block(previous, lines[index - 1] if index else ""):
            kind = "indented"
        elif previous == "indented" and not line.strip():
            following = next((x for x in lines[index + 1 :] if x.strip()), "")
            kind = "indented" if following.startswith("  ") else "prose"
        else:
            kind = "prose"
        if kind != previous:
            segments.append((kind, []))
        segments[-1][1].append(line)
    return segments


def _opens_block(previous: str | None, line: str) -> bool:
    """Whether an indented line after `line` starts a block: after a blank line or a heading
    such as "Parameters:", or inside a block; otherwise it continues the line above (a
    wrapped list item), as in Markdown."""
    heading = line.rstrip().endswith(":") and not line.startswith((" ", "-"))
    return previous == "indented" or not line.strip() or heading


def _render_indented(lines: list[str]) -> list[str]:
    """A bullet list stays a list, `name: text` lines become a list of parameters; anything
    else is fenced as text."""
    first = lines[0]
    if first.startswith("- "):
        return [line if line.startswith("- ") else "  " + line.strip() for line in lines]
    if _PARAM.match(first) and all(_PARAM.match(x) or x.startswith(" ") for x in lines):
        items = []
        for line in lines:
            match = _PARAM.match(line)
            items.append(f"- `{match[1]}`: {match[2]}" if match else "  " + line.strip())
        return items
    return ["```text", *lines, "```"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the schedule primitives reference.")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the Markdown file")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is outdated")
    args = parser.parse_args(argv)
    import schedlab.schedule  # noqa: F401  (registers every primitive)

    text = render_reference()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run python -m schedlab.schedule.reference")
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output} ({sum(map(is_builtin, all_kinds()))} primitives)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
