"""if-sink-readers: an If whose branches build sequences of different lengths, read only by
SequenceAt, SequenceLength and ConcatFromSequence, returns the readers' tensors instead (the
readers move into both branches and lower there). What it emits, what it refuses and why, and
equality with the original under onnxruntime for both conditions, lengths 0, 1 and several, and
every valid position (negative ones included)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support import (
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    run_ort,
    sequence_op_count,
)

A, B, C = (np.array(v, dtype=np.float32) for v in ([1, 2], [3, 4], [5, 6]))

# then: 3 elements, else: 1 (or an empty sequence in the empty variant)
THREE_OR_ONE = """g (bool c, float[2] a, float[2] b, float[2] d, int64 p)
    => (float[?] y, int64 n, float[2] z) {{
  s = If(c) <then_branch = t () => (seq(float) st) {{ st = SequenceConstruct(a, b, d) }},
             else_branch = e () => (seq(float) se) {{ {else_body} }}>
  y = ConcatFromSequence<axis = {axis}>(s)
  n = SequenceLength(s)
  z = SequenceAt(s, p)
}}"""


def _feeds(c: bool, p: int) -> dict[str, np.ndarray]:
    return {"c": np.array(c), "a": A, "b": B, "d": C, "p": np.array(p, dtype=np.int64)}


@pytest.mark.parametrize("axis", [0, -1])
def test_readers_move_into_branches_of_different_lengths(axis):
    model = parse(THREE_OR_ONE.format(else_body="se = SequenceConstruct(b)", axis=axis))
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["if-sink-readers"] == 1
    (if_node,) = [n for n in lowered.graph.node if n.op_type == "If"]
    assert len(if_node.output) == 3  # the readers' tensors, no sequence
    for c, p in [(True, 0), (True, 2), (True, -3), (False, 0), (False, -1)]:
        _, _, (y, n, z) = lower_and_compare(model, _feeds(c, p))
        assert int(n) == (3 if c else 1)
        np.testing.assert_array_equal(z, ([A, B, C] if c else [B])[p])
        np.testing.assert_array_equal(y, np.concatenate([A, B, C] if c else [B]))


def test_a_branch_of_one_element_against_a_run_time_position_fails_as_the_original():
    model = parse(THREE_OR_ONE.format(else_body="se = SequenceConstruct(b)", axis=0))
    lowered, _ = lower(model)
    for candidate in (model, lowered):  # position 2 is out of range for one element
        with pytest.raises(Exception, match=r"(?i)out of (range|bounds)|invalid"):
            run_ort(candidate, _feeds(False, 2))
    assert run_ort(lowered, _feeds(True, 2))[2].tolist() == C.tolist()


def test_lengths_zero_one_and_several_read_by_length():
    """len() of a list built as [], [a] or [a, b, d] depending on two conditions."""
    model = parse("""g (bool c, bool k, float[2] a, float[2] b, float[2] d) => (int64 n) {
      s = If(c) <
        then_branch = t () => (seq(float) st) {
          st = If(k) <then_branch = tt () => (seq(float) r) { r = SequenceEmpty<dtype = 1>() },
                      else_branch = te () => (seq(float) r2) { r2 = SequenceConstruct(a) }>
        },
        else_branch = e () => (seq(float) se) { se = SequenceConstruct(a, b, d) }>
      n = SequenceLength(s)
    }""")
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["if-sink-readers"] == 2  # the outer If, then the inner one
    for c, k in itertools.product([True, False], repeat=2):
        feeds = {"c": np.array(c), "k": np.array(k), "a": A, "b": B, "d": C}
        _, _, (n,) = lower_and_compare(model, feeds)
        assert int(n) == (0 if k else 1) if c else 3


def test_refuses_a_reader_that_would_fail_in_a_branch_that_may_never_run():
    model = parse("""g (bool c, float[2] a, float[2] b) => (float[2] z, float[?] y) {
      s = If(c) <then_branch = t () => (seq(float) st) { st = SequenceConstruct(a, b) },
                 else_branch = e () => (seq(float) se) { se = SequenceConstruct(b) }>
      one = Constant<value = int64 {1}>()
      z = SequenceAt(s, one)
      e = If(c) <then_branch = t2 () => (seq(float) st2) { st2 = SequenceConstruct(a) },
                 else_branch = e2 () => (seq(float) se2) { se2 = SequenceEmpty<dtype = 1>() }>
      y = ConcatFromSequence<axis = 0>(e)
    }""")
    lowered, report, (z, y) = lower_and_compare(
        model, {"c": np.array(True), "a": A, "b": B}, tensor_lists=False
    )
    np.testing.assert_array_equal(z, B)
    np.testing.assert_array_equal(y, A)
    text = reasons(report)
    assert "position 1 of '' is out of range in the else branch" in text
    assert "ConcatFromSequence '' would read an empty sequence in the else branch" in text
    assert op_counts(lowered)["SequenceAt"] == 1 and op_counts(lowered)["ConcatFromSequence"] == 1


@pytest.mark.parametrize(
    ("reader", "reason"),
    [
        (
            "t = SequenceInsert(s, a)\n  y = ConcatFromSequence<axis = 0>(t)",
            "read by SequenceInsert",
        ),
        ("y = ConcatFromSequence<axis = 0>(s)", "output 's' in the else branch: 'q' is a"),
        (
            "n = SequenceLength(s)\n  one = Constant<value = int64 {1}>()\n"
            "  last = Sub(n, one)\n  y = SequenceAt(s, last)",
            "output 's': a reader's position is computed after the If",
        ),
    ],
    ids=["other-reader", "unknown-length", "position-after"],
)
def test_refusals_say_why(reader, reason):
    model = parse(f"""g (bool c, float[2] a, seq(float[2]) q) => (float[?] y) {{
      s = If(c) <then_branch = t () => (seq(float) st) {{ st = SequenceConstruct(a, a) }},
                 else_branch = e () => (seq(float) se) {{ se = Identity(q) }}>
      {reader}
    }}""")
    lowered, report = lower(model)
    assert "if-sink-readers" not in report.rules_fired
    assert op_counts(lowered)["If"] == 1 and sequence_op_count(lowered) > 0
    assert reason in reasons(report)
    lower_and_compare(model, {"c": np.array(True), "a": A, "q": [A, B]})


def test_a_static_position_defined_after_the_if_is_copied_into_each_branch():
    model = parse("""g (bool c, float[2] a, float[3] b) => (float[?] z) {
      s = If(c) <then_branch = t () => (seq(float) st) { st = SequenceConstruct(a, b) },
                 else_branch = e () => (seq(float) se) { se = SequenceConstruct(b) }>
      last = Constant<value = int64 {-1}>()
      z = SequenceAt(s, last)
    }""")
    b = np.array([7, 8, 9], dtype=np.float32)
    for c in (True, False):
        lowered, report, (z,) = lower_and_compare(model, {"c": np.array(c), "a": A, "b": b})
        np.testing.assert_array_equal(z, b)
    assert sequence_op_count(lowered) == 0 and report.rules_fired["if-sink-readers"] == 1


def test_refuses_a_concat_that_cannot_fit_in_a_branch_that_never_runs():
    """Fuzz seed 453: elements of different widths in the branch not taken; a Concat of them
    there would fail shape inference (the checker), though the branch never runs."""
    model = parse("""g (bool c, float[2,2] a, float[4,1] b) => (float[?,?] y) {
      s = If(c) <then_branch = t () => (seq(float) st) { st = SequenceConstruct(a, b) },
                 else_branch = e () => (seq(float) se) { se = SequenceConstruct(b, b, b) }>
      y = ConcatFromSequence<axis = 0>(s)
    }""")
    b = np.arange(4, dtype=np.float32).reshape(4, 1)
    feeds = {"c": np.array(False), "a": np.zeros((2, 2), np.float32), "b": b}
    lowered, report, (y,) = lower_and_compare(model, feeds, tensor_lists=False)
    np.testing.assert_array_equal(y, np.concatenate([b, b, b]))
    assert "'' cannot concatenate the elements of the then branch (dim 1)" in reasons(report)
    assert op_counts(lowered)["ConcatFromSequence"] == 1


def test_a_concat_waits_for_the_branch_elements_then_refuses_a_misfit():
    """Fuzz seed 1528: the else branch inserts a [1,2] tensor into a list of scalars (the
    branch is not taken). Its elements are known only once the insert folds; the concat is not
    sunk before, and then not at all."""
    model = parse("""g (float[2] x, bool c) => (float[?] y) {
      a = ReduceSum<keepdims = 0>(x)
      s = SequenceConstruct(a, a, a)
      wide = Constant<value = float[1,2] {-2, -3}>()
      r = If(c) <then_branch = t () => (seq(float) st) { st = SequenceErase(s) },
                 else_branch = e () => (seq(float) se) { se = SequenceInsert(s, wide) }>
      y = ConcatFromSequence<axis = -1, new_axis = 1>(r)
    }""")
    lowered, report, (y,) = lower_and_compare(model, {"x": A, "c": np.array(True)})
    np.testing.assert_array_equal(y, [3, 3])
    assert "cannot concatenate the elements of the else branch (ranks or axis)" in reasons(report)
    assert op_counts(lowered)["ConcatFromSequence"] == 1
