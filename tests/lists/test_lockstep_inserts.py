"""Lists started by SequenceEmpty and grown by SequenceInsert whose elements share one shape
known only at run time (beam search's per-step lists: `best = []; for j ...:
best.append(cat(hyps[j], t))`, `kept = []; for k ...: if keep[k]: kept.append(best[p])`, every
hypothesis one token longer each step) are one stacked tensor. The empty list is `[0, 1, ..,
1]`; an insert into a list that may be empty broadcasts the data to the shape of x first
(Expand: the same data where the list has elements), so that no Concat ever joins an empty
`[0, 1]` to a `[1, d]` (checked under the ONNX reference evaluator, which refuses such a
Concat). Lists whose elements may differ in
shape (a list that keeps what earlier steps put in, grown by longer hypotheses each step) stay
ragged."""

from __future__ import annotations

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from support import (
    assert_same_or_both_fail,
    lower,
    lower_tensor_form,
    op_counts,
    parse,
    run_ort,
    sequence_op_count,
)


def _beam(kept_init: str = "e1", grow: str = "bs2 = SequenceInsert(bs, g)") -> str:
    """Hypotheses `x, x`; each step every hypothesis grows by the step's token into `best`
    (from an empty list), then `hs` becomes the `best[pick[r]]` whose `keep[r]` is set, put
    into `kept_init` (the empty `e1`, or `hs`: the step's list, which keeps the shorter
    hypotheses of earlier steps)."""
    return f"""g (int64[T] x, int64[K] tok, int64[Q] pick, bool[Q] keep, int64 steps)
            => (int64 n, int64[?] first, int64[?] last) {{
    t = Constant<value = bool {{1}}>()
    row = Constant<value = int64[1] {{1}}>()
    minus = Constant<value = int64 {{-1}}>()
    zero = Constant<value = int64 {{0}}>()
    q = Size(pick)
    h0 = SequenceConstruct(x, x)
    h = Loop(steps, t, h0) <body = step (int64 i, bool c, seq(int64[?]) hs)
            => (bool c2, seq(int64[?]) hs2) {{
        k = Gather(tok, i)
        tk = Reshape(k, row)
        m = SequenceLength(hs)
        e0 = SequenceEmpty<dtype = 7>()
        best = Loop(m, t, e0) <body = grow (int64 j, bool cj, seq(int64[?]) bs)
                => (bool cj2, seq(int64[?]) bs2) {{
            e = SequenceAt(hs, j)
            g = Concat<axis = 0>(e, tk)
            {grow}
            cj2 = Identity(cj)
        }}>
        e1 = SequenceEmpty<dtype = 7>()
        hs2 = Loop(q, t, {kept_init}) <body = choose (int64 r, bool cr, seq(int64[?]) ks)
                => (bool cr2, seq(int64[?]) ks2) {{
            p = Gather(pick, r)
            b = Gather(keep, r)
            ks2 = If(b) <then_branch = th () => (seq(int64[?]) put) {{
                chosen = SequenceAt(best, p)
                put = SequenceInsert(ks, chosen)
            }}, else_branch = el () => (seq(int64[?]) same) {{
                same = Identity(ks)
            }}>
            cr2 = Identity(cr)
        }}>
        c2 = Identity(c)
    }}>
    n = SequenceLength(h)
    first = SequenceAt(h, zero)
    last = SequenceAt(h, minus)
}}"""


def _feeds(rng: np.random.Generator, steps: int, keep: list[bool], t: int = 3, low: int = 0):
    q = len(keep)
    return {
        "x": rng.integers(0, 9, t).astype(np.int64),
        "tok": rng.integers(0, 9, max(steps, 1)).astype(np.int64),
        "pick": rng.integers(low, 2, q).astype(np.int64),
        "keep": np.array(keep, np.bool_).reshape(q),
        "steps": np.array(steps, np.int64),
    }


# keep patterns: two kept (the list stays two long), one, none (an empty list, and the next
# step's loops run zero times), and no pick at all (the choosing loop runs zero times)
_KEEPS = ([True, True], [False, True], [True, False, True], [False, False], [])


def test_lists_grown_from_empty_in_lockstep_are_stacked():
    """Every list is stacked, each insert into a list that may be empty an Expand of the data
    to the shape of the tensor put in; no CumSum or Slice of a ragged buffer. Same results as
    the original for every step count (none too), keep pattern (empty lists, zero-iteration
    loops) and pick (negative ones read from the end, -3 fails in both)."""
    model = parse(_beam())
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} - {"direct"} == {"stacked"}
    counts = op_counts(lowered)
    assert "CumSum" not in counts and "Slice" not in counts, counts
    expands = [
        node for graph in _graphs(lowered.graph) for node in graph.node if node.op_type == "Expand"
    ]
    assert len(expands) >= 2, "the two inserts into lists that start empty broadcast first"
    rng = np.random.default_rng(7)
    for steps in (0, 1, 2, 3):
        for keep in _KEEPS:
            for low in (0, -2, -3):
                assert_same_or_both_fail(model, lowered, _feeds(rng, steps, keep, low=low))


def test_no_concat_joins_an_empty_list_of_other_dims():
    """The ONNX reference evaluator refuses a Concat whose other dims differ (onnxruntime may
    let an empty input through): the lowered model runs there, and agrees with onnxruntime,
    on inputs whose lists start empty and are then grown."""
    model = parse(_beam())
    lowered, _report = lower_tensor_form(model)
    rng = np.random.default_rng(8)
    for steps, keep in ((1, [True, True]), (2, [False, True]), (3, [True, False, True])):
        feeds = _feeds(rng, steps, keep)
        feeds["pick"] = np.array([0, -1, 0][: len(keep)], np.int64)  # in range every step
        expected = run_ort(model, feeds)
        got = ReferenceEvaluator(lowered).run(None, feeds)
        for want, have in zip(expected, got, strict=True):
            np.testing.assert_array_equal(want, have)


def test_the_default_pipeline_agrees():
    """With the pattern rules too (the unconditional appends become scan outputs)."""
    model = parse(_beam())
    lowered, _report = lower(model)
    assert sequence_op_count(lowered) == 0
    rng = np.random.default_rng(9)
    for steps in (0, 1, 3):
        for keep in _KEEPS:
            assert_same_or_both_fail(model, lowered, _feeds(rng, steps, keep))


_SLICED = """one1 = Constant<value = int64[1] {1}>()
            zero1 = Constant<value = int64[1] {0}>()
            jr = Reshape(j, row)
            j1 = Add(jr, one1)
            part = Slice(g, zero1, j1)
            bs2 = SequenceInsert(bs, part)"""


# the first iteration starts the list anew with an ungrown hypothesis, the others grow it
_RESTARTED = """fresh = SequenceEmpty<dtype = 7>()
            alone = SequenceInsert(fresh, e)
            grown = SequenceInsert(bs, g)
            one1 = Constant<value = int64 {1}>()
            first_j = Less(j, one1)
            bs2 = If(first_j) <then_branch = a () => (seq(int64[?]) ra) {
                ra = Identity(alone)
            }, else_branch = o () => (seq(int64[?]) ro) {
                ro = Identity(grown)
            }>"""


@pytest.mark.parametrize(
    ("kept_init", "grow", "stacked", "why"),
    [
        (
            "hs",
            "bs2 = SequenceInsert(bs, g)",
            False,  # its hypotheses, grown each step, then differ too
            "the kept list starts as the step's list: its hypotheses are one token shorter",
        ),
        (
            "e1",
            "both = SequenceInsert(bs, g)\n            bs2 = SequenceInsert(both, e)",
            False,
            "each step puts a grown and an ungrown hypothesis into one list",
        ),
        ("e1", _SLICED, False, "the tensor put in has a length that changes with the iteration"),
        ("e1", _RESTARTED, False, "an ungrown hypothesis put into an empty list flows on"),
    ],
)
def test_elements_that_may_differ_stay_ragged(kept_init, grow, stacked, why):
    """Where the tensors put into a list may differ in shape, the list is not stacked (a
    stack of unequal rows would fail where the original runs), nor is a list whose elements
    are read from such a list. Same results, or both fail."""
    model = parse(_beam(kept_init, grow))
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    tiers = {name: node.tier for node in report.nodes for name in node.outputs}
    assert tiers["put"] != "stacked", why
    assert (tiers["bs2"] == "stacked") == stacked, why
    rng = np.random.default_rng(10)
    for steps in (0, 1, 2, 3):
        for keep in _KEEPS:
            assert_same_or_both_fail(model, lowered, _feeds(rng, steps, keep))


def _graphs(graph):
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.g.node:
                yield from _graphs(attribute.g)


_PAIR = "pair = Concat<axis = 0>(start, start)\n            rows = Gather(x, pair)"
_SLICE = "end = Add(start, two)\n            rows = Slice(x, start, end)"


def _kept(dtype: str, cut: str = _PAIR) -> str:
    """`kept = []; for r in range(len(keep)): if keep[r]: kept.append(x[[r, r]])` (or
    `x[r:r + 2]`, one row at the end of x): rows of a run-time width put in where `keep[r]` is
    set."""
    return f"""g ({dtype}[T, W] x, bool[Q] keep) => (int64 n, {dtype}[?, ?] last) {{
    t = Constant<value = bool {{1}}>()
    minus = Constant<value = int64 {{-1}}>()
    q = Size(keep)
    e = SequenceEmpty<dtype = {_DTYPES[dtype]}>()
    kept = Loop(q, t, e) <body = choose (int64 r, bool cr, seq({dtype}[?, ?]) ks)
            => (bool cr2, seq({dtype}[?, ?]) ks2) {{
        b = Gather(keep, r)
        ks2 = If(b) <then_branch = th () => (seq({dtype}[?, ?]) put) {{
            two = Constant<value = int64[1] {{2}}>()
            shape = Constant<value = int64[1] {{1}}>()
            start = Reshape(r, shape)
            {cut}
            put = SequenceInsert(ks, rows)
        }}, else_branch = el () => (seq({dtype}[?, ?]) same) {{
            same = Identity(ks)
        }}>
        cr2 = Identity(cr)
    }}>
    n = SequenceLength(kept)
    last = SequenceAt(kept, minus)
}}"""


_DTYPES = {"float16": 10, "int8": 3, "uint16": 4, "bool": 9, "double": 11}


@pytest.mark.parametrize("dtype", sorted(_DTYPES))
def test_a_list_kept_from_empty_is_stacked_for_every_element_type(dtype):
    """Rows `x[[r, r]]` are put in where `keep[r]` is set: each is two rows of x's width,
    the same in every iteration, though the width is known only at run time (and may be 0).
    Stacked; same results for every keep pattern, none set (an empty list: its last element
    fails in both) and no iteration at all."""
    model = parse(_kept(dtype))
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} - {"direct"} == {"stacked"}
    rng = np.random.default_rng(11)
    for t, w in ((5, 3), (6, 0), (2, 1)):  # (2, 1): r = 2 is past x's rows, both fail
        for keep in ([True, False, True], [False, False, False], [], [False, True]):
            values = rng.integers(0, 2 if dtype == "bool" else 9, (t, w))
            feeds = {
                "x": values.astype(np.dtype(dtype)),
                "keep": np.array(keep, np.bool_).reshape(len(keep)),
            }
            assert_same_or_both_fail(model, lowered, feeds)


def test_slices_cut_short_at_the_end_stay_unstacked():
    """`x[r:r + 2]` is one row at the end of x: the tensors put in may differ in shape, so
    the list is not stacked, and holds the short slice as the original does."""
    model = parse(_kept("double", _SLICE))
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert "stacked" not in {node.tier for node in report.nodes}
    for keep in ([True, True, True], [False, True], []):
        feeds = {"x": np.arange(6.0).reshape(3, 2), "keep": np.array(keep, np.bool_)}
        assert_same_or_both_fail(model, lowered, feeds)
