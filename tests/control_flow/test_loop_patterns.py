"""Dynamic list-building loops (issue 16, patterns 1, 3 and 4) become scan outputs:

- values carried through a `while` loop or a run-time `range(n)` whose shape the analysis proves
  fixed (`x = x * 0.5`), and per-sample slices `Slice(x, i, i + 1)`;
- prepends (`SequenceInsert(s, t, 0)`): the stack is reversed once after the loop;
- conditional appends (`if c: out.append(t)`): scans of t and c, one Compress after the loop;
  an If whose two branches each append one tensor returns that tensor instead.

Each is checked three ways: what it emits, what it refuses and why, and onnxruntime outputs on
0, 1 and several iterations.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, reasons, sequence_op_count

X = np.array([[1.0, -2.0, 3.5], [0.5, 0.25, -4.0]], dtype=np.float32)

WHILE_HALVE = parse(
    """g (float[A,3] x) => (float[?,A,3] y) {
    big = Constant<value = int64 {9223372036854775807}>()
    one = Constant<value = float {1}>()
    start = SequenceConstruct(x)
    ax = Abs(x)
    total = ReduceSum<keepdims = 0>(ax)
    go = Greater(total, one)
    h, s = Loop(big, go, x, start) <body = body (int64 i, bool c, float[A,3] h_in, seq(float) acc)
                                               => (bool c2, float h_out, seq(float) grown) {
        half = Constant<value = float {0.5}>()
        h_out = Mul(h_in, half)
        grown = SequenceInsert(acc, h_out)
        ah = Abs(h_out)
        sum_h = ReduceSum<keepdims = 0>(ah)
        limit = Constant<value = float {1}>()
        c2 = Greater(sum_h, limit)
    }>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}"""
)


@pytest.mark.parametrize("scale", [0.01, 0.3, 8.0])  # 0, 1 and several halvings
def test_a_value_halved_in_a_while_loop_is_stacked(scale):
    x = X * scale
    lowered, report, (y,) = lower_and_compare(WHILE_HALVE, {"x": x})
    runs = 0
    while np.abs(x * 0.5**runs).sum() > 1:
        runs += 1
    assert y.shape == (runs + 1, 2, 3)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["loop-append-to-scan"] == 1


RANGE_N = parse(
    """g (float[A,3] x, int64 n) => (float[?,3] y) {
    t = Constant<value = bool {1}>()
    start = SequenceConstruct(x)
    h, s = Loop(n, t, x, start) <body = body (int64 i, bool c, float[A,3] h_in, seq(float) acc)
                                            => (bool c2, float h_out, seq(float) grown) {
        c2 = Identity(c)
        one = Constant<value = float {1}>()
        h_out = Add(h_in, one)
        grown = SequenceInsert(acc, h_out)
    }>
    y = ConcatFromSequence<axis = 0>(s)
}"""
)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_a_run_time_range_carrying_x_plus_one(n):
    lowered, _, (y,) = lower_and_compare(RANGE_N, {"x": X, "n": np.array(n)})
    np.testing.assert_array_equal(y, np.concatenate([X + k for k in range(n + 1)]))
    assert sequence_op_count(lowered) == 0


def _per_sample(width: str) -> str:
    """Appends Slice(x, i, i + width) for i in range(dim 0 of x)."""
    return f"""g (float[N,3] x) => (float[?,3] y) {{
    zero = Constant<value = int64 {{0}}>()
    shape = Shape(x)
    n = Gather(shape, zero)
    t = Constant<value = bool {{1}}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        axes = Constant<value = int64[1] {{0}}>()
        width = Constant<value = int64 {{{width}}}>()
        stop = Add(i, width)
        starts = Unsqueeze(i, axes)
        ends = Unsqueeze(stop, axes)
        row = Slice(x, starts, ends, axes)
        scaled = Mul(row, row)
        grown = SequenceInsert(acc, scaled)
    }}>
    y = ConcatFromSequence<axis = 0>(s)
}}"""


@pytest.mark.parametrize("n", [1, 2, 5])
def test_per_sample_slices_of_one_row_are_stacked(n):
    x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    lowered, report, (y,) = lower_and_compare(parse(_per_sample("1")), {"x": x})
    np.testing.assert_array_equal(y, x * x)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["loop-append-to-scan"] == 1


def test_slices_of_two_rows_may_shrink_at_the_end_and_are_concatenated():
    """Slice(x, i, i + 2) over i < N: the last slice has one row, so no scan output, but a
    tensor accumulator."""
    model = parse(_per_sample("2"))
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    lowered, report, _ = lower_and_compare(model, {"x": x}, target="generic")
    assert report.rules_fired.get("loop-append-to-scan") is None
    assert report.rules_fired["loop-append-to-concat"] == 1
    assert sequence_op_count(lowered) == 0


def _prepend(initial: str) -> str:
    return f"""g (int64 m, float[3] x) => (float[?,3] y) {{
    t = Constant<value = bool {{1}}>()
    minus = Neg(x)
    start = {initial}
    s = Loop(m, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        fi = Cast<to = 1>(i)
        row = Mul(x, fi)
        front = Constant<value = int64 {{0}}>()
        grown = SequenceInsert(acc, row, front)
    }}>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_prepends_are_a_reversed_scan_before_the_initial_elements(trips):
    x = np.array([1.0, -2.0, 3.5], dtype=np.float32)
    model = parse(_prepend("SequenceConstruct(minus, x)"))
    lowered, _report, (y,) = lower_and_compare(model, {"m": np.array(trips), "x": x})
    expected = np.stack([x * k for k in reversed(range(trips))] + [-x, x])
    np.testing.assert_array_equal(y, expected)
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Slice"] == 1  # the reversal


@pytest.mark.parametrize("trips", [1, 3])
def test_prepends_onto_an_empty_sequence(trips):
    x = np.array([1.0, -2.0, 3.5], dtype=np.float32)
    model = parse(_prepend("SequenceEmpty<dtype = 1>()"))
    lowered, _, (y,) = lower_and_compare(model, {"m": np.array(trips), "x": x})
    np.testing.assert_array_equal(y, np.stack([x * k for k in reversed(range(trips))]))
    assert sequence_op_count(lowered) == 0


def _conditional(then: str, orelse: str, initial: str = "SequenceConstruct(x0)") -> str:
    """Appends row i of x when its sum is positive (the branch that appends is chosen)."""
    return f"""g (float[N,3] x) => (float[?,3] y) {{
    zero = Constant<value = int64 {{0}}>()
    x0 = Gather(x, zero)
    shape = Shape(x)
    n = Gather(shape, zero)
    t = Constant<value = bool {{1}}>()
    start = {initial}
    s = Loop(n, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        row = Gather(x, i)
        total = ReduceSum<keepdims = 0>(row)
        nothing = Constant<value = float {{0}}>()
        positive = Greater(total, nothing)
        grown = If(positive) <then_branch = then () => (seq(float) a) {{
            {then}
        }}, else_branch = orelse () => (seq(float) b) {{
            {orelse}
        }}>
    }}>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""


ROWS = np.array([[1, 2, 3], [-1, -2, 0], [4, -1, 0], [-3, 0, 0], [0, 0, 0]], dtype=np.float32)


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("appends_in_else", [False, True])
def test_a_conditional_append_is_a_compressed_scan(n, appends_in_else):
    append, skip = "a = SequenceInsert(acc, row)", "a = Identity(acc)"
    then, orelse = (skip, append) if appends_in_else else (append, skip)
    model = parse(_conditional(then, orelse.replace("a =", "b =")))
    x = ROWS[:n]
    lowered, _report, (y,) = lower_and_compare(model, {"x": x})
    kept = [r for r in x if (r.sum() > 0) != appends_in_else]
    np.testing.assert_array_equal(y, np.stack([x[0], *kept]))
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Compress"] == 1 and op_counts(lowered)["If"] == 0


def test_a_conditional_append_starting_empty_with_no_row_kept():
    model = parse(
        _conditional(
            "a = SequenceInsert(acc, row)", "b = Identity(acc)", "SequenceEmpty<dtype = 1>()"
        )
        .replace("ConcatFromSequence<axis = 0, new_axis = 1>(s)", "SequenceLength(s)")
        .replace("float[?,3] y", "int64 y")
    )
    for n in (1, 2, 5):
        x = ROWS[:n] * -1 if n == 2 else ROWS[:n]
        lowered, _, (y,) = lower_and_compare(model, {"x": x})
        assert y == sum(r.sum() > 0 for r in x)
    assert sequence_op_count(lowered) == 0


def test_both_branches_append_one_tensor_each():
    model = parse(
        _conditional(
            "a = SequenceInsert(acc, row)",
            """minus = Neg(row)
            b = SequenceInsert(acc, minus)""",
        )
    )
    for n in (1, 2, 5):
        x = ROWS[:n]
        lowered, report, (y,) = lower_and_compare(model, {"x": x})
        np.testing.assert_array_equal(y, np.stack([x[0], *[r if r.sum() > 0 else -r for r in x]]))
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["if-append-both-branches"] == 1
    assert report.rules_fired["loop-append-to-scan"] == 1


@pytest.mark.parametrize("n", [1, 2, 5])
def test_a_tensor_computed_in_the_branch_by_ops_that_cannot_fail_runs_every_iteration(n):
    """`if row.sum() > 0: out.append(relu(row) * 2)`: computed in every iteration, then kept."""
    model = parse(
        _conditional(
            """two = Constant<value = float {2}>()
            positive_part = Relu(row)
            twice = Mul(positive_part, two)
            a = SequenceInsert(acc, twice)""",
            "b = Identity(acc)",
        )
    )
    x = ROWS[:n]
    lowered, _, (y,) = lower_and_compare(model, {"x": x})
    np.testing.assert_array_equal(
        y, np.stack([x[0], *[2 * np.maximum(r, 0) for r in x if r.sum() > 0]])
    )
    assert sequence_op_count(lowered) == 0 and op_counts(lowered)["If"] == 0


@pytest.mark.parametrize(
    "computed",
    [
        "twice = Add(row, row)",  # a broadcast of two tensors may fail on shapes
        """k = Constant<value = int64 {7}>()
            twice = Gather(x, k)""",  # an index that may be out of range
    ],
    ids=["add-of-two-tensors", "gather"],
)
def test_a_tensor_computed_in_the_branch_by_ops_that_may_fail_is_refused(computed):
    """Running them in every iteration could fail where the original never ran them."""
    model = parse(
        _conditional(
            f"""{computed}
            a = SequenceInsert(acc, twice)""",
            "b = Identity(acc)",
        )
    )
    _, report = lower(model, tensor_lists=False)
    assert "which could fail in iterations where the branch does not run" in reasons(report)
    lower_and_compare(model, {"x": -np.abs(ROWS[:3]) - 1})  # the branch never runs


def test_an_if_that_also_reads_the_sequence_outside_the_branches_is_refused():
    model = parse(
        _conditional("a = SequenceInsert(acc, row)", "b = Identity(acc)").replace(
            "c2 = Identity(c)",
            """k = SequenceLength(acc)
            limit = Constant<value = int64 {100}>()
            c2 = Less(k, limit)""",
        )
    )
    _, report = lower(model, tensor_lists=False)
    assert "the body reads it outside the If that appends to it" in reasons(report)


@pytest.mark.parametrize("m", [0, 1, 4])
def test_a_conditional_append_over_zero_one_and_several_iterations(m):
    """Keeps the odd iterations of a run-time range; the length is the only reader."""
    model = parse(
        """g (int64 m, float[3] x) => (int64 n, float[?,3] y) {
        t = Constant<value = bool {1}>()
        start = SequenceConstruct(x)
        s = Loop(m, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                           => (bool c2, seq(float) grown) {
            c2 = Identity(c)
            two = Constant<value = int64 {2}>()
            parity = Mod(i, two)
            one = Constant<value = int64 {1}>()
            odd = Equal(parity, one)
            fi = Cast<to = 1>(i)
            row = Mul(x, fi)
            grown = If(odd) <then_branch = then () => (seq(float) a) {
                a = SequenceInsert(acc, row)
            }, else_branch = orelse () => (seq(float) b) {
                b = Identity(acc)
            }>
        }>
        n = SequenceLength(s)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    )
    x = np.array([1.0, -2.0, 3.5], dtype=np.float32)
    lowered, _, (n, y) = lower_and_compare(model, {"m": np.array(m), "x": x})
    assert n == 1 + m // 2
    np.testing.assert_array_equal(y, np.stack([x, *[x * k for k in range(1, m, 2)]]))
    assert sequence_op_count(lowered) == 0


def _static_trip(source: str, inputs: str, op: str = "Relu", z: str = "float[3] z") -> str:
    """Three iterations appending Relu(source[i]), then the list grows once more after the loop:
    only unrolling keeps its length static."""
    return f"""g ({inputs}, {z}) => (float y) {{
    {source}
    three = Constant<value = int64 {{3}}>()
    t = Constant<value = bool {{1}}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(three, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                           => (bool c2, seq(float) grown) {{
        c2 = Identity(c)
        e = SequenceAt(items, i)
        r = {op}(e)
        grown = SequenceInsert(acc, r)
    }}>
    more = SequenceInsert(s, z)
    y = ConcatFromSequence<axis = 0, new_axis = 1>(more)
}}"""


def test_a_static_trip_count_waits_for_unrolling_when_the_body_reads_a_split():
    """Fuzz seed 128: the SequenceAt of a split in the body is lowered first, then the loop is
    unrolled (static length: the insert after the loop folds too) rather than scanned."""
    model = parse(
        _static_trip("items = SplitToSequence<axis = 0, keepdims = 0>(x)", "float[N,3] x")
    )
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    z = np.ones(3, np.float32)
    lowered, report, (y,) = lower_and_compare(model, {"x": x, "z": z})
    np.testing.assert_array_equal(y, np.stack([*np.maximum(x[:3], 0), z]))
    assert sequence_op_count(lowered) == 0
    assert "loop-unroll" in report.rules_fired and "loop-append-to-scan" not in report.rules_fired


def test_a_static_trip_count_reading_a_sequence_input_is_scanned():
    """The body reads a sequence-typed model input: unrolling can never apply, so no waiting
    (the sum of each element has one shape, whatever the elements' shapes)."""
    model = parse(_static_trip("", "seq(float) items", "ReduceSum<keepdims = 0>", "float z"))
    _, report = lower(model)
    assert report.rules_fired["loop-append-to-scan"] == 1
    items = [np.full(k + 1, k - 1.5, np.float32) for k in range(4)]
    lower_and_compare(model, {"items": items, "z": np.array(1, np.float32)})


def test_branches_that_append_and_prepend_are_not_merged():
    """if-append-both-branches needs two plain appends to the same sequence."""
    model = parse(
        _conditional(
            "a = SequenceInsert(acc, row)",
            """front = Constant<value = int64 {0}>()
            b = SequenceInsert(acc, row, front)""",
        )
    )
    lowered, report = lower(model, tensor_lists=False)
    assert "if-append-both-branches: the else_branch inserts at a given position" in reasons(report)
    assert op_counts(lowered)["SequenceInsert"] == 2
    for n in (1, 3):
        lower_and_compare(model, {"x": ROWS[:n]})


# a running state (so the loop stays a loop) and a list grown in the else branch of an If: what
# the RNN-T greedy decoder does with its tokens (a blank moves on, anything else is appended)
RECURRENT_ELSE = """g (float[N,3] x, float[3] h0) => (float[?,3] y) {
    zero = Constant<value = int64 {0}>()
    zero1 = Constant<value = int64[1] {0}>()
    shape = Shape(x)
    n = Gather(shape, zero)
    t = Constant<value = bool {1}>()
    start = START
    h, s = Loop(n, t, h0, start) <body = body (int64 i, bool c, float[3] hi, ACC_TYPE acc)
                                       => (bool c2, float[3] ho, ACC_TYPE grown) {
        c2 = Identity(c)
        row = Gather(x, i)
        mixed = Add(row, hi)
        ho = Tanh(mixed)
        total = ReduceSum<keepdims = 0>(ho)
        nothing = Constant<value = float {0}>()
        blank = Less(total, nothing)
        grown = If(blank) <then_branch = then () => (ACC_TYPE a) {
            a = Identity(acc)
        }, else_branch = orelse () => (ACC_TYPE b) {
            GROW
        }>
    }>
    y = FINISH
}"""
AS_LIST = {
    "START": "SequenceConstruct(h0)",
    "ACC_TYPE": "seq(float)",
    "GROW": "b = SequenceInsert(acc, ho)",
    "FINISH": "ConcatFromSequence<axis = 0, new_axis = 1>(s)",
}
AS_TENSOR = {
    "START": "Unsqueeze(h0, zero1)",
    "ACC_TYPE": "float[?,3]",
    "GROW": "ax = Constant<value = int64[1] {0}>()\n            hu = Unsqueeze(ho, ax)\n"
    "            b = Concat<axis = 0>(acc, hu)",
    "FINISH": "Identity(s)",
}


@pytest.mark.parametrize("form", [AS_LIST, AS_TENSOR], ids=["list", "tensor"])
def test_an_append_in_the_else_branch_negates_its_condition_once_after_the_loop(form):
    text = RECURRENT_ELSE
    for key, value in form.items():
        text = text.replace(key, value)
    model = parse(text)
    h0 = np.array([0.5, -1.0, 0.25], np.float32)
    for n in (0, 1, 5):
        lowered, _, (y,) = lower_and_compare(model, {"x": ROWS[:n], "h0": h0})
        states, h = [h0], h0
        for row in ROWS[:n]:
            h = np.tanh(row + h)
            if h.sum() >= 0:
                states.append(h)
        np.testing.assert_allclose(y, np.array(states, np.float32).reshape(-1, 3), rtol=1e-6)
    assert sequence_op_count(lowered) == 0 and op_counts(lowered)["If"] == 0
    main = [node.op_type for node in lowered.graph.node]
    assert main.count("Not") == 1 and main.index("Not") > main.index("Loop")
    assert op_counts(lowered)["Not"] == 1  # none in the body
