"""Slices whose bounds differ per element (`h[i, :lengths[i]]`) batch as the unsliced stack and a
mask, read by reductions over the sliced axis: masked mean pooling, sums, maxima and minima of
variable-length rows, and elementwise ops in between. Each loop is batched (no Loop left) and
computes what the original does under onnxruntime, empty slices and negative bounds included."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_outputs,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    rule_check,
    run_ort,
    run_reference,
    sequence_op_count,
)

from seqlower import runtime_quirks
from seqlower.rule import Refusal
from seqlower.rules import loop_batching

RNG = np.random.default_rng(23)

# for i in range(B): out.append(REDUCE(f(h[i, START:END]), 0)); stack(out)
POOL = """g ({dtype}[B,T,4] h, int64[B] lengths) => ({dtype}[B,4] y) {{
    t = Constant<value = bool {{1}}>()
    shape = Shape(h)
    zero = Constant<value = int64 {{0}}>()
    n = Gather(shape, zero)
    empty = SequenceEmpty<dtype = {code}>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq({dtype}) acc)
                                   => (bool c2, seq({dtype}) grown) {{
        c2 = Identity(c)
        length = Gather<axis = 0>(lengths, i)
        row = Gather<axis = 0>(h, i)
        axes = Constant<value = int64[1] {{0}}>()
        {bounds}
        part = Slice(row, starts, ends, axes)
        {body}
        grown = SequenceInsert(acc, pooled)
    }}>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""
UP_TO_LENGTH = """starts = Constant<value = int64[1] {0}>()
        ends = Unsqueeze(length, axes)"""
FROM_LENGTH = """starts = Unsqueeze(length, axes)
        ends = Constant<value = int64[1] {9223372036854775807}>()"""
LAST_LENGTH = """negative = Neg(length)
        starts = Unsqueeze(negative, axes)
        ends = Constant<value = int64[1] {9223372036854775807}>()"""
BETWEEN = """starts = Unsqueeze(length, axes)
        gap = Constant<value = int64 {2}>()
        past = Add(length, gap)
        ends = Unsqueeze(past, axes)"""


def _model(body: str, bounds: str = UP_TO_LENGTH, dtype: str = "float"):  # type: ignore[no-untyped-def]
    code = 1 if dtype == "float" else 7
    return parse(POOL.format(body=body, bounds=bounds, dtype=dtype, code=code), opset=17)


def _feeds(dtype: str, lengths: list[int]) -> dict[str, np.ndarray]:
    h = RNG.standard_normal((len(lengths), 5, 4)) * 10
    return {
        "h": h.astype(np.float32 if dtype == "float" else np.int64),
        "lengths": np.array(lengths, np.int64),
    }


LENGTHS = [[3, 5, 1], [0, 2], [4], [-2, 7, 0]]  # an empty slice; beyond the end; negative
PYTHON_SLICES = {  # the same slices in Python, which clamps its bounds as Slice does
    UP_TO_LENGTH: lambda n: slice(0, n),
    FROM_LENGTH: lambda n: slice(n, None),
    LAST_LENGTH: lambda n: slice(-n, None),
    BETWEEN: lambda n: slice(n, n + 2),
}


def _runs_in_onnxruntime(body: str, bounds: str, lengths: list[int]) -> bool:
    """Whether the original runs: onnxruntime 1.20 fails the maximum of an empty slice (and
    gives 0 for the minimum of an empty integer one); the batched form gives the
    specification's value, so such feeds are compared only where onnxruntime follows it."""
    extremum = "ReduceMax" in body or "ReduceMin" in body
    empty = any(not range(5)[PYTHON_SLICES[bounds](n)] for n in lengths)
    return not (extremum and empty and runtime_quirks.holds("empty-reductions"))


@pytest.mark.parametrize(
    "body",
    [
        "pooled = ReduceMean<axes = [0], keepdims = 0>(part)",
        "pooled = ReduceSum<keepdims = 0>(part, axes)",
        "pooled = ReduceMax<axes = [0], keepdims = 0>(part)",
        "pooled = ReduceMin<axes = [-2], keepdims = 0>(part)",
        "kept = ReduceSum<keepdims = 1>(part, axes)\n        pooled = Squeeze(kept, axes)",
        "a = Abs(part)\n        two = Constant<value = float {2}>()\n"
        "        b = Mul(a, two)\n        pooled = ReduceMax<axes = [0], keepdims = 0>(b)",
        # a value per position of the other axis: the same for every position of the slice
        "scale = Constant<value = float[4] {1, 2, 3, 4}>()\n        m = Mul(part, scale)\n"
        "        pooled = ReduceSum<keepdims = 0>(m, axes)",
        # a float division by padded positions gives inf or NaN there, which the mask drops
        "one = Constant<value = float {1}>()\n        q = Div(one, part)\n"
        "        pooled = ReduceMax<axes = [0], keepdims = 0>(q)",
    ],
    ids=[
        "mean",
        "sum",
        "max",
        "min-negative-axis",
        "keepdims",
        "elementwise-then-max",
        "scaled-columns",
        "divisor",
    ],
)
@pytest.mark.parametrize("bounds", [UP_TO_LENGTH, FROM_LENGTH, LAST_LENGTH, BETWEEN])
def test_reductions_of_ragged_slices_are_masked(body, bounds):
    model = _model(body, bounds)
    for lengths in LENGTHS:
        if not _runs_in_onnxruntime(body, bounds, lengths):
            continue
        lowered, report, _ = lower_and_compare(model, _feeds("float", lengths))
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
        assert "Loop" not in op_counts(lowered) and sequence_op_count(lowered) == 0


@pytest.mark.parametrize(
    "body",
    [
        "pooled = ReduceSum<keepdims = 0>(part, axes)",
        "pooled = ReduceMax<axes = [0], keepdims = 0>(part)",
        "pooled = ReduceMin<axes = [0], keepdims = 0>(part)",
    ],
    ids=["sum", "max", "min"],
)
def test_integer_rows(body):
    model = _model(body, dtype="int64")
    for lengths in LENGTHS:
        if not _runs_in_onnxruntime(body, UP_TO_LENGTH, lengths):
            continue
        lowered, _, _ = lower_and_compare(model, _feeds("int64", lengths))
        assert "Loop" not in op_counts(lowered)


def test_the_mean_of_an_empty_slice_is_what_onnxruntime_gives():
    """The specification leaves the mean of nothing undefined; onnxruntime answers 0, and so
    does the masked form (its count is at least 1)."""
    model = _model("pooled = ReduceMean<axes = [0], keepdims = 0>(part)")
    lowered, _ = lower(model)
    _, _, (y,) = lower_and_compare(model, _feeds("float", [0, 2]))
    np.testing.assert_array_equal(y[0], np.zeros(4, np.float32))
    assert "Where" in op_counts(lowered)


def _refusal(model) -> str:  # type: ignore[no-untyped-def]
    found = rule_check(model, loop_batching._check, "Loop")
    assert isinstance(found, Refusal), "loop-batch accepts the loop"
    return found.reason


@pytest.mark.parametrize(
    ("body", "dtype", "why"),
    [
        ("pooled = Identity(part)", "float", "a list of ragged slices, or one that does not"),
        (
            "w = Constant<value = float[4,4] {1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1}>()\n"
            "        m = MatMul(part, w)\n        pooled = ReduceSum<keepdims = 0>(m, axes)",
            "float",
            "MatMul reads a slice whose bounds differ per element",
        ),
        (
            "one = Constant<value = int64[1] {1}>()\n"
            "        kept = ReduceSum<keepdims = 1>(part, one)\n"
            "        pooled = ReduceMax<axes = [0, 1], keepdims = 0>(kept)",
            "float",
            "a reduction of a ragged slice that keeps its ragged axis",
        ),
        (
            "pooled = ReduceMean<axes = [0], keepdims = 0>(part)",
            "int64",
            "a mean of a ragged slice over more axes, or of integers",
        ),
        (
            "pooled = ReduceProd<axes = [0], keepdims = 0>(part)",
            "float",
            "ReduceProd reads a slice whose bounds differ per element",
        ),
        (  # a value per position of the sliced axis: the elements' own lengths must match it
            "scale = Constant<value = float[3, 1] {1, 2, 3}>()\n        m = Mul(part, scale)\n"
            "        pooled = ReduceSum<keepdims = 0>(m, axes)",
            "float",
            "Mul broadcasts a ragged slice against a tensor",
        ),
        (  # the positions past each length are zeros here: the batched division would fail
            "hundred = Constant<value = int64 {100}>()\n        q = Div(hundred, part)\n"
            "        pooled = ReduceSum<keepdims = 0>(q, axes)",
            "int64",
            "Div divides by a slice whose bounds differ per element",
        ),
    ],
    ids=["returned", "matmul", "keeps-ragged-axis", "integer-mean", "prod", "broadcast", "divisor"],
)
def test_other_readers_of_a_ragged_slice_are_refused(body, dtype, why):
    model = _model(body, dtype=dtype)
    assert why in _refusal(model)
    feeds = _feeds(dtype, [3, 3, 3])
    feeds["h"][:, 3:] = 0  # padding past the lengths, as a padded batch holds it
    feeds["h"][:, :3] = np.where(feeds["h"][:, :3] == 0, 1, feeds["h"][:, :3])
    lowered, report, _ = lower_and_compare(model, feeds)
    assert "loop-batch" not in report.rules_fired
    assert sequence_op_count(lowered) == 0


# -- lists of ragged slices, concatenated ------------------------------------------------------

GROWING = """g (float[N,3] x) => (float[?,3] y) {{
    t = Constant<value = bool {{1}}>()
    shape = Shape(x)
    zero = Constant<value = int64 {{0}}>()
    n = Gather(shape, zero)
    axes = Constant<value = int64[1] {{{axis}}}>()
    {start}
    s = Loop(n, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                   => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        one = Constant<value = int64 {{1}}>()
        next = Add(i, one)
        front = Constant<value = int64[1] {{0}}>()
        ends = Unsqueeze(next, front)
        begin = Constant<value = int64[1] {{0}}>()
        part = Slice(x, begin, ends, axes)
        two = Constant<value = float {{2}}>()
        doubled = Mul(part, two)
        grown = SequenceInsert(acc, doubled)
    }}>
    y = ConcatFromSequence<axis = {axis}>(s)
}}"""
FIRST_ROW = """b0 = Constant<value = int64[1] {0}>()
    e0 = Constant<value = int64[1] {1}>()
    head = Slice(x, b0, e0, axes)
    start = SequenceConstruct(head)"""


@pytest.mark.parametrize("start", [FIRST_ROW, "start = SequenceEmpty<dtype = 1>()"])
def test_growing_prefixes_concatenated_are_one_compress(start):
    """`outs = [x[:1]]; for i in range(len(x)): outs.append(x[:i + 1] * 2); torch.cat(outs)`:
    the prefixes, padded to x and masked, then compressed into their concatenation."""
    model = parse(GROWING.format(axis=0, start=start), opset=17)
    for rows in (4, 1, 0):
        x = RNG.standard_normal((rows, 3)).astype(np.float32)
        if rows == 0 and "Slice" not in start:
            continue  # the original concatenates an empty list: an error in onnxruntime
        lowered, report, (y,) = lower_and_compare(model, {"x": x})
        want = [x[:1]] if "Slice" in start else []
        want += [x[: i + 1] * 2 for i in range(rows)]
        np.testing.assert_array_equal(y, np.concatenate(want, 0))
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
        assert "Loop" not in op_counts(lowered) and op_counts(lowered)["Compress"] == 1


def test_prefixes_along_axis_1_concatenated_along_axis_1():
    model = parse(
        GROWING.format(axis=1, start=FIRST_ROW)
        .replace("float[N,3] x) => (float[?,3] y)", "float[3,N] x) => (float[3,?] y)")
        .replace("zero = Constant<value = int64 {0}>()", "zero = Constant<value = int64 {1}>()"),
        opset=17,
    )
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    lowered, report, (y,) = lower_and_compare(model, {"x": x})
    want = [x[:, :1]] + [x[:, : i + 1] * 2 for i in range(4)]
    np.testing.assert_array_equal(y, np.concatenate(want, 1))
    assert report.rules_fired.get("loop-batch") == 1
    assert "Loop" not in op_counts(lowered)


def test_a_list_of_ragged_slices_read_otherwise_is_refused():
    text = (
        GROWING.format(axis=0, start="start = SequenceEmpty<dtype = 1>()")
        .replace("=> (float[?,3] y)", "=> (float[?,3] y, int64 count)")
        .replace("y = ConcatFromSequence", "count = SequenceLength(s)\n    y = ConcatFromSequence")
    )
    model = parse(text, opset=17)
    assert "read otherwise than concatenated" in _refusal(model)
    lowered, report, _ = lower_and_compare(
        model, {"x": RNG.standard_normal((3, 3)).astype(np.float32)}
    )
    # the list tier holds it as the rows and a table of sizes; that Loop (the Shape of each
    # slice is its count of positions) is then batched
    assert report.rules_fired.get("loop-batch") == 1
    assert "Loop" not in op_counts(lowered)
    assert sequence_op_count(lowered) == 0


def test_a_tensor_grown_by_concatenating_prefixes_is_one_compress():
    """`acc = x[:1]; for i in range(len(x)): acc = torch.cat((acc, x[: i + 1] * 2))`: the same
    as a list of prefixes concatenated, with the initial value first."""
    model = parse(
        """g (float[N,3] x) => (float[?,3] y) {
        t = Constant<value = bool {1}>()
        shape = Shape(x)
        zero = Constant<value = int64 {0}>()
        n = Gather(shape, zero)
        front = Constant<value = int64[1] {0}>()
        one_row = Constant<value = int64[1] {1}>()
        start = Slice(x, front, one_row, front)
        y = Loop(n, t, start) <body = body (int64 i, bool c, float[?,3] acc)
                                      => (bool c2, float[?,3] grown) {
            c2 = Identity(c)
            one = Constant<value = int64 {1}>()
            next = Add(i, one)
            ends = Unsqueeze(next, front)
            part = Slice(x, front, ends, front)
            two = Constant<value = float {2}>()
            doubled = Mul(part, two)
            grown = Concat<axis = 0>(acc, doubled)
        }>
    }""",
        opset=17,
    )
    for rows in (4, 1, 0):
        x = RNG.standard_normal((rows, 3)).astype(np.float32)
        lowered, report, (y,) = lower_and_compare(model, {"x": x})
        want = [x[:1]] + [x[: i + 1] * 2 for i in range(rows)]
        np.testing.assert_array_equal(y, np.concatenate(want, 0))
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
        assert "Loop" not in op_counts(lowered)


@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("bounds", [UP_TO_LENGTH, FROM_LENGTH, BETWEEN])
def test_a_nan_within_the_bounds_comes_out_of_a_maximum(bounds, op, where):
    """A NaN anywhere within an element's bounds makes its maximum NaN, as the specification
    (numpy's maximum, onnx.reference) says. The fill before a start other than 0 must not hide
    it: onnxruntime's ReduceMax keeps its first operand against a NaN, so the fill came out."""
    model = _model(f"pooled = {op}<axes = [0], keepdims = 0>(part)", bounds)
    lengths = [1, 2, 2]
    feeds = _feeds("float", lengths)
    for b, n in enumerate(lengths):
        rows = range(5)[PYTHON_SLICES[bounds](n)]
        feeds["h"][b, rows[0] if where == "first" else rows[-1], 1] = np.nan
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    (got,) = run_ort(lowered, feeds)
    (want,) = run_reference(model, feeds)
    np.testing.assert_array_equal(got, want)  # NaN where NaN
    assert np.isnan(got[:, 1]).all() and not np.isnan(got[:, [0, 2, 3]]).any()
    if where == "first" or not runtime_quirks.holds("reduce-max-nan-order"):
        assert_same_outputs(model, lowered, feeds)  # onnxruntime's original gives a NaN first
