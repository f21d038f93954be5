"""loop-last-element: a list a Loop appends to and reads only at position -1 (a greedy decoder's
`tokens[-1]`) carries its last element, and the appends become scan outputs."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower_and_compare, op_counts, parse, rule_check, sequence_op_count

import seqlower
from seqlower.rule import Refusal
from seqlower.rules import loop_last_element
from seqlower.targets import check_target

_START = "first = Identity(x)\n    start = SequenceConstruct(first)"
_READ_LAST = "minus_one = Constant<value = int64 {-1}>()\n        prev = SequenceAt(acc, minus_one)"


def _decoder(start: str = _START, read: str = _READ_LAST, dtype: str = "float") -> str:
    """`tokens = [x]; for i in range(m): t = prev * 2 + i (prev = tokens[-1]); tokens.append(t);
    stop once t > limit`, then the list stacked."""
    return f"""g (int64 m, {dtype}[3] x, {dtype} limit) => ({dtype}[?,3] stacked, int64 n) {{
    t = Constant<value = bool {{1}}>()
    {start}
    s = Loop(m, t, start) <body = body (int64 i, bool c, seq({dtype}[3]) acc)
                                   => (bool c2, seq({dtype}[3]) grown) {{
        {read}
        two = Constant<value = {dtype} {{2}}>()
        doubled = Mul(prev, two)
        step = Cast<to = {1 if dtype == "float" else 7}>(i)
        row = Add(doubled, step)
        grown = SequenceInsert(acc, row)
        top = ReduceMax<keepdims = 0>(row)
        c2 = LessOrEqual(top, limit)
    }}>
    stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    n = SequenceLength(s)
}}"""


def _expected(m: int, x: np.ndarray, limit: float) -> np.ndarray:
    rows = [x]
    for i in range(m):
        rows.append(rows[-1] * 2 + i)
        if rows[-1].max() > limit:
            break
    return np.stack(rows)


@pytest.mark.parametrize(("trips", "limit"), [(0, 100.0), (1, 100.0), (5, 100.0), (9, 20.0)])
@pytest.mark.parametrize(("dtype", "numpy_type"), [("float", np.float32), ("int64", np.int64)])
def test_the_last_element_is_carried_and_the_appends_are_scanned(trips, limit, dtype, numpy_type):
    x = np.array([1, -2, 3], dtype=numpy_type)
    feeds = {"m": np.array(trips), "x": x, "limit": np.array(limit, dtype=numpy_type)}
    lowered, report, (stacked, n) = lower_and_compare(parse(_decoder(dtype=dtype)), feeds)
    np.testing.assert_array_equal(stacked, _expected(trips, x, limit))
    assert n == len(stacked)
    assert report.rules_fired["loop-last-element"] == 1
    assert report.rules_fired["loop-append-to-scan"] == 1
    assert sequence_op_count(lowered) == 0
    (loop,) = [node for node in lowered.graph.node if node.op_type == "Loop"]
    body = next(a.g for a in loop.attribute if a.name == "body")
    # the body reads nothing that grows: no Concat of the list, no Gather of its last row
    assert not {"Concat", "Gather", "Slice"} & {node.op_type for node in body.node}


def test_a_longer_initial_list_gives_its_last_element():
    start = """minus_x = Neg(x)
    first = Identity(x)
    start = SequenceConstruct(minus_x, first)"""
    model = parse(_decoder(start=start))
    x = np.array([1, -2, 3], dtype=np.float32)
    feeds = {"m": np.array(3), "x": x, "limit": np.array(1e9, np.float32)}
    lowered, report, (stacked, _) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(stacked, np.concatenate([[-x], _expected(3, x, 1e9)]))
    assert report.rules_fired["loop-last-element"] == 1
    assert op_counts(lowered)["Loop"] == 1


def test_two_reads_of_the_last_element_read_one_carried_value():
    read = """minus_one = Constant<value = int64 {-1}>()
        prev = SequenceAt(acc, minus_one)
        again = SequenceAt(acc, minus_one)
        unused = Neg(again)"""
    model = parse(_decoder(read=read))
    x = np.array([1, -2, 3], dtype=np.float32)
    feeds = {"m": np.array(4), "x": x, "limit": np.array(1e9, np.float32)}
    _, report, (stacked, _) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(stacked, _expected(4, x, 1e9))
    assert report.rules_fired["loop-last-element"] == 1


# -- refusals ----------------------------------------------------------------------------------


def _refusal(text: str) -> str:
    found = rule_check(parse(text), loop_last_element._check, "Loop")
    assert isinstance(found, Refusal), "loop-last-element accepts the Loop"
    return found.reason


@pytest.mark.parametrize(
    ("start", "read", "why"),
    [
        (  # SequenceAt(s0, -1) would run before the loop and fail on an empty list
            "start = SequenceEmpty<dtype = 1>()",
            None,
            "not known to be at least one",
        ),
        (
            None,
            "zero = Constant<value = int64 {0}>()\n        prev = SequenceAt(acc, zero)",
            "a position other than -1",
        ),
        (
            None,
            "prev = SequenceAt(acc, i)",
            "a position other than -1",
        ),
        (
            None,
            "prev = Identity(x)\n        n_in = SequenceLength(acc)",
            "not only at position -1",
        ),
        (None, "prev = Identity(x)", "reads no element"),
    ],
)
def test_refuses(start, read, why):
    kwargs = {k: v for k, v in (("start", start), ("read", read)) if v is not None}
    assert why in _refusal(_decoder(**kwargs))


def test_refuses_a_list_read_after_the_append():
    text = _decoder().replace(
        "top = ReduceMax<keepdims = 0>(row)",
        "n_after = SequenceLength(grown)\n        top = ReduceMax<keepdims = 0>(row)",
    )
    assert "append one tensor at its end" in _refusal(text)


def test_refused_loops_still_lower_and_compute_the_same():
    """With the list read at position 0 the list stays a list inside the loop (its tensor form)."""
    read = "zero = Constant<value = int64 {0}>()\n        prev = SequenceAt(acc, zero)"
    model = parse(_decoder(read=read))
    x = np.array([1, -2, 3], dtype=np.float32)
    feeds = {"m": np.array(3), "x": x, "limit": np.array(1e9, np.float32)}
    lowered, report, (stacked, _) = lower_and_compare(model, feeds)
    assert "loop-last-element" not in report.rules_fired
    assert sequence_op_count(lowered) == 0
    np.testing.assert_array_equal(stacked[0], x)


def test_a_carried_last_element_is_named_by_the_value_it_carries():
    """A target that refuses the Loop names the carried last element as the user's value."""
    text = """g (int64 m, float[3] x) => (float[?] joined) {
    t = Constant<value = bool {1}>()
    first = Identity(x)
    start = SequenceConstruct(first)
    s = Loop(m, t, start) <body = body (int64 i, bool c, seq(float[?]) acc)
                                   => (bool c2, seq(float[?]) grown) {
        minus_one = Constant<value = int64 {-1}>()
        prev = SequenceAt(acc, minus_one)
        row = Concat<axis = 0>(prev, prev)
        grown = SequenceInsert(acc, row)
        c2 = Identity(c)
    }>
    joined = ConcatFromSequence<axis = 0>(s)
}"""
    lowered, report = seqlower.optimize(ir.from_proto(parse(text)), target="portable")
    assert report.rules_fired["loop-last-element"] == 1
    (error,) = check_target(lowered, report, "tensorrt").errors
    assert "'row', whose shape may change between iterations" in error
    assert "_last" not in error
