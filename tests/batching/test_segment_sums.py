"""Sums, means, maxima and minima of the chunks of a split by run-time sizes, where nothing else
reads a chunk (`for g in x.split(sizes): g.mean(0)`, deformable attention's levels, a per-graph
max readout): segment reductions of the split tensor itself (ScatterElements, reduction="add",
and from opset 18 "max" and "min"), not the tensor once per chunk and a mask. Checked: what it
emits, which bodies keep the masked form and why, and that it computes what the original does
under onnxruntime and what the specification gives (empty chunks, the empty list, NaN, negative
values, int dtypes, another axis, keepdims) and fails where it fails (sizes that do not add up,
a negative size)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    run_ort,
    run_reference,
)

from seqlower import runtime_quirks

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


def _scatters(lowered) -> list[str]:  # type: ignore[no-untyped-def]
    """The reductions of the ScatterElements that scatter values of x (not the ones that mark
    the ends of the chunks, whose updates are a ConstantOfShape of ones), in graph order."""
    made = {out: node for node in lowered.graph.node for out in node.output}
    found = []
    for node in lowered.graph.node:
        updates = made.get(node.input[2]) if node.op_type == "ScatterElements" else None
        if node.op_type == "ScatterElements" and (
            updates is None or updates.op_type != "ConstantOfShape"
        ):
            found.append(next(a.s.decode() for a in node.attribute if a.name == "reduction"))
    return found


def _segmented(lowered) -> bool:  # type: ignore[no-untyped-def]
    """Segment reductions, no loop and no mask: nothing compares positions with the chunk
    bounds, nothing reduces a padded stack."""
    counts = op_counts(lowered)
    masked = {"Loop", "GreaterOrEqual", "ReduceMax", "ReduceMin", "Compress"}
    return bool(_scatters(lowered)) and not masked & set(counts)


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
        assert _scatters(lowered) == ["add"] and _segmented(lowered)


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


def _extreme(x: np.ndarray, sizes: list[int], op: str, axis: int, keepdims: bool) -> np.ndarray:
    """The specification's maximum (minimum) of each chunk: numpy's, NaN wherever a chunk holds
    one; of an empty chunk the lowest (highest) value of the type, -inf (inf) for floats."""
    bounds = np.cumsum([0, *sizes])
    reduce = np.max if op == "Max" else np.min
    if x.dtype.kind == "f":
        empty = -np.inf if op == "Max" else np.inf
    else:
        empty = np.iinfo(x.dtype).min if op == "Max" else np.iinfo(x.dtype).max
    found = []
    for a, b in itertools.pairwise(bounds):
        piece = np.take(x, range(a, b), axis=axis)
        if b > a:
            found.append(reduce(piece, axis=axis, keepdims=keepdims))
        else:
            shape = list(piece.shape)
            shape[axis] = 1
            found.append(
                np.full(shape, empty, x.dtype).reshape(
                    shape if keepdims else shape[:axis] + shape[axis + 1 :]
                )
            )
    return np.stack(found)


def _extreme_model(
    op: str, dtype: str = "float", axis: int = 0, keepdims: int = 0, opset: int = 18
):  # type: ignore[no-untyped-def]
    model = _model(f"y = Reduce{op}<keepdims = {keepdims}>(part, ax)", dtype, axis, opset)
    if keepdims:
        model.graph.output[0].type.tensor_type.shape.Clear()
    return model


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", ["float", "double", "int32", "int64"])
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_maxima_and_minima_at_opset_18_are_segment_scatters(op, dtype, axis, keepdims):
    """ScatterElements with reduction max (min) into a tensor of the type's lowest (highest)
    value, for floats plus the scatter-add of the NaNs; what numpy gives, empty chunks
    included, and what the loop gives under onnxruntime (where it follows the specification:
    onnxruntime 1.20 fails the maximum of an empty chunk)."""
    model = _extreme_model(op, dtype, axis, keepdims)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert _segmented(lowered), op_counts(lowered)
    floats = dtype in ("float", "double")
    assert _scatters(lowered) == [op.lower(), "add"] if floats else [op.lower()]
    for sizes in SIZES:
        feeds = _feeds(sizes, dtype, axis)
        if sizes == [1]:  # a chunk of negative values only: the fill never wins
            feeds["x"] = -np.abs(feeds["x"]) - 1 if op == "Max" else np.abs(feeds["x"]) + 1
        (out,) = run_ort(lowered, feeds)
        want = _extreme(feeds["x"], sizes, op, axis, bool(keepdims))
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out, want)
        if 0 not in sizes or not runtime_quirks.holds("empty-reductions"):
            assert_same_outputs(model, lowered, feeds)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_a_nan_anywhere_in_a_chunk_makes_its_extreme_nan(op):
    """First in its chunk or after a number: the specification's maximum (onnx.reference's,
    numpy's) is NaN either way; onnxruntime's ReduceMax, and its ScatterElements max, keep the
    number after a NaN (`reduce-max-nan-order`), so the scatter-add of the NaNs puts it back."""
    model = _extreme_model(op)
    lowered, _ = lower(model)
    assert _segmented(lowered)
    feeds = _feeds([2, 3, 4])
    feeds["x"][0, 0] = np.nan  # chunk 0, first
    feeds["x"][4, 2] = np.nan  # chunk 1, last
    (out,) = run_ort(lowered, feeds)
    (want,) = run_reference(model, feeds)
    np.testing.assert_array_equal(np.isnan(out), [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out, _extreme(feeds["x"], [2, 3, 4], op, 0, False))


def test_a_maximum_and_a_mean_of_one_chunk_are_two_scatters():
    """`g.max(0) + g.mean(0)`: one scatter of each reduction, the ids and the Expand of them
    shared (cleanup merges the two emitted), no mask."""
    body = """y1 = ReduceMax<keepdims = 0>(part, ax)
        y2 = ReduceMean<keepdims = 0>(part, ax)
        y = Add(y1, y2)"""
    model = _model(body, opset=18)
    for sizes in ([2, 3, 4], [1], [5, 1, 3]):
        lowered, _, _ = lower_and_compare(model, _feeds(sizes))
        assert _segmented(lowered) and sorted(_scatters(lowered)) == ["add", "add", "max"]
        assert op_counts(lowered)["Expand"] == 1


@pytest.mark.parametrize(("width", "segments"), [(6, True), (7, False), (8, False)])
def test_maxima_of_rows_of_more_than_6_values_are_gathered(width, segments):
    """A float maximum scatters twice (the values and the NaNs), one value at a time in
    onnxruntime: beyond `SEGMENT_EXTREMA_WIDTH` values a position the gathered chunks reduce
    faster; a sum of such rows (up to `SEGMENT_WIDTH`) stays a segment sum. Both agree with the
    loop."""
    body = "y = ReduceMax<keepdims = 0>(part, ax)"
    text = CHUNKS.format(
        dtype="float", code=1, shape=f"N,{width}", out=f"?,{width}", axis=0, body=body
    )
    model = parse(text, opset=18)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert _segmented(lowered) is segments, op_counts(lowered)
    assert ("GreaterOrEqual" in op_counts(lowered)) is not segments
    summed = parse(text.replace("ReduceMax", "ReduceSum"), opset=18)
    assert _segmented(lower(summed)[0])
    for sizes in ([3, 1, 5], [2], [4, 4]):
        x = RNG.standard_normal((sum(sizes), width)).astype(np.float32)
        lower_and_compare(model, {"x": x, "sizes": np.array(sizes, np.int64)})


@pytest.mark.parametrize("op", ["Max", "Sum"])
def test_an_empty_list_gives_no_row(op):
    """No size and no row: no chunk, an output of no row. The original's ConcatFromSequence of
    no element fails in onnxruntime (and the specification); the batched form gives the empty
    stack, as every batched loop does (docs/design.md, "A list in its tensor form")."""
    model = _extreme_model(op) if op == "Max" else _model(SUM, opset=18)
    lowered, _ = lower(model)
    assert _segmented(lowered)
    feeds = _feeds([])
    with pytest.raises(Exception, match="1 or more inputs"):
        run_ort(model, feeds)
    (out,) = run_ort(lowered, feeds)
    assert out.shape == (0, 3) and out.dtype == np.float32


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
        (
            "y = ReduceMin<axes = [0], keepdims = 0>(part)",
            "float",
            17,
            "a minimum: ScatterElements' min needs opset 18",
        ),
        (
            "y = ReduceMax<keepdims = 0>(part, ax)",
            "float16",
            18,
            "onnxruntime does not scatter float16",
        ),
        (
            "y = ReduceMax<keepdims = 0>(part)",
            "float",
            18,
            "a maximum over every axis",
        ),
    ],
    ids=[
        "elementwise-reader",
        "max",
        "float16",
        "opset-15",
        "all-axes",
        "min-opset-17",
        "max-float16",
        "max-all-axes",
    ],
)
def test_other_bodies_keep_the_masked_form(body, dtype, opset, why):
    """Each still lowers, masked, and agrees with the original: the segment form is taken only
    where every read of a chunk is a sum or mean along the split axis alone."""
    model = _model(body, dtype=dtype, opset=opset)
    if body in ("y = ReduceSum<keepdims = 0>(part)", "y = ReduceMax<keepdims = 0>(part)"):
        model.graph.output[0].type.tensor_type.shape.Clear()
    sizes = [2, 3, 1]
    lowered, report, _ = lower_and_compare(model, _feeds(sizes, dtype))
    assert report.rules_fired.get("loop-batch") == 1, (why, report.rules_fired)
    counts = op_counts(lowered)
    assert "ScatterElements" not in counts and counts["Where"] >= 1, (why, counts)
