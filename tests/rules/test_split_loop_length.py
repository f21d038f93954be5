"""`for v in x.split(sizes)`: the length of a split by run-time sizes that is only the trip
count of Loops reading element i in every iteration i is Size(sizes) plus the check that the
sizes are not negative and add up to the dim, without telling empty sizes apart (the Equal and
two Wheres that give onnxruntime's chunks of one): where the sizes are empty and the dim is not,
the lowered list's read of element 0 fails anyway. Elsewhere the full form stays."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    rules_without,
    run_ort,
)

# the sum of each chunk, added up, and each chunk's sum scanned; `{trip}` is the trip count
TEMPLATE = """g (float[N,3] x, int64[M] sizes, float[3] start, bool flag)
        => (float[3] total, float[?,3] sums{extra_out}) {{
    s = SplitToSequence<axis = 0>(x, sizes)
    n = SequenceLength(s)
    {trip}
    t = Constant<value = bool {{1}}>()
    total, sums = Loop({count}, t, start) <body = body (int64 i, bool c, float[3] acc)
            => (bool c2, float[3] more, float[3] sum) {{
        c2 = Identity(c)
        {read}
        zero = Constant<value = int64[1] {{0}}>()
        sum = ReduceSum<keepdims = 0>(piece, zero)
        more = Add(acc, sum)
    }}>
    {extra}
}}"""
DIRECT = ""
ENUMERATE = """big = Constant<value = int64[1] {9223372036854775807}>()
    axes = Constant<value = int64[1] {0}>()
    n1 = Unsqueeze(n, axes)
    both = Concat<axis = 0>(big, n1)
    trips = ReduceMin<keepdims = 0>(both)"""
READ = "piece = SequenceAt(s, i)"


def _model(trip: str = DIRECT, read: str = READ, extra: str = "", extra_out: str = ""):
    count = "trips" if trip else "n"
    return parse(
        TEMPLATE.format(trip=trip, read=read, extra=extra, extra_out=extra_out, count=count)
    )


X = np.arange(18, dtype=np.float32).reshape(6, 3)
START = np.array([1.0, 2.0, 3.0], np.float32)


def _feeds(sizes, x=X) -> dict:
    return {"x": x, "sizes": np.array(sizes, np.int64), "start": START, "flag": np.array(True)}


def _length_ops(lowered: onnx.ModelProto) -> dict:
    counts = op_counts(lowered)
    return {op: counts[op] for op in ("Equal", "Where", "Size", "Gather", "Min")}


@pytest.mark.parametrize("trip", [DIRECT, ENUMERATE], ids=["direct", "enumerate"])
def test_a_loop_over_every_chunk_checks_the_sizes_only(trip):
    """(The loop kept: loop-batch would read the chunks with a mask and leave no loop.)"""
    model = _model(trip)
    lowered, _ = lower(model, target="generic", rules=rules_without("loop-batch"))
    found = _length_ops(lowered)
    assert found["Equal"] == 0 and found["Where"] == 0 and found["Size"] == 1
    assert found["Min"] == 0  # no case for empty sizes at all
    for sizes in ([1, 2, 3], [6], [0, 6, 0]):
        total, sums = assert_same_outputs(model, lowered, _feeds(sizes))
        cuts = np.cumsum([0, *sizes])
        want = np.stack([X[a:b].sum(0) for a, b in itertools.pairwise(cuts)])
        np.testing.assert_allclose(sums, want)
        np.testing.assert_allclose(total, START + want.sum(0))


@pytest.mark.parametrize("sizes", [[1, 2], [4, 4], [7, -1], [-1, 7], [2, -2, 6]])
def test_sizes_that_do_not_cut_the_dim_fail_in_both(sizes):
    model = _model()
    lowered, _ = lower(model, target="generic")
    assert_both_fail(model, lowered, _feeds(sizes))


def test_empty_sizes():
    """On an empty dim both run no iteration. On a dim that is not empty onnxruntime cuts
    chunks of one from the original; the lowered model fails, as it did before this form (the
    read of element 0 from empty tables), now at the length."""
    model = _model()
    lowered, _ = lower(model, target="generic")
    empty_dim = _feeds([], x=np.zeros((0, 3), np.float32))
    (want_total, want_sums), (total, sums) = run_ort(model, empty_dim), run_ort(lowered, empty_dim)
    np.testing.assert_array_equal(total, want_total)
    np.testing.assert_array_equal(total, START)
    assert sums.shape[0] == want_sums.shape[0] == 0  # (the scan of no iteration: 0 rows)
    run_ort(model, _feeds([]))
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own error types
        run_ort(lowered, _feeds([]))


@pytest.mark.parametrize(
    ("read", "extra", "extra_out"),
    [
        # the length is also a model output
        (READ, "n_out = Identity(n)", ", int64 n_out"),
        # the element is read in a branch only: a Loop may run without reading element 0
        (
            """piece = If(flag) <then_branch = th () => (float[?,3] a) { a = SequenceAt(s, i) },
                               else_branch = el () => (float[?,3] b) { b = Identity(x) }>""",
            "",
            "",
        ),
    ],
    ids=["length-returned", "read-in-a-branch"],
)
def test_elsewhere_the_empty_sizes_keep_their_chunks_of_one(read, extra, extra_out):
    model = _model(read=read, extra=extra, extra_out=extra_out)
    # (the loop kept: loop-batch would read the chunks with a mask and leave no loop)
    lowered, _ = lower(model, target="generic", rules=rules_without("loop-batch"))
    found = _length_ops(lowered)
    # the case of empty sizes kept: the length is the dim there (Size(sizes) + bad, bad = the
    # dim), and only sizes that are there and wrong fail (Gather([0], Min(bad, Size(sizes))))
    assert found["Min"] == 1 and found["Equal"] == 0 and found["Where"] == 0
    for sizes in ([1, 2, 3], [2, 4]):
        assert_same_outputs(model, lowered, _feeds(sizes))
    assert_both_fail(model, lowered, _feeds([2, 5]))
