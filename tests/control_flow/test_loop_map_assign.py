"""loop-map-assign: `for i in range(len(xs)): xs[i] = f(xs[i], h)` (a decoder's per-layer cache)
reads the initial list and appends what it puts; the appends become scan outputs."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower_and_compare, parse, rule_check, sequence_op_count

from seqlower.rule import Refusal
from seqlower.rules import loop_map_assign

_READ = "old = SequenceAt(s, i)"
_EDIT = "cut = SequenceErase(s, i)\n        put = SequenceInsert(cut, new, i)"
_AFTER = "again = SequenceAt(put, i)"


def _cache(
    read: str = _READ,
    edit: str = _EDIT,
    after: str = _AFTER,
    trips: str = "n = SequenceLength(start)",
    dtype: str = "float",
    outputs: str = "float[?,?,3] stacked, float[3] h_out, int64 count",
) -> str:
    """`keys = list(past.unbind(0)); for i in range(len(keys)): keys[i] = cat([keys[i], h]);
    h = h + keys[i].sum(0)`, run twice over the list (the second loop reads the first's)."""
    return f"""g ({dtype}[L,P,3] past, {dtype}[3] h0) => ({outputs}) {{
    t = Constant<value = bool {{1}}>()
    axes = Constant<value = int64[1] {{0}}>()
    start = SplitToSequence<axis = 0, keepdims = 0>(past)
    {trips}
    h1, s1 = Loop(n, t, h0, start) <body = body (int64 i, bool c, {dtype}[3] h,
                                                 seq({dtype}[?,3]) s)
                                     => (bool c2, {dtype}[3] h2, seq({dtype}[?,3]) put) {{
        {read}
        row = Unsqueeze(h, axes)
        new = Concat<axis = 0>(old, row)
        {edit}
        {after}
        total = ReduceSum<keepdims = 0>(again, axes)
        h2 = Add(h, total)
        c2 = Identity(c)
    }}>
    m = SequenceLength(s1)
    h_out, s2 = Loop(m, t, h1, s1) <body = body2 (int64 j, bool d, {dtype}[3] g,
                                                  seq({dtype}[?,3]) r)
                                      => (bool d2, {dtype}[3] g2, seq({dtype}[?,3]) put2) {{
        old2 = SequenceAt(r, j)
        row2 = Unsqueeze(g, axes)
        new2 = Concat<axis = 0>(old2, row2)
        cut2 = SequenceErase(r, j)
        put2 = SequenceInsert(cut2, new2, j)
        total2 = ReduceSum<keepdims = 0>(new2, axes)
        g2 = Add(g, total2)
        d2 = Identity(d)
    }}>
    stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s2)
    count = SequenceLength(s2)
}}"""


def _expected(past: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keys = list(past)
    for _ in range(2):
        for i in range(len(keys)):
            keys[i] = np.concatenate([keys[i], h[None]], 0)
            h = h + keys[i].sum(0)
    return np.stack(keys) if keys else np.zeros((0,), past.dtype), h


@pytest.mark.parametrize(("layers", "rows"), [(1, 2), (3, 2), (4, 0)])
@pytest.mark.parametrize("dtype", ["float", "int64"])
def test_each_loop_reads_the_initial_list_and_appends(layers, rows, dtype):
    numpy_type = np.float32 if dtype == "float" else np.int64
    past = np.arange(layers * rows * 3, dtype=numpy_type).reshape(layers, rows, 3) - 4
    h = np.array([1, -2, 3], dtype=numpy_type)
    outputs = f"{dtype}[?,?,3] stacked, {dtype}[3] h_out, int64 count"
    model = parse(_cache(dtype=dtype, outputs=outputs))
    lowered, report, (stacked, h_out, count) = lower_and_compare(model, {"past": past, "h0": h})
    want_stacked, want_h = _expected(past, h)
    np.testing.assert_array_equal(stacked, want_stacked)
    np.testing.assert_array_equal(h_out, want_h)
    assert count == layers
    assert report.rules_fired["loop-map-assign"] == 2
    assert report.rules_fired["loop-append-to-scan"] == 2
    assert sequence_op_count(lowered) == 0


def test_an_empty_list_runs_no_iteration():
    text = _cache(outputs="float[3] h_out, int64 count")
    model = parse(text.replace("stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s2)", ""))
    past = np.zeros((0, 2, 3), np.float32)
    h = np.array([1, -2, 3], np.float32)
    _, report, (h_out, count) = lower_and_compare(model, {"past": past, "h0": h})
    np.testing.assert_array_equal(h_out, h)
    assert count == 0
    assert report.rules_fired["loop-map-assign"] == 2


def test_lengths_read_in_the_body_are_the_initial_length():
    after = (
        "size = SequenceLength(put)\n        scale = Cast<to = 1>(size)\n"
        "        read = SequenceAt(put, i)\n        again = Mul(read, scale)"
    )
    model = parse(_cache(after=after))
    past = np.arange(9, dtype=np.float32).reshape(3, 1, 3)
    h = np.array([1, -2, 3], np.float32)
    _, report, (stacked, h_out, _) = lower_and_compare(model, {"past": past, "h0": h})
    keys = list(past)
    for scale in (3, 1):  # the first loop scales what it sums by the length, the second not
        for i in range(len(keys)):
            keys[i] = np.concatenate([keys[i], h[None]], 0)
            h = h + keys[i].sum(0) * scale
    np.testing.assert_array_equal(stacked, np.stack(keys))
    np.testing.assert_array_equal(h_out, h)
    assert report.rules_fired["loop-map-assign"] == 2


# -- refusals ----------------------------------------------------------------------------------


def _refusal(text: str) -> str:
    found = rule_check(parse(text), loop_map_assign._check, "Loop")
    assert isinstance(found, Refusal), "loop-map-assign accepts the Loop"
    return found.reason


_ZERO = "zero = Constant<value = int64 {0}>()\n        "


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"read": _ZERO + "old = SequenceAt(s, zero)"}, "not only at the iteration number"),
        (
            {"edit": "cut = SequenceErase(s, i)\n        put = SequenceInsert(cut, new)"},
            "does not insert one tensor at the iteration number",
        ),
        (
            {
                "edit": _ZERO
                + "cut = SequenceErase(s, zero)\n        put = SequenceInsert(cut, new, i)"
            },
            "does not erase the element at the iteration number",
        ),
        ({"after": _ZERO + "again = SequenceAt(put, zero)"}, "not at the iteration number"),
        (
            {"edit": _EDIT + "\n        extra = SequenceLength(cut)"},
            "the list without the element is read elsewhere",
        ),
        (
            {"trips": "three = Constant<value = int64 {3}>()\n    n = Identity(three)"},
            "trip count is not the length",
        ),
    ],
)
def test_refuses(change, why):
    assert why in _refusal(_cache(**change))


def test_refuses_a_loop_that_may_end_early():
    stop = "top = ReduceMax<keepdims = 0>(h2)\n        c2 = Less(top, top)"
    text = _cache().replace("c2 = Identity(c)", stop)
    assert "may end early" in _refusal(text)


def test_a_refused_loop_still_lowers_and_computes_the_same():
    """Read at 0 as well (the element the first iteration put), the list stays a list in the
    first loop (its tensor form); the second loop is still a map."""
    read = _ZERO + (
        "first = SequenceAt(s, zero)\n        lead = ReduceSum<keepdims = 0>(first)\n"
        "        plain = SequenceAt(s, i)\n        old = Add(plain, lead)"
    )
    model = parse(_cache(read=read))
    past = np.arange(18, dtype=np.float32).reshape(3, 2, 3)
    h = np.array([1, -2, 3], np.float32)
    lowered, report, (stacked, h_out, _) = lower_and_compare(model, {"past": past, "h0": h})
    keys = list(past)
    for i in range(len(keys)):  # the first loop: keys[0] as it is in iteration i
        keys[i] = np.concatenate([keys[i] + keys[0].sum(), h[None]], 0)
        h = h + keys[i].sum(0)
    for i in range(len(keys)):
        keys[i] = np.concatenate([keys[i], h[None]], 0)
        h = h + keys[i].sum(0)
    np.testing.assert_array_equal(stacked, np.stack(keys))
    np.testing.assert_array_equal(h_out, h)
    assert report.rules_fired["loop-map-assign"] == 1  # the second loop only
    assert sequence_op_count(lowered) == 0
