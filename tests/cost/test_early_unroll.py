"""gcc's early complete unrolling as the cost model sees it, checked against gcc's own numbers
(its -fdump-tree-cunrolli-details size estimates) and its -fopt-info vectorization report."""

import re
import subprocess

import pytest

from schedlab import workloads
from schedlab.backend.build import build
from schedlab.backend.cpu.compiler import compiler_command, compiler_version
from schedlab.cost import model as M
from schedlab.cost import predict
from schedlab.cost.early_unroll import body_statements, unrolled_before_vectorizing
from schedlab.cost.nest import extract
from schedlab.cost.predict import _lanes
from schedlab.schedule import Schedule
from schedlab.target import Target


def _tiled_gemm(order: str, i_parts, j_parts, k_parts) -> Schedule:
    """gemm 256 with i, j, k split into the given factors and the parts in `order` (names i0,
    i1, ..., k1: `i` then the part's index)."""
    sch = Schedule(workloads.spec("gemm").make(M=256, N=256, K=256))
    i, j, k = sch.get_loops(sch.get_block("C"))
    parts = {}
    for name, loop, factors in (("i", i, i_parts), ("j", j, j_parts), ("k", k, k_parts)):
        for n, part in enumerate(sch.split(loop, list(factors))):
            parts[f"{name}{n}"] = part
    sch.reorder(*[parts[name] for name in order.split()])
    return sch


def test_body_size_is_gccs_estimate():
    # gcc 12's dump for this nest: "size: 33-3" at k_1 (30 statements past the loop control),
    # "Estimated size after unrolling: 160" (8 x 30 x 2/3): unrolled; then i_2 around the
    # copies: 136 statements, 354 after unrolling > 200: kept
    sch = _tiled_gemm("i0 j0 k0 i1 j1 i2 k1", (2, 32, 4), (16, 16), (32, 8))
    nest = extract(sch.func)[0]
    shapes = [M.analyze_access(a, nest) for a in nest.accesses]
    assert sum(count for count, _ in body_statements(nest, shapes)) == 30
    names = [lp.var.name for lp in nest.loops]
    assert {names[j] for j in unrolled_before_vectorizing(nest, shapes)} == {"k_1"}
    # so gcc vectorizes j_1 around the kept i_2 loop (outer-loop vectorization)
    assert predict(sch.func, "cpu").nests[0].vectorization == "auto"


def test_schedule_unroll_counts_as_straight_line():
    sch = _tiled_gemm("i0 j0 k0 i1 k1 j1", (8, 32), (32, 8), (64, 4))
    sch.unroll(sch.get_loops(sch.get_block("C"))[-1])
    nest = extract(sch.func)[0]
    shapes = [M.analyze_access(a, nest) for a in nest.accesses]
    names = [lp.var.name for lp in nest.loops]
    # j_1 is written out by the C back end; k_1 around its 8 copies is too big to unroll: gcc
    # 12 counts 106 statements (103 past the loop control), 274 unrolled
    size = sum(
        count * (8 if names.index("j_1") in deps else 1)
        for count, deps in body_statements(nest, shapes)
    )
    assert 100 <= size <= 110 and 4 * size * 2 / 3 > 200
    assert {names[j] for j in unrolled_before_vectorizing(nest, shapes)} == {"j_1"}


_FOR = re.compile(r"for \(int\d+_t (\w+) = ")
_VECTORIZED = re.compile(r"^k\.c:(\d+):\d+: optimized: loop vectorized")


def _gcc_vectorized_loops(func, tmp_path) -> set[str]:
    """Loop variables of the loops gcc's -fopt-info-vec reports vectorized in the kernel."""
    source = build(func, "cpu").source
    (tmp_path / "k.c").write_text(source)
    flags = ["-O3", "-march=native", "-fopenmp", "-std=c11", "-ffp-contract=fast",
             "-fno-math-errno"]  # fmt: skip
    result = subprocess.run(
        [compiler_command(), *flags, "-c", "k.c", "-fopt-info-vec-optimized"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    lines = source.splitlines()
    found = set()
    for report in result.stderr.splitlines():
        match = _VECTORIZED.match(report)
        if match:
            loop = _FOR.search(lines[int(match.group(1)) - 1])
            found.add(loop.group(1) if loop else "?")
    return found


@pytest.mark.skipif(
    "gcc" not in compiler_version(compiler_command()) or " 12." not in
    compiler_version(compiler_command()),
    reason="the unrolling limits and vectorizer rules are gcc 12's",
)  # fmt: skip
@pytest.mark.parametrize(
    "order, i_parts, j_parts, k_parts, expected",
    [
        # k_1 unrolled, j_1 vectorized around the kept i_2 (seen in bench-cost seed 4)
        ("i0 j0 k0 i1 j1 i2 k1", (2, 32, 4), (16, 16), (32, 8), "j_1"),
        # k_1:8 unrolled, then j_1 innermost with contiguous stores
        ("i0 j0 k0 i1 j1 k1", (8, 32), (16, 16), (32, 8), "j_1"),
        # a 16-trip k_1 is too big to unroll: j_1 around it (outer-loop vectorization)
        ("i0 k0 j0 i1 j1 k1", (16, 16), (16, 16), (16, 16), "j_1"),
    ],
)
def test_vector_loop_is_gccs(order, i_parts, j_parts, k_parts, expected, tmp_path):
    sch = _tiled_gemm(order, i_parts, j_parts, k_parts)
    nest = extract(sch.func)[0]
    shapes = [M.analyze_access(a, nest) for a in nest.accesses]
    _, how, loop = _lanes(nest, shapes, Target("cpu"))
    assert how == "auto" and nest.loops[loop].var.name == expected
    assert expected in _gcc_vectorized_loops(sch.func, tmp_path)


def test_conv_index_products_and_window_offsets():
    # conv2d 32x28x28, 3x3: row pitches 784, 392, 28 are no powers of two, so gcc keeps each
    # product (ff_0*784 + yy_1*392 + ...), and the rc_1 products fold to constants when rc_1
    # is unrolled; ry_1, written out by the schedule, is a constant offset. gcc 12 counts
    # "size: 41-5" for rc_1 (36 statements), 192 unrolled <= 200: unrolled
    func = workloads.spec("conv2d_nchw").make(N=1, CI=32, H=28, W=28, CO=32, kernel=3)
    sch = Schedule(func)
    block = sch.get_block("conv2d_nchw")
    nn, ff, yy, xx, rc, ry, rx = sch.get_loops(block)
    ff0, ff1, ff2 = sch.split(ff, [32, 1, 1])
    yy0, yy1, yy2 = sch.split(yy, [1, 2, 14])
    xx0, xx1 = sch.split(xx, [4, 7])
    rc0, rc1 = sch.split(rc, [4, 8])
    ry0, ry1 = sch.split(ry, [1, 3])
    rx0, rx1 = sch.split(rx, [1, 3])
    sch.reorder(nn, ff0, yy0, xx0, rc0, ry0, rx0, yy1, ff1, ff2, yy2, xx1, rx1, ry1, rc1)
    sch.unroll(ry1)
    nest = extract(sch.func)[-1]
    shapes = [M.analyze_access(a, nest) for a in nest.accesses]
    names = [lp.var.name for lp in nest.loops]
    rc_1, constant = names.index("rc_1"), {names.index("rc_1"), names.index("ry_1")}
    size = sum(c for c, deps in body_statements(nest, shapes) if not deps <= constant)
    assert 34 <= size <= 38 and 8 * size * 2 / 3 <= 200
    assert rc_1 in unrolled_before_vectorizing(nest, shapes)
    # so gcc vectorizes xx_1 around the kept rx_1 loop
    assert predict(sch.func, "cpu").nests[-1].vectorization == "auto"
