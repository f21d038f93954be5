"""A ragged list made before a loop and read there at the iteration number (`for i in
range(len(xs)): f(xs[i])` over a list whose elements differ in length) reads the bounds of
element i as one Gather each from the list's table of starts and ends taken as [n, 1] columns
(made once, before the loop): no Reshape of the iteration number in every iteration."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse, run_ort

# pieces x[i : 2i + 1] (i + 1 rows each): a ragged list, then a sum of each piece, stacked
MODEL = parse(
    """g (int64 m, int64 k, float[N,3] x) => (float[?,3] y) {
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(m, t, empty) <body = build (int64 i, bool c, seq(float) acc)
                                  => (bool c1, seq(float) grown) {
        c1 = Identity(c)
        axes = Constant<value = int64[1] {0}>()
        two = Constant<value = int64 {2}>()
        one = Constant<value = int64 {1}>()
        twice = Mul(i, two)
        stop = Add(twice, one)
        b = Unsqueeze(i, axes)
        e = Unsqueeze(stop, axes)
        piece = Slice(x, b, e)
        grown = SequenceInsert(acc, piece)
    }>
    sums = SequenceEmpty<dtype = 1>()
    out = Loop(k, t, sums) <body = read (int64 j, bool c, seq(float) acc)
                                  => (bool c2, seq(float) more) {
        c2 = Identity(c)
        piece = SequenceAt(s, j)
        zero = Constant<value = int64[1] {0}>()
        total = ReduceSum<keepdims = 0>(piece, zero)
        more = SequenceInsert(acc, total)
    }>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(out)
}"""
)
X = np.arange(24, dtype=np.float32).reshape(8, 3)


def test_the_read_gathers_its_bounds_from_columns():
    """The list held as its data and the first row of each piece: the read loop takes each
    piece between two bounds gathered from those columns, and as they are summed it is batched
    (the pieces held flat, as the data's rows: `seqlower.batching.windows`), no loop left."""
    lowered, report = lower(MODEL, target="generic")
    assert report.rules_fired.get("loop-batch") == 2, report.rules_fired
    counts = op_counts(lowered)
    assert counts["SequenceAt"] == 0 and "Loop" not in counts
    assert counts["CumSum"] >= 1 and counts["ScatterElements"] >= 1


@pytest.mark.parametrize(("m", "k"), [(4, 4), (4, 2), (1, 1), (0, 0)])
def test_reads_at_the_iteration_number_give_the_pieces(m, k):
    lowered, _ = lower(MODEL, target="generic")
    feeds = {"m": np.array(m), "k": np.array(k), "x": X}
    if k == 0:  # the original's stack of no element fails; the lowered stack is empty
        (got,) = run_ort(lowered, feeds)
        assert got.size == 0
        return
    (got,) = assert_same_outputs(MODEL, lowered, feeds)
    np.testing.assert_array_equal(got, np.stack([X[i : 2 * i + 1].sum(0) for i in range(k)]))


@pytest.mark.parametrize(("m", "k"), [(2, 3), (0, 1)])
def test_reading_past_the_end_fails_in_both(m, k):
    lowered, _ = lower(MODEL, target="generic")
    assert_both_fail(MODEL, lowered, {"m": np.array(m), "k": np.array(k), "x": X})
