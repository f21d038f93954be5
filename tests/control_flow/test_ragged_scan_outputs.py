"""A loop that reshapes each element of a list it does not build (a sequence-typed input, a list
kept as given) and appends the result: the pieces take one shape in every iteration only where
the list's elements are proved to share one. `Reshape(element, [B, -1])` with B read at run time
(not proved >= 1: a 0 would copy the element's dim) names the unknown dims of an element whose
sizes change from one iteration to the next: they change too, and a scan output of them fails
in onnxruntime (`Inconsistent shape in loop output`), so `loop-append-to-scan` refuses."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    parse,
    rule_check,
    rules_without,
    sequence_op_count,
)

from seqlower.rule import Refusal
from seqlower.rules.loop_appends import AppendPlan, _check_append

# what loop-append-to-scan emits is seen without loop-batch, which would batch the split's loop
WITHOUT_BATCHING = rules_without("loop-batch")

# each element (B, h, w) -> (B, w * h): B from the input `rows`, a size not proved >= 1
LOOP = """
    t = Constant<value = bool {1}>()
    n = SequenceLength(levels)
    empty = SequenceEmpty<dtype = 1>()
    batch = Shape(rows)
    minus = Constant<value = int64[1] {-1}>()
    target = Concat<axis = 0>(batch, minus)
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float[?,?]) acc)
                                     => (bool c2, seq(float[?,?]) grown) {
        c2 = Identity(c)
        level = SequenceAt(levels, i)
        moved = Transpose<perm = [0, 2, 1]>(level)
        row = Reshape(moved, target)
        grown = SequenceInsert(acc, row)
    }>
    count = SequenceLength(s)
    flat = ConcatFromSequence<axis = 1>(s)
    zero = Constant<value = int64 {0}>()
    first = SequenceAt(s, zero)
}"""

# the list is a sequence-typed model input: its elements may differ in shape
RAGGED = parse(
    "g (seq(float[B,?,?]) levels, float[B] rows)\n"
    "    => (int64 count, float[B,?] flat, float[B,?] first) {" + LOOP
)
# Slice(element, [0], [1000], axes) with axes given at run time: which dims it cuts is not known,
# and the dims of an element that change stay so (the pieces: (2, 16), then (2, 4))
SLICED = parse("""g (seq(float[2,?,?]) levels, int64[1] ax)
    => (int64 count, float[2,?] flat, float[2,?] first) {
    t = Constant<value = bool {1}>()
    n = SequenceLength(levels)
    empty = SequenceEmpty<dtype = 1>()
    start = Constant<value = int64[1] {0}>()
    end = Constant<value = int64[1] {1000}>()
    target = Constant<value = int64[2] {2, -1}>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float[?,?]) acc)
                                     => (bool c2, seq(float[?,?]) grown) {
        c2 = Identity(c)
        level = SequenceAt(levels, i)
        cut = Slice(level, start, end, ax)
        row = Reshape(cut, target)
        grown = SequenceInsert(acc, row)
    }>
    count = SequenceLength(s)
    flat = ConcatFromSequence<axis = 1>(s)
    zero = Constant<value = int64 {0}>()
    first = SequenceAt(s, zero)
}""")
RAGGED_MODELS = {"reshape": RAGGED, "slice": SLICED}

# the list is split from a tensor: every element has shape (B, 4, 4)
EVEN = parse(
    "g (float[N,B,4,4] x, float[B] rows) => (int64 count, float[B,?] flat, float[B,?] first) {\n"
    "    levels = SplitToSequence<axis = 0, keepdims = 0>(x)" + LOOP
)


def _ragged_feeds(kind: str, sizes: list[int]) -> dict[str, object]:
    if kind == "reshape":
        return {"levels": _levels(sizes), "rows": np.zeros(2, np.float32)}
    return {"levels": _levels(sizes), "ax": np.array([1])}


def _levels(sizes: list[int], batch: int = 2) -> list[np.ndarray]:
    return [
        np.arange(batch * k * k, dtype=np.float32).reshape(batch, k, k) / (k + 1) for k in sizes
    ]


def test_pieces_of_elements_proved_of_one_shape_become_a_scan_output():
    plans = rule_check(EVEN, _check_append, "Loop")
    assert isinstance(plans, tuple) and len(plans) == 1
    (plan,) = plans
    assert isinstance(plan, AppendPlan) and plan.tensor.name == "row"
    assert plan.element_shape == (None, None)  # one shape, named symbolically
    lowered, report = lower(EVEN, rules=WITHOUT_BATCHING)
    assert report.rules_fired["loop-append-to-scan"] == 1
    assert sequence_op_count(lowered) == 0
    rows = np.zeros(2, np.float32)
    for count in (1, 3):
        x = np.stack(_levels([4] * count))
        length, flat, first = assert_same_outputs(EVEN, lowered, {"x": x, "rows": rows})
        assert length == count and flat.shape == (2, 16 * count) and first.shape == (2, 16)
    # no element: the original's ConcatFromSequence and SequenceAt fail, and so does the lowering
    assert_both_fail(EVEN, lowered, {"x": np.zeros((0, 2, 4, 4), np.float32), "rows": rows})


@pytest.mark.parametrize("kind", RAGGED_MODELS)
def test_pieces_of_elements_that_may_differ_are_not_a_scan_output(kind):
    model = RAGGED_MODELS[kind]
    refusal = rule_check(model, _check_append, "Loop")
    assert isinstance(refusal, Refusal)
    assert (
        "the appended tensor 'row' may change shape between iterations ('level' is an element "
        "of a sequence whose elements may differ in shape), and the list is not stacked after "
        "the loop; a scan output needs one shape" in refusal.reason
    )
    _, report = lower(model, target="generic")
    assert "loop-append-to-scan" not in report.rules_fired
    assert report.rules_fired["tensor-list"] >= 1  # the list made a tensor with its lengths


@pytest.mark.parametrize("kind", RAGGED_MODELS)
@pytest.mark.parametrize("sizes", [[4, 2, 1], [1, 3], [2], [3, 3]])
def test_ragged_pieces_run_as_the_original_does(kind, sizes):
    # the default target: the form that failed was a scan output of (2, 16) then (2, 4) pieces
    model = RAGGED_MODELS[kind]
    lowered, _ = lower(model, target="generic")
    length, flat, first = assert_same_outputs(model, lowered, _ragged_feeds(kind, sizes))
    assert length == len(sizes) and flat.shape == (2, sum(k * k for k in sizes))
    assert first.shape == (2, sizes[0] ** 2)


@pytest.mark.parametrize("kind", RAGGED_MODELS)
def test_an_empty_ragged_list_fails_as_the_original_does(kind):
    # no element: the original's SequenceAt and ConcatFromSequence fail, and so does the lowering
    model = RAGGED_MODELS[kind]
    lowered, _ = lower(model, target="generic")
    assert_both_fail(model, lowered, _ragged_feeds(kind, []))
