"""The Schedule itself: handles, undo/redo, history, copies, seeded sampling, failed primitives
that change nothing, and handles whose loop or block a later primitive removed."""

import inspect

import pytest

from schedlab import workloads
from schedlab.ir import assert_structural_equal
from schedlab.ir.stmt import Block, For
from schedlab.schedule import (
    BlockNotFoundError,
    BlockRV,
    HandleError,
    InstructionKind,
    LoopRV,
    Schedule,
    ScheduleError,
    all_kinds,
    get_kind,
)
from schedlab.schedule.reference import DEFAULT_OUTPUT, render_reference
from schedlab.schedule.reference import main as reference_main

from .helpers import assert_error_keeps_state


def _gemm(m=9, n=7, k=5):
    return workloads.get("gemm", M=m, N=n, K=k)[0]


def _samples(sch: Schedule, count: int = 6) -> list:
    """`count` sampling decisions taken on gemm's first loop (and one categorical)."""
    i = sch.get_loops(sch.get_block("C"))[0]
    values = [sch.get(v) for _ in range(count) for v in sch.sample_perfect_tile(i, n=3)]
    return values + [sch.get(sch.sample_categorical([0, 1, 2, 3], [1, 1, 1, 1]))]


# -- handles -----------------------------------------------------------------------------------
def test_handles_resolve_to_the_current_nodes():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    assert isinstance(block, BlockRV) and isinstance(sch.get(block), Block)
    loops = sch.get_loops(block)
    assert all(isinstance(loop, LoopRV) for loop in loops)
    assert [sch.get(loop).loop_var.name for loop in loops] == ["i", "j", "k"]
    assert all(isinstance(sch.get(loop), For) for loop in loops)
    assert sch.get(5) == 5 and sch.get([block])[0] is sch.get(block)


def test_handles_follow_later_primitives():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    k_before = sch.get(k)
    sch.split(i, [None, 4])
    assert sch.get(k).uid == k_before.uid  # rebuilt (its block's bindings changed), same uid
    assert sch.get(block).name_hint == "C"
    assert sch.get(j).loop_var.name == "j"
    assert len(sch.get_loops(block)) == 4


def test_removed_loop_handle_names_the_primitive_and_step():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    i, j, _ = sch.get_loops(block)
    sch.split(i, [None, 4])  # step 3
    with pytest.raises(HandleError, match=r"removed by split \(step 3\)"):
        sch.get(i)
    outer, inner = sch.get_loops(block)[:2]
    sch.fuse(outer, inner)  # step 5
    with pytest.raises(HandleError, match=r"removed by fuse \(step 5\)"):
        sch.get(outer)
    with pytest.raises(HandleError, match=r"removed by split \(step 3\)"):
        sch.split(i, [2, None])  # a primitive given a dead handle says the same
    assert sch.get(j).loop_var.name == "j"


def test_handle_of_another_schedule_or_an_undone_step():
    one, two = Schedule(_gemm()), Schedule(_gemm())
    block = one.get_block("C")
    with pytest.raises(HandleError, match="does not belong to this schedule"):
        two.get(block)
    one.undo()
    with pytest.raises(HandleError, match="does not belong"):
        one.get_loops(block)


def test_copy_shares_handles_made_before_it():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    other = sch.copy()
    assert other.get(block) is sch.get(block)


# -- undo / redo / history ---------------------------------------------------------------------
def test_undo_redo_move_between_versions():
    func = _gemm()
    sch = Schedule(func)
    start = sch.mod
    block = sch.get_block("C")
    i = sch.get_loops(block)[0]
    sch.split(i, [None, 4])
    split_mod, split_trace = sch.mod, sch.trace
    assert sch.mod is not start
    assert sch.undo() and sch.mod is start and len(sch.trace) == 2
    assert sch.undo() and sch.undo() and sch.mod is start and len(sch.trace) == 0
    assert not sch.undo()
    assert sch.redo() and sch.redo() and sch.redo()
    assert sch.mod is split_mod and sch.trace is split_trace
    assert not sch.redo()


def test_a_new_primitive_after_undo_drops_the_redo_branch():
    sch = Schedule(_gemm())
    block = sch.get_block("C")
    i = sch.get_loops(block)[0]
    sch.split(i, [None, 4])
    sch.undo()
    sch.split(i, [None, 3])
    assert not sch.redo()
    assert [s.instruction.kind for s in sch.history[1:]] == ["GetBlock", "GetLoops", "Split"]
    assert int(sch.get(sch.get_loops(block)[1]).extent) == 3


def test_history_lists_every_version():
    func = _gemm()
    sch = Schedule(func)
    block = sch.get_block("C")
    i = sch.get_loops(block)[0]
    sch.split(i, [None, 4])
    history = sch.history
    assert [step.index for step in history] == [0, 1, 2, 3]
    assert history[0].instruction is None and history[0].mod is history[1].mod
    assert history[-1].mod is sch.mod and history[-1].trace is sch.trace
    assert [len(step.trace) for step in history] == [0, 1, 2, 3]
    sch.undo()
    assert len(sch.history) == 3
    assert repr(sch) == "Schedule(2 instructions, step 2)"


def test_copy_is_independent():
    func = _gemm()
    sch = Schedule(func)
    block = sch.get_block("C")
    i = sch.get_loops(block)[0]
    other = sch.copy()
    other.split(i, [None, 4])
    assert len(sch.trace) == 2 and len(other.trace) == 3
    assert len(sch.get_loops(block)) == 3 and len(other.get_loops(block)) == 4
    assert other.undo() and other.undo()
    assert_structural_equal(other.mod, sch.mod)
    assert sch.redo() is False


# -- seeded sampling ---------------------------------------------------------------------------
def test_same_seed_same_decisions():
    func = workloads.get("gemm", M=720, N=8, K=8)[0]
    assert _samples(Schedule(func, seed=11)) == _samples(Schedule(func, seed=11))
    assert _samples(Schedule(func, seed=11)) != _samples(Schedule(func, seed=12))
    assert _samples(Schedule(func, seed=None)) == _samples(Schedule(func, seed=-1))


def test_undo_rewinds_the_random_generator():
    func = workloads.get("gemm", M=720, N=8, K=8)[0]
    sch = Schedule(func, seed=5)
    sch.get_block("C")
    first = _samples(sch, 1)
    for _ in range(3):
        sch.undo()
    assert _samples(sch, 1) == first


def test_copy_forks_the_random_generator():
    func = workloads.get("gemm", M=720, N=8, K=8)[0]

    def fork(seed):
        sch = Schedule(func, seed=seed)
        one, two = sch.copy(), sch.copy()
        return _samples(sch), _samples(one), _samples(two)

    original, one, two = fork(7)
    assert len({tuple(original), tuple(one), tuple(two)}) == 3  # three different streams
    assert fork(7) == (original, one, two)  # ... that repeat for the same seed
    assert original != _samples(Schedule(func, seed=7))  # copying advanced the original


def test_seed_must_be_an_int():
    with pytest.raises(TypeError, match="seed must be an int"):
        Schedule(_gemm(), seed="0")


# -- failures change nothing -------------------------------------------------------------------
def test_failed_primitive_keeps_state_and_renders_the_function():
    sch = Schedule(_gemm())
    sch.get_block("C")
    err = assert_error_keeps_state(sch, lambda: sch.get_block("D"), BlockNotFoundError,
                                   "no block named 'D'; blocks: C")  # fmt: skip
    assert err.primitive == "get_block"
    assert str(err).startswith("ScheduleError in get_block: no block named 'D'")
    assert "def gemm" in str(err)


def test_error_render_levels():
    for level, shows_ir in (("detail", True), ("fast", False), ("none", False)):
        sch = Schedule(_gemm(), error_render_level=level)
        with pytest.raises(ScheduleError) as info:
            sch.get_block("D")
        assert ("T.block" in str(info.value)) == shows_ir
    with pytest.raises(ValueError, match="error_render_level must be one of"):
        Schedule(_gemm(), error_render_level="loud")


def test_error_marks_the_offending_node():
    sch = Schedule(_gemm(12, 10, 8))
    i = sch.get_loops(sch.get_block("C"))[0]
    with pytest.raises(ScheduleError) as info:
        sch.sample_perfect_tile(i, n=2, decision=[5, 5])
    text = str(info.value)
    assert "product 12" in text and "^^^" in text


def test_wrong_arguments_are_type_errors_naming_the_method():
    sch = Schedule(_gemm())
    with pytest.raises(TypeError, match="get_loops: "):
        sch.get_loops()
    with pytest.raises(TypeError, match="expected a PrimFunc or IRModule, got int"):
        Schedule(3)


def test_debug_mode_verifies_and_release_mode_skips():
    func = _gemm()
    fast = Schedule(func, debug=False)
    i = fast.get_loops(fast.get_block("C"))[0]
    fast.split(i, [None, 4])
    checked = Schedule(func, debug=True)
    i = checked.get_loops(checked.get_block("C"))[0]
    checked.split(i, [None, 4])
    assert_structural_equal(fast.mod, checked.mod)


# -- the registry ------------------------------------------------------------------------------
def test_every_registered_primitive_is_a_schedule_method():
    for kind in all_kinds():
        method = getattr(Schedule, kind.method)
        assert method.__doc__ == kind.doc and kind.doc, kind.name
        assert get_kind(kind.name) is kind
    with pytest.raises(KeyError, match="unknown instruction kind 'Nope'"):
        get_kind("Nope")


def test_primitives_reference_page_is_up_to_date():
    page = DEFAULT_OUTPUT.read_text() if DEFAULT_OUTPUT.exists() else ""
    assert page == render_reference(), (
        "docs/primitives.md is out of date: run `python -m schedlab.schedule.reference`"
    )
    for kind in all_kinds():
        assert f"### {kind.method}\n" in page and f"instruction `{kind.name}`" in page


def test_reference_renders_signature_doctests_and_indented_blocks():
    def demo(ctx, loop, factor: int = 2):
        """Do a thing.

        Before:
            for i in range(8):
                body

            tail

        >>> 1 + 1
        2
        """

    kind = InstructionKind("Demo", "demo", demo, ("loop",), ("factor",), "loops", False, False,
                           inspect.signature(demo).replace(parameters=list(
                               inspect.signature(demo).parameters.values())[1:]))  # fmt: skip
    text = render_reference([kind])
    assert "sch.demo(loop, factor: int = 2) -> list[LoopRV]" in text
    assert "```text\nfor i in range(8):\n    body\n\ntail\n```" in text
    assert "```pycon\n>>> 1 + 1\n2\n```" in text
    assert "instruction `Demo`; inputs `loop`; attributes `factor`." in text


def test_reference_check_mode(tmp_path):
    stale = tmp_path / "primitives.md"
    stale.write_text("old")
    assert reference_main(["--check", "--output", str(stale)]) == 1
    assert reference_main(["--output", str(stale)]) == 0
    assert reference_main(["--check", "--output", str(stale)]) == 0


def test_get_block_accepts_tvm_main_for_a_lone_function():
    from schedlab import workloads
    from schedlab.schedule import BlockNotFoundError, Schedule

    sch = Schedule(workloads.get("gemm", M=8, N=8, K=8)[0])
    assert sch.get(sch.get_block("C", func_name="main")).name_hint == "C"
    with pytest.raises(BlockNotFoundError, match="no function 'other'"):
        sch.get_block("C", func_name="other")
