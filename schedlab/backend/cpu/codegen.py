"""The CPU renderer: C11 for gcc with OpenMP and GCC vector extensions.

Entry point (one per PrimFunc), a typed signature in parameter order, then the symbolic sizes:

    int32_t gemm(float* restrict C, const float* restrict A, const float* restrict B);
    int32_t scale(float* restrict B, const float* restrict A, int32_t n);   // n: a shape var

Buffer parameters are pointers to their first element (`const` when the function never stores
to them; `restrict` when the PrimFunc has `tir.noalias`); scalar parameters are passed by value;
symbolic sizes last, in order of first use. The result is 0, or -1 when a heap scratch buffer
could not be allocated. Beside it, `double gemm__timed(<same args>, int64_t number)` runs the
kernel `number` times and returns the elapsed seconds (timing in C keeps ctypes' per-call cost
out of measurements of tiny kernels; -1.0 on failure).

Loops: the outermost PARALLEL loop becomes `#pragma omp parallel for schedule(static)
num_threads(sl_threads(N))` with N the target's `num_cores`, fewer when OMP_NUM_THREADS asks
for fewer (one OpenMP region; parallel loops nested in it run serially; a target of one core
gets one thread whatever OMP_NUM_THREADS says),
VECTORIZED loops `#pragma omp simd` when the body has no loop-carried dependence the renderer
could miss (else a plain loop that gcc may still vectorize), UNROLLED loops
`#pragma GCC unroll N`.
"""

from __future__ import annotations

from schedlab.arith.linear import linear_coefficient
from schedlab.ir import expr as E
from schedlab.ir import stmt as S
from schedlab.ir.functor import Visitor
from schedlab.ir.intrin import INTRINSICS
from schedlab.ir.structural import structural_equal

from ..c_family import CFamilyRenderer, RenderedFunction

_NOIPA = """\
// kernels are opaque to their timing loop, so gcc cannot merge repeated calls
#if defined(__GNUC__) && !defined(__clang__)
#define SL_KERNEL __attribute__((noipa))
#else
#define SL_KERNEL __attribute__((noinline))
#endif
// a parallel loop's threads: the target's cores, fewer when OMP_NUM_THREADS (or
// omp_set_num_threads) asks for fewer, as on a machine shared with other work
#ifdef _OPENMP
#include <omp.h>
static inline int sl_threads(int cores) {
  int most = omp_get_max_threads();
  return cores < most ? cores : most;
}
#endif"""

_MAX_UNROLL = 65534  # gcc's limit for `#pragma GCC unroll`
_DEFAULT_UNROLL = 8  # for extents unknown at compile time


class CpuRenderer(CFamilyRenderer):
    """C for the host CPU (gcc, OpenMP)."""

    headers = CFamilyRenderer.headers + ("<time.h>",)
    defines = ("_POSIX_C_SOURCE 200809L",)
    preamble = _NOIPA
    kernel_prefix = "SL_KERNEL "
    outline_parallel_body = True
    vector_register_arrays = True

    @property
    def native_vector_bits(self) -> int:
        """The host's SIMD width: wider vector stores are split into native chunks."""
        return int(getattr(self.target, "attrs", {}).get("simd_width", 0))

    @property
    def openmp(self) -> bool:
        return bool(getattr(self.target, "attrs", {}).get("openmp", True))

    def loop_style(self, loop: S.For) -> tuple[str, list[str], str]:
        enclosing = {style for _, style in self._loop_stack}
        kind = loop.kind
        if kind == S.ForKind.PARALLEL:
            if "parallel" in enclosing:
                return "serial", [], "parallel, inside the OpenMP region of an outer loop"
            if "simd" in enclosing:
                return "serial", [], "parallel, inside an omp simd loop"
            if not self.openmp:
                return "serial", [], "parallel, OpenMP disabled for this target"
            threads = int(getattr(self.target, "attrs", {}).get("num_cores", 0) or 0)
            clause = f" num_threads(sl_threads({threads}))" if threads > 0 else ""
            return "parallel", [f"#pragma omp parallel for schedule(static){clause}"], ""
        if kind == S.ForKind.VECTORIZED:
            if "simd" in enclosing:
                return "serial", [], "vectorized, inside an omp simd loop"
            if not simd_safe(loop):
                return "serial", [], "vectorized, but iterations may depend on each other"
            return "simd", ["#pragma omp simd"], ""
        if kind == S.ForKind.UNROLLED:
            extent = loop.extent
            count = extent.value if isinstance(extent, E.IntImm) else _DEFAULT_UNROLL
            return "unroll", [f"#pragma GCC unroll {max(1, min(count, _MAX_UNROLL))}"], ""
        return super().loop_style(loop)

    def after_function(self, info: RenderedFunction) -> list[str]:
        """`<symbol>__timed`: the kernel run `number` times, timed with a monotonic clock."""
        params = ", ".join(self.param_decl(p) for p in info.params)
        params = f"{params}, int64_t sl_number" if params else "int64_t sl_number"
        args = ", ".join(p.name for p in info.params)
        return [
            f"double {info.symbol}__timed({params}) {{",
            "  struct timespec sl_start, sl_stop;",
            "  clock_gettime(CLOCK_MONOTONIC, &sl_start);",
            "  for (int64_t sl_i = 0; sl_i < sl_number; ++sl_i) {",
            f"    if ({info.symbol}({args}) != 0) return -1.0;",
            "  }",
            "  clock_gettime(CLOCK_MONOTONIC, &sl_stop);",
            "  return (double)(sl_stop.tv_sec - sl_start.tv_sec)"
            " + 1e-9 * (double)(sl_stop.tv_nsec - sl_start.tv_nsec);",
            "}",
        ]


def simd_safe(loop: S.For) -> bool:
    """May the iterations of `loop` run as SIMD lanes? True when every buffer the body stores
    to (other than scratch allocated inside it) is only accessed at one index expression, which
    is affine in the loop variable with a nonzero constant coefficient (so each iteration
    touches its own element), and the body calls no external function."""
    accesses = _Accesses()
    accesses.visit(loop.body)
    if accesses.opaque:
        return False
    for key, indices in accesses.by_buffer.items():
        if key not in accesses.stored or key in accesses.local:
            continue
        first = indices[0]
        if not any(linear_coefficient(index, loop.loop_var) for index in first):
            return False
        if not all(structural_equal(first, other) for other in indices[1:]):
            return False
    return True


class _Accesses(Visitor):
    def __init__(self):
        self.by_buffer: dict[int, list] = {}
        self.stored: set[int] = set()
        self.local: set[int] = set()
        self.opaque = False

    def _record(self, node) -> None:
        self.by_buffer.setdefault(id(node.buffer.data), []).append(node.indices)

    def visit_BufferStore(self, node):
        self._record(node)
        self.stored.add(id(node.buffer.data))
        self.generic_visit(node)

    def visit_BufferLoad(self, node):
        self._record(node)
        self.generic_visit(node)

    def visit_Allocate(self, node):
        self.local.add(id(node.buffer.data))
        self.generic_visit(node)

    def visit_Call(self, node):
        if node.op not in INTRINSICS:
            self.opaque = True
        self.generic_visit(node)
