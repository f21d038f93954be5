"""`while-length-bound`: `while len(out) < n: out.append(x)` runs a counted number of times.

Loop(M, c0, s0, body: s1 = SequenceInsert(s, e); c' = Less(SequenceLength(s1), n))
    -> Loop(Min(K, M), true, s0, body: s1 = SequenceInsert(s, e); c' = true)
"""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, rule_check

from seqlower.rule import Refusal
from seqlower.rules.while_length import WhilePlan, _check

BIG = "9223372036854775807"


def _model(
    condition: str = "c2 = Less(l, n)",
    first: str = "c0 = Less(l0, n)",
    trip: str = "big",
    insert: str = "acc2 = SequenceInsert(acc, pad)",
) -> str:
    return f"""g (float[N,3] x, int64 n, int64 m) => (float[?,3] y) {{
    big = Constant<value = int64 {{{BIG}}}>()
    s0 = SplitToSequence<axis = 0, keepdims = 0>(x)
    l0 = SequenceLength(s0)
    {first}
    pad = Constant<value = float[3] {{0, 1, 2}}>()
    s = Loop({trip}, c0, s0) <body = body (int64 i, bool c, seq(float) acc)
                                => (bool c2, seq(float) acc2) {{
        {insert}
        l = SequenceLength(acc2)
        {condition}
    }}>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""


X = np.arange(9, dtype=np.float32).reshape(3, 3)


def _feeds(n: int, rows: int = 3, m: int = 100) -> dict[str, np.ndarray]:
    return {"x": X[:rows], "n": np.array(n, np.int64), "m": np.array(m, np.int64)}


def _padded(n: int, rows: int = 3, first_always: bool = False, m: int = 100) -> np.ndarray:
    ids = [*X[:rows]]
    runs = 0
    if first_always or len(ids) < n:
        while runs < m:
            ids.append(np.array([0, 1, 2], np.float32))
            runs += 1
            if not len(ids) < n:
                break
    return np.stack(ids)


@pytest.mark.parametrize("n", [-(2**62), -1, 0, 2, 3, 4, 8])
def test_a_list_padded_to_a_length_becomes_a_counted_loop(n):
    model = parse(_model(), opset=17)
    lowered, report, (y,) = lower_and_compare(model, _feeds(n))
    np.testing.assert_array_equal(y, _padded(n))
    assert report.rules_fired["while-length-bound"] == 1
    assert op_counts(lowered)["Less"] <= 2  # none left in a loop body


@pytest.mark.parametrize("n", [0, 2, 5])
def test_an_empty_list_is_padded_from_nothing(n):
    model = parse(_model(), opset=17)
    _, _, (y,) = lower_and_compare(model, _feeds(max(n, 1), rows=0))
    np.testing.assert_array_equal(y, _padded(max(n, 1), rows=0))


@pytest.mark.parametrize("n", [1, 3, 6])
def test_a_first_iteration_that_always_runs_and_a_bound_on_the_right(n):
    model = parse(
        _model(condition="c2 = Greater(n, l)", first="c0 = Constant<value = bool {1}>()"),
        opset=17,
    )
    _, report, (y,) = lower_and_compare(model, _feeds(n))
    np.testing.assert_array_equal(y, _padded(n, first_always=True))
    assert report.rules_fired["while-length-bound"] == 1


@pytest.mark.parametrize("m", [0, 1, 2, 10])
def test_a_given_trip_count_still_bounds_it(m):
    model = parse(_model(trip="m"), opset=17)
    lowered, _, (y,) = lower_and_compare(model, _feeds(7, m=m))
    np.testing.assert_array_equal(y, _padded(7, m=m))
    assert op_counts(lowered)["Min"] == 1


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"condition": "k = Less(l, n)\n tt = Constant<value = bool {1}>()\n c2 = And(k, tt)"},
         "not a length compared"),
        ({"condition": "n2 = Add(n, i)\n c2 = Less(l, n2)"}, "changes in the body"),
        ({"condition": "c2 = Less(n, l)"}, "does not compare a list's length"),
        ({"insert": "zero = Constant<value = int64 {0}>()\n"
                    " acc2 = SequenceInsert(acc, pad, zero)"}, "exactly one appended"),
    ],
)  # fmt: skip
def test_other_loops_are_refused_with_the_reason(change, reason):
    model = parse(_model(**change), opset=17)
    found = rule_check(model, _check, "Loop")
    assert isinstance(found, Refusal) and reason in found.reason, found
    _, report = lower(model)
    assert "while-length-bound" not in report.rules_fired


def test_the_plan_names_the_list_and_its_bound():
    plan = rule_check(parse(_model(), opset=17), _check, "Loop")
    assert isinstance(plan, WhilePlan)
    assert (plan.index, plan.bound.name) == (0, "n")
