"""The chunks of a split by run-time sizes, batched in a loop body, are gathered into as many slots
as the largest chunk has (chunk k in the last size-k slots, the slots before it masked off), not
x once per chunk: the padded value is [n, m, ..], not [n, d, ..]. Checked: what it emits (the
padded value's run-time shape), the maximum and minimum with a NaN at any row of a chunk (NaN, as
the specification's maximum gives), empty chunks (the masked form's lowest or highest value; a
mean of 0), int32, int64 and double, a split along a negative axis."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import lower, lower_and_compare, op_counts, parse, rule_check, run_ort

from seqlower import runtime_quirks
from seqlower.rule import Refusal
from seqlower.rules import loop_batching

RNG = np.random.default_rng(7)

# for g in x.split(sizes, AXIS): out.append(BODY(g)); stack(out)   (x [N, 3], or [3, N])
CHUNKS = """g ({dtype}[{xdims}] x, int64[K] sizes) => ({dtype}[?,?] out) {{
    t = Constant<value = bool {{1}}>()
    parts = SplitToSequence<axis = {axis}>(x, sizes)
    n = SequenceLength(parts)
    empty = SequenceEmpty<dtype = {code}>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq({dtype}) acc)
                                   => (bool c2, seq({dtype}) grown) {{
        c2 = Identity(c)
        part = SequenceAt(parts, i)
        y = {op}<axes = [{axis}], keepdims = 0>(part)
        grown = SequenceInsert(acc, y)
    }}>
    out = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""
TYPES = {"float": (1, np.float32), "double": (11, np.float64), "int32": (6, np.int32)}
TYPES["int64"] = (7, np.int64)


def _model(op: str, dtype: str = "float", axis: int = 0):  # type: ignore[no-untyped-def]
    code = TYPES[dtype][0]
    xdims = "N,3" if axis == 0 else "3,N"
    return parse(CHUNKS.format(dtype=dtype, code=code, op=op, axis=axis, xdims=xdims), opset=17)


def _split_rows(x: np.ndarray, sizes: list[int], axis: int) -> list[np.ndarray]:
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _want(op: str, x: np.ndarray, sizes: list[int], axis: int) -> np.ndarray:
    """numpy's maximum (NaN wherever a chunk holds one), the type's lowest value for an empty
    chunk (highest for a minimum), a mean of nothing 0: what the masked form gives."""
    out = []
    for piece in _split_rows(x, sizes, axis):
        if piece.shape[axis] == 0:
            if op == "ReduceMean":
                fill = 0
            elif x.dtype.kind == "f":
                fill = -np.inf if op == "ReduceMax" else np.inf
            else:
                limits = np.iinfo(x.dtype)
                fill = limits.min if op == "ReduceMax" else limits.max
            out.append(np.full(3, fill, x.dtype))
            continue
        reduce = {"ReduceMax": np.max, "ReduceMin": np.min, "ReduceMean": np.mean}[op]
        out.append(reduce(piece, axis=axis).astype(x.dtype))
    return np.stack(out)


def _padded_shape(lowered: onnx.ModelProto, feeds: dict) -> tuple[int, ...]:
    """The run-time shape of the padded chunks the lowered model reduces."""
    (gather,) = [n for n in lowered.graph.node if n.op_type == "Gather" and n.input[0] == "x"]
    probe = onnx.ModelProto()
    probe.CopyFrom(lowered)
    probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(gather.output[0]))
    return run_ort(probe, feeds)[-1].shape


def test_the_padding_is_the_largest_chunk_not_the_whole_tensor():
    model = _model("ReduceMax")
    sizes = [3, 1, 5, 2, 0, 4]
    feeds = {"x": RNG.standard_normal((15, 3)).astype(np.float32), "sizes": np.array(sizes)}
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    counts = op_counts(lowered)
    assert "Loop" not in counts and "Expand" not in counts
    assert _padded_shape(lowered, feeds) == (6, 5, 3)  # [n, m, 3], not [6, 15, 3]
    (got,) = run_ort(lowered, feeds)
    np.testing.assert_array_equal(got, _want("ReduceMax", feeds["x"], sizes, 0))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("row", ["first", "middle", "last"])
def test_a_nan_anywhere_in_a_chunk_comes_out_of_its_maximum(op, axis, row):
    """Slots before a chunk hold rows of other chunks and are filled; a NaN at any row of the
    chunk gives NaN (the specification's maximum, which the loop under onnxruntime gives where
    the NaN comes first)."""
    model = _model(op, axis=axis)
    sizes = [3, 4, 1, 3]
    starts = np.cumsum([0, *sizes[:-1]])
    at = {"first": starts, "middle": starts + 1, "last": starts + np.array(sizes) - 1}[row]
    x = RNG.standard_normal((sum(sizes), 3)).astype(np.float32)
    x[np.minimum(at, starts + np.array(sizes) - 1), 1] = np.nan
    x[3:7, 2] = np.nan  # a whole chunk of NaN in another column
    if axis:
        x = np.ascontiguousarray(x.T)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    (got,) = run_ort(lowered, {"x": x, "sizes": np.array(sizes)})
    want = _want(op, x, sizes, axis % 2)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[:, 1]).all() and np.isnan(got[1, 2])
    if row == "first":  # the loop reads the NaN first too: onnxruntime's original agrees
        lower_and_compare(model, {"x": x, "sizes": np.array(sizes)})


@pytest.mark.parametrize(
    ("dtype", "op"),
    [(t, op) for t in ("int32", "int64") for op in ("ReduceMax", "ReduceMin")]
    + [(t, op) for t in ("double", "float") for op in ("ReduceMax", "ReduceMin", "ReduceMean")],
)
@pytest.mark.parametrize("axis", [0, -1])
def test_edge_types_and_empty_chunks(dtype, op, axis):
    numpy_type = TYPES[dtype][1]
    model = _model(op, dtype, axis)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert "Loop" not in op_counts(lowered)
    for sizes in ([2, 3, 4], [1], [4, 0, 2], [0, 0, 5], [6, 0]):
        x = (RNG.standard_normal((sum(sizes), 3)) * 50).astype(numpy_type)
        if axis:
            x = np.ascontiguousarray(x.T)
        feeds = {"x": x, "sizes": np.array(sizes)}
        (got,) = run_ort(lowered, feeds)
        want = _want(op, x, sizes, axis % 2)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        # onnxruntime 1.20's loop reduces an empty chunk otherwise (`empty-reductions`: it
        # fails a maximum, gives 0 for a minimum of integers, other rows' values for a mean
        # along the last axis); elsewhere the original agrees with the specification
        if 0 not in sizes or not runtime_quirks.holds("empty-reductions"):
            lower_and_compare(model, feeds)


def test_a_mean_of_integer_chunks_is_refused():
    found = rule_check(_model("ReduceMean", "int32"), loop_batching._check, "Loop")
    assert isinstance(found, Refusal) and "of integers" in found.reason, found


def test_no_chunk_of_an_empty_tensor():
    model = _model("ReduceMax")
    lowered, _ = lower(model)
    (got,) = run_ort(lowered, {"x": np.zeros((0, 3), np.float32), "sizes": np.zeros(0, np.int64)})
    assert got.shape[1:] == (3,) and got.size == 0


MEANS = """g (float[{dims}] x, int64[K] sizes) => (float[?,?] out) {{
    t = Constant<value = bool {{1}}>()
    parts = SplitToSequence<axis = 0>(x, sizes)
    n = SequenceLength(parts)
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                   => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        part = SequenceAt(parts, i)
        y = ReduceMean<axes = [0], keepdims = 0>(part)
        grown = SequenceInsert(acc, y)
    }}>
    out = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""


@pytest.mark.parametrize(
    ("dims", "width", "segments"),
    [
        ("N,8", 8, True),
        ("N,2,4", 8, True),
        ("N,9", 9, False),
        ("N,64", 64, False),
        ("N,W", 5, False),
    ],
)
def test_means_of_wide_rows_are_gathered_not_scattered(dims, width, segments):
    """Segment sums scatter one value at a time in onnxruntime: rows of more than 8 values (or of
    a width known only at run time) are gathered and masked instead. Both agree with the loop."""
    model = parse(MEANS.format(dims=dims), opset=17)
    model.graph.output[0].type.tensor_type.shape.Clear()
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    counts = op_counts(lowered)
    assert ("ScatterElements" in counts) is segments, counts
    assert ("GreaterOrEqual" in counts) is not segments, counts
    shape = [int(d) for d in dims.split(",")[1:] if d.isdigit()] or [width]
    for sizes in ([3, 0, 5], [1], [2, 2, 2, 2]):
        x = RNG.standard_normal((sum(sizes), *shape)).astype(np.float32)
        lower_and_compare(model, {"x": x, "sizes": np.array(sizes)})
