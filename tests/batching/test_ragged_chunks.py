"""A loop over the chunks of a split by run-time sizes (`for g in x.split(sizes): ...`, as
torch_geometric's `unbatch` writes it) batches as the split tensor and a mask of the positions
each chunk holds: the reductions over the split axis read the masked values, elementwise ops keep
the mask, a list of the chunks concatenated back is one Compress. Checked: what it emits, what it
refuses and why, and that it computes what the original does under onnxruntime (empty chunks,
chunks along another axis, int32 sizes) and fails where it fails (sizes that do not add up, a
negative size)."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_both_fail,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    rule_check,
    sequence_op_count,
)

from seqlower import runtime_quirks
from seqlower.rule import Refusal
from seqlower.rules import loop_batching

RNG = np.random.default_rng(31)

# for g in x.split(sizes, AXIS): a.append(BODY); cat(a, AXIS) or stack(a)
CHUNKS = """g (float[N,3] x, {itype}[K] sizes) => ({out}) {{
    t = Constant<value = bool {{1}}>()
    parts = SplitToSequence<axis = {axis}>(x, sizes)
    n = SequenceLength(parts)
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                   => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        part = SequenceAt(parts, i)
        {body}
        grown = SequenceInsert(acc, y)
    }}>
    out = ConcatFromSequence<axis = {join}, new_axis = {new}>(s)
}}"""
CENTRED = """m = ReduceMean<axes = [0], keepdims = 1>(part)
        y = Sub(part, m)"""
MAX = "y = ReduceMax<axes = [0], keepdims = 0>(part)"
SCALED_SUM = """ax = Constant<value = int64[1] {0}>()
        two = Constant<value = float {2}>()
        d = Mul(part, two)
        y = ReduceSum<keepdims = 0>(d, ax)"""
COUNTED = """ax = Constant<value = int64[1] {0}>()
        total = ReduceSum<keepdims = 0>(part, ax)
        one = Constant<value = int64 {1}>()
        k = Add(i, one)
        kf = Cast<to = 1>(k)
        y = Mul(total, kf)"""


def _model(body: str, *, joined: bool = False, itype: str = "int64", axis: int = 0):  # type: ignore[no-untyped-def]
    text = CHUNKS.format(
        itype=itype, out="float[?,3] out", axis=axis, body=body, join=0, new=0 if joined else 1
    )
    return parse(text, opset=17)


def _feeds(sizes: list[int], itype=np.int64) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    rows = max(sum(sizes), 0)
    return {
        "x": RNG.standard_normal((rows, 3)).astype(np.float32),
        "sizes": np.array(sizes, itype),
    }


SIZES = [[2, 3, 4], [1], [4, 0, 2], [0, 0, 5]]


def _comparable(body: str, sizes: list[int]) -> bool:
    """onnxruntime 1.20 fails the maximum over an empty chunk, where the masked form gives the
    specification's lowest value: such feeds are compared only where onnxruntime follows it."""
    return not ("ReduceMax" in body and 0 in sizes and runtime_quirks.holds("empty-reductions"))


@pytest.mark.parametrize(
    ("body", "joined"),
    [(CENTRED, True), (MAX, False), (SCALED_SUM, False), (COUNTED, False)],
    ids=["centred-joined", "max", "scaled-sum", "iteration-number"],
)
def test_chunks_of_runtime_sizes_batch_without_a_loop(body, joined):
    model = _model(body, joined=joined)
    for sizes in SIZES:
        if not _comparable(body, sizes):
            continue
        lowered, report, (out,) = lower_and_compare(model, _feeds(sizes))
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
        counts = op_counts(lowered)
        assert "Loop" not in counts and sequence_op_count(lowered) == 0
        # the ends of the chunks (and for a segment sum, or chunks held as rows, the chunk of
        # each row, counted by a CumSum of the ends scattered)
        assert counts["CumSum"] == (2 if body in (COUNTED, CENTRED) else 1)
        if joined:  # held as x's own rows (tests/batching/test_chunk_rows.py): no padding
            assert "Compress" not in counts and "GreaterOrEqual" not in counts
            assert out.shape == (sum(sizes), 3)
        elif body is not COUNTED:  # (a sum of the chunk itself is a segment sum)
            # chunk k gathered into slots [0, size k), not x once per chunk
            assert "Expand" not in counts and counts["Range"] == 1 and counts["GreaterOrEqual"] == 1


def test_the_centred_chunks_are_what_numpy_gives():
    model = _model(CENTRED, joined=True)
    feeds = _feeds([2, 3, 4])
    _, _, (out,) = lower_and_compare(model, feeds)
    pieces = np.split(feeds["x"], [2, 5])
    want = np.concatenate([p - p.mean(0, keepdims=True) for p in pieces])
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_int32_sizes():
    model = _model(SCALED_SUM, itype="int32")
    _, report, _ = lower_and_compare(model, _feeds([3, 1, 2], np.int32))
    assert report.rules_fired.get("loop-batch") == 1


def test_chunks_along_the_last_axis():
    text = (
        CHUNKS.format(itype="int64", out="float[3,?] out", axis=1, body="", join=1, new=0)
        .replace("float[N,3] x", "float[3,N] x")
        .replace(
            "        \n        grown",
            "        m = ReduceMean<axes = [1], keepdims = 1>(part)\n"
            "        y = Sub(part, m)\n        grown",
        )
    )
    model = parse(text, opset=17)
    for sizes in ([2, 3], [4], [1, 0, 3]):
        x = RNG.standard_normal((3, sum(sizes))).astype(np.float32)
        lowered, report, _ = lower_and_compare(model, {"x": x, "sizes": np.array(sizes, np.int64)})
        assert report.rules_fired.get("loop-batch") == 1
        assert "Loop" not in op_counts(lowered)


@pytest.mark.parametrize(
    "sizes", [[2, 2], [4, 3, 1], [5, -1, 2]], ids=["short", "long", "negative"]
)
def test_sizes_that_do_not_split_the_tensor_fail_as_the_split_does(sizes):
    model = _model(CENTRED, joined=True)
    lowered, _ = lower(model)
    feeds = {"x": RNG.standard_normal((6, 3)).astype(np.float32), "sizes": np.array(sizes)}
    assert_both_fail(model, lowered, feeds)


def test_speed_first_targets_keep_the_loop():
    """`--target onnxruntime` leaves such a loop to the other forms (its region is then costed
    as before): over the few chunks measured, the masked form ties the loop."""
    found = rule_check(_model(MAX), loop_batching._check, "Loop", target="onnxruntime")
    assert isinstance(found, Refusal)
    assert "default target only" in found.reason
    assert not isinstance(rule_check(_model(MAX), loop_batching._check, "Loop"), Refusal)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            "w = Constant<value = float[3,3] {1,0,0, 0,1,0, 0,0,1}>()\n        y = MatMul(part, w)",
            "MatMul reads a slice whose bounds differ per element",
        ),
        (
            "row = Constant<value = float[2,3] {1,2,3, 4,5,6}>()\n"
            "        z = Add(part, row)\n"
            "        y = ReduceMax<axes = [0], keepdims = 0>(z)",
            "Add broadcasts a ragged slice against a tensor",
        ),
    ],
    ids=["matmul", "broadcast-along-the-split-axis"],
)
def test_other_readers_of_a_chunk_are_refused(body, why):
    model = _model(body, joined=True)
    found = rule_check(model, loop_batching._check, "Loop")
    assert isinstance(found, Refusal) and why in found.reason, found


ONE_AXIS = """g ({dtype}[N] x, int64[K] sizes) => ({dtype}[?] out) {{
    t = Constant<value = bool {{1}}>()
    parts = SplitToSequence<axis = -1>(x, sizes)
    n = SequenceLength(parts)
    empty = SequenceEmpty<dtype = {code}>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq({dtype}) acc)
                                   => (bool c2, seq({dtype}) grown) {{
        c2 = Identity(c)
        part = SequenceAt(parts, i)
        ax = Constant<value = int64[1] {{0}}>()
        total = ReduceSum<keepdims = 0>(part, ax)
        grown = SequenceInsert(acc, total)
    }}>
    out = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""


@pytest.mark.parametrize(
    ("dtype", "code", "numpy_type"),
    [("float16", 10, np.float16), ("int32", 6, np.int32), ("double", 11, np.float64)],
)
def test_chunks_of_a_vector_of_edge_types(dtype, code, numpy_type):
    """Chunks of a 1-D tensor (a negative split axis), summed: one masked sum per chunk."""
    model = parse(ONE_AXIS.format(dtype=dtype, code=code), opset=17)
    for sizes in ([2, 3, 1], [0, 4], [5]):
        x = (RNG.standard_normal(sum(sizes)) * 4).astype(numpy_type)
        lowered, report, (out,) = lower_and_compare(
            model, {"x": x, "sizes": np.array(sizes, np.int64)}
        )
        assert report.rules_fired.get("loop-batch") == 1
        assert "Loop" not in op_counts(lowered)
        want = [x[a:b].sum() for a, b in zip(np.cumsum([0, *sizes]), np.cumsum(sizes))]
        np.testing.assert_allclose(out, np.array(want, numpy_type), rtol=1e-2)


def test_a_nan_at_a_chunks_first_row_comes_out_of_its_maximum():
    """The fill before a chunk comes first in the reduction, and onnxruntime's ReduceMax keeps
    its first operand against a NaN: the maximum of a chunk starting with a NaN must still be
    NaN (as in the loop and in the specification), not the fill."""
    model = _model(MAX)
    sizes = [2, 1, 3]
    feeds = _feeds(sizes)
    feeds["x"][[0, 2, 3], 1] = np.nan  # each chunk's first row, column 1
    _, report, (out,) = lower_and_compare(model, feeds)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert np.isnan(out[:, 1]).all() and not np.isnan(out[:, [0, 2]]).any()
