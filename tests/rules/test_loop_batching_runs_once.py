"""loop-batch's sum of a loop whose trip count is proved at least one
(`seqlower.analysis.lower_bounds`): no guard for a loop of no iteration, neither the If that
keeps an initial value of run-time dims nor the Reshape of the terms to [0, *acc] beside a
static one.

    for step in range(n):                         # diffusers' LMS scheduler
        total = zeros_like(s); k = len(xs) - 1
        for j in range(min(step + 1, 4)):          # at least one coefficient
            total = total + cs[j] * xs[k]; k -= 1
        s = s + total

Three ways: what it emits (no If, no Where), what keeps the guard (a trip count that may be
0, the onnxruntime target's sum of run-time dims), and the same outputs as the original under
onnxruntime: no step, one, several, a negative count, negative positions, reads past the end
(both fail), float16 and float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_or_both_fail,
    lower,
    op_counts,
    parse,
    proto_graphs,
    run_ort,
)

RNG = np.random.default_rng(11)

# the sum starts from zeros of the sample's run-time dims; the coefficients of a step are a row
# of a table
LMS = """g ({t}[N,D] x, {t}[S,{order}] table, int64 n, {t}[D] s0) => ({t}[?] s_out) {{
    t = Constant<value = bool {{1}}>()
    s_out = Loop(n, t, s0) <body = outer (int64 i, bool c, {t}[?] s) => (bool c2, {t}[?] s2) {{
        c2 = Identity(c)
        one = Constant<value = int64 {{1}}>()
        four = Constant<value = int64 {{4}}>()
        i1 = Add(i, one)
        m = Min(i1, four)
        cs = Gather(table, i)
        xs = SplitToSequence<axis = 0, keepdims = 0>(x)
        nx = SequenceLength(xs)
        k0 = Sub(nx, one)
        dims = Shape(s)
        zeros = ConstantOfShape<value = {t}[1] {{0}}>(dims)
        total, kf = Loop(m, t, zeros, k0) <body = inner (int64 j, bool c3, {t}[?] acc, int64 k)
                                            => (bool c4, {t}[?] acc2, int64 k2) {{
            c4 = Identity(c3)
            cj = Gather(cs, j)
            e = SequenceAt(xs, k)
            term = Mul(cj, e)
            acc2 = Add(acc, term)
            step = Constant<value = int64 {{1}}>()
            k2 = Sub(k, step)
        }}>
        s2 = Add(s, total)
    }}>
}}"""

# the sum starts from a constant of static dims, the rows read have a run-time width
STATIC = """g (float[N,D] x, float[C] cs, int64 n, float[3] s0) => (float[3] s_out) {
    t = Constant<value = bool {1}>()
    s_out = Loop(n, t, s0) <body = outer (int64 i, bool c, float[3] s) => (bool c2, float[3] s2) {
        c2 = Identity(c)
        one = Constant<value = int64 {1}>()
        four = Constant<value = int64 {4}>()
        i1 = Add(i, one)
        m = Min(i1, four)
        xs = SplitToSequence<axis = 0, keepdims = 0>(x)
        zeros = Constant<value = float[3] {0, 0, 0}>()
        total = Loop(m, t, zeros) <body = inner (int64 j, bool c3, float[3] acc)
                                            => (bool c4, float[3] acc2) {
            c4 = Identity(c3)
            cj = Gather(cs, j)
            e = SequenceAt(xs, j)
            term = Mul(cj, e)
            acc2 = Add(acc, term)
        }>
        s2 = Add(s, total)
    }>
}"""

MAYBE_NONE = ("i1 = Add(i, one)", "i1 = Identity(i)")  # min(step, 4): none in the first step
DTYPES = {"float": np.float32, "double": np.float64, "float16": np.float16}


def lms(dtype: str = "float", order: int = 4, inner_row: bool = False) -> str:
    """`order` coefficients in each row of the table, for min(step + 1, 4) terms; the row of
    the step read before the inner loop, or in its body (`inner_row`)."""
    text = LMS.format(t=dtype, order=order)
    if inner_row:
        text = text.replace("        cs = Gather(table, i)\n", "")
        read = "cs = Gather(table, i)\n            cj = Gather(cs, j)"
        text = text.replace("cj = Gather(cs, j)", read)
    return text


def feeds(rows: int, width: int, coefficients: int, steps: int, dtype=np.float32) -> dict:
    return {
        "x": RNG.standard_normal((rows, width)).astype(dtype),
        "cs": RNG.standard_normal(coefficients).astype(dtype),
        "n": np.array(steps, np.int64),
        "s0": RNG.standard_normal(width).astype(dtype),
    }


def lms_feeds(rows: int, order: int, table: int, steps: int, dtype=np.float32) -> dict:
    return {
        "x": RNG.standard_normal((rows, 3)).astype(dtype),
        "table": RNG.standard_normal((table, order)).astype(dtype),
        "n": np.array(steps, np.int64),
        "s0": RNG.standard_normal(3).astype(dtype),
    }


def reads_of(model, name: str) -> list[str]:
    """The operators that read the value `name`, in every graph."""
    return [n.op_type for g in proto_graphs(model.graph) for n in g.node if name in n.input]


# -- what it emits ---------------------------------------------------------------------------


def test_a_sum_of_at_least_one_term_needs_no_if():
    lowered, report = lower(parse(lms()))
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    counts = op_counts(lowered)
    assert counts["Loop"] == 1  # the sampling loop only
    assert counts["If"] == 0 and counts["Greater"] == 0
    assert counts["ReduceSum"] == 1


def named(model, part: str) -> list:
    """The nodes of every graph whose name holds `part`."""
    return [n for g in proto_graphs(model.graph) for n in g.node if part in n.name]


def test_coefficients_read_within_their_row_need_no_check():
    """cs = table[step] has 4 entries, M = min(step + 1, 4) <= 4: the rows read are cs[:M],
    with no check that M passes the row."""
    lowered, _ = lower(parse(lms()))
    assert reads_of(lowered, "cs") == ["Slice"]
    assert not named(lowered, "rows_check")


def test_coefficients_that_may_run_past_the_row_keep_the_check():
    """Rows of 3 coefficients, up to 4 terms: not proved within the row, so the read keeps
    loop-batch's check (the Slice end fails where an iteration would read past the row)."""
    lowered, _ = lower(parse(lms(order=3)))
    assert len(named(lowered, "rows_check")) == 1


def test_the_coefficients_gathered_in_the_body_are_a_slice_of_their_row():
    """Gather(row, Range(0, M)) for M = min(step + 1, 4) <= 4, the row's length (the row
    computed in the body, as TorchScript exports `coeffs[step, o]`): the first M entries,
    Slice(row, 0, M), one Slice and a Reshape of M where onnxruntime's optimizer makes the
    Range and the Gather a Slice of three Unsqueezes."""
    lowered, _ = lower(parse(lms(inner_row=True)))
    (sliced,) = named(lowered, "counted_rows")
    assert sliced.op_type == "Slice"
    # len(xs) (a dim of x), table[step] and the reversed reads only
    assert op_counts(lowered)["Gather"] == 3


def test_coefficients_gathered_past_their_row_stay_a_gather():
    """Rows of 3, up to 4 terms: Gather(row, Range(0, M)) fails where an iteration would
    read past the row (a Slice would clamp)."""
    lowered, _ = lower(parse(lms(order=3, inner_row=True)))
    assert not named(lowered, "counted_rows")
    assert op_counts(lowered)["Gather"] == 4


def test_a_static_sum_of_at_least_one_term_needs_no_reshape_of_the_terms():
    lowered, report = lower(parse(STATIC))
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    counts = op_counts(lowered)
    assert counts["Loop"] == 1 and counts["ReduceSum"] == 1
    assert counts["Where"] == 0 and counts["If"] == 0


# -- what keeps the guard ----------------------------------------------------------------------


def test_a_trip_count_that_may_be_zero_keeps_the_if():
    lowered, report = lower(parse(lms().replace(*MAYBE_NONE)))
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert op_counts(lowered)["If"] == 1


def test_a_trip_count_that_may_be_zero_keeps_the_reshape_of_the_terms():
    lowered, report = lower(parse(STATIC.replace(*MAYBE_NONE)))
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert op_counts(lowered)["Where"] == 1


def test_the_onnxruntime_target_still_keeps_the_loop_of_a_sum_of_run_time_dims():
    """One term batched costs more than the loop of one iteration, even with no If
    (diffusers' LMS with one step: 0.92x batched against 0.98x kept)."""
    lowered, _ = lower(parse(lms()), target="onnxruntime")
    assert op_counts(lowered)["Loop"] == 2
    assert op_counts(lowered)["ReduceSum"] == 0


# -- equal outputs ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("inner_row", [False, True])
@pytest.mark.parametrize("maybe_none", [False, True])
@pytest.mark.parametrize(
    ("rows", "order", "table", "steps"),
    [
        (4, 4, 9, 0),  # no step: the sampling loop runs nothing
        (4, 4, 9, 1),  # one coefficient
        (4, 4, 9, 7),  # 4 coefficients from the fourth step on
        (4, 4, 9, -2),  # a negative count: no step
        (1, 4, 9, 2),  # xs[-1] of one row, then xs[-2]: both fail
        (4, 4, 2, 3),  # the table's row 2 in the third step: both fail
        (5, 3, 9, 3),  # rows of 3 coefficients, 3 terms at most
        (4, 3, 9, 5),  # rows of 3, the fourth term in the fourth step: both fail
    ],
)
def test_the_sum_computes_what_the_loops_compute(
    dtype, inner_row, maybe_none, rows, order, table, steps
):
    text = lms(dtype, order, inner_row)
    if maybe_none:
        text = text.replace(*MAYBE_NONE)
    model = parse(text)
    lowered, _ = lower(model)
    given = lms_feeds(rows, order, table, steps, DTYPES[dtype])
    if dtype != "float16":
        assert_same_or_both_fail(model, lowered, given)
        return
    # float16: the batched sum adds in another order than the loop (up to 4 terms a step, over
    # 7 steps), a few units in the last place apart (one is 2**-10 relative)
    try:
        (want,) = run_ort(model, given)
    except Exception:  # onnxruntime raises its own error types
        with pytest.raises(Exception):  # noqa: B017
            run_ort(lowered, given)
        return
    (got,) = run_ort(lowered, given)
    assert got.dtype == want.dtype == np.float16 and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=8 * 2.0**-10, atol=1e-3)


@pytest.mark.parametrize("maybe_none", [False, True])
@pytest.mark.parametrize(
    ("rows", "width", "coefficients", "steps"),
    [(4, 3, 4, 0), (4, 3, 4, 1), (4, 3, 4, 6), (4, 1, 4, 3), (2, 3, 4, 3), (4, 3, 4, -1)],
)
def test_the_static_sum_computes_what_the_loops_compute(
    maybe_none, rows, width, coefficients, steps
):
    """A width of 1 broadcasts into the sum's 3; 2 rows read at j = 2: both fail."""
    text = STATIC.replace(*MAYBE_NONE) if maybe_none else STATIC
    model = parse(text)
    lowered, _ = lower(model)
    assert_same_or_both_fail(model, lowered, feeds(rows, width, coefficients, steps))
