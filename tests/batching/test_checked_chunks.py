"""Chunks of a split by sizes proved never negative (counts, Abs) gathered through
Split(x, [ReduceSum(sizes)]): the Split fails exactly where such sizes do not add up to x's
dim, so where every value the batched loop gives reads the gathered chunks, the slots start at
0 and the length's own check (Shape, Gather, ReduceSum, Sub, Abs and a Gather from a table of
one 0) goes. Checked: what it emits, where it keeps the length's check (sizes that may be
negative, a value read from the mask alone, opset 12), and that it computes what the loop does
under onnxruntime (one chunk, many, empty chunks, no row) and fails where the loop fails.

Their means, where nothing reads them but through the chunk's own mask (the centring joined back
by the mask's Compress), divide by the sizes unclamped: an empty chunk's mean (0 / 0) is never
read (`seqlower.batching.means`); a mean also read as it is keeps Max(sizes, 1)."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_both_fail, lower, lower_and_compare, op_counts, parse, run_ort

from seqlower import runtime_quirks

RNG = np.random.default_rng(47)

# torch_geometric's unbatch: sizes counted from a batch vector, for g in x.split(sizes):
# centred.append(y1); readout.append(z1); cat(centred), stack(readout)
COUNTED = """g (float[N,3] x, int64[N] batch) => (float[?,3] y, {z_type} z) {{
    t = Constant<value = bool {{1}}>()
    top = ReduceMax<keepdims = 0>(batch)
    one = Constant<value = int64 {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    ax1 = Constant<value = int64[1] {{1}}>()
    ax0 = Constant<value = int64[1] {{0}}>()
    n = Add(top, one)
    ids = Range(zero, n, one)
    col = Unsqueeze(batch, ax1)
    hit = Equal(col, ids)
    hits = Cast<to = 7>(hit)
    counts = ReduceSum<keepdims = 0>(hits, ax0)
    negated = Neg(counts)
    sizes = {sizes}
    parts = SplitToSequence<axis = 0>(x, sizes)
    len = SequenceLength(parts)
    e1 = SequenceEmpty<dtype = 1>()
    e2 = SequenceEmpty<dtype = {z_dtype}>()
    a, b = Loop(len, t, e1, e2) <body = body (int64 i, bool c, seq(float) acc, seq({z_elem}) acc2)
                                        => (bool c2, seq(float) grown, seq({z_elem}) grown2) {{
        c2 = Identity(c)
        g = SequenceAt(parts, i)
        m = ReduceMean<axes = [0], keepdims = 1>(g)
        y1 = Sub(g, m)
        {z1}
        grown = SequenceInsert(acc, y1)
        grown2 = SequenceInsert(acc2, z1)
    }}>
    y = ConcatFromSequence<axis = 0>(a)
    z = ConcatFromSequence<axis = 0, new_axis = 1>(b)
}}"""
MAX = "z1 = ReduceMax<axes = [0], keepdims = 0>(g)"  # a max readout
SHAPE = "z1 = Shape(g)"  # each chunk's shape: read from the mask alone, not from the chunks


def _model(z1: str = MAX, sizes: str = "Identity(counts)"):  # type: ignore[no-untyped-def]
    shape = z1 is SHAPE
    text = COUNTED.format(
        sizes=sizes,
        z1=z1,
        z_type="int64[?,2]" if shape else "float[?,3]",
        z_dtype=7 if shape else 1,
        z_elem="int64" if shape else "float",
    )
    return parse(text, opset=17)


def _feeds(graphs: list[int], batch: list[int] | None = None) -> dict[str, np.ndarray]:
    ids = batch if batch is not None else [g for g, s in enumerate(graphs) for _ in range(s)]
    return {
        "x": RNG.standard_normal((len(ids), 3)).astype(np.float32),
        "batch": np.array(ids, np.int64),
    }


def _length_check(counts) -> bool:  # type: ignore[no-untyped-def]
    """The length's check: |Sum(sizes) - dim| looked up in a table of one 0."""
    return counts["Abs"] >= 1 and counts["Shape"] >= 1


# graphs of nodes (the batch sorted, as torch_geometric makes it); empty graphs where an id
# is skipped; one graph; a batch read in any order (its counts still add up)
BATCHES = {
    "three": ([3, 2, 4], None),
    "one": ([5], None),
    "four-small": ([1, 1, 2, 1], None),
    "many": (list(RNG.integers(1, 9, 40)), None),
    "skipped-ids": ([0, 0, 3, 1, 0, 2], None),
    "unsorted": ([], [2, 0, 1, 0, 2, 2]),
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_counted_chunks_are_checked_by_a_split(name):
    graphs, batch = BATCHES[name]
    feeds = _feeds(graphs, batch)
    empty = 0 in np.bincount(feeds["batch"])
    if empty and runtime_quirks.holds("empty-reductions"):
        pytest.skip("onnxruntime 1.20 fails the loop's maximum of an empty chunk")
    lowered, report, (y, z) = lower_and_compare(_model(), feeds)
    assert report.rules_fired.get("loop-batch") == 1
    counts = op_counts(lowered)
    assert "Loop" not in counts
    # the Split checks the counts; the length's check and its table are gone
    assert counts["Split"] == 1 and not _length_check(counts), counts
    # the sizes as a column once: its CumSum gives the ends, one Unsqueeze of the sizes
    assert counts["CumSum"] == 1 and counts["Range"] == 2  # the model's own Range, the slots
    # the centring mean is read only through the mask: divided by the sizes, unclamped
    assert "Max" not in counts, counts
    pieces = np.split(feeds["x"], np.cumsum(np.bincount(feeds["batch"]))[:-1])
    want = [p - p.mean(0, keepdims=True) for p in pieces if len(p)]
    np.testing.assert_allclose(y, np.concatenate(want), rtol=1e-6, atol=1e-6)
    assert z.shape == (len(pieces), 3)


def test_a_negative_id_makes_both_fail():
    # the counts of ids 0..max miss the row of id -1: they add up to 4 of 5 rows
    feeds = _feeds([], [0, 0, -1, 1, 1])
    lowered, _ = lower(_model())
    assert op_counts(lowered)["Split"] == 1
    assert_both_fail(_model(), lowered, feeds)


def test_no_row():
    # no graph: the loop's join of no chunk fails (onnxruntime 1.32), where the batched form
    # gives no row, as every batched loop does; onnxruntime 1.20 fails the model's own maximum
    # of no id in both
    feeds = {"x": np.zeros((0, 3), np.float32), "batch": np.zeros((0,), np.int64)}
    lowered, _ = lower(_model())
    if runtime_quirks.holds("empty-reductions"):
        assert_both_fail(_model(), lowered, feeds)
        return
    y, z = run_ort(lowered, feeds)
    assert y.shape == (0, 3) and z.shape == (0, 3)


def test_a_value_of_the_mask_alone_keeps_the_length_check():
    # Shape(g) reads the mask, not the chunks: the slots start at the length's check, so
    # that the shapes fail where the counts do not add up, as the loop's split does
    model = _model(SHAPE)
    lowered, report, (_, z) = lower_and_compare(model, _feeds([3, 2, 4]))
    assert report.rules_fired.get("loop-batch") == 1
    counts = op_counts(lowered)
    assert "Loop" not in counts and _length_check(counts), counts
    assert z.tolist() == [[3, 3], [2, 3], [4, 3]]
    assert_both_fail(model, lowered, _feeds([], [0, 0, -1, 1, 1]))


def test_sizes_that_may_be_negative_keep_the_length_check():
    # the counts negated twice: the same sizes, but Neg proves no sign, so no Split checks them
    model = _model(sizes="Neg(negated)")
    lowered, report, _ = lower_and_compare(model, _feeds([3, 2, 4]))
    assert report.rules_fired.get("loop-batch") == 1
    counts = op_counts(lowered)
    assert "Loop" not in counts and "Split" not in counts and _length_check(counts), counts
    assert_both_fail(model, lowered, _feeds([], [0, 0, -1, 1, 1]))


# the centring mean also read as it is, beside the maximum (which keeps the chunks padded at
# opset 17): an empty chunk's maximum (the lowest value) plus its mean (0, as the loop gives)
MEAN_TOO = """top1 = ReduceMax<axes = [0], keepdims = 0>(g)
        mean1 = Squeeze(m, ax0)
        z1 = Add(top1, mean1)"""
# a second mean beside the maximum: its clamp stays, the centring mean's goes
SECOND_MEAN = """top1 = ReduceMax<axes = [0], keepdims = 0>(g)
        mean1 = ReduceMean<axes = [0], keepdims = 0>(g)
        z1 = Add(top1, mean1)"""


@pytest.mark.parametrize(
    ("z1", "clamps"), [(MEAN_TOO, 1), (SECOND_MEAN, 1), (MAX, 0)], ids=["read", "second", "max"]
)
@pytest.mark.parametrize("graphs", [[3, 0, 2], [0, 4], [5], [2, 0, 0, 1]], ids=str)
def test_a_mean_read_as_it_is_keeps_its_clamp(z1, clamps, graphs):
    if 0 in graphs and runtime_quirks.holds("empty-reductions"):
        pytest.skip("onnxruntime 1.20 fails the loop's maximum of an empty chunk")
    feeds = _feeds(graphs)
    lowered, report, (y, z) = lower_and_compare(_model(z1), feeds)
    assert report.rules_fired.get("loop-batch") == 1
    counts = op_counts(lowered)
    assert counts["Max"] == clamps and "Compress" in counts, counts  # padded, joined by the mask
    empty = [k for k, size in enumerate(graphs) if size == 0]
    assert np.all(z[empty] == -np.inf) and not np.any(np.isnan(z))  # the lowest value + 0
    assert y.shape == (sum(graphs), 3) and np.all(np.isfinite(y))
