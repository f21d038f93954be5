"""Lists whose elements share one shape that changes from step to step (beam hypotheses rebuilt
each step from their parents, each one token longer: `hyps = [cat(hyps[p], t) for p, t in
...]`) are one stacked tensor carried by the loop, its shape changing as a whole: induction
over the loop proves the elements of every list value share a shape, though no shape holds
in every iteration. Where the elements put in may differ, the list stays ragged."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_or_both_fail,
    lower,
    lower_tensor_form,
    op_counts,
    parse,
    sequence_op_count,
)


def _beams(grow_second: str = "t1", second_init: str = "x") -> str:
    """Two hypotheses start as `x` and `second_init`; each step both are rebuilt from the
    parents `pick0[step]`, `pick1[step]` (run-time positions), the first grown by one token,
    the second by `grow_second`."""
    return f"""g (int64[T] x, int64[S] y, int64[K] pick0, int64[K] pick1, int64[K] tok0,
            int64[K] tok1, int64 steps) => (int64[?,?] hyps) {{
    t = Constant<value = bool {{1}}>()
    row = Constant<value = int64[1] {{1}}>()
    two = Constant<value = int64[1] {{2}}>()
    h0 = SequenceConstruct(x, {second_init})
    h = Loop(steps, t, h0) <body = step (int64 i, bool c, seq(int64[?]) hs)
            => (bool c2, seq(int64[?]) hs2) {{
        p0 = Gather(pick0, i)
        p1 = Gather(pick1, i)
        k0 = Gather(tok0, i)
        k1 = Gather(tok1, i)
        t0 = Reshape(k0, row)
        t1 = Reshape(k1, row)
        t2 = Expand(t1, two)
        e0 = SequenceAt(hs, p0)
        e1 = SequenceAt(hs, p1)
        g0 = Concat<axis = 0>(e0, t0)
        g1 = Concat<axis = 0>(e1, {grow_second})
        hs2 = SequenceConstruct(g0, g1)
        c2 = Identity(c)
    }}>
    hyps = ConcatFromSequence<axis = 0, new_axis = 1>(h)
}}"""


def _feeds(
    rng: np.random.Generator, steps: int, t: int = 3, s: int = 3, low: int = 0, high: int = 2
):
    return {
        "x": rng.integers(0, 9, t).astype(np.int64),
        "y": rng.integers(0, 9, s).astype(np.int64),
        # the parents and tokens of each step, one input per hypothesis (onnxruntime 1.20's
        # GatherSliceToSplitFusion names two fused pairs in one graph alike, and fails)
        **{f"pick{k}": rng.integers(low, high, max(steps, 1)).astype(np.int64) for k in (0, 1)},
        **{f"tok{k}": rng.integers(0, 9, max(steps, 1)).astype(np.int64) for k in (0, 1)},
        "steps": np.array(steps, np.int64),
    }


def test_hypotheses_rebuilt_each_step_are_one_stacked_tensor():
    """The list is stacked: its reads are Gathers of the carried tensor, no row counts,
    CumSum or Slices of a ragged buffer; same results for every parent (negative ones
    too: -2 and -1 are the two hypotheses) and step count, including none, and a failure
    where a parent is out of range (2, -3), as in the original."""
    model = parse(_beams())
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} - {"direct"} == {"stacked"}
    counts = op_counts(lowered)
    assert "CumSum" not in counts and "Slice" not in counts, counts
    rng = np.random.default_rng(3)
    for steps in (0, 1, 2, 4):
        for low, high in ((0, 2), (-2, 2), (-3, 3)):
            assert_same_or_both_fail(model, lowered, _feeds(rng, steps, low=low, high=high))


def test_the_default_pipeline_batches_the_rebuild():
    """With the pattern rules too, the two reads and the construct of the rebuilt list are
    one Gather of the stacked tensor at both parents."""
    model = parse(_beams())
    lowered, _report = lower(model)
    assert sequence_op_count(lowered) == 0
    rng = np.random.default_rng(4)
    for steps in (0, 1, 3):
        assert_same_or_both_fail(model, lowered, _feeds(rng, steps))


@pytest.mark.parametrize(
    ("grow_second", "second_init", "why"),
    [
        ("t2", "x", "the second hypothesis grows by two tokens, the first by one"),
        ("t1", "y", "the two start from inputs of different lengths"),
    ],
)
def test_elements_that_may_differ_stay_ragged(grow_second, second_init, why):
    """Where the elements put in may differ in length, the list is not stacked (a stack of
    unequal rows would fail where the original runs): it stays ragged, with the same results,
    and the stack at the end fails where the original's does."""
    model = parse(_beams(grow_second, second_init))
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert "stacked" not in {node.tier for node in report.nodes}, why
    rng = np.random.default_rng(5)
    for steps in (0, 1, 2):
        assert_same_or_both_fail(model, lowered, _feeds(rng, steps, t=3, s=3))
        assert_same_or_both_fail(model, lowered, _feeds(rng, steps, t=2, s=4))


def _beams_in_branch(else_list: str) -> str:
    """Each step rebuilds the hypotheses only where `grow[step]` is set; the else-branch
    returns `else_list`."""
    return f"""g (int64[T] x, int64[K] pick0, int64[K] pick1, int64[K] tok0, bool[K] grow,
            int64 steps) => (int64[?,?] hyps) {{
    t = Constant<value = bool {{1}}>()
    row = Constant<value = int64[1] {{1}}>()
    h0 = SequenceConstruct(x, x)
    h = Loop(steps, t, h0) <body = step (int64 i, bool c, seq(int64[?]) hs)
            => (bool c2, seq(int64[?]) hs2) {{
        p0 = Gather(pick0, i)
        p1 = Gather(pick1, i)
        k0 = Gather(tok0, i)
        t0 = Reshape(k0, row)
        e0 = SequenceAt(hs, p0)
        e1 = SequenceAt(hs, p1)
        g0 = Concat<axis = 0>(e0, t0)
        g1 = Concat<axis = 0>(e1, t0)
        b = Gather(grow, i)
        hs2 = If(b) <then_branch = th () => (seq(int64[?]) grown) {{
            grown = SequenceConstruct(g0, g1)
        }}, else_branch = el () => (seq(int64[?]) kept) {{
            kept = {else_list}
        }}>
        c2 = Identity(c)
    }}>
    hyps = ConcatFromSequence<axis = 0, new_axis = 1>(h)
}}"""


@pytest.mark.parametrize(
    ("else_list", "stacked"),
    [
        ("Identity(hs)", True),  # unchanged: still one shape
        ("SequenceConstruct(g0, e1)", False),  # one grown, one not: they may differ
    ],
)
def test_a_rebuild_in_a_branch_keeps_the_proof_only_where_both_branches_keep_one_shape(
    else_list, stacked
):
    model = parse(_beams_in_branch(else_list))
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert ("stacked" in {node.tier for node in report.nodes}) == stacked
    rng = np.random.default_rng(6)
    for steps in (0, 1, 3):
        for _ in range(3):
            fed = {
                "x": rng.integers(0, 9, 2).astype(np.int64),
                "pick0": rng.integers(-2, 2, max(steps, 1)).astype(np.int64),
                "pick1": rng.integers(-2, 2, max(steps, 1)).astype(np.int64),
                "tok0": rng.integers(0, 9, max(steps, 1)).astype(np.int64),
                "grow": rng.integers(0, 2, max(steps, 1)).astype(bool),
                "steps": np.array(steps, np.int64),
            }
            assert_same_or_both_fail(model, lowered, fed)
