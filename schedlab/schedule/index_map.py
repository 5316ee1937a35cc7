"""`IndexMap`: a function from indices to indices (TVM's `tir.IndexMap`), used to re-lay out a
buffer (`transform_layout`) or a block's iteration space (`transform_block_layout`).

    >>> m = IndexMap.from_func(lambda i, j: (i // 4, j, i % 4))
    >>> m
    IndexMap(lambda i, j: (i // 4, j, i % 4))
    >>> m.map_shape([16, 3])
    [4, 3, 4]
    >>> m.inverse([16, 3])
    IndexMap(lambda i0, i1, i2: (i0 * 4 + i2, i1))

A map is `initial_indices` (variables) and `final_indices` (expressions of them). Its text form
is the lambda above; `IndexMap.from_text` reads it back with the script parser, never with
`eval`, which is how index maps travel in trace JSON.
"""

from __future__ import annotations

import ast
import inspect
import math
import types
from collections.abc import Callable, Sequence

from schedlab.arith import Analyzer, detect_iter_map, eval_set
from schedlab.arith.iter_map_expr import IterMark, IterSumExpr
from schedlab.errors import ScriptError
from schedlab.ir import expr as E
from schedlab.ir.dtype import DataType, int32
from schedlab.ir.functor import Mutator, collect_vars, post_order_visit, substitute
from schedlab.ir.op import convert
from schedlab.ir.structural import structural_equal

from .errors import TraceError
from .values import register_value_type


class IndexMapError(ValueError):
    """An index map cannot be built, read, inverted or applied as asked."""


class IndexMap:
    """`lambda *initial_indices: final_indices` over integer index variables."""

    __slots__ = ("initial_indices", "final_indices")

    def __init__(self, initial_indices: Sequence[E.Var], final_indices: Sequence):
        initial = tuple(initial_indices)
        for var in initial:
            if not isinstance(var, E.Var) or not var.dtype.is_integer:
                raise IndexMapError(f"IndexMap: initial indices must be integer Vars, got {var!r}")
        final = tuple(_as_index(value) for value in final_indices)
        if not final:
            raise IndexMapError("IndexMap: the map must produce at least one index")
        self.initial_indices = initial
        self.final_indices = final

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def from_func(func: Callable, ndim: int | None = None, index_dtype="int32") -> IndexMap:
        """The map computed by calling `func` on fresh index variables, named after its
        parameters (`ndim` is needed only for a `*args` function)."""
        if isinstance(func, IndexMap):
            return func
        if not callable(func):
            raise IndexMapError(f"IndexMap.from_func: expected a function, got {func!r}")
        names = _param_names(func, ndim)
        dtype = DataType(index_dtype)
        initial = [E.Var(name, dtype) for name in names]
        result = func(*initial)
        final = list(result) if isinstance(result, (list, tuple)) else [result]
        return IndexMap(initial, final)

    @staticmethod
    def from_text(text: str, index_dtype="int32") -> IndexMap:
        """Read the text form `lambda i, j: (j, i)` safely (parsed, never executed)."""
        if not isinstance(text, str):
            raise IndexMapError(f"IndexMap.from_text: expected a str, got {type(text).__name__}")
        return _parse_lambda(text, DataType(index_dtype))

    def with_index_dtype(self, dtype) -> IndexMap:
        """The same map over index variables of `dtype` (constants follow)."""
        dtype = DataType(dtype)
        if all(v.dtype == dtype for v in self.initial_indices):
            return self
        initial = [E.Var(v.name, dtype) for v in self.initial_indices]
        retype = _Retype(dict(zip(self.initial_indices, initial)), self.index_dtype, dtype)
        return IndexMap(initial, [retype.visit(value) for value in self.final_indices])

    # -- inspection -----------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """How many indices the map takes."""
        return len(self.initial_indices)

    @property
    def index_dtype(self) -> DataType:
        return self.initial_indices[0].dtype if self.initial_indices else int32

    def to_text(self) -> str:
        """The map as a lambda in the script syntax: `lambda i, j: (i // 4, j, i % 4)`."""
        from schedlab.script._print_expr import ExprPrinter, Namer

        namer = Namer()
        params = [namer.define(var, var.name) for var in self.initial_indices]
        printer = ExprPrinter(namer)
        outputs = [printer.expr(value) for value in self.final_indices]
        tail = "," if len(outputs) == 1 else ""
        return f"lambda {', '.join(params)}: ({', '.join(outputs)}{tail})"

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"IndexMap({self.to_text()})"

    def is_equivalent_to(self, other: IndexMap) -> bool:
        """Same arity and structurally equal outputs (up to renaming the inputs)."""
        if not isinstance(other, IndexMap) or self.ndim != other.ndim:
            return False
        if len(self.final_indices) != len(other.final_indices):
            return False
        renamed = other.map_indices(self.initial_indices, simplify=False)
        return all(structural_equal(a, b) for a, b in zip(self.final_indices, renamed))

    # -- applying -------------------------------------------------------------------------------
    def map_indices(self, indices: Sequence, analyzer: Analyzer | None = None,
                    simplify: bool = True) -> list[E.PrimExpr]:  # fmt: skip
        """The final indices with the initial ones replaced by `indices` (simplified)."""
        indices = [convert(i) for i in indices]
        self._check_arity(indices, "map_indices")
        vmap = dict(zip(self.initial_indices, indices))
        mapped = [substitute(value, vmap) for value in self.final_indices]
        if not simplify:
            return mapped
        analyzer = analyzer if analyzer is not None else Analyzer()
        return [analyzer.simplify(value) for value in mapped]

    def map_ranges(self, ranges: Sequence[E.Range], analyzer=None) -> list[E.Range]:
        """The bounding box of the image of the box `ranges` (one Range per input)."""
        self._check_arity(ranges, "map_ranges")
        analyzer = analyzer if analyzer is not None else Analyzer()
        dom = {var: rng for var, rng in zip(self.initial_indices, ranges)}
        with analyzer.constraint_scope(convert(True)):
            for var, rng in dom.items():
                analyzer.bind(var, rng, allow_override=True)
            result = []
            for value in self.final_indices:
                value = analyzer.simplify(value)
                interval = eval_set(value, dom, analyzer)
                if not interval.is_bounded:
                    raise IndexMapError(f"{self}: the index {value} is unbounded over {ranges}")
                result.append(interval.to_range(analyzer))
        return result

    def map_shape(self, shape: Sequence, analyzer=None) -> list[E.PrimExpr]:
        """The shape of the image of a buffer of `shape`; every output must start at 0."""
        shape = [convert(s) for s in shape]
        ranges = [E.Range(E.IntImm(s.dtype, 0), s) for s in shape]
        result = []
        analyzer = analyzer if analyzer is not None else Analyzer()
        for k, rng in enumerate(self.map_ranges(ranges, analyzer)):
            if not analyzer.can_prove_equal(rng.min, 0):
                raise IndexMapError(
                    f"{self}: output {k} starts at {rng.min} on shape {list(shape)}, not at 0 "
                    "(a layout must start at index 0; subtract the offset in the map)"
                )
            result.append(rng.extent)
        return result

    def inverse(self, shape: Sequence) -> IndexMap:
        """The inverse map, for a map that is a bijection from a buffer of `shape` onto its
        image (`map_shape(shape)`); raises IndexMapError otherwise."""
        inverse, padding = self.non_surjective_inverse(shape)
        if not _is_false(padding):
            raise IndexMapError(
                f"{self} is not a bijection on shape {list(shape)}: the points where "
                f"{padding} are padding; use non_surjective_inverse"
            )
        return inverse

    def non_surjective_inverse(self, shape: Sequence) -> tuple[IndexMap, E.PrimExpr]:
        """`(inverse, padding_predicate)` for an injective affine map: the inverse is defined on
        the whole output shape, and the predicate (over the inverse's inputs) is true where an
        output point is padding, not the image of a point of `shape`."""
        shape = [convert(s) for s in shape]
        self._check_arity(shape, "inverse")
        out_shape = self.map_shape(shape)
        sums = self._detect_bijective(shape)
        outputs = [E.Var(f"i{k}", self.index_dtype) for k in range(len(self.final_indices))]
        values = _invert_sums(sums, outputs, self.initial_indices)
        analyzer = Analyzer()
        for var, extent in zip(outputs, out_shape):
            analyzer.bind(var, E.Range(E.IntImm(extent.dtype, 0), extent))
        inverse = [analyzer.simplify(values[id(var)]) for var in self.initial_indices]
        padding = self._padding_predicate(inverse, outputs, shape, sums, analyzer)
        return IndexMap(outputs, inverse), padding

    # -- helpers ------------------------------------------------------------------------------
    def _check_arity(self, values, what: str) -> None:
        if len(values) != self.ndim:
            raise IndexMapError(
                f"{self}.{what}: the map takes {self.ndim} indices, got {len(values)}"
            )

    def _detect_bijective(self, shape) -> list[IterSumExpr]:
        """The outputs as iter sums over the inputs' domain, padded up to a multiple of the
        map's divisors when the shape itself does not divide (`i // 4` on 10 rows)."""
        errors = []
        for domain in _candidate_domains(shape, self.final_indices):
            iters = {v: E.Range(E.IntImm(s.dtype, 0), s) for v, s in zip(self.initial_indices,
                                                                         domain)}  # fmt: skip
            result = detect_iter_map(self.final_indices, iters, check_level="bijective")
            if result:
                return result.indices
            errors.extend(result.errors)
        reason = "; ".join(dict.fromkeys(errors)) or "it is not affine"
        raise IndexMapError(
            f"{self} is not an injective affine map on shape {list(shape)}: {reason}"
        )

    def _padding_predicate(self, inverse, outputs, shape, sums, analyzer) -> E.PrimExpr:
        parts = []
        for value, extent in zip(inverse, shape):
            parts.append(E.LT(value, E.IntImm(value.dtype, 0)))
            parts.append(E.GE(value, extent))
        if any(not _is_one(s.args[0].scale) for s in sums if s.args):
            # outputs with gaps (`2 * i`): a point is padding unless it maps back to itself
            forward = self.map_indices(inverse, analyzer)
            parts.extend(E.NE(f, o) for f, o in zip(forward, outputs))
        result = convert(False)
        for part in parts:
            result = E.Or(result, part)
        return analyzer.simplify(result)


# ---------------------------------------------------------------------------------------------
# inverting iter sums (TVM's InverseAffineIterMap)
# ---------------------------------------------------------------------------------------------
def _invert_sums(sums, outputs, inputs) -> dict[int, E.PrimExpr]:
    """Each input variable (by id) as an expression of the output variables."""
    values: dict[int, E.PrimExpr] = {}
    order = _marks_top_down(sums)
    for total, out in zip(sums, outputs):
        if total.args:
            _add_split(values, total.args[0], E.FloorDiv(out - total.base, total.args[0].scale))
    result: dict[int, E.PrimExpr] = {}
    for mark in order:
        value = values.get(id(mark), E.IntImm(mark.extent.dtype, 0))
        if isinstance(mark.source, IterSumExpr):
            remaining = value - mark.source.base
            for arg in mark.source.args:
                part = E.FloorMod(E.FloorDiv(remaining, arg.scale), arg.extent)
                _add_split(values, arg, part)
        else:
            var, offset = _input_of(mark, inputs)
            result[id(var)] = value + offset
    for var in inputs:
        result.setdefault(id(var), E.IntImm(var.dtype, 0))
    return result


def _add_split(values: dict, split, split_value) -> None:
    """Credit `split_value` (the value of `mark // lower % extent`) to the split's mark."""
    mark = split.source
    contribution = split_value * split.lower_factor
    old = values.get(id(mark))
    values[id(mark)] = contribution if old is None else old + contribution


def _marks_top_down(sums) -> list[IterMark]:
    """Every mark reachable from the sums, each after all the fused marks that contain it."""
    children: dict[int, list[IterMark]] = {}
    marks: dict[int, IterMark] = {}
    pending = [s.source for total in sums for s in total.args]
    while pending:
        mark = pending.pop()
        if id(mark) in marks:
            continue
        marks[id(mark)] = mark
        kids = [a.source for a in mark.source.args] if isinstance(mark.source, IterSumExpr) else []
        children[id(mark)] = kids
        pending.extend(kids)
    indegree = {key: 0 for key in marks}
    for kids in children.values():
        for kid in kids:
            indegree[id(kid)] += 1
    ready = [m for key, m in marks.items() if indegree[key] == 0]
    order = []
    while ready:
        mark = ready.pop()
        order.append(mark)
        for kid in children[id(mark)]:
            indegree[id(kid)] -= 1
            if indegree[id(kid)] == 0:
                ready.append(kid)
    return order


def _input_of(mark: IterMark, inputs) -> tuple[E.Var, E.PrimExpr]:
    """The input variable a leaf mark iterates and its offset (`source = var - offset`)."""
    source = mark.source
    ids = {id(v): v for v in inputs}
    used = [v for v in collect_vars(source) if id(v) in ids]
    if len(used) != 1:
        raise IndexMapError(f"cannot invert the iterator {source}")
    var = used[0]
    return var, Analyzer().simplify(var - source)


def _candidate_domains(shape, final_indices) -> list[list]:
    """The shape itself, then paddings of it that make the map's divisions exact: one input
    rounded up to a multiple of the map's divisors (a fused `(i * 5 + j) // 4` needs only the
    outer one padded), then every input."""
    step = _divisor_lcm(final_indices)
    domains = [list(shape)]
    if step == 1:
        return domains
    padded = [_round_up(extent, step) for extent in shape]
    for k in range(len(shape)):
        domains.append([padded[d] if d == k else shape[d] for d in range(len(shape))])
    domains.append(padded)
    return domains


def _divisor_lcm(final_indices) -> int:
    divisors = [1]

    def visit(node):
        if isinstance(node, (E.FloorDiv, E.FloorMod)) and isinstance(node.b, E.IntImm):
            if node.b.value > 0:
                divisors.append(node.b.value)

    for value in final_indices:
        post_order_visit(value, visit)
    return math.lcm(*divisors)


def _round_up(extent: E.PrimExpr, step: int) -> E.PrimExpr:
    if isinstance(extent, E.IntImm):
        return E.IntImm(extent.dtype, -(-extent.value // step) * step)
    return (extent + (step - 1)) // step * step


# ---------------------------------------------------------------------------------------------
# text form
# ---------------------------------------------------------------------------------------------
def _parse_lambda(text: str, dtype: DataType) -> IndexMap:
    from schedlab.script._parse_expr import ExprParser
    from schedlab.script.parser import _Source

    source = _Source(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise IndexMapError(f"index map text {text!r} is not valid syntax: {err.msg}") from None
    except RecursionError:  # e.g. `i + i + ...` thousands of terms long (from a trace file)
        raise _too_deep(text) from None
    node = tree.body
    if not isinstance(node, ast.Lambda):
        raise IndexMapError(f"index map text must be a lambda, got {text!r}")
    args = node.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
        raise IndexMapError(f"index map lambda takes plain parameters only: {text!r}")
    parser = ExprParser(source)
    parser.push()
    initial = [E.Var(arg.arg, dtype) for arg in args.args]
    for var in initial:
        parser.define(var.name, var)
    items = node.body.elts if isinstance(node.body, (ast.Tuple, ast.List)) else [node.body]
    try:
        final = [parser.expr(item) for item in items]
    except ScriptError as err:
        raise IndexMapError(f"index map text {text!r}: {err}") from None
    except RecursionError:
        raise _too_deep(text) from None
    final = [_retype_weak(parser, value, dtype) for value in final]
    return IndexMap(initial, final)


def _too_deep(text: str) -> IndexMapError:
    from schedlab.script.parser import largest_group

    line, column = largest_group(text.strip()) or (1, 1)
    return IndexMapError(
        f"index map text ({len(text)} characters) is nested too deeply to read, at line {line}, "
        f"column {column}: {text.strip()[column - 1 : column + 39]!r}..."
    )


class _Retype(Mutator):
    """Index variables and integer constants of one dtype moved to another."""

    def __init__(self, vmap: dict, old: DataType, new: DataType):
        self.vmap = {id(k): v for k, v in vmap.items()}
        self.old, self.new = old, new

    def visit_Var(self, var):
        return self.vmap.get(id(var), var)

    def visit_IntImm(self, imm):
        return E.IntImm(self.new, imm.value) if imm.dtype == self.old else imm


def _retype_weak(parser, value: E.PrimExpr, dtype: DataType) -> E.PrimExpr:
    """A bare number output (`lambda i: (0, i)`) takes the index dtype."""
    if id(value) in parser.weak and isinstance(value, E.IntImm) and value.dtype != dtype:
        return E.IntImm(dtype, value.value)
    return value


def _param_names(func: Callable, ndim: int | None) -> list[str]:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    has_varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    if ndim is None:
        if has_varargs:
            raise IndexMapError("IndexMap.from_func: pass ndim for a function taking *args")
        return positional
    if not has_varargs and ndim != len(positional):
        raise IndexMapError(
            f"IndexMap.from_func: ndim={ndim} but the function takes {len(positional)} indices"
        )
    return (positional + [f"i{k}" for k in range(len(positional), ndim)])[:ndim]


def _as_index(value) -> E.PrimExpr:
    if isinstance(value, bool):
        raise IndexMapError(f"IndexMap: an index must be an integer expression, got {value!r}")
    try:
        expr = convert(value)
    except (TypeError, ValueError):
        raise IndexMapError(
            f"IndexMap: an index must be an integer expression, got {value!r}"
        ) from None
    if not isinstance(expr, E.PrimExpr) or not expr.dtype.is_integer or expr.dtype.is_vector:
        raise IndexMapError(f"IndexMap: an index must be an integer expression, got {value!r}")
    return expr


def _is_false(expr: E.PrimExpr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 0


def _is_one(expr) -> bool:
    return isinstance(expr, E.IntImm) and expr.value == 1


def as_index_map(value, ndim: int, index_dtype, what: str = "index_map") -> IndexMap:
    """An IndexMap from an IndexMap or a function, over `ndim` indices of `index_dtype`."""
    if isinstance(value, IndexMap):
        index_map = value.with_index_dtype(index_dtype)
    elif callable(value):
        index_map = IndexMap.from_func(value, index_dtype=index_dtype)
    else:
        raise IndexMapError(f"{what} must be an IndexMap or a lambda, got {type(value).__name__}")
    if index_map.ndim != ndim:
        raise IndexMapError(f"{what} {index_map} takes {index_map.ndim} indices, expected {ndim}")
    return index_map


# ---------------------------------------------------------------------------------------------
# trace values: an index map is its lambda text (a Python lambda is recorded the same way)
# ---------------------------------------------------------------------------------------------
def _to_json(index_map: IndexMap) -> dict:
    return {"lambda": index_map.to_text(), "index_dtype": str(index_map.index_dtype)}


def _from_json(data) -> IndexMap:
    if not isinstance(data, dict) or not isinstance(data.get("lambda"), str):
        raise TraceError(f"trace values: an IndexMap needs {{'lambda': text}}, got {data!r}")
    try:
        return IndexMap.from_text(data["lambda"], data.get("index_dtype", "int32"))
    except (IndexMapError, TypeError, ValueError) as err:
        raise TraceError(f"trace values: bad IndexMap: {err}") from None


def _as_map(value) -> IndexMap:
    if isinstance(value, IndexMap):
        return value
    try:
        return IndexMap.from_func(value)
    except Exception as err:
        raise TraceError(
            f"trace values: the function {value!r} is recorded as an index map, and building "
            f"one from it failed: {err}"
        ) from None


register_value_type(
    "IndexMap", (IndexMap, types.FunctionType), lambda v: _to_json(_as_map(v)), _from_json,
    lambda v: _as_map(v).to_text(),
)  # fmt: skip

__all__ = ["IndexMap", "IndexMapError", "as_index_map"]
