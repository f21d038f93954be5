"""loop-list-copy: a Loop that appends element i of a list in iteration i, for every i, builds the
list itself (`[s for s in xs]`): what it emits, what it refuses, and the same values under
onnxruntime, for chunks that differ in size, empty lists and several element types."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower_and_compare, op_counts, parse, rule_check

from seqlower.rule import Refusal
from seqlower.rules import loop_copy

# ys = [s for s in x.split(sizes)]; torch.cat(ys + [t]), len(ys)
COPIED = """g ({dtype}[N,3] x, int64[K] sizes, {dtype}[1,3] t) => ({dtype}[?,3] y, int64 n) {{
    xs = SplitToSequence<axis = 0>(x, sizes)
    length = SequenceLength(xs)
    {trip}
    yes = Constant<value = bool {{1}}>()
    empty = SequenceEmpty<dtype = {code}>()
    ys = Loop(trip, {cond}, empty) <body = body (int64 i, bool c, seq({dtype}[?,3]) s)
        => (bool c1, seq({dtype}[?,3]) s1) {{
        c1 = Identity(c)
        e = SequenceAt(xs, {position})
        s1 = SequenceInsert(s, e)
    }}>
    with_t = SequenceInsert(ys, t)
    y = ConcatFromSequence<axis = 0>(with_t)
    n = SequenceLength(ys)
}}"""
PLAIN = "trip = Identity(length)"
# TorchScript's count of `enumerate(xs)`: min(INT64_MAX, len(xs))
ENUMERATED = """big = Constant<value = int64[1] {9223372036854775807}>()
    zero = Constant<value = int64[1] {0}>()
    one_d = Unsqueeze(length, zero)
    counts = Concat<axis = 0>(big, one_d)
    trip = ReduceMin<keepdims = 0>(counts)"""
CODES = {"float": 1, "int64": 7, "float16": 10, "double": 11}


def _model(dtype="float", trip=PLAIN, cond="yes", position="i", empty_dtype=None) -> object:
    code = CODES[empty_dtype or dtype]
    return parse(COPIED.format(dtype=dtype, code=code, trip=trip, cond=cond, position=position))


@pytest.mark.parametrize("dtype", ["float", "int64", "float16", "double"])
@pytest.mark.parametrize("trip", [PLAIN, ENUMERATED], ids=["length", "enumerate"])
@pytest.mark.parametrize(
    "sizes", [[2, 0, 3], [5], [1, 1, 1, 1, 1], []], ids=["ragged", "one", "equal", "none"]
)
def test_the_copy_is_the_list(dtype, trip, sizes):
    rows = sum(sizes)
    x = (np.arange(rows * 3).reshape(rows, 3) - 4).astype(
        np.dtype(dtype if dtype != "float" else "float32")
    )
    t = np.full((1, 3), 9, x.dtype)
    feeds = {"x": x, "sizes": np.array(sizes, np.int64), "t": t}
    lowered, report, (y, n) = lower_and_compare(_model(dtype, trip), feeds)
    np.testing.assert_array_equal(y, np.concatenate([x, t]))
    assert int(n) == len(sizes)
    assert report.rules_fired.get("loop-list-copy") == 1
    assert "Loop" not in op_counts(lowered)  # the copy is gone, and with it the Loop


def _refusal(model) -> str:
    found = rule_check(model, loop_copy._check, "Loop")
    assert isinstance(found, Refusal), "loop-list-copy accepts the Loop"
    return found.reason


def test_emits_the_list_itself():
    found = rule_check(_model(), loop_copy._check, "Loop")
    assert isinstance(found, loop_copy.ListCopy)
    assert found.source.name == "xs"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"trip": "trip = Add(length, length)"}, "the trip count is not the length of a list"),
        (
            {"cond": "c0", "trip": PLAIN + "\n    c0 = Constant<value = bool {0}>()"},
            "the initial condition may be false",
        ),
        ({"position": "last"}, "no carried list is a copy"),
        ({"empty_dtype": "double"}, "no carried list is a copy"),
    ],
    ids=["twice-the-length", "false-condition", "other-position", "other-dtype"],
)
def test_refuses_what_is_not_a_copy(kwargs, reason):
    model = _model(**kwargs)
    if kwargs.get("position") == "last":  # xs[-1] in every iteration
        text = COPIED.format(dtype="float", code=1, trip=PLAIN, cond="yes", position="last")
        text = text.replace(
            "c1 = Identity(c)", "c1 = Identity(c)\n        last = Constant<value = int64 {-1}>()"
        )
        model = parse(text)
    assert reason in _refusal(model)


def test_refuses_a_body_that_may_stop():
    text = COPIED.format(dtype="float", code=1, trip=PLAIN, cond="yes", position="i")
    text = text.replace(
        "c1 = Identity(c)", "limit = Constant<value = int64 {1}>()\n        c1 = Less(i, limit)"
    )
    assert "the body may stop the loop early" in _refusal(parse(text))


def test_refuses_a_list_read_at_another_list():
    text = COPIED.format(dtype="float", code=1, trip=PLAIN, cond="yes", position="i")
    text = text.replace("e = SequenceAt(xs, i)", "e = SequenceAt(other, i)")
    text = text.replace(
        "length = SequenceLength(xs)",
        "length = SequenceLength(xs)\n    other = SplitToSequence<axis = 0>(x, sizes)",
    )
    assert "no carried list is a copy" in _refusal(parse(text))


# the same Loop also sums the rows of the elements: that value stays the Loop's
COPIED_AND_COUNTED = """g (float[N,3] x, int64[K] sizes) => (float[?,3] y, int64 total) {
    xs = SplitToSequence<axis = 0>(x, sizes)
    trip = SequenceLength(xs)
    yes = Constant<value = bool {1}>()
    zero = Constant<value = int64 {0}>()
    empty = SequenceEmpty<dtype = 1>()
    total, ys = Loop(trip, yes, zero, empty) <body = body (int64 i, bool c, int64 acc,
        seq(float[?,3]) s) => (bool c1, int64 acc1, seq(float[?,3]) s1) {
        c1 = Identity(c)
        e = SequenceAt(xs, i)
        s1 = SequenceInsert(s, e)
        shape = Shape<end = 1>(e)
        rows = ReduceSum<keepdims = 0>(shape)
        acc1 = Add(acc, rows)
    }>
    y = ConcatFromSequence<axis = 0>(ys)
}"""


def test_the_loop_keeps_its_other_values():
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    feeds = {"x": x, "sizes": np.array([1, 0, 5], np.int64)}
    lowered, report, (y, total) = lower_and_compare(parse(COPIED_AND_COUNTED), feeds)
    np.testing.assert_array_equal(y, x)
    assert int(total) == 6
    assert report.rules_fired.get("loop-list-copy") == 1
    assert "SequenceInsert" not in op_counts(lowered)
