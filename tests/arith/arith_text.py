"""A compact infix rendering of expressions for assertions (independent of the printer)."""

from schedlab.ir import expr as E

_SYMBOLS = {
    E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.Mod: "%%", E.FloorDiv: "//",
    E.FloorMod: "%", E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=",
    E.And: "and", E.Or: "or",
}  # fmt: skip
_PREC = {E.Or: 1, E.And: 2, E.EQ: 3, E.NE: 3, E.LT: 3, E.LE: 3, E.GT: 3, E.GE: 3, E.Add: 4,
         E.Sub: 4, E.Mul: 5, E.Div: 5, E.Mod: 5, E.FloorDiv: 5, E.FloorMod: 5}  # fmt: skip


def text(node, parent_prec: int = 0, right: bool = False) -> str:
    """`i*16 + j`-style text; parentheses only where needed."""
    if isinstance(node, E.Var):
        return node.name
    if isinstance(node, E.IntImm):
        if node.dtype.is_bool:
            return "True" if node.value else "False"
        return str(node.value)
    if isinstance(node, E.FloatImm):
        return repr(node.value)
    kind = type(node)
    if kind in _SYMBOLS:
        prec = _PREC[kind]
        sep = " " if prec <= 4 else ""
        body = f"{text(node.a, prec)}{sep}{_SYMBOLS[kind]}{sep}{text(node.b, prec, True)}"
        needs = prec < parent_prec or (prec == parent_prec and right)
        return f"({body})" if needs else body
    if isinstance(node, (E.Min, E.Max)):
        return f"{kind.__name__.lower()}({text(node.a)}, {text(node.b)})"
    if isinstance(node, E.Not):
        return f"not {text(node.a, 6)}"
    if isinstance(node, E.Select):
        return f"select({text(node.condition)}, {text(node.true_value)}, {text(node.false_value)})"
    if isinstance(node, E.Cast):
        return f"{node.dtype}({text(node.value)})"
    if isinstance(node, E.BufferLoad):
        return f"{node.buffer.name}[{', '.join(text(i) for i in node.indices)}]"
    if isinstance(node, E.Call):
        return f"{node.op}({', '.join(text(a) for a in node.args)})"
    if isinstance(node, E.Range):
        return f"{text(node.min)}:{text(E.Add(node.min, node.extent))}"
    return repr(node)


def region_text(region) -> str:
    """`A[vi:vi + 1, 0:16]` with extents shown as (min, extent)."""
    parts = [f"{text(r.min)}+{text(r.extent)}" for r in region.region]
    return f"{region.buffer.name}[{', '.join(parts)}]"
