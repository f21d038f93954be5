"""Sums and means of the chunks of a split by run-time sizes, where nothing else reads a chunk
(`for g in x.split(sizes): g.mean(0)`, deformable attention's levels): segment sums of the split
tensor itself (ScatterElements, reduction="add"), not the tensor once per chunk and a mask.
Checked: what it emits, which bodies keep the masked form and why, and that it computes what the
original does under onnxruntime (empty chunks, NaN, int dtypes, another axis, keepdims) and
fails where it fails (sizes that do not add up, a negative size)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support import assert_both_fail, lower, lower_and_compare, op_counts, parse

RNG = np.random.default_rng(47)

# for g in x.split(sizes, AXIS): a.append(BODY); stack(a)
CHUNKS = """g ({dtype}[{shape}] x, int64[K] sizes) => ({dtype}[{out}] out) {{
    t = Constant<value = bool {{1}}>()
    parts = SplitToSequence<axis = {axis}>(x, sizes)
    n = SequenceLength(parts)
    empty = SequenceEmpty<dtype = {code}>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq({dtype}) acc)
                                   => (bool c2, seq({dtype}) grown) {{
        c2 = Identity(c)
        part = SequenceAt(parts, i)
        ax = Constant<value = int64[1] {{{axis}}}>()
        {body}
        grown = SequenceInsert(acc, y)
    }}>
    out = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""
SUM = "y = ReduceSum<keepdims = 0>(part, ax)"
MEAN = "y = ReduceMean<axes = [{axis}], keepdims = 0>(part)"
MEAN_KEPT = "y = ReduceMean<axes = [{axis}], keepdims = 1>(part)"
# a mean and a sum of the same chunk, scaled by the chunk's number (msdeform's `* (level + 1)`)
TWO = """m = ReduceMean<axes = [{axis}], keepdims = 0>(part)
        total = ReduceSum<keepdims = 0>(part, ax)
        one = Constant<value = int64 {{1}}>()
        k1 = Add(i, one)
        k = Cast<to = 1>(k1)
        scaled = Mul(m, k)
        y = Add(scaled, total)"""
CODES = {"float": 1, "double": 11, "int32": 6, "int64": 7, "float16": 10}
NUMPY = {"float": np.float32, "double": np.float64, "int32": np.int32, "int64": np.int64}
NUMPY["float16"] = np.float16


def _model(body: str, dtype: str = "float", axis: int = 0, opset: int = 17):  # type: ignore[no-untyped-def]
    shape, out = ("N,3", "?,3") if axis == 0 else ("2,N,3", "?,2,3")
    body = body.format(axis=axis)
    text = CHUNKS.format(dtype=dtype, code=CODES[dtype], shape=shape, out=out, axis=axis, body=body)
    return parse(text, opset=opset)


def _feeds(sizes: list[int], dtype: str = "float", axis: int = 0) -> dict[str, np.ndarray]:
    rows = max(sum(sizes), 0)
    shape = (rows, 3) if axis == 0 else (2, rows, 3)
    x = RNG.standard_normal(shape) * 5
    return {"x": x.astype(NUMPY[dtype]), "sizes": np.array(sizes, np.int64)}


def _want(x: np.ndarray, sizes: list[int], axis: int, mean: bool) -> np.ndarray:
    bounds = np.cumsum([0, *sizes])
    pieces = [np.take(x, range(a, b), axis=axis) for a, b in itertools.pairwise(bounds)]
    sums = [p.sum(axis) for p in pieces]
    if mean:  # onnxruntime's mean of no position is 0, as the masked form's is
        sums = [s / max(len_, 1) for s, len_ in zip(sums, sizes)]
    return np.stack(sums)


SIZES = [[2, 3, 4], [1], [4, 0, 2], [0, 0, 5], [3, 0]]


def _segmented(lowered) -> bool:  # type: ignore[no-untyped-def]
    counts = op_counts(lowered)
    return counts["ScatterElements"] >= 1 and "Loop" not in counts and "Where" not in counts


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize(("body", "mean"), [(SUM, False), (MEAN, True)], ids=["sum", "mean"])
def test_sums_and_means_of_chunks_are_segment_sums(body, mean, axis):
    model = _model(body, axis=axis)
    for sizes in SIZES:
        feeds = _feeds(sizes, axis=axis)
        lowered, report, (out,) = lower_and_compare(model, feeds)
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
        assert _segmented(lowered), op_counts(lowered)
        # x is read once: no copy of it per chunk, no mask of positions
        assert "Compress" not in op_counts(lowered) and "And" not in op_counts(lowered)
        want = _want(feeds["x"], sizes, axis, mean)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_a_mean_and_a_sum_of_one_chunk_share_one_scatter():
    """Each is emitted with its own scatter of the same values; cleanup merges the two."""
    model = _model(TWO, axis=1)
    for sizes in SIZES:
        lowered, _, _ = lower_and_compare(model, _feeds(sizes, axis=1))
        assert op_counts(lowered)["ScatterElements"] == 1 and _segmented(lowered)


def test_a_kept_axis_comes_out_as_one():
    model = _model(MEAN_KEPT, axis=1)
    model.graph.output[0].type.tensor_type.shape.Clear()
    lowered, _, (out,) = lower_and_compare(model, _feeds([2, 3], axis=1))
    assert _segmented(lowered) and out.shape == (2, 2, 1, 3)


@pytest.mark.parametrize("dtype", ["int32", "int64", "double"])
def test_integer_and_double_sums_are_exact(dtype):
    model = _model(SUM, dtype=dtype)
    for sizes in SIZES:
        feeds = _feeds(sizes, dtype)
        lowered, _, (out,) = lower_and_compare(model, feeds)
        assert _segmented(lowered) and out.dtype == NUMPY[dtype]
        np.testing.assert_array_equal(out, _want(feeds["x"], sizes, 0, False).astype(NUMPY[dtype]))


def test_a_nan_stays_in_its_chunk():
    model = _model(MEAN)
    feeds = _feeds([2, 3, 4])
    feeds["x"][3, 1] = np.nan  # chunk 1, column 1
    lowered, _, (out,) = lower_and_compare(model, feeds)
    assert _segmented(lowered)
    assert np.isnan(out[1, 1]) and np.isnan(out).sum() == 1


@pytest.mark.parametrize(
    "sizes", [[2, 2], [4, 3, 1], [5, -1, 2]], ids=["short", "long", "negative"]
)
def test_sizes_that_do_not_split_the_tensor_fail_as_the_split_does(sizes):
    model = _model(MEAN)
    lowered, _ = lower(model)
    assert _segmented(lowered)
    feeds = {
        "x": RNG.standard_normal((6, 3)).astype(np.float32),
        "sizes": np.array(sizes, np.int64),
    }
    assert_both_fail(model, lowered, feeds)


@pytest.mark.parametrize(
    ("body", "dtype", "opset", "why"),
    [
        (
            "two = Constant<value = float {{2}}>()\n        d = Mul(part, two)\n"
            "        y = ReduceSum<keepdims = 0>(d, ax)",
            "float",
            17,
            "the chunk is read elementwise: it is held padded anyway",
        ),
        (
            "y = ReduceMax<axes = [0], keepdims = 0>(part)",
            "float",
            17,
            "a maximum: ScatterElements' max needs opset 18 and drops a NaN after a number",
        ),
        (SUM, "float16", 17, "onnxruntime does not scatter-add float16"),
        (SUM, "float", 15, "ScatterElements has no reduction before opset 16"),
        ("y = ReduceSum<keepdims = 0>(part)", "float", 17, "a sum over every axis"),
    ],
    ids=["elementwise-reader", "max", "float16", "opset-15", "all-axes"],
)
def test_other_bodies_keep_the_masked_form(body, dtype, opset, why):
    """Each still lowers, masked, and agrees with the original: the segment form is taken only
    where every read of a chunk is a sum or mean along the split axis alone."""
    model = _model(body, dtype=dtype, opset=opset)
    if body == "y = ReduceSum<keepdims = 0>(part)":
        model.graph.output[0].type.tensor_type.shape.Clear()
    sizes = [2, 3, 1]
    lowered, report, _ = lower_and_compare(model, _feeds(sizes, dtype))
    assert report.rules_fired.get("loop-batch") == 1, (why, report.rules_fired)
    counts = op_counts(lowered)
    assert "ScatterElements" not in counts and counts["Where"] >= 1, (why, counts)
