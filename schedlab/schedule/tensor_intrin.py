"""Tensor intrinsics (TVM's `TensorIntrin`): a description PrimFunc (what the hardware
instruction computes, as loops and blocks) and an implementation PrimFunc (how: vector code, a
micro-kernel), over the same buffer parameters.

`tensorize` matches a block's subtree against a description and swaps in the implementation,
binding the implementation's buffers to the matched regions with `match_buffer`.

    TensorIntrin.register("my_dot_4", dot_desc, dot_impl)
    sch.tensorize(loop, "my_dot_4")

Built-in intrinsics live in `schedlab.schedule.intrinsics` and register on first use, with those
of installed extensions (entry-point group `schedlab.intrinsics`).
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.arith import Analyzer
from schedlab.ir import expr as E
from schedlab.ir import stmt as S
from schedlab.ir.buffer import Buffer, BufferRegion
from schedlab.ir.function import PrimFunc
from schedlab.ir.functor import substitute, uses_var
from schedlab.ir.node import child_fields

_REGISTRY: dict[str, TensorIntrin] = {}


class TensorIntrinError(ValueError):
    """A tensor intrinsic is malformed, or no intrinsic has the requested name."""


@dataclass(frozen=True)
class TensorIntrin:
    """A description (`desc`) and an implementation (`impl`) of one tensor instruction. Both
    take the same buffers (same count, order, shapes and dtypes)."""

    desc: PrimFunc
    impl: PrimFunc

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> None:
        """Register an intrinsic under `name` (an existing name needs `override=True`)."""
        if not isinstance(name, str) or not name:
            raise TensorIntrinError(f"TensorIntrin.register: name must be a non-empty str, "
                                    f"got {name!r}")  # fmt: skip
        if name in _REGISTRY and not override:
            raise TensorIntrinError(
                f"TensorIntrin.register: {name!r} is already registered (pass override=True)"
            )
        _check_pair(name, desc, impl)
        _REGISTRY[name] = TensorIntrin(desc, impl)

    @staticmethod
    def get(name: str, allow_missing: bool = False) -> TensorIntrin | None:
        """The intrinsic registered as `name` (None if missing and `allow_missing`)."""
        _load_builtin()
        found = _REGISTRY.get(name)
        if found is None and not allow_missing:
            known = ", ".join(sorted(_REGISTRY)) or "none"
            raise TensorIntrinError(f"no tensor intrinsic named {name!r}; registered: {known}")
        return found

    @staticmethod
    def names() -> list[str]:
        """Every registered intrinsic name, sorted."""
        _load_builtin()
        return sorted(_REGISTRY)

    @property
    def desc_body(self) -> S.Stmt:
        return root_body(self.desc)

    @property
    def impl_body(self) -> S.Stmt:
        return root_body(self.impl)


def _load_builtin() -> None:
    from schedlab import plugins

    from . import intrinsics  # noqa: F401  (importing registers the built-in intrinsics)

    plugins.load("schedlab.intrinsics")  # extensions' intrinsics (docs/extending.md)


def root_body(func: PrimFunc) -> S.Stmt:
    """The statement inside a function's root block (or its body when it has none)."""
    body = func.body
    if isinstance(body, S.BlockRealize) and not body.block.iter_vars:
        return body.block.body
    return body


def root_allocs(func: PrimFunc) -> tuple[Buffer, ...]:
    body = func.body
    if isinstance(body, S.BlockRealize) and not body.block.iter_vars:
        return body.block.alloc_buffers
    return ()


def _check_pair(name: str, desc: PrimFunc, impl: PrimFunc) -> None:
    for what, func in (("desc", desc), ("impl", impl)):
        if not isinstance(func, PrimFunc):
            raise TensorIntrinError(
                f"TensorIntrin {name}: {what} must be a PrimFunc, got {type(func).__name__}"
            )
    dbufs, ibufs = desc.buffers, impl.buffers
    if len(dbufs) != len(ibufs) or len(dbufs) != len(desc.params):
        raise TensorIntrinError(
            f"TensorIntrin {name}: desc and impl must take the same buffers; desc takes "
            f"{len(dbufs)}, impl {len(ibufs)}"
        )
    ana = Analyzer()
    for d, i in zip(dbufs, ibufs):
        same = len(d.shape) == len(i.shape) and all(
            ana.can_prove_equal(a, b) for a, b in zip(d.shape, i.shape)
        )
        if not same or d.dtype != i.dtype:
            raise TensorIntrinError(
                f"TensorIntrin {name}: buffer {d.name} of desc is {d.dtype}{list(d.shape)}, "
                f"buffer {i.name} of impl is {i.dtype}{list(i.shape)}; they must agree"
            )
    if not isinstance(root_body(desc), (S.For, S.BlockRealize, S.SeqStmt)):
        raise TensorIntrinError(f"TensorIntrin {name}: desc must describe loops and blocks")


# ---------------------------------------------------------------------------------------------
# matching a block's subtree against a description
# ---------------------------------------------------------------------------------------------
class MatchError(Exception):
    """The subtree differs from the description (the message says where and how)."""


@dataclass
class IntrinMatch:
    """How a description matched: for each desc parameter buffer (in order), the target
    buffer and the region of it that the intrinsic covers."""

    regions: list[BufferRegion]


class Matcher:
    """Structural comparison of a target statement with a description statement. Variables
    bound in the description (loops, iter vars) map to the target's; each description buffer
    maps to one target buffer at a fixed offset (TVM's TensorizeComparator)."""

    def __init__(self):
        self.analyzer = Analyzer()
        self.vars: dict[int, E.Var] = {}
        self.inner: set[int] = set()  # target vars bound inside the matched subtree
        self.buffers: dict[int, Buffer] = {}
        self.claimed: dict[int, Buffer] = {}
        self.offsets: dict[int, list[E.PrimExpr]] = {}
        self.path: list[str] = []

    def fail(self, message: str) -> MatchError:
        where = " > ".join(self.path) or "the top"
        return MatchError(f"at {where}: {message}")

    # -- statements -----------------------------------------------------------------------------
    def stmt(self, t: S.Stmt, d: S.Stmt) -> None:
        if type(t) is not type(d):
            raise self.fail(f"the block has a {_kind(t)} where the intrinsic has a {_kind(d)}")
        method = getattr(self, f"_s_{type(d).__name__}", None)
        if method is None:
            raise self.fail(f"{_kind(d)} statements are not supported in descriptions")
        method(t, d)

    def _s_For(self, t: S.For, d: S.For) -> None:
        self.path.append(f"loop {t.loop_var.name}")
        self.equal_value(t.min, d.min, "loop start")
        self.equal_value(t.extent, d.extent, "loop extent")
        self.bind(t.loop_var, d.loop_var)
        self.stmt(t.body, d.body)
        self.path.pop()

    def _s_BlockRealize(self, t: S.BlockRealize, d: S.BlockRealize) -> None:
        tb, db = t.block, d.block
        self.path.append(f"block {tb.name_hint}")
        if len(tb.iter_vars) != len(db.iter_vars):
            raise self.fail(f"{len(tb.iter_vars)} iter vars, the intrinsic's block has "
                            f"{len(db.iter_vars)}")  # fmt: skip
        for tv, dv, tval, dval in zip(tb.iter_vars, db.iter_vars, t.iter_values, d.iter_values):
            if tv.iter_type != dv.iter_type:
                raise self.fail(f"iter var {tv.var.name} is {tv.iter_type}, the intrinsic's "
                                f"is {dv.iter_type}")  # fmt: skip
            self.equal_value(tv.dom.extent, dv.dom.extent, f"extent of {tv.var.name}")
            self.expr(tval, dval)
        if not _is_true(t.predicate) and _is_true(d.predicate):
            raise self.fail(
                f"the block has the predicate {t.predicate} (a partial tile), the intrinsic "
                "computes whole tiles: choose tile sizes that divide the loops"
            )
        if not _is_true(t.predicate) or not _is_true(d.predicate):
            self.expr(t.predicate, d.predicate)
        for tv, dv in zip(tb.iter_vars, db.iter_vars):
            self.bind(tv.var, dv.var)
        if (tb.init is None) != (db.init is None):
            raise self.fail("one block has an init and the other does not")
        if tb.init is not None:
            self.stmt(tb.init, db.init)
        if tb.alloc_buffers or db.alloc_buffers or tb.match_buffers or db.match_buffers:
            raise self.fail("blocks that allocate or match buffers cannot be matched")
        self.stmt(tb.body, db.body)
        self.path.pop()

    def _s_BufferStore(self, t: S.BufferStore, d: S.BufferStore) -> None:
        self.access(t.buffer, t.indices, d.buffer, d.indices)
        self.expr(t.value, d.value)

    def _s_SeqStmt(self, t: S.SeqStmt, d: S.SeqStmt) -> None:
        if len(t.seq) != len(d.seq):
            raise self.fail(f"{len(t.seq)} statements in a row, the intrinsic has {len(d.seq)}")
        for a, b in zip(t.seq, d.seq):
            self.stmt(a, b)

    def _s_IfThenElse(self, t: S.IfThenElse, d: S.IfThenElse) -> None:
        self.expr(t.condition, d.condition)
        self.stmt(t.then_case, d.then_case)
        if (t.else_case is None) != (d.else_case is None):
            raise self.fail("one branch has an else and the other does not")
        if t.else_case is not None:
            self.stmt(t.else_case, d.else_case)

    def _s_Evaluate(self, t: S.Evaluate, d: S.Evaluate) -> None:
        self.expr(t.value, d.value)

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, t: E.PrimExpr, d: E.PrimExpr) -> None:
        if isinstance(d, E.Var):
            mapped = self.vars.get(id(d))
            if mapped is None:
                raise self.fail(f"the intrinsic uses {d.name}, which it never defines")
            if t is not mapped:
                raise self.fail(f"the block has {t} where the intrinsic has {d.name}")
            return
        if type(t) is not type(d) or t.dtype != d.dtype:
            raise self.fail(f"the block computes {t} ({t.dtype}) where the intrinsic computes "
                            f"{_text(d)} ({d.dtype})")  # fmt: skip
        if isinstance(d, (E.IntImm, E.FloatImm, E.StringImm)):
            if t.value != d.value:
                raise self.fail(f"constant {t} differs from the intrinsic's {_text(d)}")
            return
        if isinstance(d, E.BufferLoad):
            self.access(t.buffer, t.indices, d.buffer, d.indices)
            return
        if isinstance(d, E.Call) and t.op != d.op:
            raise self.fail(f"call {t.op} differs from the intrinsic's {d.op}")
        if isinstance(d, (E.Ramp, E.Broadcast)) and t.lanes != d.lanes:
            raise self.fail("vector lanes differ")
        for name in child_fields(type(d)):
            self._children(getattr(t, name), getattr(d, name))

    def _children(self, t, d) -> None:
        if isinstance(d, E.PrimExpr):
            self.expr(t, d)
        elif isinstance(d, tuple):
            if len(t) != len(d):
                raise self.fail("argument counts differ")
            for a, b in zip(t, d):
                self._children(a, b)

    # -- bindings and buffers -------------------------------------------------------------------
    def bind(self, t: E.Var, d: E.Var) -> None:
        if t.dtype != d.dtype:
            raise self.fail(f"{t.name} is {t.dtype}, the intrinsic's {d.name} is {d.dtype}")
        self.vars[id(d)] = t
        self.inner.add(id(t))

    def equal_value(self, t: E.PrimExpr, d: E.PrimExpr, what: str) -> None:
        mapped = substitute(d, lambda v: self.vars.get(id(v)))
        if not self.analyzer.can_prove_equal(t, mapped):
            raise self.fail(f"{what} is {t}, the intrinsic's is {_text(d)}")

    def access(self, tb: Buffer, t_idx, db: Buffer, d_idx) -> None:
        """`tb[t_idx]` must be `db[d_idx]` shifted by the offsets recorded for `db`."""
        known = self.buffers.get(id(db))
        if known is None:
            self._claim(tb, db)
        elif known is not tb:
            raise self.fail(f"the intrinsic's buffer {db.name} is both {known.name} and {tb.name}")
        lead = len(t_idx) - len(d_idx)
        offsets = []
        for k, index in enumerate(t_idx):
            if k < lead:
                offset = self.analyzer.simplify(index)
            else:
                mapped = substitute(d_idx[k - lead], lambda v: self.vars.get(id(v)))
                offset = self.analyzer.simplify(index - mapped)
            if uses_var(offset, lambda v: id(v) in self.inner):
                raise self.fail(
                    f"{tb.name}[{', '.join(map(str, t_idx))}] does not follow the intrinsic's "
                    f"{db.name}[{', '.join(_text(i) for i in d_idx)}] at a fixed offset"
                )
            offsets.append(offset)
        self._check_offsets(tb, db, offsets)

    def _claim(self, tb: Buffer, db: Buffer) -> None:
        if id(tb) in self.claimed:
            other = self.claimed[id(tb)]
            raise self.fail(f"{tb.name} plays both {other.name} and {db.name} of the intrinsic")
        if tb.dtype != db.dtype:
            raise self.fail(f"{tb.name} holds {tb.dtype}, the intrinsic's {db.name} {db.dtype}")
        if tb.ndim < db.ndim:
            raise self.fail(f"{tb.name} has {tb.ndim} dimensions, the intrinsic's {db.name} "
                            f"{db.ndim}")  # fmt: skip
        self.buffers[id(db)] = tb
        self.claimed[id(tb)] = db

    def _check_offsets(self, tb: Buffer, db: Buffer, offsets) -> None:
        old = self.offsets.get(id(db))
        if old is None:
            self.offsets[id(db)] = offsets
            return
        for a, b in zip(old, offsets):
            if not self.analyzer.can_prove_equal(a, b):
                raise self.fail(f"{tb.name} is accessed at two different offsets ({a} and {b})")

    def regions(self, desc: PrimFunc) -> list[BufferRegion]:
        """The target region behind each desc parameter buffer, in parameter order."""
        result = []
        for db in desc.buffers:
            tb = self.buffers.get(id(db))
            if tb is None:
                raise MatchError(f"the intrinsic's buffer {db.name} is not accessed")
            offsets = self.offsets[id(db)]
            lead = tb.ndim - db.ndim
            ranges = []
            for k, offset in enumerate(offsets):
                extent = E.IntImm(offset.dtype, 1) if k < lead else db.shape[k - lead]
                ranges.append(E.Range(offset, _cast_like(extent, offset)))
            result.append(BufferRegion(tb, tuple(ranges)))
        return result


def match_intrin(target: S.Block, intrin: TensorIntrin) -> IntrinMatch:
    """Match `target`'s body against the intrinsic's description; raises MatchError."""
    matcher = Matcher()
    matcher.stmt(target.body, intrin.desc_body)
    return IntrinMatch(matcher.regions(intrin.desc))


def _cast_like(extent: E.PrimExpr, like: E.PrimExpr) -> E.PrimExpr:
    if extent.dtype == like.dtype or not isinstance(extent, E.IntImm):
        return extent
    return E.IntImm(like.dtype, extent.value)


def _kind(stmt) -> str:
    return {"For": "loop", "BlockRealize": "block", "BufferStore": "store",
            "SeqStmt": "sequence"}.get(type(stmt).__name__, type(stmt).__name__)  # fmt: skip


def _text(expr) -> str:
    try:
        return str(expr)
    except Exception:  # pragma: no cover - printing must not hide the real error
        return object.__repr__(expr)


def _is_true(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


__all__ = [
    "TensorIntrin", "TensorIntrinError", "MatchError", "IntrinMatch", "Matcher", "match_intrin",
    "root_body", "root_allocs",
]  # fmt: skip
