"""Visitors and mutators over the IR, plus the common walks built on them.

Dispatch is by class name along the MRO: a `Visitor` subclass defines `visit_For`,
`visit_BufferLoad`, ... and everything else is walked generically through the dataclass fields
(those not marked `child=False`). A `Mutator` rebuilds a node only when a child changed, so
untouched subtrees are shared and keep their identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .expr import PrimExpr, Var
from .node import Node, child_fields


def _dispatch_table(cls) -> dict:
    table = cls.__dict__.get("_dispatch_cache")
    if table is None:
        table = {}
        cls._dispatch_cache = table
    return table


class Visitor:
    """Read-only walk. Override `visit_<ClassName>(node)`; call `self.generic_visit(node)` to walk
    the children of a node you handle."""

    def visit(self, node):
        table = _dispatch_table(type(self))
        method = table.get(type(node))
        if method is None:
            method = self._find_method(type(node))
            table[type(node)] = method
        return method(self, node)

    @classmethod
    def _find_method(cls, node_type):
        for klass in node_type.__mro__:
            method = getattr(cls, f"visit_{klass.__name__}", None)
            if method is not None:
                return method
        return cls.generic_visit

    def generic_visit(self, node):
        for name in child_fields(type(node)):
            self._visit_value(getattr(node, name))

    def _visit_value(self, value):
        if isinstance(value, Node):
            self.visit(value)
        elif isinstance(value, (tuple, list)):
            for item in value:
                self._visit_value(item)
        elif isinstance(value, dict):
            for item in value.values():
                self._visit_value(item)


class Mutator(Visitor):
    """Rewriting walk. `visit_<ClassName>` returns the replacement node; the default rebuilds
    the node from its visited children (sharing it when nothing changed)."""

    def generic_visit(self, node):
        changes = {}
        for name in child_fields(type(node)):
            old = getattr(node, name)
            new = self._mutate_value(old)
            if new is not old:
                changes[name] = new
        return node.replace(**changes) if changes else node

    def _mutate_value(self, value):
        if isinstance(value, Node):
            return self.visit(value)
        if isinstance(value, tuple):
            items = [self._mutate_value(item) for item in value]
            return value if all(a is b for a, b in zip(items, value)) else tuple(items)
        if isinstance(value, dict):
            items = {key: self._mutate_value(item) for key, item in value.items()}
            return value if all(items[k] is value[k] for k in value) else items
        return value


# Names TVM users look for.
ExprVisitor = StmtVisitor = StmtExprVisitor = Visitor
ExprMutator = StmtMutator = StmtExprMutator = Mutator


def child_nodes(node: Node) -> list[Node]:
    """The nodes directly below `node`, in field order: what the generic walk visits."""
    found: list[Node] = []
    for name in child_fields(type(node)):
        _collect_nodes(getattr(node, name), found)
    return found


def _collect_nodes(value, found: list) -> None:
    if isinstance(value, Node):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _collect_nodes(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect_nodes(item, found)


# The walks below keep their own stack instead of a Visitor's recursive dispatch: they are the
# scheduling core's most frequent calls (a tuning replay makes hundreds of thousands), and an
# expression of any depth walks without hitting Python's recursion limit.
def post_order_visit(node: Node, fn: Callable[[Node], Any]) -> None:
    """Call `fn` on every node below and including `node`, children first."""
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        current, expanded = stack.pop()
        if expanded:
            fn(current)
            continue
        stack.append((current, True))
        stack.extend((child, False) for child in reversed(child_nodes(current)))


def pre_order_visit(node: Node, fn: Callable[[Node], Any]) -> None:
    """Call `fn` on every node, parents first; returning False skips a node's children."""
    stack = [node]
    while stack:
        current = stack.pop()
        if fn(current) is False:
            continue
        children = child_nodes(current)
        children.reverse()
        stack.extend(children)


class _Transform(Mutator):
    def __init__(self, preorder, postorder, only_types):
        self.preorder = preorder
        self.postorder = postorder
        self.only_types = only_types

    def visit(self, node):
        applies = self.only_types is None or isinstance(node, self.only_types)
        if applies and self.preorder is not None:
            replaced = self.preorder(node)
            if replaced is not None:
                return replaced
        node = super().visit(node)
        if applies and self.postorder is not None:
            replaced = self.postorder(node)
            if replaced is not None:
                return replaced
        return node


def ir_transform(node: Node, preorder=None, postorder=None, only_types=None) -> Node:
    """Rewrite a tree with callbacks: `preorder(n)` may return a replacement (children are then
    not visited); `postorder(n)` sees the node with rewritten children and may replace it.
    Returning None keeps the node. `only_types` limits which node types see the callbacks."""
    return _Transform(preorder, postorder, only_types).visit(node)


class _Substitute(Mutator):
    def __init__(self, vmap_by_id):
        self.vmap = vmap_by_id

    def visit_Var(self, node):
        return self.vmap.get(id(node), node)


def substitute(node: Node, vmap: dict | Callable[[Var], PrimExpr | None]) -> Node:
    """Replace variables: `vmap` maps Var -> expression, or is a function returning the
    replacement (None keeps the variable). Buffers are not rewritten."""
    if callable(vmap) and not isinstance(vmap, dict):

        class _ByFunction(Mutator):
            def visit_Var(self, var):
                replaced = vmap(var)
                return var if replaced is None else replaced

        return _ByFunction().visit(node)
    if not vmap:
        return node
    return _Substitute({id(k): v for k, v in vmap.items()}).visit(node)


def collect_vars(node: Node) -> list[Var]:
    """The distinct variables used in `node` (outside buffers), in first-use order."""
    seen: dict[int, Var] = {}

    def record(n):
        if isinstance(n, Var):
            seen.setdefault(id(n), n)

    post_order_visit(node, record)
    return list(seen.values())


def uses_var(node: Node, predicate: Callable[[Var], bool]) -> bool:
    """Whether some variable in `node` satisfies `predicate`."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Var) and predicate(current):
            return True
        stack.extend(child_nodes(current))
    return False


def count_nodes(node: Node, types) -> int:
    count = 0

    def check(n):
        nonlocal count
        if isinstance(n, types):
            count += 1

    post_order_visit(node, check)
    return count


__all__ = [
    "Visitor", "Mutator", "ExprVisitor", "ExprMutator", "StmtVisitor", "StmtMutator",
    "StmtExprVisitor", "StmtExprMutator", "post_order_visit", "pre_order_visit",
    "ir_transform", "substitute", "collect_vars", "uses_var", "count_nodes", "child_nodes",
    "PrimExpr",
]  # fmt: skip
