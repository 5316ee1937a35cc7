"""Loops: plain Python `for` loops, or numpy array code where the dependence tests allow.

At each loop the translator looks at the perfect nest starting there and tries, in order:
1. parallel: the largest leading group of loops that `analysis.parallel_verdict` accepts runs
   at once, each loop variable becoming an `arange` along its own array axis (new axes go in
   front of those already open, so numpy's right-aligned broadcasting keeps every value lined
   up); the body is then translated once for all points;
2. reduction: the nest computes `C[w] op= f` over leading reduction loops (and inner parallel
   ones), run with numpy's reductions (`analysis.match_reduction`);
3. a serial Python loop (inner loops get their own chance).
Conditions that depend on run-time sizes (symbolic extents, the array-size cap) are checked by
the generated code, which then falls back to the serial loop.
"""

from __future__ import annotations

from dataclasses import replace

from schedlab.ir import expr as E
from schedlab.ir.stmt import For

from . import runtime
from .analysis import match_reduction, parallel_verdict, uses_any
from .exprgen import Code, ExprCtx, VarInfo

LIMIT = 1 << 21  # most points a vectorized nest may hold at once (memory of temporaries)
MAX_LOOPS = 17  # CPython allows 20 nested loops per function; deeper code is outlined
MAX_INDENT = 60


def perfect_nest(loop: For) -> list[For]:
    nest = [loop]
    while isinstance(nest[-1].body, For):
        nest.append(nest[-1].body)
    return nest


def _const(code: Code) -> bool:
    return code.interval is not None and code.interval[0] == code.interval[1]


def _static_size(bounds, outer: int | None) -> int | None:
    if outer is None or not all(_const(extent) for _, extent in bounds):
        return None
    size = outer
    for _, extent in bounds:
        size *= max(extent.interval[0], 0)
    return size


def _loop_interval(start: Code, extent: Code):
    if start.interval is None or extent.interval is None:
        return None
    return (start.interval[0], start.interval[1] + max(extent.interval[1], 1) - 1)


class LoopGen:
    """The loop half of the Translator (it supplies emit/expr/env/... )."""

    def gen_for(self, loop: For, ctx) -> None:
        if self.vectorize and (self.try_parallel(loop, ctx) or self.try_reduction(loop, ctx)):
            return
        self.serial_for(loop, ctx, lambda c: self.gen(loop.body, c))

    # -- serial ------------------------------------------------------------------------------
    def serial_for(self, loop: For, ctx, body_fn) -> None:
        if ctx.loops >= MAX_LOOPS or ctx.indent >= MAX_INDENT:
            self.outline(ctx, lambda c: self.serial_for(loop, c, body_fn))
            return
        what = f"the bounds of loop {loop.loop_var.name}"
        start, extent = self.scalar(loop.min, ctx, what), self.scalar(loop.extent, ctx, what)
        name = self.fresh(loop.loop_var.name)
        if start.text == "0":
            span = f"range({extent.text})"
        else:
            span = f"range({start.text}, {start.text} + {extent.text})"
        self.emit(ctx, f"for {name} in {span}:")
        interval = _loop_interval(start, extent)
        self.env[id(loop.loop_var)] = VarInfo(name, loop.loop_var.dtype, False, interval)
        self.nested(ctx.deeper(name, loop=True), body_fn)

    def outline(self, ctx, fn) -> None:
        """Continue in a separate function (Python limits nesting), passing every live local."""
        name = self.internal("part")
        params = ", ".join(ctx.live)
        self.emit(ctx, f"{name}({params})")
        saved, self.out = self.out, [f"def {name}({params}):"]
        self.nested(replace(ctx, indent=1, loops=0), fn)
        self.functions.append(self.out)
        self.out = saved

    # -- planning ----------------------------------------------------------------------------
    def loop_bounds(self, loops: list[For], ctx) -> list[tuple[Code, Code]] | None:
        """(start, extent) codes of a rectangular nest whose bounds are the same in every lane."""
        ids = {id(loop.loop_var) for loop in loops}
        bounds = []
        for loop in loops:
            if uses_any(loop.min, ids) or uses_any(loop.extent, ids):
                return None
            start, extent = self.expr(loop.min, ctx), self.expr(loop.extent, ctx)
            if start.varying or extent.varying:
                return None
            bounds.append((start, extent))
        return bounds

    def runtime_conditions(self, groups, bounds, size, ctx) -> list[str] | None:
        """Python conditions the vector path needs at run time (None: impossible)."""
        conditions = []
        for group in groups:
            pairs = []
            for coefficient, extent in group:
                texts = [self._number(v, ctx) for v in (coefficient, extent)]
                if None in texts:
                    return None
                pairs.append(f"({texts[0]}, {texts[1]})")
            conditions.append(f"_rt.radix_ok(({', '.join(pairs)},))")
        if size is None:
            total = " * ".join([f"max({e.text}, 0)" for _, e in bounds] + [ctx.count])
            conditions.append(f"{total} <= {LIMIT}")
        return conditions

    def _number(self, value, ctx) -> str | None:
        if isinstance(value, int):
            return str(value)
        code = self.expr(value, ctx)
        return None if code.varying else code.text

    def with_fallback(self, conditions: list[str], loop: For, ctx, vector_fn) -> None:
        if not conditions:
            vector_fn(ctx)
            return
        self.emit(ctx, f"if {' and '.join(conditions)}:")
        self.nested(ctx.deeper(), vector_fn)
        self.emit(ctx, "else:")
        self.nested(
            ctx.deeper(), lambda c: self.serial_for(loop, c, lambda cc: self.gen(loop.body, cc))
        )

    def positive(self, bounds, ctx, fn) -> None:
        """Run `fn` only when every loop iterates at least once (as the loops would)."""
        unknown = [e.text for _, e in bounds if not (e.interval and e.interval[0] > 0)]
        if not unknown:
            fn(ctx)
            return
        self.emit(ctx, f"if {' and '.join(f'{t} > 0' for t in unknown)}:")
        self.nested(ctx.deeper(), fn)

    # -- parallel ----------------------------------------------------------------------------
    def try_parallel(self, loop: For, ctx) -> bool:
        nest = perfect_nest(loop)
        for end in range(len(nest), 0, -1):
            loops = nest[:end]
            bounds = self.loop_bounds(loops, ctx)
            if bounds is None:
                continue
            size = _static_size(bounds, ctx.size)
            if size is not None and size > LIMIT:
                continue
            verdict = parallel_verdict(loops, loops[-1].body, self.storage)
            if not verdict.ok:
                continue
            conditions = self.runtime_conditions(verdict.groups, bounds, size, ctx)
            if conditions is None:
                continue

            def region(c, loops=loops, bounds=bounds):
                self.positive(
                    bounds,
                    c,
                    lambda cc: self.gen(loops[-1].body, self.open_axes(loops, bounds, cc)),
                )

            self.with_fallback(conditions, loop, ctx, region)
            return True
        return False

    def open_axes(self, loops: list[For], bounds, ctx):
        """Make the loops' variables arrays along new leading axes; returns the inner ctx. A loop
        of extent 1 needs no axis: its variable is simply its start value."""
        axes = []
        for loop, (start, extent) in zip(loops, bounds):
            if _const(extent) and extent.interval[0] == 1:
                self.env[id(loop.loop_var)] = VarInfo(
                    start.text, loop.loop_var.dtype, False, start.interval
                )
            else:
                axes.append((loop, start, extent))
        if not axes:
            return ctx
        ndim = ctx.ndim + len(axes)
        extents = [extent.text for _, _, extent in axes]
        shape = self.internal("shape")
        items = extents + ([f"*{ctx.shape}"] if ctx.shape else [])
        ctx = self.assign(ctx, shape, "(" + ", ".join(items) + ",)")
        size = _static_size([(s, e) for _, s, e in axes], ctx.size)
        if size is not None:
            count = str(size)
        else:
            count = self.internal("count")
            ctx = self.assign(ctx, count, " * ".join(extents + [ctx.count]))
        for position, (loop, start, extent) in enumerate(axes):
            ctx = self.axis(loop.loop_var, start, extent, position, ndim, ctx)
        return replace(ctx, ndim=ndim, shape=shape, size=size, count=count)

    def axis(self, var: E.Var, start: Code, extent: Code, position: int, ndim: int, ctx):
        numpy_dtype = var.dtype.numpy
        if _const(start) and _const(extent):
            low, count = start.interval[0], extent.interval[0]
            key = ("axis", low, count, str(var.dtype), position, ndim)
            name = self.constant(
                key, lambda: _frozen(runtime.axis(low, count, numpy_dtype, position, ndim)), "ax"
            )
        else:
            name = self.fresh(var.name)
            dt = self.dtype_const(var.dtype)
            text = f"_rt.axis({start.text}, {extent.text}, {dt}, {position}, {ndim})"
            ctx = self.assign(ctx, name, text)
        self.env[id(var)] = VarInfo(name, var.dtype, True, _loop_interval(start, extent))
        return ctx

    # -- reductions --------------------------------------------------------------------------
    def try_reduction(self, loop: For, ctx) -> bool:
        nest = perfect_nest(loop)
        bounds = self.loop_bounds(nest, ctx)
        if bounds is None:
            return False
        size = _static_size(bounds, ctx.size)
        if size is not None and size > LIMIT:
            return False
        for count in range(1, len(nest) + 1):
            reduce_loops, parallel_loops = nest[:count], nest[count:]
            plan = match_reduction(reduce_loops, parallel_loops, nest[-1].body, self.storage)
            if plan is None:
                continue
            conditions = self.runtime_conditions(plan.groups, bounds, size, ctx)
            if conditions is None:
                continue

            def region(c, plan=plan, count=count):
                self.positive(
                    bounds,
                    c,
                    lambda cc: self.reduction_region(plan, nest[:count], nest[count:], bounds, cc),
                )

            self.with_fallback(conditions, loop, ctx, region)
            return True
        return False

    def reduction_region(self, plan, reduce_loops, parallel_loops, bounds, ctx) -> None:
        count = len(reduce_loops)
        inner = ctx
        if parallel_loops:
            inner = self.open_axes(parallel_loops, bounds[count:], ctx)
        full = self.open_axes(reduce_loops, bounds[:count], inner)
        if plan.simple_init and plan.init_outer is not None:
            outer = self.expr(plan.init_outer, full)
            if not outer.varying:  # `if k0 == 0:` around the nest: init at its start, or none
                self.emit(full, f"if {outer.text}:")
                self.nested(full.deeper(), lambda c: self.exact_reduction(plan, c, inner, True))
                self.emit(full, "else:")
                self.nested(full.deeper(), lambda c: self.exact_reduction(plan, c, inner, False))
                return
        elif plan.simple_init:
            self.exact_reduction(plan, full, inner, True)
            return
        if plan.init_guard is None and plan.update_guard is None:
            self.exact_reduction(plan, full, inner, False)
        else:
            self.general_reduction(plan, full, inner)

    def exact_reduction(self, plan, full, inner, with_init: bool) -> None:
        """`C[w] = start op reduce(f)` (init at the first point) or `C[w] op= reduce(f)`."""
        masked = full.mask is not None
        target_ctx = ExprCtx(inner.ndim, masked)
        info = self.buffer_info(plan.buffer)
        indices = [self.expr(i, full, target_ctx) for i in plan.indices]
        values = self.expr(plan.value, full, ExprCtx(full.ndim, masked)).text
        if with_init:
            base = self.expr(plan.start, full, target_ctx).text
        else:
            base = self.expr(E.BufferLoad(plan.buffer, plan.indices), full, target_ctx).text
        dt, kind, count = self.dtype_const(plan.buffer.dtype), plan.kind, full.ndim - inner.ndim
        reduced = f"_rt.reduce_leading({kind!r}, {values}, {full.shape or '()'}, {count}, {dt})"
        result = f"_rt.combine({kind!r}, {base}, {reduced}, {dt})"
        self.store(info, indices, result, full.mask, full)

    def general_reduction(self, plan, full, inner) -> None:
        """Guarded updates and inits anywhere in the nest: `runtime.reduction`."""
        target_ctx = ExprCtx(inner.ndim, True)
        info = self.buffer_info(plan.buffer)
        indices = [self.expr(i, full, target_ctx) for i in plan.indices]
        value_ctx = ExprCtx(full.ndim, full.mask is not None or plan.update_guard is not None)
        values = self.expr(plan.value, full, value_ctx).text
        guard_ctx = ExprCtx(full.ndim, True)
        guards = [
            None if guard is None else self.expr(guard, full, guard_ctx).text
            for guard in (plan.update_guard, plan.init_guard)
        ]
        mask = full.mask
        if mask is not None:  # lanes masked off outside the nest neither update nor init
            guards[0] = mask if guards[0] is None else f"({mask} & {guards[0]})"
            guards[1] = None if guards[1] is None else f"({mask} & {guards[1]})"
        start = "None" if plan.start is None else self.expr(plan.start, full, target_ctx).text
        current = self.expr(E.BufferLoad(plan.buffer, plan.indices), full, target_ctx).text
        dt, count = self.dtype_const(plan.buffer.dtype), full.ndim - inner.ndim
        result, written = self.internal("result"), self.internal("written")
        shape = full.shape or "()"
        self.emit(
            full,
            f"{result}, {written} = _rt.reduction({plan.kind!r}, {dt}, {shape}, {count}, "
            f"{values}, {guards[0] or 'None'}, {guards[1] or 'None'}, {start}, {current})",
        )
        self.store(info, indices, result, written, full.with_live(result, written))


def _frozen(array):
    array.flags.writeable = False
    return array
