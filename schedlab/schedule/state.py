"""An immutable view of a module being scheduled: find loops and blocks by their stable uid, walk
their ancestors, and replace a subtree (rebuilding only the path above it).

TVM keeps a mutable "sref" tree beside its IR; here the IR is immutable, every For and Block has
a `uid` that survives copies, and `ScheduleState` indexes one module version. Primitives are
functions `ScheduleState -> ScheduleState` built from these queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from schedlab.ir.function import IRModule, PrimFunc
from schedlab.ir.node import child_fields
from schedlab.ir.stmt import Block, BlockRealize, For, SeqStmt, Stmt


@dataclass(frozen=True)
class _Location:
    func_name: str
    # ancestors from the function body down to the node's parent: (node, field, index or None)
    path: tuple[tuple[Stmt, str, int | None], ...]


class ScheduleState:
    """One version of the module under scheduling, with uid and parent indexes."""

    __slots__ = ("mod", "__dict__")

    def __init__(self, mod: IRModule):
        self.mod = mod

    # -- indexes ----------------------------------------------------------------------------
    @cached_property
    def _index(self) -> tuple[dict[int, Stmt], dict[int, _Location]]:
        by_uid: dict[int, Stmt] = {}
        where: dict[int, _Location] = {}
        for name, func in self.mod.items():
            if isinstance(func, PrimFunc):
                _walk(func.body, name, (), by_uid, where)
        return by_uid, where

    def has(self, uid: int) -> bool:
        return uid in self._index[0]

    def node(self, uid: int) -> For | Block:
        """The loop or block with this uid (KeyError when it is not in this version)."""
        return self._index[0][uid]

    def location(self, node: Stmt) -> _Location:
        """Where a statement of this version sits (identity lookup)."""
        return self._index[1][id(node)]

    def func_name_of(self, uid: int) -> str:
        return self._index[1][id(self.node(uid))].func_name

    def func_of(self, uid: int) -> PrimFunc:
        return self.mod[self.func_name_of(uid)]

    def uids(self) -> set[int]:
        return set(self._index[0])

    # -- navigation -------------------------------------------------------------------------
    def ancestors(self, node: Stmt) -> list[Stmt]:
        """Every statement above `node`, outermost first (BlockRealize/SeqStmt/If included)."""
        return [step[0] for step in self.location(node).path]

    def parent_stmt(self, node: Stmt) -> Stmt | None:
        path = self.location(node).path
        return path[-1][0] if path else None

    def realize_of(self, block: Block) -> BlockRealize:
        parent = self.parent_stmt(block)
        if not isinstance(parent, BlockRealize):  # pragma: no cover - the IR form guarantees it
            raise AssertionError(f"block {block.name_hint} is not under a BlockRealize")
        return parent

    def scope_block(self, node: Stmt) -> Block | None:
        """The nearest block strictly above `node` (None for a function's root)."""
        for ancestor in reversed(self.ancestors(node)):
            if isinstance(ancestor, Block):
                return ancestor
        return None

    def loops_above(self, node: Stmt) -> list[For]:
        """The loops between `node` and its scope block, outermost first."""
        loops: list[For] = []
        for ancestor in reversed(self.ancestors(node)):
            if isinstance(ancestor, Block):
                break
            if isinstance(ancestor, For):
                loops.append(ancestor)
        return loops[::-1]

    def sref_parent(self, node: Stmt) -> For | Block | None:
        """The nearest For or Block above `node` (TVM's sref parent)."""
        for ancestor in reversed(self.ancestors(node)):
            if isinstance(ancestor, (For, Block)):
                return ancestor
        return None

    def child_blocks(self, node: Stmt) -> list[Block]:
        """Blocks inside `node` (under any loops, but not inside a nested block), in program
        order: a scope's child blocks."""
        found: list[Block] = []
        body = node.body if isinstance(node, (For, Block)) else node
        _collect_child_blocks(body, found)
        return found

    def blocks_named(self, name: str, func_name: str | None = None) -> list[Block]:
        return [
            b for b in self._index[0].values()
            if isinstance(b, Block) and b.name_hint == name
            and (func_name is None or self.location(b).func_name == func_name)
        ]  # fmt: skip

    def is_ancestor(self, outer: Stmt, inner: Stmt) -> bool:
        return any(a is outer for a in self.ancestors(inner))

    # -- rewriting --------------------------------------------------------------------------
    def replace(self, old: Stmt, new: Stmt) -> ScheduleState:
        """A new state with `old` (a statement of this version) replaced by `new`."""
        return self.replace_many({id(old): (old, new)})

    def replace_many(self, replacements: dict) -> ScheduleState:
        """Several disjoint replacements at once: {id(old): (old, new)}."""
        functions = dict(self.mod.functions())
        by_func: dict[str, list] = {}
        for old, new in replacements.values():
            by_func.setdefault(self.location(old).func_name, []).append((old, new))
        for name, items in by_func.items():
            func = functions[name]
            body = _rebuild(func.body, {id(o): n for o, n in items})
            functions[name] = func.with_body(body)
        return ScheduleState(IRModule(functions, self.mod.attrs))

    def with_func(self, name: str, func: PrimFunc) -> ScheduleState:
        return ScheduleState(self.mod.with_function(name, func))


def _walk(node, func_name, path, by_uid, where) -> None:
    if isinstance(node, Stmt):
        where[id(node)] = _Location(func_name, path)
        if isinstance(node, (For, Block)):
            by_uid[node.uid] = node
    for field in child_fields(type(node)):
        value = getattr(node, field)
        if isinstance(value, Stmt):
            _walk(value, func_name, path + ((node, field, None),), by_uid, where)
        elif isinstance(value, tuple):
            for index, item in enumerate(value):
                if isinstance(item, Stmt):
                    _walk(item, func_name, path + ((node, field, index),), by_uid, where)


def _collect_child_blocks(stmt: Stmt | None, found: list[Block]) -> None:
    if stmt is None:
        return
    if isinstance(stmt, BlockRealize):
        found.append(stmt.block)
        return
    if isinstance(stmt, Block):
        found.append(stmt)
        return
    for field in child_fields(type(stmt)):
        value = getattr(stmt, field)
        if isinstance(value, Stmt):
            _collect_child_blocks(value, found)
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, Stmt):
                    _collect_child_blocks(item, found)


def _rebuild(node, replacements: dict[int, Stmt]):
    """`node` with the statements in `replacements` swapped in; untouched subtrees are shared.
    Replacing a statement inside a SeqStmt by a SeqStmt splices it flat."""
    if id(node) in replacements:
        return replacements[id(node)]
    if not isinstance(node, Stmt):
        return node
    changes = {}
    for field in child_fields(type(node)):
        value = getattr(node, field)
        if isinstance(value, Stmt):
            new = _rebuild(value, replacements)
            if new is not value:
                changes[field] = new
        elif isinstance(value, tuple) and any(isinstance(v, Stmt) for v in value):
            items = [_rebuild(v, replacements) for v in value]
            if any(a is not b for a, b in zip(items, value)):
                changes[field] = tuple(items)
    if not changes:
        return node
    if isinstance(node, SeqStmt):
        return SeqStmt.flatten(*changes["seq"])
    return node.replace(**changes)
