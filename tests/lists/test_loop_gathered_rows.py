"""A loop that appends rows picked from a tensor by indices of changing size (`boxes[keep]`,
RetinaNet's per-level detections) and whose list is concatenated after the loop: the picked
rows keep the tensor's other dims, so the list is ragged (not flat), and a ragged list that is
only concatenated carries nothing but its data: one Concat per iteration. The rows above a
score are picked by one Compress (`mask-positions-to-compress`); the best k rows (TopK's
indices) by a Gather."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same_outputs, lower, parse, run_ort

TEXT = """g (int64 m, float[N,4] boxes, float[N] score) => (float[?,4] kept) {
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(m, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        fi = Cast<to = 1>(i)
        above = Greater(score, fi)
        picked = NonZero(above)
        flat = Constant<value = int64[1] {-1}>()
        idx = Reshape(picked, flat)
        rows = Gather<axis = 0>(boxes, idx)
        grown = SequenceInsert(acc, rows)
    }>
    kept = ConcatFromSequence<axis = 0>(s)
}"""
MODEL = parse(TEXT)
# the best i + 1 rows by score, in order of score: indices of a size that changes
BEST = parse(
    TEXT.replace(
        """picked = NonZero(above)
        flat = Constant<value = int64[1] {-1}>()
        idx = Reshape(picked, flat)""",
        """one = Constant<value = int64[1] {1}>()
        i1 = Reshape(i, one)
        k = Add(i1, one)
        best, idx = TopK<axis = 0>(score, k)""",
    )
)
BOXES = np.arange(20, dtype=np.float32).reshape(5, 4)
SCORE = np.array([0.5, 3.5, 1.5, 2.5, 0.0], np.float32)


@pytest.mark.parametrize(("model", "picks"), [(MODEL, "Compress"), (BEST, "Gather")])
def test_the_loop_carries_the_rows_only(model, picks):
    lowered, _ = lower(model, target="generic")
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    body = next(a.g for a in loop.attribute if a.name == "body")
    kinds = [n.op_type for n in body.node]
    assert kinds.count("Concat") == 1 and "Shape" not in kinds and picks in kinds
    assert len(loop.input) == 3  # trip count, condition, the rows so far


@pytest.mark.parametrize("trips", [1, 3, 5])
def test_the_best_rows_of_every_iteration(trips):
    lowered, _ = lower(BEST, target="generic")
    (kept,) = assert_same_outputs(
        BEST, lowered, {"m": np.array(trips), "boxes": BOXES, "score": SCORE}
    )
    order = np.argsort(-SCORE)
    np.testing.assert_array_equal(
        kept, np.concatenate([BOXES[order[: i + 1]] for i in range(trips)])
    )


@pytest.mark.parametrize("trips", [1, 3, 5])  # 4 and 5: no row is above
def test_rows_of_every_iteration_in_order(trips):
    lowered, _ = lower(MODEL, target="generic")
    (kept,) = assert_same_outputs(
        MODEL, lowered, {"m": np.array(trips), "boxes": BOXES, "score": SCORE}
    )
    np.testing.assert_array_equal(kept, np.concatenate([BOXES[i < SCORE] for i in range(trips)]))


def test_no_iteration_gives_no_row():
    """The original's concatenation of no element fails; the lowered one gives no row."""
    lowered, _ = lower(MODEL, target="generic")
    feeds = {"m": np.array(0), "boxes": BOXES, "score": SCORE}
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own error types
        run_ort(MODEL, feeds)
    (kept,) = run_ort(lowered, feeds)
    assert kept.shape == (0, 4)


# pack_padded_sequence with lists: the rows of step t that are still running, appended in the
# branch a `break` test leaves; the step's width changes, the features do not
PACKED = parse(
    """g (float[T,B,3] x, int64[B] lengths) => (float[?,3] data) {
    t = Constant<value = bool {1}>()
    big = Constant<value = int64 {100}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(big, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                  => (bool going, seq(float) grown) {
        running = Greater(lengths, i)
        as_int = Cast<to = 7>(running)
        bs = ReduceSum<keepdims = 0>(as_int)
        zero = Constant<value = int64 {0}>()
        done = Equal(bs, zero)
        going = Not(done)
        grown = If(done) <then_branch = th () => (seq(float) same) { same = Identity(acc) },
                          else_branch = el () => (seq(float) more) {
            step = Gather<axis = 0>(x, i)
            start = Constant<value = int64[1] {0}>()
            axes = Constant<value = int64[1] {0}>()
            stop = Unsqueeze(bs, axes)
            rows = Slice(step, start, stop, axes)
            more = SequenceInsert(acc, rows)
        }>
    }>
    data = ConcatFromSequence<axis = 0>(s)
}"""
)


def test_rows_appended_in_a_branch_are_ragged_and_carry_no_table():
    lowered, _ = lower(PACKED, target="generic")
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    body = next(a.g for a in loop.attribute if a.name == "body")
    (branching,) = [n for n in body.node if n.op_type == "If"]
    inner = [n.op_type for a in branching.attribute for n in a.g.node]
    assert inner.count("Concat") == 1 and "Shape" not in inner and "Reshape" not in inner
    assert len(loop.input) == 3


@pytest.mark.parametrize("lengths", [[3, 1, 2], [1, 1, 1], [4, 4, 4]])
def test_packed_rows_in_order(lengths):
    lowered, _ = lower(PACKED, target="generic")
    x = np.arange(36, dtype=np.float32).reshape(4, 3, 3)
    feeds = {"x": x, "lengths": np.array(lengths)}
    (data,) = assert_same_outputs(PACKED, lowered, feeds)
    lens = np.array(lengths)
    want = np.concatenate([x[step, : (lens > step).sum()] for step in range(lens.max())])
    np.testing.assert_array_equal(data, want)


RETURNED = parse(
    TEXT.replace("=> (float[?,4] kept)", "=> (seq(float[?,4]) s)").replace(
        "    kept = ConcatFromSequence<axis = 0>(s)\n", ""
    )
)


@pytest.mark.parametrize("trips", [1, 3, 5])
def test_a_returned_list_of_kept_rows_makes_its_counts_once_per_iteration(trips):
    """The list is the model's output: its row counts are needed, and are a scan output (the
    count of the rows Compress keeps is one number per iteration), not a tensor regrown."""
    lowered, _ = lower(RETURNED, target="generic")
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    body = next(a.g for a in loop.attribute if a.name == "body")
    assert [n.op_type for n in body.node].count("Concat") == 1  # the rows only
    (kept,) = assert_same_outputs(
        RETURNED, lowered, {"m": np.array(trips), "boxes": BOXES, "score": SCORE}
    )
    assert len(kept) == trips
