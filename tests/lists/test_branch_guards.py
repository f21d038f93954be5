"""A branch taken only when a list is long enough (`if len(stack) >= 2: stack.pop() ..`) knows
that its pops at constant positions are in range: they are Slices, without the Split that
checks the length at run time; and what only that branch reads moves into it."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
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
