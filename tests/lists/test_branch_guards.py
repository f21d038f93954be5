"""A branch taken only when a list is long enough (`if len(stack) >= 2: stack.pop() ..`) knows
that its pops at constant positions are in range: they are Slices, without the Split that
checks the length at run time; and what only that branch reads moves into it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    proto_graphs,
    sequence_op_count,
)

_POPS = """
            last = Constant<value = int64 {-1}>()
            a = SequenceAt(s, last)
            s1 = SequenceErase(s, last)
            b = SequenceAt(s1, last)
            s2 = SequenceErase(s1, last)
            c = Add(a, b)
            s3 = SequenceInsert(s2, c)"""


def _guarded(condition: str, inputs: str = "") -> str:
    """`s = list(x.unbind(0)); if <condition>: s.append(s.pop() + s.pop())`, then stacked."""
    return f"""g (float[N,3] x{inputs}) => (float[?,3] y, int64 n) {{
    s = SplitToSequence<axis = 0, keepdims = 0>(x)
    size = SequenceLength(s)
    two = Constant<value = int64 {{2}}>()
    one = Constant<value = int64 {{1}}>()
    {condition}
    out = If(enough) <then_branch = then () => (seq(float[3]) s3) {{{_POPS}
        }}, else_branch = other () => (seq(float[3]) kept) {{
            kept = Identity(s)
        }}>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(out)
    n = SequenceLength(out)
}}"""


def _expected(x: np.ndarray, guarded: bool) -> np.ndarray:
    rows = list(x)
    if guarded:
        a, b = rows.pop(), rows.pop()
        rows.append(a + b)
    return np.stack(rows)


def _feeds(rows: int) -> dict[str, np.ndarray]:
    return {"x": np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) - 2}


@pytest.mark.parametrize(
    "condition",
    [
        "enough = GreaterOrEqual(size, two)",
        "enough = Greater(size, one)",
        "enough = LessOrEqual(two, size)",
        "cast = Cast<to = 9>(size)\n    big = GreaterOrEqual(size, two)\n"
        "    enough = And(cast, big)",
    ],
)
@pytest.mark.parametrize("rows", [1, 2, 3, 5])
def test_pops_under_a_length_guard_need_no_check(condition, rows):
    model = parse(_guarded(condition))
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Split"] == 0  # the erases' run-time checks
    y, n = assert_same_outputs(model, lowered, _feeds(rows))
    np.testing.assert_array_equal(y, _expected(_feeds(rows)["x"], rows >= 2))
    assert n == len(y)


def test_a_short_circuit_and_guards_its_then_branch():
    """TorchScript's `p and len(s) >= 2`: If(p, then: len(s) >= 2, else: false)."""
    condition = """enough = If(p) <then_branch = check () => (bool big) {
        big = GreaterOrEqual(size, two)
    }, else_branch = no () => (bool nope) {
        nope = Constant<value = bool {0}>()
    }>"""
    model = parse(_guarded(condition, inputs=", bool p"))
    lowered, _ = lower(model)
    assert op_counts(lowered)["Split"] == 0
    for rows, p in ((1, True), (3, True), (3, False)):
        feeds = {**_feeds(rows), "p": np.array(p)}
        y, _ = assert_same_outputs(model, lowered, feeds)
        np.testing.assert_array_equal(y, _expected(feeds["x"], p and rows >= 2))


def test_a_guard_too_short_for_the_pops_keeps_their_checks():
    """`len(s) >= k` with k known at run time only proves nothing: the pops are checked, and
    fail as the original does when the list is too short."""
    model = parse(_guarded("enough = GreaterOrEqual(size, k)", inputs=", int64 k"))
    lowered, _ = lower(model)
    assert op_counts(lowered)["Split"] > 0
    feeds = {**_feeds(3), "k": np.array(2)}
    y, _ = assert_same_outputs(model, lowered, feeds)
    np.testing.assert_array_equal(y, _expected(feeds["x"], True))
    assert_both_fail(model, lowered, {**_feeds(1), "k": np.array(0)})


def test_a_guard_of_one_element_checks_the_second_pop():
    model = parse(_guarded("enough = GreaterOrEqual(size, one)"))
    lowered, _ = lower(model)
    assert op_counts(lowered)["Split"] == 1  # the first pop is in range, the second checked
    y, _ = assert_same_outputs(model, lowered, _feeds(2))
    np.testing.assert_array_equal(y, _expected(_feeds(2)["x"], True))
    assert_both_fail(model, lowered, _feeds(1))


def _shift(condition: str) -> str:
    """`stack = list(y.unbind(0)); buf = list(x.unbind(0))`;
    `if <condition>: stack.append(buf.pop(0))`, then the stack stacked."""
    return f"""g (float[N,3] x, float[M,3] y) => (float[?,3] out) {{
    buf = SplitToSequence<axis = 0, keepdims = 0>(x)
    stack = SplitToSequence<axis = 0, keepdims = 0>(y)
    size = SequenceLength(buf)
    zero = Constant<value = int64 {{0}}>()
    {condition}
    moved = If(enough) <then_branch = then () => (seq(float[3]) pushed) {{
            first = SequenceAt(buf, zero)
            pushed = SequenceInsert(stack, first)
        }}, else_branch = other () => (seq(float[3]) kept) {{
            kept = Identity(stack)
        }}>
    out = ConcatFromSequence<axis = 0, new_axis = 1>(moved)
}}"""


def _element_gathers(model: onnx.ModelProto) -> int:
    """The Gathers that read an element of `x` (not a dim of its shape)."""
    return sum(
        node.op_type == "Gather" and node.input[0] == "x"
        for graph in proto_graphs(model.graph)
        for node in graph.node
    )


def test_an_element_read_in_range_is_pushed_as_a_row():
    """Under `len(buf) > 0` the element read at 0 is the row `x[0:1]`: no Gather, no Unsqueeze."""
    model = parse(_shift("enough = Greater(size, zero)"))
    lowered, _ = lower(model)
    assert _element_gathers(lowered) == 0 and op_counts(lowered)["Unsqueeze"] == 0
    y = np.ones((2, 3), np.float32)
    for rows in (0, 1, 3):
        feeds = {**_feeds(rows), "y": y}
        (out,) = assert_same_outputs(model, lowered, feeds)
        want = np.concatenate([y, feeds["x"][:1]]) if rows else y
        np.testing.assert_array_equal(out, want)


def test_an_element_read_without_a_guard_is_checked():
    """Read whatever the length, the Gather stays: it fails on an empty list, as the original."""
    model = parse(_shift("enough = Identity(p)").replace("float[M,3] y)", "float[M,3] y, bool p)"))
    lowered, _ = lower(model)
    assert _element_gathers(lowered) == 1
    y = np.ones((2, 3), np.float32)
    (out,) = assert_same_outputs(model, lowered, {**_feeds(2), "y": y, "p": np.array(True)})
    np.testing.assert_array_equal(out, np.concatenate([y, _feeds(2)["x"][:1]]))
    assert_both_fail(model, lowered, {**_feeds(0), "y": y, "p": np.array(True)})
