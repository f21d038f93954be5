"""A list a Loop appends to and that is stacked after the loop (ConcatFromSequence with
new_axis=1, whose result is needed) becomes a scan output even where the loop analysis cannot
prove the appended tensor keeps one shape: the stack fails unless every element has one shape,
so wherever the original runs to the end, a scan output can collect them; where the shapes
differ, the lowered Loop fails where the original's stack fails."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_both_fail,
    lower,
    parse,
    rule_check,
    run_ort,
    sequence_op_count,
)

from seqlower.rule import Refusal
from seqlower.rules.loop_appends import _check_append

# rows i .. i + 2 of x: a Slice clamps at the end, so the analysis cannot prove two rows
WINDOW_BODY = """<body = body (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        axes = Constant<value = int64[1] {0}>()
        two = Constant<value = int64 {2}>()
        stop = Add(i, two)
        b = Unsqueeze(i, axes)
        e = Unsqueeze(stop, axes)
        window = Slice(x, b, e)
        grown = SequenceInsert(acc, window)
    }>"""


def _model(readers: str, outputs: str = "float[?,?,3] y", start: str = "") -> str:
    return parse(
        f"""g (int64 m, float[N,3] x, bool flag) => ({outputs}) {{
        t = Constant<value = bool {{1}}>()
        {start or "s0 = SequenceEmpty<dtype = 1>()"}
        s = Loop(m, t, s0) {WINDOW_BODY}
        {readers}
    }}"""
    )


STACKED = _model("y = ConcatFromSequence<axis = 0, new_axis = 1>(s)")
X = np.arange(15, dtype=np.float32).reshape(5, 3)


def _feeds(m: int) -> dict:
    return {"m": np.array(m), "x": X, "flag": np.array(True)}


def _windows(m: int) -> np.ndarray:
    return np.stack([X[i : i + 2] for i in range(m)])


@pytest.mark.parametrize("trips", [1, 3, 4])
def test_a_stacked_list_of_windows_is_a_scan_output(trips):
    lowered, report = lower(STACKED, target="generic")
    assert report.rules_fired["loop-append-to-scan"] == 1
    assert sequence_op_count(lowered) == 0
    (body,) = [a.g for n in lowered.graph.node if n.op_type == "Loop" for a in n.attribute]
    assert "Concat" not in {n.op_type for n in body.node}  # nothing regrown per iteration
    (got,) = run_ort(lowered, _feeds(trips))
    (want,) = run_ort(STACKED, _feeds(trips))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, _windows(trips))


def test_windows_of_two_shapes_fail_in_both():
    """Window 4 of 5 rows has one row: the original's stack fails, and so does the Loop."""
    lowered, _ = lower(STACKED, target="generic")
    assert_both_fail(STACKED, lowered, _feeds(5))


def test_no_iteration_gives_an_empty_stack():
    """The original's stack of no element fails; the scan output of no iteration is empty
    (as for every stacked list: ConcatFromSequence of an empty list gives an empty tensor)."""
    lowered, _ = lower(STACKED, target="generic")
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own error types
        run_ort(STACKED, _feeds(0))
    (got,) = run_ort(lowered, _feeds(0))
    assert got.size == 0


def test_initial_elements_are_stacked_with_the_windows():
    model = _model(
        "y = ConcatFromSequence<axis = 0, new_axis = 1>(s)",
        start="""zero = Constant<value = int64[1] {0}>()
        end = Constant<value = int64[1] {2}>()
        first = Slice(x, zero, end, zero)
        s0 = SequenceConstruct(first)""",
    )
    lowered, report = lower(model, target="generic")
    assert report.rules_fired["loop-append-to-scan"] == 1
    assert sequence_op_count(lowered) == 0
    for trips in (0, 2, 4):
        (got,) = run_ort(lowered, _feeds(trips))
        (want,) = run_ort(model, _feeds(trips))
        np.testing.assert_array_equal(got, want)
    assert_both_fail(model, lowered, _feeds(5))


def test_a_stack_whose_result_feeds_a_branch_is_needed():
    model = _model(
        """stack = ConcatFromSequence<axis = 0, new_axis = 1>(s)
        y = If(flag) <then_branch = th () => (float[?,?,3] a) { a = Identity(stack) },
                      else_branch = el () => (float[?,?,3] b) { b = Neg(stack) }>"""
    )
    lowered, report = lower(model, target="generic")
    assert report.rules_fired["loop-append-to-scan"] == 1
    for flag in (True, False):
        feeds = {**_feeds(3), "flag": np.array(flag)}
        np.testing.assert_array_equal(run_ort(lowered, feeds)[0], run_ort(model, feeds)[0])


@pytest.mark.parametrize(
    "readers",
    [
        # stacked in one branch only: the other may run with windows of two shapes
        """y = If(flag) <then_branch = th () => (float[?,?,3] a) {
                a = ConcatFromSequence<axis = 0, new_axis = 1>(s) },
            else_branch = el () => (float[?,?,3] b) {
                b = ConcatFromSequence<axis = 0>(s) }>""",
        # concatenated, not stacked: windows of two shapes are fine
        "y = ConcatFromSequence<axis = 0>(s)",
    ],
    ids=["stacked-in-a-branch", "concatenated"],
)
def test_a_list_not_surely_stacked_keeps_its_accumulator(readers):
    model = _model(readers)
    refusal = rule_check(model, _check_append, "Loop")
    assert isinstance(refusal, Refusal)
    assert "may change shape between iterations" in refusal.reason
    assert "the list is not stacked after the loop" in refusal.reason
    full, report = lower(model, target="generic")
    assert "loop-append-to-scan" not in report.rules_fired
    assert sequence_op_count(full) == 0
    for trips in (3, 5):  # window 4 has one row: concatenated, it is fine
        feeds = {**_feeds(trips), "flag": np.array(False)}
        try:
            want = run_ort(model, feeds)
        except Exception:
            assert_both_fail(model, full, feeds)
            continue
        np.testing.assert_array_equal(run_ort(full, feeds)[0], want[0])


# the window appended only where row i of `keep` says so (an If in the body)
KEPT_BODY = WINDOW_BODY.replace(
    "grown = SequenceInsert(acc, window)",
    """wanted = Gather(keep, i)
        grown = If(wanted) <
            then_branch = th () => (seq(float) a) { a = SequenceInsert(acc, window) },
            else_branch = el () => (seq(float) d) { d = Identity(acc) }>""",
)
KEPT = parse(
    f"""g (int64 m, float[N,3] x, bool[K] keep) => (float[?,?,3] y) {{
        t = Constant<value = bool {{1}}>()
        s0 = SequenceEmpty<dtype = 1>()
        s = Loop(m, t, s0) {KEPT_BODY}
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }}"""
)


def test_a_stack_proves_nothing_of_the_windows_a_conditional_append_skips():
    """Window 4 of 5 rows has one row, and is not appended: the original stacks the others.
    A scan output would collect every window, of two shapes, and onnxruntime's Loop fails on
    that ("Inconsistent shape in loop output"): the list stays an accumulator."""
    refusal = rule_check(KEPT, _check_append, "Loop")
    assert isinstance(refusal, Refusal)
    assert "is appended in some of them only" in refusal.reason
    lowered, report = lower(KEPT, target="generic")
    assert "loop-append-to-scan" not in report.rules_fired
    for keep in ([True, True, True, True, False], [True, False, True, True, False], [False] * 5):
        feeds = {"m": np.array(5), "x": X, "keep": np.array(keep)}
        try:
            want = run_ort(KEPT, feeds)
        except Exception:
            assert_both_fail(KEPT, lowered, feeds)
            continue
        np.testing.assert_array_equal(run_ort(lowered, feeds)[0], want[0])
    assert_both_fail(KEPT, lowered, {"m": np.array(5), "x": X, "keep": np.array([True] * 5)})
