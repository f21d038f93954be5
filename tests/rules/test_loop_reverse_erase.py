"""`for k in range(len(xs) - 1, -1, -1): if bad(k): del xs[k]`: a filter, not a loop.

Checked three ways: what it emits (no Loop left: the conditions batched, then one Compress),
what it refuses and why (a forward walk, a position not counted from the last, a condition that
reads the list, a trip count not the list's length), and the numbers against the original
under onnxruntime on lists of 0 to 6 elements, every condition true, none, some, in either
branch of the If.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_or_both_fail,
    lower,
    op_counts,
    parse,
    rule_check,
    sequence_op_count,
)

from seqlower.rule import Refusal
from seqlower.rules.loop_reverse_erase import _check

# TorchScript's export of the loop, its trip count a float ceil of (-1 - (len - 1)) / -1
FILTER = """
g (float[K,3] hyps, float[K] scores) => (float[?,3] y) {{
    one = Constant <value = int64 {{1}}> ()
    s = SplitToSequence <axis = 0, keepdims = 0> (hyps, one)
    n = SequenceLength (s)
    last = Sub (n, one)
    minus1 = Constant <value = int64 {{-1}}> ()
    span = Sub (minus1, last)
    fspan = Cast <to = 1> (span)
    fstep = Constant <value = float {{-1}}> ()
    ratio = Div (fspan, fstep)
    up = Ceil (ratio)
    count = Cast <to = 7> (up)
    {count}
    t = Constant <value = bool {{1}}> ()
    kept = Loop (trip, t, s) <body = b (int64 i, bool c, seq(float) xs)
                                  => (bool co, seq(float) out) {{
        k = {position}
        score = Gather <axis = 0> (scores, k)
        zero = Constant <value = float {{0}}> ()
        bad = Less (score, zero)
        {condition}
        out = If (flag) <
            then_branch = th () => (seq(float) a) {{ {then} }},
            else_branch = el () => (seq(float) d) {{ {other} }}>
        co = Identity (c)
    }}>
    axes = Constant <value = int64[1] {{0}}> ()
    total = ReduceSum <keepdims = 0> (hyps, axes)
    full = SequenceInsert (kept, total)
    y = ConcatFromSequence <axis = 0, new_axis = 1> (full)
}}"""
ERASE = "a = SequenceErase (xs, k)"
KEEP = "d = Identity (xs)"


def model(
    position="Sub (last, i)",
    condition="flag = Identity (bad)",
    then=ERASE,
    other=KEEP,
    count="trip = Identity (count)",
):
    return parse(
        FILTER.format(position=position, condition=condition, then=then, other=other, count=count)
    )


def feeds(rows: int, kind: str) -> dict:
    rng = np.random.default_rng(rows * 7 + len(kind))
    scores = rng.standard_normal(rows).astype(np.float32)
    if kind == "all":
        scores = -np.abs(scores) - 1
    elif kind == "none":
        scores = np.abs(scores) + 1
    hyps = rng.standard_normal((rows, 3)).astype(np.float32)
    return {"hyps": hyps, "scores": scores}


def every_list(original, lowered):
    for rows in range(7):
        for kind in ("some", "all", "none"):
            assert_same_or_both_fail(original, lowered, feeds(rows, kind))


@pytest.mark.parametrize(
    "variant",
    [
        {},
        # the erase in the else branch: kept where the condition holds
        {"condition": "flag = Not (bad)", "then": KEEP.replace("d =", "a ="),
         "other": ERASE.replace("a =", "d =")},
        # the trip count as the list's length
        {"count": "trip = Identity (n)"},
    ],
    ids=["export", "else-branch", "length"],
)  # fmt: skip
def test_a_filter_from_the_end_is_one_compress(variant):
    original = model(**variant)
    lowered, report = lower(original, target="generic")
    assert report.rules_fired["loop-reverse-erase"] == 1
    counts = op_counts(lowered)
    assert sequence_op_count(lowered) == 0
    assert "Loop" not in counts and "If" not in counts and counts["Compress"] == 1, counts
    every_list(original, lowered)


def test_scores_shorter_than_the_list_fail_in_both():
    original = model()
    lowered, _ = lower(original, target="generic")
    short = {"hyps": np.ones((4, 3), np.float32), "scores": -np.ones(2, np.float32)}
    assert_same_or_both_fail(original, lowered, short)


@pytest.mark.parametrize(
    ("variant", "reason"),
    [
        # forward: erasing at i moves the elements still to visit
        ({"position": "Identity (i)"}, "not counted down from an outer value"),
        # counted down from the one before the last
        ({"position": "Sub (n, i)"}, "not the last of the list"),
        # the condition reads the list
        ({"condition": "len = SequenceLength (xs)\n        flag = Greater (len, k)"},
         "reads the list"),
        # a trip count of its own
        ({"count": "two = Constant <value = int64 {2}> ()\n    trip = Identity (two)"},
         "not known to be the list's length"),
    ],
    ids=["forward", "not-last", "reads-list", "own-count"],
)  # fmt: skip
def test_what_is_not_a_filter_from_the_end_is_refused(variant, reason):
    original = model(**variant)
    refusal = rule_check(original, _check, "Loop")
    assert isinstance(refusal, Refusal)
    assert reason in refusal.reason
    lowered, report = lower(original, target="generic")
    assert "loop-reverse-erase" not in report.rules_fired
    every_list(original, lowered)
