"""Windows of one tensor with no constant bound on their length (`x[off[i]:off[i + 1]]`,
`x[start[i]:start[i] + count[i]]`) read in a batched loop elementwise, by segment reductions or
concatenated back, are held flat: x's own rows in the windows, laid end to end, and the window of
each row (`seqlower.batching.windows.flat_windows`), not x padded to its whole axis per window.
Checked three ways: what is emitted (no Expand of x, no loop), what keeps the padded form and
why (`windows_as_rows`), and onnxruntime outputs against the original's for negative bounds,
empty windows, ends past the axis, starts after ends, int32 bounds, an empty x and no window."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same_or_both_fail, lower, op_counts, parse, run_ort, sequence_op_count

from seqlower import runtime_quirks
from seqlower.batching.rows import windows_as_rows
from seqlower.rules import loop_batching

# for i in range(len(off) - 1): w = x[off[i]:off[i + 1]]; a.append(Y); b.append(Z); cat(a), cat(b)
OFFSETS = """g ({dtype}[N,3] x, {bound}[K] off) => ({dtype}[?,3] y, {dtype}[?,3] z) {{
    t = Constant<value = bool {{1}}>()
    one = Constant<value = int64 {{1}}>()
    nothing = Constant<value = int64[1] {{0}}>()
    k = Size(off)
    m = Sub(k, one)
    head = Slice(x, nothing, nothing)
    e1 = SequenceConstruct(head)
    e2 = SequenceConstruct(head)
    s1, s2 = Loop(m, t, e1, e2) <body = body (int64 i, bool c, seq({dtype}) a1, seq({dtype}) a2)
                                             => (bool c2, seq({dtype}) g1, seq({dtype}) g2) {{
        c2 = Identity(c)
        axes = Constant<value = int64[1] {{0}}>()
        along = Constant<value = {bound}[1] {{0}}>()
        j = Add(i, one)
        first = Gather(off, i)
        last = Gather(off, j)
        starts = Unsqueeze(first, axes)
        ends = Unsqueeze(last, axes)
        w = Slice(x, starts, ends, along)
        {body}
        g1 = SequenceInsert(a1, y1)
        g2 = SequenceInsert(a2, z1)
    }}>
    y = ConcatFromSequence<axis = 0>(s1)
    z = ConcatFromSequence<axis = 0>(s2)
}}"""
# the window, scaled, and its sum
SUMMED = """two = Constant<value = {dtype} {{2}}>()
        y1 = Mul(w, two)
        z1 = ReduceSum<keepdims = 1>(w, axes)"""
# the window through two elementwise ops, and itself
ROWWISE = """r = Relu(w)
        y1 = Neg(r)
        z1 = Identity(w)"""
# maxima (opset 18: a segment maximum) and a mean of each window
EXTREMA = """y1 = Abs(w)
        mx = ReduceMax<keepdims = 1>(w, axes)
        mn = ReduceMin<keepdims = 1>(w, axes)
        z1 = Sub(mx, mn)"""
# the same below opset 18 (the reduced axes an attribute)
EXTREMA_17 = """y1 = Abs(w)
        mx = ReduceMax<axes = [0], keepdims = 1>(w)
        mn = ReduceMin<axes = [0], keepdims = 1>(w)
        z1 = Sub(mx, mn)"""
TYPES = {"float": np.float32, "double": np.float64, "int32": np.int32, "int64": np.int64}
BOUNDS = {"int64": np.int64, "int32": np.int32}
# offsets: in order, empty windows, negative (from the end), past the end, decreasing (empty)
OFFSET_CASES = [
    (6, [0, 2, 2, 5, 6]),
    (6, [0, 6]),
    (6, [-4, -1, 2, 9, 100]),
    (6, [5, 1, -7, 3, 0]),
    (4, [2, 2, 2]),
    (4, [1]),  # no window
    (0, [0, 0, 1, -1]),  # an empty x
    (5, [-100, 100, -100]),
]


def _model(body: str = SUMMED, dtype: str = "float", bound: str = "int64", opset: int = 18):  # type: ignore[no-untyped-def]
    text = OFFSETS.format(dtype=dtype, bound=bound, body=body.format(dtype=dtype))
    return parse(text, opset=opset)


def _x(rows: int, dtype: str = "float") -> np.ndarray:
    values = (np.arange(3 * rows).reshape(rows, 3) % 7 - 3) * (1 + np.arange(rows)[:, None])
    return values.astype(TYPES[dtype])


def _expected(x, off, body):  # type: ignore[no-untyped-def]
    windows = [x[off[i] : off[i + 1]] for i in range(len(off) - 1)]
    if body is SUMMED:
        return [2 * w for w in windows], [w.sum(0, keepdims=True) for w in windows]
    return [-np.maximum(w, 0) for w in windows], windows


def _flat(lowered) -> bool:  # type: ignore[no-untyped-def]
    """No loop, no x Expanded to [n, N, 3] with a mask: x gathered at computed rows once."""
    counts = op_counts(lowered)
    expands = [n for n in lowered.graph.node if n.op_type == "Expand" and n.input[0] == "x"]
    gathers = [n for n in lowered.graph.node if n.op_type == "Gather" and n.input[0] == "x"]
    return "Loop" not in counts and not expands and len(gathers) == 1


def _decisions(model, monkeypatch) -> list:  # type: ignore[no-untyped-def,type-arg]
    """What `windows_as_rows` decides for the loop's windows when the model is lowered (each
    decision: the values held as rows, or why not)."""
    found: list = []  # type: ignore[type-arg]

    def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
        decided = windows_as_rows(*args, **kwargs)
        found.extend(decided.values())
        return decided

    monkeypatch.setattr(loop_batching, "windows_as_rows", recorded)
    lower(model)
    monkeypatch.undo()
    return found


def _compare(model, cases, dtype="float", bound="int64"):  # type: ignore[no-untyped-def]
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert sequence_op_count(lowered) == 0
    for rows, off in cases:
        feeds = {"x": _x(rows, dtype), "off": np.array(off, BOUNDS[bound])}
        assert_same_or_both_fail(model, lowered, feeds)
    return lowered


@pytest.mark.parametrize("body", [SUMMED, ROWWISE], ids=["summed", "rowwise"])
def test_windows_between_offsets_are_held_flat(body, monkeypatch):
    model = _model(body)
    decisions = _decisions(model, monkeypatch)
    assert decisions and all(isinstance(d, set) for d in decisions), decisions
    lowered = _compare(model, OFFSET_CASES)
    assert _flat(lowered), op_counts(lowered)
    x, off = _x(7), [0, 3, 3, -2, 7, 1]
    y, z = run_ort(lowered, {"x": x, "off": np.array(off, np.int64)})
    want_y, want_z = _expected(x, off, body)
    np.testing.assert_array_equal(y, np.concatenate([x[:0], *want_y]))
    np.testing.assert_array_equal(z, np.concatenate([x[:0], *want_z]))


@pytest.mark.parametrize("dtype", list(TYPES))
@pytest.mark.parametrize("bound", list(BOUNDS))
def test_windows_of_each_type_and_bound_type(dtype, bound, monkeypatch):
    model = _model(SUMMED, dtype=dtype, bound=bound)
    lowered = _compare(model, OFFSET_CASES, dtype=dtype, bound=bound)
    assert _flat(lowered), op_counts(lowered)


MEANS = """y1 = Identity(w)
        z1 = ReduceMean<keepdims = 1>(w, axes)"""


def test_window_means():
    model = _model(MEANS)
    lowered = _compare(model, OFFSET_CASES)
    assert _flat(lowered), op_counts(lowered)


def test_window_extrema_from_opset_18(monkeypatch):
    """A maximum and a minimum of each window: segment maxima and minima (opset 18)."""
    model = _model(EXTREMA)
    decisions = _decisions(model, monkeypatch)
    assert decisions and all(isinstance(d, set) for d in decisions), decisions
    cases = OFFSET_CASES
    if runtime_quirks.holds("empty-reductions"):  # 1.20 fails the original's empty maximum
        cases = [(6, [0, 2, 5, 6]), (6, [-4, -1, 6]), (5, [1, 9])]
    lowered = _compare(model, cases)
    assert _flat(lowered), op_counts(lowered)


def test_a_maximum_below_opset_18_keeps_the_windows_padded(monkeypatch):
    """ReduceMax has no segment form below opset 18: the windows stay padded with a mask, and
    with a trip count not proved to be the length of the offsets the loop is not batched."""
    model = _model(EXTREMA_17, opset=17)
    decisions = _decisions(model, monkeypatch)
    assert decisions and not any(isinstance(d, set) for d in decisions), decisions
    assert decisions[0] == "ReduceMax reads a chunk otherwise than by a segment reduction"
    lowered, report = lower(model)
    assert "loop-batch" not in report.rules_fired
    for rows, off in OFFSET_CASES[:4]:
        assert_same_or_both_fail(model, lowered, {"x": _x(rows), "off": np.array(off)})


def test_opset_16_is_needed(monkeypatch):
    """The row ids scatter-add (opset 16): below it the windows stay padded."""
    model = _model(SUMMED, opset=15)
    decisions = _decisions(model, monkeypatch)
    assert decisions and not any(isinstance(d, set) for d in decisions), decisions
    assert decisions[0] == "opset 15 has no scatter-add for the windows' row ids (16)"
    lowered, report = lower(model)
    assert "loop-batch" not in report.rules_fired
    for rows, off in OFFSET_CASES[:4]:
        assert_same_or_both_fail(model, lowered, {"x": _x(rows), "off": np.array(off)})


# for i in range(len(count)): w = x[start[i]:start[i] + count[i]], start = cumsum(count) - count
COUNTS = """g (float[N,3] x, int64[K] count) => (float[?,3] y, float[?,3] z) {{
    t = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    axes = Constant<value = int64[1] {{0}}>()
    nothing = Constant<value = int64[1] {{0}}>()
    ends = CumSum(count, zero)
    start = Sub(ends, count)
    k = Size(count)
    head = Slice(x, nothing, nothing)
    e1 = SequenceConstruct(head)
    e2 = SequenceConstruct(head)
    s1, s2 = Loop(k, t, e1, e2) <body = body (int64 i, bool c, seq(float) a1, seq(float) a2)
                                             => (bool c2, seq(float) g1, seq(float) g2) {{
        c2 = Identity(c)
        first = Gather(start, i)
        size = Gather(count, i)
        last = Add(first, size)
        lo = Unsqueeze(first, axes)
        hi = Unsqueeze(last, axes)
        w = Slice(x, lo, hi, axes)
        {body}
        g1 = SequenceInsert(a1, y1)
        g2 = SequenceInsert(a2, z1)
    }}>
    y = ConcatFromSequence<axis = 0>(s1)
    z = ConcatFromSequence<axis = 0>(s2)
}}"""
# counts: empty windows, negative counts (an end before the start), past the end, an empty x
COUNT_CASES = [(6, [2, 0, 3, 1]), (6, [4, -2, 3]), (3, [2, 5]), (0, [1, 0]), (4, [])]


def _counts_model(body: str, opset: int = 18):  # type: ignore[no-untyped-def]
    return parse(COUNTS.format(body=body.format(dtype="float")), opset=opset)


def test_windows_at_a_start_and_count_are_held_flat():
    model = _counts_model(SUMMED)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert _flat(lowered), op_counts(lowered)
    for rows, count in COUNT_CASES:
        assert_same_or_both_fail(
            model, lowered, {"x": _x(rows), "count": np.array(count, np.int64)}
        )
    x, count = _x(6), [2, 0, 3, -1, 9]
    y, z = run_ort(lowered, {"x": x, "count": np.array(count, np.int64)})
    ends = np.cumsum(count)
    windows = [x[e - c : e] if e - c >= 0 else x[len(x) + e - c : e] for e, c in zip(ends, count)]
    np.testing.assert_array_equal(y, np.concatenate([x[:0], *(2 * w for w in windows)]))
    np.testing.assert_array_equal(
        z, np.concatenate([x[:0], *(w.sum(0, keepdims=True) for w in windows)])
    )


def test_windows_read_otherwise_keep_the_whole_axis(monkeypatch):
    """A maximum below opset 18 reads the padded window: x is Expanded to [n, N, 3] with a mask
    (the loop is still batched: its trip count is the length of what it reads)."""
    model = _counts_model(EXTREMA_17, opset=17)
    decisions = _decisions(model, monkeypatch)
    assert decisions and not any(isinstance(d, set) for d in decisions), decisions
    assert decisions[0] == "ReduceMax reads a chunk otherwise than by a segment reduction"
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert [n.input[0] for n in lowered.graph.node if n.op_type == "Expand"].count("x") == 1
    cases = COUNT_CASES
    if runtime_quirks.holds("empty-reductions"):
        cases = [(6, [2, 1, 3]), (6, [4, 1]), (3, [2, 5])]
    for rows, count in cases:
        assert_same_or_both_fail(
            model, lowered, {"x": _x(rows), "count": np.array(count, np.int64)}
        )


# for i in range(N): a.append(2 * x[:i + 1]): nested windows, one bound the same for all
PREFIXES = """g (float[N,3] x) => (float[?,3] y) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    axes = Constant<value = int64[1] {0}>()
    nothing = Constant<value = int64[1] {0}>()
    shape = Shape(x)
    n = Gather(shape, zero)
    head = Slice(x, nothing, nothing)
    e1 = SequenceConstruct(head)
    s1 = Loop(n, t, e1) <body = body (int64 i, bool c, seq(float) a1) => (bool c2, seq(float) g1) {
        c2 = Identity(c)
        j = Add(i, one)
        hi = Unsqueeze(j, axes)
        w = Slice(x, nothing, hi, axes)
        two = Constant<value = float {2}>()
        y1 = Mul(w, two)
        g1 = SequenceInsert(a1, y1)
    }>
    y = ConcatFromSequence<axis = 0>(s1)
}"""


def test_nested_windows_stay_padded(monkeypatch):
    """x[:i + 1]: one bound the same for every window, the windows nested, their total up to
    n x N / 2: the padded form (an Expand of x and a mask) stays, as it costs less per value."""
    model = parse(PREFIXES)
    assert _decisions(model, monkeypatch) == []
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert [n.input[0] for n in lowered.graph.node if n.op_type == "Expand"].count("x") == 1
    for rows in (0, 1, 4):
        assert_same_or_both_fail(model, lowered, {"x": _x(rows)})


def test_the_onnxruntime_target_keeps_a_loop_over_offsets_unbatched():
    """Windows between offsets, the trip count not proved to be their number: batched by the
    default target only (over a few windows the loop costs less); the model still computes the
    same."""
    model = _model(SUMMED)
    lowered, report = lower(model, target="onnxruntime")
    assert "loop-batch" not in report.rules_fired, report.rules_fired
    for rows, off in OFFSET_CASES[:4]:
        assert_same_or_both_fail(model, lowered, {"x": _x(rows), "off": np.array(off)})


# windows of columns, x [3, N], int32 bounds, float16: cat(relu(x[:, off[i]:off[i + 1]]), 1)
COLUMNS = """g (float16[3,N] x, int32[K] off) => (float16[3,?] y) {
    t = Constant<value = bool {1}>()
    one = Constant<value = int64 {1}>()
    nothing = Constant<value = int64[1] {0}>()
    columns = Constant<value = int64[1] {1}>()
    k = Size(off)
    m = Sub(k, one)
    head = Slice(x, nothing, nothing, columns)
    e1 = SequenceConstruct(head)
    s1 = Loop(m, t, e1) <body = body (int64 i, bool c, seq(float16) a1)
                                     => (bool c2, seq(float16) g1) {
        c2 = Identity(c)
        axes = Constant<value = int64[1] {0}>()
        along = Constant<value = int32[1] {-1}>()
        j = Add(i, one)
        first = Gather(off, i)
        last = Gather(off, j)
        starts = Unsqueeze(first, axes)
        ends = Unsqueeze(last, axes)
        w = Slice(x, starts, ends, along)
        y1 = Relu(w)
        g1 = SequenceInsert(a1, y1)
    }>
    y = ConcatFromSequence<axis = 1>(s1)
}"""


def test_windows_of_columns_with_int32_bounds_of_float16():
    """Along the last axis (written -1), int32 bounds, float16 values (read elementwise and
    concatenated back: no scatter of the values)."""
    model = parse(COLUMNS)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert _flat(lowered), op_counts(lowered)
    for rows, off in OFFSET_CASES:
        x = _x(rows, "float").T.astype(np.float16)
        assert_same_or_both_fail(model, lowered, {"x": x, "off": np.array(off, np.int32)})
    x = _x(7).T.astype(np.float16)
    (y,) = run_ort(lowered, {"x": x, "off": np.array([6, -5, 9, 1], np.int32)})
    want = [x[:, 6:2], x[:, 2:9], x[:, 9:1]]
    np.testing.assert_array_equal(y, np.maximum(np.concatenate([x[:, :0], *want], 1), 0))


# each window centred on its mean (`w - w.mean(0, keepdim=True)`), and its sum
CENTRED = """mu = ReduceMean<keepdims = 1>(w, axes)
        y1 = Sub(w, mu)
        z1 = ReduceSum<keepdims = 1>(w, axes)"""


@pytest.mark.parametrize("dtype", ["float", "double"])
def test_windows_centred_on_their_mean(dtype, monkeypatch):
    """A value per window read back at each row: the segment mean gathered at the rows' window
    ids (the slice's dims off its axis are x's, so the mean is known to broadcast into it)."""
    model = _model(CENTRED, dtype=dtype)
    decisions = _decisions(model, monkeypatch)
    assert decisions and all(isinstance(d, set) for d in decisions), decisions
    lowered = _compare(model, OFFSET_CASES, dtype=dtype)
    assert _flat(lowered), op_counts(lowered)
    x, off = _x(7, dtype), [0, 3, 3, -2, 7, 1]
    y, z = run_ort(lowered, {"x": x, "off": np.array(off, np.int64)})
    windows = [x[off[i] : off[i + 1]] for i in range(len(off) - 1)]
    want = [w - w.mean(0, keepdims=True) for w in windows if len(w)]
    np.testing.assert_allclose(y, np.concatenate([x[:0], *want]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(z, np.concatenate([w.sum(0, keepdims=True) for w in windows]))
