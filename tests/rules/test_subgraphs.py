"""Sequence ops inside If branches, Loop bodies, SequenceMap bodies and model-local functions are
lowered too (trap 12); sequence-typed model inputs and outputs keep the interface (trap 9)."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    sequence_op_count,
    sequence_op_counts,
)

RNG = np.random.default_rng(4)
X = RNG.standard_normal((3, 4)).astype(np.float32)


@pytest.mark.parametrize("flag", [True, False])
def test_in_if_branches(flag):
    model = parse(
        """g (bool c, float[3,4] x) => (float y) {
        y = If(c) <
            then_branch = then_g () => (float[4] r) {
                s = SplitToSequence<axis = 0, keepdims = 0>(x)
                last = Constant<value = int64 {-1}>()
                r = SequenceAt(s, last)
            },
            else_branch = else_g () => (float[12] r2) {
                s2 = SplitToSequence<axis = 0, keepdims = 0>(x)
                r2 = ConcatFromSequence<axis = 0>(s2)
            }
        >
    }"""
    )
    lowered, _, (y,) = lower_and_compare(model, {"c": np.array(flag), "x": X})
    np.testing.assert_array_equal(y, X[-1] if flag else X.reshape(-1))
    assert sequence_op_count(lowered) == 0


def test_in_a_loop_body():
    """The body reads rows of the outer x at the iteration number (a run-time position)."""
    model = parse("""g (float[3,4] x) => (float[4] total) {
        n = Constant<value = int64 {3}>()
        t = Constant<value = bool {1}>()
        zero = Constant<value = float[4] {0, 0, 0, 0}>()
        total = Loop(n, t, zero) <body = body (int64 i, bool c, float[4] acc)
                                            => (bool c2, float[4] out) {
            c2 = Identity(c)
            rows = SplitToSequence<axis = 0, keepdims = 0>(x)
            first = Constant<value = int64 {0}>()
            row = SequenceAt(rows, first)
            grown = SequenceInsert(rows, row, i)
            r = SequenceAt(grown, i)
            gone = SequenceErase(grown, first)
            n_rows = SequenceLength(gone)
            scale = Cast<to = 1>(n_rows)
            scaled = Div(r, scale)
            out = Add(scaled, acc)
        }>
    }""")
    lowered, _, _ = lower_and_compare(model, {"x": X})
    assert sequence_op_count(lowered) == 0


def test_in_a_loop_body_over_the_carried_value():
    model = parse("""g (float[3,4] x) => (float[3,4] y) {
        n = Constant<value = int64 {2}>()
        t = Constant<value = bool {1}>()
        y = Loop(n, t, x) <body = body (int64 i, bool c, float[3,4] acc)
                                     => (bool c2, float[3,4] out) {
            c2 = Identity(c)
            rows = SplitToSequence<axis = 0, keepdims = 0>(acc)
            first = Constant<value = int64 {0}>()
            r = SequenceAt(rows, first)
            grown = SequenceInsert(rows, r)
            erased = SequenceErase(grown, first)
            out = ConcatFromSequence<axis = 0, new_axis = 1>(erased)
        }>
    }""")
    lowered, _, (y,) = lower_and_compare(model, {"x": X})
    np.testing.assert_array_equal(y, X[[2, 0, 1]])  # rows rotated twice
    assert sequence_op_count(lowered) == 0


def test_in_a_sequence_map_body_kept_as_a_loop():
    """The map stays a Loop (its input has no static length); the body's own split and
    concat are lowered inside the Loop body."""
    model = parse(
        """g (seq(float[3,4]) s) => (seq(float[4,3]) m) {
        m = SequenceMap<body = b (float[3,4] x) => (float[4,3] z) {
            rows = SplitToSequence<axis = 0, keepdims = 0>(x)
            z = ConcatFromSequence<axis = 1, new_axis = 1>(rows)
        }>(s)
    }""",
        opset=17,
    )
    for length in (0, 1, 3):
        feeds = {"s": [RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(length)]}
        lowered, report, (m,) = lower_and_compare(model, feeds)
        assert [e.tolist() for e in m] == [e.T.tolist() for e in feeds["s"]]
    counts = sequence_op_counts(lowered)
    assert counts.get("SequenceMap", 0) == counts.get("ConcatFromSequence", 0) == 0
    assert "sequence-typed model input" in reasons(report)


def test_in_a_model_local_function():
    model = parse(
        """g (float[2] a, float[2] b) => (float[6] y) {
            y = local.join(a, b)
        }""",
        domains={"local": 1},
        functions="""<domain: "local", opset_import: ["" : 18]>
        join (p, q) => (r) {
            s = SequenceConstruct(p, q)
            t = SequenceInsert(s, p)
            last = Constant<value = int64 {-1}>()
            u = SequenceErase(t, last)
            v = SequenceInsert(u, q)
            r = ConcatFromSequence<axis = 0>(v)
        }""",
    )
    a, b = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    lowered, _, (y,) = lower_and_compare(model, {"a": a, "b": b})
    np.testing.assert_array_equal(y, [1, 2, 3, 4, 3, 4])
    assert sequence_op_count(lowered) == 0


# -- the model's interface ---------------------------------------------------------------------


def test_a_sequence_typed_output_stays_a_sequence_and_everything_behind_is_lowered():
    model = parse("""g (float[3,4] x, float[4] w) => (seq(float[4]) out) {
        rows = SplitToSequence<axis = 0, keepdims = 0>(x)
        first = Constant<value = int64 {0}>()
        gone = SequenceErase(rows, first)
        out = SequenceInsert(gone, w, first)
    }""")
    w = np.ones(4, dtype=np.float32)
    lowered, report, (out,) = lower_and_compare(model, {"x": X, "w": w}, tensor_lists=False)
    assert [e.tolist() for e in out] == [w.tolist(), X[1].tolist(), X[2].tolist()]
    assert sequence_op_counts(lowered) == {"SequenceConstruct": 1}
    assert lowered.graph.output[0].type.HasField("sequence_type")
    assert "feeds the sequence-typed output 'out' (interface kept)" in reasons(
        report, "SequenceConstruct"
    )


def test_a_sequence_typed_input_is_kept_and_read_where_it_is_used():
    model = parse("""g (seq(float[4]) s, float[3,4] x) => (int64 n, float[4] y) {
        rows = SplitToSequence<axis = 0, keepdims = 0>(x)
        one = Constant<value = int64 {1}>()
        r = SequenceAt(rows, one)
        n = SequenceLength(s)
        y = Add(r, r)
    }""")
    for length in (0, 2):
        feeds = {"s": [X[0]] * length, "x": X}
        lowered, report, _ = lower_and_compare(model, feeds)
    assert sequence_op_counts(lowered) == {"SequenceLength": 1}
    assert "'s' is a sequence-typed model input" in reasons(report, "SequenceLength")
    assert op_counts(lowered)["Split"] == 1
