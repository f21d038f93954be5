"""Windows of one tensor read in a batched loop (`out.append(f(x[s_i:e_i]))`) are held padded
to their bound w (a Gather of s_i + Range(w)), not to the whole tensor, where e_i - s_i <= w is
proved: e_i = s_i + w, or Min(s_i + w, a size) (others are held flat: test_flat_windows.py).
Checked three ways: what is emitted (no Expand of x to [n, N, ...]), what keeps the whole-axis
form and why, and onnxruntime outputs for
windows at the end, negative starts, empty x, no iteration, a step of 2 and several types."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_or_both_fail,
    lower,
    op_counts,
    parse,
    run_ort,
    sequence_op_count,
)

TYPES = {"float": np.float32, "double": np.float64, "int64": np.int64}


def _windows(
    width: str = "2",
    start: str = "first = Identity(i)",
    end: str = "last = Add(first, width)",
    body: str = "out = Relu(row)",
    kind: str = "float",
    dims: str = "N,3",
) -> str:
    """`out = [x[:0]]; for i in range(m): out.append(f(x[s_i:e_i]))`, concatenated along 0
    (the empty first element: no iteration gives an empty y, not a failing concatenation)."""
    return f"""g ({kind}[{dims}] x, int64 m) => ({kind}[?,3] y) {{
    t = Constant<value = bool {{1}}>()
    nothing = Constant<value = int64[1] {{0}}>()
    head = Slice(x, nothing, nothing)
    empty = SequenceConstruct(head)
    s = Loop(m, t, empty) <body = body (int64 i, bool c, seq({kind}) acc)
                                       => (bool c2, seq({kind}) grown) {{
        c2 = Identity(c)
        axes = Constant<value = int64[1] {{0}}>()
        width = Constant<value = int64 {{{width}}}>()
        two = Constant<value = int64 {{2}}>()
        {start}
        {end}
        starts = Unsqueeze(first, axes)
        ends = Unsqueeze(last, axes)
        row = Slice(x, starts, ends, axes)
        {body}
        grown = SequenceInsert(acc, out)
    }}>
    y = ConcatFromSequence<axis = 0>(s)
}}"""


def _check(model, cases):
    """Lowered once (the loop batched, no sequence op left); on each (x, trips) the same
    outputs as the original under onnxruntime, or both fail. Returns the model and report."""
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1
    assert sequence_op_count(lowered) == 0
    for x, trips in cases:
        assert_same_or_both_fail(model, lowered, {"x": x, "m": np.array(trips)})
    return lowered, report


def _x(rows: int, kind: str = "float") -> np.ndarray:
    values = np.arange(3 * rows).reshape(rows, 3) * (-1) ** np.arange(3 * rows).reshape(rows, 3)
    return values.astype(TYPES[kind])


def _expands_of_x(model) -> list[str]:
    return [n.output[0] for n in model.graph.node if n.op_type == "Expand" and n.input[0] == "x"]


@pytest.mark.parametrize("width", ["1", "2", "3"])
@pytest.mark.parametrize("rows", [0, 1, 2, 5])
def test_windows_at_their_width_shorter_at_the_end(width, rows):
    model = parse(_windows(width))
    x = _x(rows)
    lowered, report = _check(model, [(x, rows)])
    (y,) = run_ort(lowered, {"x": x, "m": np.array(rows)})
    expected = [x[:0], *(np.maximum(x[i : i + int(width)], 0) for i in range(rows))]
    np.testing.assert_array_equal(y, np.concatenate(expected))
    assert report.rules_fired.get("loop-batch") == 1
    assert sequence_op_count(lowered) == 0
    assert _expands_of_x(lowered) == []
    assert op_counts(lowered)["Gather"] >= 1


@pytest.mark.parametrize("kind", list(TYPES))
def test_windows_of_each_type(kind):
    model = parse(_windows("3", kind=kind))
    cases = [(4, 4), (4, 0), (0, 2), (3, 6)]  # trips past the end: empty windows
    lowered, _ = _check(model, [(_x(rows, kind), trips) for rows, trips in cases])
    assert _expands_of_x(lowered) == []


@pytest.mark.parametrize(
    "start",
    [
        "first = Sub(i, two)",  # negative starts count from the end
        "first = Neg(i)",  # 0, -1, -2 ...: [-k, -k + w)
        "first = Mul(i, two)",  # a step of 2 between starts
    ],
)
@pytest.mark.parametrize("rows", [0, 1, 3, 6])
def test_windows_of_other_starts(start, rows):
    model = parse(_windows("2", start=start))
    lowered, _ = _check(model, [(_x(rows), max(rows, 1) + 1), (_x(rows), 1)])
    assert _expands_of_x(lowered) == []


def test_windows_ending_at_a_size():
    """e_i = Min(s_i + w, N), N the rows of x: bounded by w."""
    end = """plus = Add(first, width)
        size = Shape<start = 0, end = 1>(x)
        whole = Squeeze(size)
        last = Min(plus, whole)"""
    model = parse(_windows("3", end=end))
    lowered, _ = _check(model, [(_x(rows), rows + 1) for rows in (0, 2, 5)])
    assert _expands_of_x(lowered) == []


def test_windows_of_a_static_axis_gather_x_itself():
    """x with 5 rows: Gather never reads an empty axis, so no row of zeros is appended."""
    model = parse(_windows("2", dims="5,3"))
    lowered, _ = _check(model, [(_x(5), 7), (_x(5), 0), (_x(5), 2)])
    assert _expands_of_x(lowered) == []
    assert op_counts(lowered)["ConstantOfShape"] == 0
    gathers = [n for n in lowered.graph.node if n.op_type == "Gather" and n.input[0] == "x"]
    assert len(gathers) == 1


def test_windows_summed():
    """Each window reduced along 0 (a masked sum over padding of w, not of N)."""
    body = "out = ReduceSum<keepdims = 1>(row, axes)"
    model = parse(_windows("3", body=body))
    lowered, _ = _check(model, [(_x(rows), rows) for rows in (0, 1, 4, 7)])
    (y,) = run_ort(lowered, {"x": _x(7), "m": np.array(7)})
    want = [_x(7)[:0], *(_x(7)[i : i + 3].sum(0, keepdims=True) for i in range(7))]
    np.testing.assert_array_equal(y, np.concatenate(want))
    assert _expands_of_x(lowered) == []


@pytest.mark.parametrize(
    ("width", "end", "why"),
    [
        # e = s - 1 with s = 0 is -1: Slice takes d - 1 rows, no bound
        ("-1", "last = Add(first, width)", "a negative width"),
        # e = 2 * i is not s + a constant
        ("2", "last = Mul(first, two)", "an end not bounded"),
        # Min with a value that may be negative (m - 3): an end of -1 counts from the end
        (
            "2",
            "plus = Add(first, width)\n        low = Sub(m, width)\n        last = Min(plus, low)",
            "Min with a value of unknown sign",
        ),
    ],
)
def test_unbounded_windows_are_held_flat(width, end, why):
    """No constant bounds these windows: not padded to the whole axis either, but held flat, as
    x's rows (read elementwise and concatenated back: `seqlower.batching.windows`)."""
    model = parse(_windows(width, end=end))
    cases = [(_x(rows), trips) for rows, trips in ((4, 3), (0, 1), (3, 0), (5, 5))]
    lowered, report = _check(model, cases)
    assert report.rules_fired.get("loop-batch") == 1, why
    assert _expands_of_x(lowered) == [], why
    gathers = [n for n in lowered.graph.node if n.op_type == "Gather" and n.input[0] == "x"]
    assert len(gathers) == 1, why


def test_windows_of_a_value_per_element_keep_their_form():
    """x computed per iteration (x * i): windows of a batched value keep their own padding."""
    body = "out = Relu(row)"
    text = _windows("2", body=body).replace(
        "row = Slice(x, starts, ends, axes)",
        "fi = Cast<to = 1>(i)\n        xi = Mul(x, fi)\n"
        "        row = Slice(xi, starts, ends, axes)",
    )
    model = parse(text)
    lowered, report = _check(model, [(_x(4), 4), (_x(0), 2)])
    assert report.rules_fired.get("loop-batch") == 1
    assert op_counts(lowered)["ConstantOfShape"] == 0


BRANCHES = """g (float[N,3] x, int64 m) => (float[?,3] y) {
    t = Constant<value = bool {1}>()
    nothing = Constant<value = int64[1] {0}>()
    head = Slice(x, nothing, nothing)
    empty = SequenceConstruct(head)
    s = Loop(m, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        axes = Constant<value = int64[1] {0}>()
        one = Constant<value = int64 {1}>()
        two = Constant<value = int64 {2}>()
        starts = Unsqueeze(i, axes)
        bit = Mod(i, two)
        odd = Equal(bit, one)
        out = If(odd) <then_branch = g1 () => (float[?,3] a) {
            e1 = Add(i, one)
            u1 = Unsqueeze(e1, axes)
            a = Slice(x, starts, u1, axes)
        }, else_branch = g2 () => (float[?,3] b) {
            e2 = Add(i, two)
            u2 = Unsqueeze(e2, axes)
            w2 = Slice(x, starts, u2, axes)
            b = Neg(w2)
        }>
        grown = SequenceInsert(acc, out)
    }>
    y = ConcatFromSequence<axis = 0>(s)
}"""


def test_windows_returned_by_a_branch_keep_the_whole_axis():
    """Windows of 1 and 2 rows returned by the two branches of an If: each branch's padding
    must be as wide as the other's, so both keep x's whole axis (the loop is still batched)."""
    model = parse(BRANCHES)
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    lowered, _ = _check(model, [(x, 0), (x, 3), (x, 5), (x, 7), (x[:0], 2)])
    assert len(_expands_of_x(lowered)) == 2
    assert op_counts(lowered)["ConstantOfShape"] == 0


AXIS_1 = """g (float[3,N] x, int64 m) => (float[3,?] y) {
    t = Constant<value = bool {1}>()
    nothing = Constant<value = int32[1] {0}>()
    columns = Constant<value = int32[1] {1}>()
    head = Slice(x, nothing, nothing, columns)
    empty = SequenceConstruct(head)
    s = Loop(m, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        axes = Constant<value = int32[1] {-1}>()
        width = Constant<value = int32 {2}>()
        zero = Constant<value = int64[1] {0}>()
        narrow = Cast<to = 6>(i)
        first = Unsqueeze(narrow, zero)
        last = Add(first, width)
        row = Slice(x, first, last, axes)
        out = Exp(row)
        grown = SequenceInsert(acc, out)
    }>
    y = ConcatFromSequence<axis = 1>(s)
}"""


def test_windows_along_the_last_axis_with_int32_bounds():
    """Windows of columns (axes = [-1]), bounds of type int32: the Gather along axis 1 is moved
    to [n, 3, w]; the bound is the same (Add of the start and a constant)."""
    model = parse(AXIS_1)
    x = np.arange(18, dtype=np.float32).reshape(3, 6) / 10
    lowered, _ = _check(model, [(x, 6), (x, 8), (x, 0), (x[:, :0], 2), (x[:, :1], 3)])
    assert _expands_of_x(lowered) == []
    assert op_counts(lowered)["Transpose"] >= 1
