"""`loop-concat-to-scan` on an If that grows several accumulators at once (a detection filter:
`if score > t: boxes.append(..); scores.append(..)`), and on pieces the branch computes with
operators that could fail but that the body runs in every iteration anyway.

    acc1, accs1 = If(c, then: (Concat(acc, p), Concat(accs, q)), else: (acc, accs))
        -> scan outputs of p, q and c; Compress of each after the loop (no If left where p and
           q can be computed in every iteration; else the If gives p or zeros, q or zeros)
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import lower, lower_and_compare, op_counts, parse, rule_check, rules_without

from seqlower.rule import Refusal
from seqlower.rules.loop_accumulators import _check

RULE = "loop-concat-to-scan"
WITHOUT_BATCHING = rules_without("loop-batch")


def _model(
    row_in_branch: str, extra_output: bool = False, score: str = "su = Unsqueeze(s, ax)"
) -> str:
    """A Loop over i < m keeping 2 * x[i] and the row's sum where the sum is positive; the
    branch reads its row with `row_in_branch` (`row2 = ...`). With `extra_output`, the If also
    counts the rows kept (a value that is no accumulator)."""
    count_out = ", int64 n1" if extra_output else ""
    count_else = ", int64 n2" if extra_output else ""
    count_then = "one = Constant<value = int64 {1}>()\n n1 = Add(k, one)" if extra_output else ""
    if_out = ", k2" if extra_output else ""
    k2 = "" if extra_output else "k2 = Identity(k)"
    return f"""g (float[N,3] x, float[?,3] a0, float[?] b0, int64 m) => (float[?,3] ya, float[?] yb,
                                                                  int64 kept) {{
    t = Constant<value = bool {{1}}>()
    z = Constant<value = int64 {{0}}>()
    ya, yb, kept = Loop(m, t, a0, b0, z) <body = body (int64 i, bool c, float[?,3] acc,
                                                       float[?] accs, int64 k)
                                          => (bool c2, float[?,3] g, float[?] gs, int64 k2) {{
        c2 = Identity(c)
        row = Gather<axis = 0>(x, i)
        s = ReduceSum<keepdims = 0>(row)
        zero = Constant<value = float {{0}}>()
        keep = Greater(s, zero)
        {k2}
        g, gs{if_out} = If(keep) <then_branch = then_graph ()
                                   => (float[?,3] g1, float[?] gs1{count_out}) {{
            {row_in_branch}
            two = Constant<value = float {{2}}>()
            r2 = Mul(row2, two)
            ax = Constant<value = int64[1] {{0}}>()
            u = Unsqueeze(r2, ax)
            g1 = Concat<axis = 0>(acc, u)
            {score}
            gs1 = Concat<axis = 0>(accs, su)
            {count_then}
        }}, else_branch = else_graph () => (float[?,3] g2, float[?] gs2{count_else}) {{
            g2 = Identity(acc)
            gs2 = Identity(accs)
            {"n2 = Identity(k)" if extra_output else ""}
        }}>
    }}>
}}"""


TWIN = "row2 = Gather<axis = 0>(x, i)"  # the body reads x[i] in every iteration already
# x[i + 1 - 1]: the same row, but not a node the body runs: it could fail where the branch
# does not run, so it stays in the If
OTHER = (
    "o = Constant<value = int64 {1}>()\n ip = Add(i, o)\n im = Sub(ip, o)\n"
    " row2 = Gather<axis = 0>(x, im)"
)
X = np.array([[1, -2, 3], [-2, 0, -4], [1, 1, 1], [0, 0, -1], [5, 0, 0]], np.float32)


def _feeds(m: int) -> dict[str, np.ndarray]:
    return {
        "x": X,
        "a0": np.full((1, 3), 7, np.float32),
        "b0": np.array([9], np.float32),
        "m": np.array(m, np.int64),
    }


def _expected(m: int) -> tuple[np.ndarray, np.ndarray, int]:
    rows = [X[i] for i in range(m) if X[i].sum() > 0]
    ya = np.concatenate([np.full((1, 3), 7, np.float32), *[2 * r[None] for r in rows]])
    yb = np.array([9, *[r.sum() for r in rows]], np.float32)
    return ya, yb, len(rows)


@pytest.mark.parametrize("m", [0, 1, 5])
def test_an_if_growing_two_accumulators_from_a_row_the_body_reads_anyway_goes(m):
    model = parse(_model(TWIN))
    lowered, report, (ya, yb, _) = lower_and_compare(
        model, _feeds(m), target="generic", rules=WITHOUT_BATCHING
    )
    want_a, want_b, _ = _expected(m)
    np.testing.assert_array_equal(ya, want_a)
    np.testing.assert_array_equal(yb, want_b)
    assert report.rules_fired[RULE] == 2
    ops = op_counts(lowered)
    assert ops["If"] == 0 and ops["Compress"] == 2
    assert ops["Concat"] == 2  # each initial value joined once, after the loop


@pytest.mark.parametrize("m", [0, 2, 5])
def test_a_branch_read_that_could_fail_keeps_the_if_for_that_value_alone(m):
    # the scores' piece moves out (the body computes the sum anyway); the boxes' piece stays in
    # the If, which then gives it or zeros
    model = parse(_model(OTHER))
    lowered, report, (ya, yb, _) = lower_and_compare(
        model, _feeds(m), target="generic", rules=WITHOUT_BATCHING
    )
    want_a, want_b, _ = _expected(m)
    np.testing.assert_array_equal(ya, want_a)
    np.testing.assert_array_equal(yb, want_b)
    assert report.rules_fired[RULE] == 2
    ops = op_counts(lowered)
    assert ops["If"] == 1 and ops["Compress"] == 2


SUM_OF_ROW2 = "sr = ReduceSum<keepdims = 0>(row2)\n su = Unsqueeze(sr, ax)"


@pytest.mark.parametrize("m", [0, 2, 5])
def test_pieces_that_could_fail_in_an_if_growing_several_values_are_refused(m):
    # the If would stay, giving each piece or zeros: for several values the stacking and masking
    # after the loop cost more than the copying saved, so the rule refuses
    model = parse(_model(OTHER, score=SUM_OF_ROW2))
    _, report, (ya, yb, _) = lower_and_compare(
        model, _feeds(m), target="generic", rules=WITHOUT_BATCHING
    )
    want_a, want_b, _ = _expected(m)
    np.testing.assert_array_equal(ya, want_a)
    np.testing.assert_allclose(yb, want_b, rtol=1e-6)
    assert RULE not in report.rules_fired
    found = rule_check(model_after_lists(model), _check, "Loop")
    assert isinstance(found, Refusal)
    assert "grows several values and a branch computes the appended tensor with Gather" in str(
        found.reason
    )


def model_after_lists(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its lists in their tensor form (what this rule reads)."""
    lowered, _ = lower(model, rules=rules_without("loop-batch", RULE))
    return lowered


@pytest.mark.parametrize("m", [0, 3, 5])
def test_an_if_that_also_gives_another_value_keeps_it(m):
    model = parse(_model(TWIN, extra_output=True))
    lowered, report, (ya, yb, kept) = lower_and_compare(
        model, _feeds(m), target="generic", rules=WITHOUT_BATCHING
    )
    want_a, want_b, count = _expected(m)
    np.testing.assert_array_equal(ya, want_a)
    np.testing.assert_array_equal(yb, want_b)
    assert int(kept) == count
    assert report.rules_fired[RULE] == 2
    # the If, rebuilt with the count alone, then becomes a Where
    assert report.rules_fired.get("if-to-where") == 1
    assert op_counts(lowered)["If"] == 0


def test_batched_whole_the_loop_goes():
    model = parse(_model(TWIN).replace("Loop(m,", "Loop(n,").replace(
        "t = Constant", "shp = Shape(x)\n    zi = Constant<value = int64 {0}>()\n"
        "    n = Gather(shp, zi)\n    t = Constant"
    ))  # fmt: skip
    lowered, _, (ya, yb, _) = lower_and_compare(model, _feeds(0), target="generic")
    want_a, want_b, _ = _expected(len(X))
    np.testing.assert_array_equal(ya, want_a)
    np.testing.assert_array_equal(yb, want_b)
    assert op_counts(lowered)["Loop"] == 0
