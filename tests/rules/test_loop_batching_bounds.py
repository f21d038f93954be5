"""loop-batch reads with no check where the trip count is proved at most the rows read.

A batched read of x at the iteration number i < M is cut to M rows by a Slice; where x is not
known to hold M rows, the Slice end carries a check (Shape, Sub, Max, a Gather from a table of
one zero, Add) that fails where an iteration would read past the end. Two trip counts are
proved at most a dim of x, so the Slice alone is enough, and a batch of one element does not
pay for the check:

- M = Sub(n, c), n a minimum one of whose terms is the dim, c a constant never negative
  (`for i in range(t.size(0) - 1)`: HF/fairseq NoRepeatNGram);
- M = ReduceMin(Concat(Shape(a, end=1), Shape(b, end=1))): `zip(a, b)` over two lists already
  lowered to tensors (their lengths are one-entry Shapes, not Unsqueezes of scalars).

Each tested three ways: what it emits (no check), what keeps the check (a constant that may be
negative, a run-time one), and the same outputs as the original under onnxruntime, or a failure
in both, at every length from none up.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import assert_same_or_both_fail, lower, op_counts, parse, run_ort

RNG = np.random.default_rng(53)

# for i in range(x.size(0) - TAKEN): out.append(x[i] * 2)
SHIFTED = """g (float[N,3] x) => (float[S,3] y) {
    t = Constant<value = bool {1}>()
    two = Constant<value = float {2}>()
    zero = Constant<value = int64 {0}>()
    taken = Constant<value = int64 {TAKEN}>()
    dims = Shape(x)
    n = Gather<axis = 0>(dims, zero)
    m = Sub(n, taken)
    y = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] r) {
        c2 = Identity(c)
        e = Gather<axis = 0>(x, i)
        r = Mul(e, two)
    }>
}"""

# for i in range(x.size(0) - k): out.append(x[i] * 2), k given at run time
RUN_TIME = """g (float[N,3] x, int64 k) => (float[S,3] y) {
    t = Constant<value = bool {1}>()
    two = Constant<value = float {2}>()
    zero = Constant<value = int64 {0}>()
    dims = Shape(x)
    n = Gather<axis = 0>(dims, zero)
    m = Sub(n, k)
    y = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] r) {
        c2 = Identity(c)
        e = Gather<axis = 0>(x, i)
        r = Mul(e, two)
    }>
}"""

# for u, v in zip(a, b): out.append(u * v), a and b lists lowered already to [n, 3] tensors
ZIPPED = """g (float[A,3] a, float[B,3] b) => (float[S,3] y) {
    t = Constant<value = bool {1}>()
    la = Shape<end = 1>(a)
    lb = Shape<end = 1>(b)
    both = Concat<axis = 0>(la, lb)
    m = ReduceMin<keepdims = 0>(both)
    y = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] r) {
        c2 = Identity(c)
        u = Gather<axis = 0>(a, i)
        v = Gather<axis = 0>(b, i)
        r = Mul(u, v)
    }>
}"""


def batched(model: onnx.ModelProto, **options) -> onnx.ModelProto:
    lowered, report = lower(model, **options)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert "Loop" not in op_counts(lowered)
    return lowered


def has_check(lowered: onnx.ModelProto) -> bool:
    """Whether a read is checked: a Gather from a table of one zero, int64[1] {0}."""
    values = {i.name: onnx.numpy_helper.to_array(i) for i in lowered.graph.initializer}
    for node in lowered.graph.node:
        if node.op_type == "Constant" and node.attribute[0].name == "value":
            values[node.output[0]] = onnx.numpy_helper.to_array(node.attribute[0].t)
    tables = {name for name, v in values.items() if v.shape == (1,) and v.tolist() == [0]}
    return any(n.op_type == "Gather" and n.input[0] in tables for n in lowered.graph.node)


@pytest.mark.parametrize("taken", [0, 1, 3])
@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_a_trip_count_of_the_rows_less_a_constant_reads_them_unchecked(taken, target):
    model = parse(SHIFTED.replace("TAKEN", str(taken)))
    lowered = batched(model, target=target)
    assert not has_check(lowered)
    counts = op_counts(lowered)
    # n - 0 folds to n, the rows themselves: read whole; else cut by one Slice to Max(m, 0)
    assert counts.get("Slice", 0) == counts.get("Max", 0) == (1 if taken else 0)
    for rows in range(6):  # m < 0 for rows < taken: no iteration, no row
        feeds = {"x": RNG.standard_normal((rows, 3)).astype(np.float32)}
        assert assert_same_or_both_fail(model, lowered, feeds)
        (y,) = run_ort(lowered, feeds)
        assert y.shape == (max(rows - taken, 0), 3)


def test_a_negative_constant_keeps_the_check_and_fails_where_the_loop_fails():
    """range(x.size(0) + 1) reads one row past the end: the check stays, and fails (the
    Slice alone would give the rows there are); with no row at all, too."""
    model = parse(SHIFTED.replace("TAKEN", "-1"))
    lowered = batched(model)
    assert has_check(lowered)
    for rows in range(4):
        feeds = {"x": RNG.standard_normal((rows, 3)).astype(np.float32)}
        assert not assert_same_or_both_fail(model, lowered, feeds)


def test_a_constant_given_at_run_time_keeps_the_check():
    model = parse(RUN_TIME)
    lowered = batched(model)
    assert has_check(lowered)
    ran = set()
    for k in (-2, -1, 0, 1, 4):
        for rows in (0, 1, 3):
            feeds = {"x": RNG.standard_normal((rows, 3)).astype(np.float32), "k": np.array(k)}
            if assert_same_or_both_fail(model, lowered, feeds):
                ran.add((k, rows))
    assert ran == {(k, r) for k in (-2, -1, 0, 1, 4) for r in (0, 1, 3) if r - k <= r}


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_zip_of_lowered_lists_cuts_both_to_the_shorter_unchecked(target):
    model = parse(ZIPPED)
    lowered = batched(model, target=target)
    assert not has_check(lowered)
    assert op_counts(lowered)["Slice"] == 2  # each cut to the shorter
    for rows_a, rows_b in ((0, 0), (0, 2), (1, 1), (1, 4), (3, 2), (4, 4)):
        feeds = {
            "a": RNG.standard_normal((rows_a, 3)).astype(np.float32),
            "b": RNG.standard_normal((rows_b, 3)).astype(np.float32),
        }
        assert assert_same_or_both_fail(model, lowered, feeds)
        (y,) = run_ort(lowered, feeds)
        assert y.shape == (min(rows_a, rows_b), 3)


def test_zip_of_one_entry_lengths_not_from_a_shape_keeps_the_check():
    """A piece of the minimum that is a given length, not a dim of what is read: checked."""
    model = parse(
        ZIPPED.replace(
            "(float[A,3] a, float[B,3] b)", "(float[A,3] a, float[B,3] b, int64[1] k)"
        ).replace("lb = Shape<end = 1>(b)", "lb = Identity(k)")
    )
    lowered = batched(model)
    assert has_check(lowered)
    for rows_a, rows_b, k in ((2, 2, 2), (2, 1, 2), (0, 3, 1), (3, 3, 5), (2, 2, 0)):
        feeds = {
            "a": RNG.standard_normal((rows_a, 3)).astype(np.float32),
            "b": RNG.standard_normal((rows_b, 3)).astype(np.float32),
            "k": np.array([k]),
        }
        assert_same_or_both_fail(model, lowered, feeds)
