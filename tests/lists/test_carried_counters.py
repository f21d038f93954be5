"""A counter a Loop carries (`for xi, x in enumerate(prediction)` exports `xi` as a carried
`Add(k, 1)` from 0) is never negative, as the iteration number is: `xs[xi] = f(xs[xi])` at it
is one assignment (SequenceErase and SequenceInsert at the same position fused: a splice and
one scatter of the table), not an erase and an insert that each check and count the position
from the end."""

from __future__ import annotations

import itertools

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, ort_session, parse, proto_graphs, run_ort

from seqlower.analysis.static_values import StaticValues
from seqlower.lists.signs import carried_counters

_TYPES = {"float": np.float32, "float16": np.float16, "int64": np.int64, "bool": np.bool_}


def _assigning(dtype: str = "float", start: str = "int64 {0}", step: str = "int64 {1}") -> str:
    """`for k, x in enumerate(..)`, k carried from `start` by `step`: unless `skip`, `xs[k] =
    cat([xs[k], xs[k]])` (a ragged list: the rows of x cut by `sizes`), then all joined."""
    return f"""g ({dtype}[?,3] x, int64[?] sizes, int64 m, bool skip) => ({dtype}[?,3] y) {{
    t = Constant<value = bool {{1}}>()
    k0 = Constant<value = {start}>()
    xs = SplitToSequence<axis = 0>(x, sizes)
    k_out, s = Loop(m, t, k0, xs) <body = body (int64 i, bool c, int64 k, seq({dtype}[?,3]) acc)
                                           => (bool c2, int64 k2, seq({dtype}[?,3]) out) {{
        step = Constant<value = {step}>()
        k2 = Add(k, step)
        out = If(skip) <then_branch = th () => (seq({dtype}[?,3]) r) {{ r = Identity(acc) }},
                        else_branch = el () => (seq({dtype}[?,3]) r) {{
            old = SequenceAt(acc, k)
            new = Concat<axis = 0>(old, old)
            erased = SequenceErase(acc, k)
            r = SequenceInsert(erased, new, k)
        }}>
        c2 = Identity(c)
    }}>
    y = ConcatFromSequence<axis = 0>(s)
}}"""


def _feeds(dtype: str, sizes: list[int], trips: int, skip: bool = False) -> dict:
    rows = sum(sizes)
    x = (np.arange(rows * 3).reshape(rows, 3) % 5).astype(_TYPES[dtype])
    sizes_array = np.array(sizes, np.int64)
    return {"x": x, "sizes": sizes_array, "m": np.array(trips), "skip": np.array(skip)}


def _expected(feeds: dict, start: int, step: int) -> np.ndarray | None:
    """What the model computes, as the ONNX operators define it (None: it fails): SequenceErase
    then SequenceInsert at k, each in range or failing, k < 0 counted from the end."""
    bounds = np.cumsum([0, *feeds["sizes"]])
    xs = [feeds["x"][a:b] for a, b in itertools.pairwise(bounds)]
    k = start
    for _ in range(int(feeds["m"])):
        if not feeds["skip"]:
            if not -len(xs) <= k < len(xs):
                return None
            old = xs.pop(k)
            if not -len(xs) <= k <= len(xs):
                return None
            xs.insert(k, np.concatenate([old, old]))
        k += step
    return np.concatenate(xs) if xs else None  # ConcatFromSequence of no element fails


def _check_outputs(model, lowered, feeds: dict, start: int = 0, step: int = 1) -> None:
    """The lowered model against the hand oracle and, where onnxruntime runs the original (1.20
    has no SplitToSequence of bools), against it too."""
    want = _expected(feeds, start, step)
    runs = [lowered]
    try:
        ort_session(model)
        runs.append(model)
    except Exception:  # a runtime without the kernel: the oracle alone
        pass
    for subject in runs:
        if want is None:
            with pytest.raises(Exception):  # noqa: B017 - onnxruntime's error, of its own kind
                run_ort(subject, feeds)
        else:
            (got,) = run_ort(subject, feeds)
            np.testing.assert_array_equal(got, want)


def _kinds(model) -> set[str]:
    return {node.op_type for graph in proto_graphs(model.graph) for node in graph.node}


_CASES = [([2, 0, 1], 3, False), ([2, 0, 1], 2, True), ([1, 2], 2, False), ([], 0, False)]


@pytest.mark.parametrize(("sizes", "trips", "skip"), _CASES)
@pytest.mark.parametrize("dtype", sorted(_TYPES))
def test_an_assignment_at_a_carried_counter_is_one_splice(dtype, sizes, trips, skip):
    model = parse(_assigning(dtype))
    lowered, _ = lower(model)
    kinds = _kinds(lowered)
    # the assignment: the table's entry scattered (ScatterND of a row of the flat layout's
    # shapes, ScatterElements of the ragged layout's first dims); no count of the position
    # from the end (Less, Where) and no check by a Gather of Range(n) for the erase
    assert {"ScatterND", "ScatterElements"} & kinds
    assert not {"Less", "Where", "Range"} & kinds
    _check_outputs(model, lowered, _feeds(dtype, sizes, trips, skip))


@pytest.mark.parametrize("sizes", [[1, 1], []])
def test_a_counter_past_the_list_fails_as_the_original_does(sizes):
    model = parse(_assigning())
    lowered, _ = lower(model)
    assert {"ScatterND", "ScatterElements"} & _kinds(lowered)
    _check_outputs(model, lowered, _feeds("float", sizes, len(sizes) + 1))


@pytest.mark.parametrize(
    ("start", "step"),
    [
        ("int64 {-2}", "int64 {1}"),  # -2, -1, 0, ..: positions from the end first
        ("int64 {1}", "int64 {-1}"),  # 1, 0, -1, ..
    ],
)
@pytest.mark.parametrize("dtype", ["float", "bool"])
def test_a_counter_that_may_be_negative_keeps_the_checked_edits(start, step, dtype):
    model = parse(_assigning(dtype, start=start, step=step))
    lowered, _ = lower(model)
    assert "Where" in _kinds(lowered) or "Less" in _kinds(lowered)
    for sizes, trips in (([2, 0, 1], 3), ([1, 2, 1, 1], 4), ([1], 1), ([1], 3)):
        feeds = _feeds(dtype, sizes, trips)
        _check_outputs(model, lowered, feeds, int(start[7:-1]), int(step[7:-1]))


def _loop(text: str) -> ir.Node:
    model = ir.from_proto(parse(text))
    return next(node for node in model.graph if node.op_type == "Loop")


@pytest.mark.parametrize(
    ("start", "step", "counts"),
    [
        ("int64 {0}", "int64 {1}", True),
        ("int64 {3}", "int64 {0}", True),
        ("int32 {0}", "int32 {2}", True),
        ("int64 {-1}", "int64 {1}", False),
        ("int64 {0}", "int64 {-1}", False),
        ("int64[1] {0}", "int64 {1}", False),
        ("int64 {0}", "int64[1] {1}", False),
    ],
)
def test_carried_counters(start, step, counts):
    dtype = start.split()[0].split("[")[0]
    text = f"""g (int64 m) => ({dtype} k_out, {dtype} other_out) {{
    t = Constant<value = bool {{1}}>()
    k0 = Constant<value = {start}>()
    o0 = Constant<value = {start}>()
    k_out, other_out = Loop(m, t, k0, o0) <body = body (int64 i, bool c, {dtype} k, {dtype} o)
                                                  => (bool c2, {dtype} k2, {dtype} o2) {{
        step = Constant<value = {step}>()
        k2 = Add(k, step)
        o2 = Sub(o, step)
        c2 = Identity(c)
    }}>
}}"""
    loop = _loop(text)
    body = loop.attributes["body"].as_graph()
    found = carried_counters(loop, StaticValues(18))
    assert found == ([body.inputs[2]] if counts else [])
