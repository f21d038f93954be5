"""loop-counter-index: a counter a counted Loop carries beside its iteration number is that
number scaled; and loop-batch's sum of dims known at run time only, which the counter's reads
then reach (`sum(c * x for c, x in zip(coeffs, reversed(xs)))`, diffusers' LMS scheduler).

Three ways: what each emits, what each refuses (and why), and the same outputs as the original
under onnxruntime: negative positions, reads past the list (both fail), no iteration, a negative
trip count, an empty list, int32 counters, a term that broadcasts the sum up.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_same_or_both_fail,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    proto_graphs,
    rule_check,
    rules_without,
    sequence_op_count,
)

from seqlower.rule import Refusal
from seqlower.rules import loop_batching, loop_counters

RNG = np.random.default_rng(7)

# total = zeros(D); k = len(xs) - 1
# for j in range(len(cs)): total = total + cs[j] * xs[k]; k = k - 1
REVERSED_SUM = """g (float[N,D] x, float[M] cs) => (float[D] total) {
    t = Constant<value = bool {1}>()
    one = Constant<value = int64 {1}>()
    xs = SplitToSequence<axis = 0, keepdims = 0>(x)
    n = SequenceLength(xs)
    k0 = Sub(n, one)
    dims = Shape<start = 1>(x)
    zeros = ConstantOfShape<value = float[1] {0}>(dims)
    m = Size(cs)
    total, kf = Loop(m, t, zeros, k0) <body = body (int64 j, bool c, float[D] acc, int64 k)
                                               => (bool c2, float[D] acc2, int64 k2) {
        c2 = Identity(c)
        cj = Gather(cs, j)
        e = SequenceAt(xs, k)
        term = Mul(cj, e)
        acc2 = Add(acc, term)
        step = Constant<value = int64 {1}>()
        k2 = Sub(k, step)
    }>
}"""

# a counter that steps by `STEP` from k0, read by a Gather into a scan output, and its final
# value read after the loop
COUNTER_SCAN = """g (float[N] x, int64 m, {kind} k0) => ({kind} kf, float[?] ys) {{
    t = Constant<value = bool {{1}}>()
    kf, ys = Loop(m, t, k0) <body = body (int64 i, bool c, {kind} k)
                                  => (bool c2, {kind} k2, float y) {{
        c2 = Identity(c)
        y = Gather(x, k)
        step = Constant<value = {kind} {{{step}}}>()
        k2 = {op}(k, step)
    }}>
}}"""


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def counter_scan(kind: str = "int64", step: int = 2, op: str = "Add") -> str:
    return COUNTER_SCAN.format(kind=kind, step=step, op=op)


def loops(model) -> list:
    return [n for g in proto_graphs(model.graph) for n in g.node if n.op_type == "Loop"]


# -- what it emits ---------------------------------------------------------------------------


def test_the_reversed_sum_is_batched_without_a_loop():
    model = parse(REVERSED_SUM)
    feeds = [
        {"x": floats(4, 3), "cs": floats(3)},  # xs[3], xs[2], xs[1]
        {"x": floats(4, 3), "cs": floats(6)},  # then xs[0], xs[-1], xs[-2]
        {"x": floats(5, 2), "cs": floats(1)},
    ]
    for feed in feeds:
        lowered, report, _ = lower_and_compare(model, feed)
        assert report.rules_fired.get("loop-counter-index") == 1, report.rules_fired
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
        assert sequence_op_count(lowered) == 0
        assert not loops(lowered)
        # no iteration keeps the initial value: one If, whose then branch sums
        assert op_counts(lowered)["If"] == 1
        assert op_counts(lowered)["ReduceSum"] == 1


def test_the_counter_becomes_the_iteration_number_scaled():
    model = parse(counter_scan(step=2))
    lowered, report = lower(model, rules=rules_without("loop-batch"))
    assert report.rules_fired.get("loop-counter-index") == 1, report.rules_fired
    (loop,) = loops(lowered)
    body = loop.attribute[0].g
    assert len(loop.input) == 2 and len(body.input) == 2  # k no longer carried
    assert [n.op_type for n in body.node if n.op_type in ("Mul", "Add")] == ["Mul", "Add"]
    x = floats(9)
    for m, k0 in ((3, 0), (4, -8), (0, 5), (-2, 5), (1, 8)):
        feeds = {"x": x, "m": np.array(m, np.int64), "k0": np.array(k0, np.int64)}
        assert_same_or_both_fail(model, lowered, feeds)
        assert lower_and_compare(model, feeds)[2][0] == k0 + 2 * max(m, 0)


def test_a_step_of_one_needs_no_multiplication():
    model = parse(counter_scan(step=1, op="Sub"))
    lowered, _ = lower(model, rules=rules_without("loop-batch"))
    (loop,) = loops(lowered)
    kept = [n.op_type for n in loop.attribute[0].g.node if n.op_type != "Constant"]
    assert kept == ["Sub", "Identity", "Gather"]


def test_an_int32_counter_is_counted_in_int32():
    model = parse(counter_scan(kind="int32", step=-3))
    lowered, report = lower(model, rules=rules_without("loop-batch"))
    assert report.rules_fired.get("loop-counter-index") == 1
    (loop,) = loops(lowered)
    casts = [n for n in loop.attribute[0].g.node if n.op_type == "Cast"]
    assert [a.i for n in casts for a in n.attribute] == [6]  # INT32
    x = floats(10)
    for m, k0 in ((3, 9), (4, -1), (0, 0), (-1, 2), (4, 5)):  # the last reads x[-4]
        feeds = {"x": x, "m": np.array(m, np.int64), "k0": np.array(k0, np.int32)}
        assert_same_or_both_fail(model, lowered, feeds)


# -- equal outputs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "terms"),
    [(4, 3), (4, 4), (4, 8), (4, 9), (4, 0), (0, 0), (0, 2), (1, 1), (3, 5)],
)
def test_the_reversed_sum_computes_what_the_loop_computes(rows, terms):
    """Negative positions once the counter passes 0 (8 terms of 4 rows read xs[-4]); reads
    past the list fail in both (9 terms of 4, 2 of none); no term keeps the zeros, of the
    rows' width even for an empty list."""
    model = parse(REVERSED_SUM)
    lowered, _ = lower(model)
    assert not loops(lowered)
    feeds = {"x": floats(rows, 3), "cs": floats(terms)}
    assert_same_or_both_fail(model, lowered, feeds)


def test_counters_through_the_whole_pipeline_compute_the_same():
    for kind, step, op in (("int64", 2, "Add"), ("int64", 1, "Sub"), ("int32", -3, "Add")):
        model = parse(counter_scan(kind=kind, step=step, op=op))
        lowered, report = lower(model)
        assert report.rules_fired.get("loop-counter-index") == 1, report.rules_fired
        x = floats(10)
        dtype = np.int32 if kind == "int32" else np.int64
        for m, k0 in ((3, 1), (5, -9), (0, 3), (-4, 3), (6, 4)):
            feeds = {"x": x, "m": np.array(m, np.int64), "k0": np.array(k0, dtype)}
            assert_same_or_both_fail(model, lowered, feeds)


def test_a_term_that_broadcasts_the_sum_up_keeps_the_initial_value_without_terms():
    """acc0 of one column at run time, terms of three: the loop's sum has three columns from
    the first term on, its initial value one where no term is added; so does the batched
    sum (the If)."""
    text = REVERSED_SUM.replace("dims = Shape<start = 1>(x)", "dims = Shape<start = 1>(w)")
    text = text.replace("(float[N,D] x, float[M] cs)", "(float[N,D] x, float[M] cs, float[A,B] w)")
    text = text.replace("=> (float[D] total)", "=> (float[?] total)")
    model = parse(text)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    for terms in (0, 1, 3):
        feeds = {"x": floats(4, 3), "cs": floats(terms), "w": floats(2, 1)}
        got = assert_same_or_both_fail(model, lowered, feeds)
        assert got


# -- what it refuses -------------------------------------------------------------------------


def refusal_of(text: str, check=loop_counters._check, **options) -> str:
    found = rule_check(parse(text), check, "Loop", **options)
    assert isinstance(found, Refusal), found
    return found.reason


def test_refuses_a_step_that_changes():
    text = counter_scan().replace("k2 = Add(k, step)", "k2 = Add(k, i)")
    assert refusal_of(text) == "the step of 'k' changes between iterations"


def test_refuses_a_counter_whose_next_value_is_read():
    text = counter_scan().replace("y = Gather(x, k)", "y = Gather(x, k2)")
    assert refusal_of(text) == "the next value of 'k' is read in the body"


def test_refuses_a_counter_that_is_a_scan_output():
    text = counter_scan().replace("float y) {", "float y, int64 k) {")
    text = text.replace("(int64 kf, float[?] ys)", "(int64 kf, float[?] ys, int64[?] ks)")
    text = text.replace("kf, ys = Loop", "kf, ys, ks = Loop")
    assert refusal_of(text) == "'k' is a scan output"


def test_refuses_a_float_counter_and_a_counter_nobody_reads():
    text = counter_scan(kind="float", step=1).replace("y = Gather(x, k)", "y = Identity(x)")
    assert refusal_of(text) == "the loop carries no counter read in its body"


def test_refuses_a_loop_that_may_stop_early():
    text = counter_scan().replace("c2 = Identity(c)", "c2 = Less(i, m)")
    assert refusal_of(text) == "the condition may end the loop early"


def test_onnxruntime_target_keeps_the_loop_of_a_sum_of_run_time_dims():
    model = parse(REVERSED_SUM)
    found = rule_check(model, loop_counters._check, "Loop", target="onnxruntime")
    assert not isinstance(found, Refusal)
    # the counter gone, loop-batch refuses the sum for onnxruntime (one term costs more batched)
    lowered, _ = lower(model, rules=rules_without("loop-batch"))
    reason = refusal_of_lowered(lowered, target="onnxruntime")
    assert reason.startswith("a running sum of dims known at run time only is batched by the")
    assert refusal_of_lowered(lowered, target="portable") is None


def refusal_of_lowered(model, **options) -> str | None:
    """loop-batch's refusal of the first Loop left in `model` (None when it accepts)."""
    found = rule_check(model, loop_batching._check, "Loop", **options)
    return found.reason if isinstance(found, Refusal) else None


def test_a_counter_read_by_a_scan_output_through_an_identity_computes_the_same():
    """`ks = Identity(k)` is a reader like any other: it reads k0 + i * d."""
    text = counter_scan(step=-1).replace("float y) {", "float y, int64 ks) {")
    text = text.replace("(int64 kf, float[?] ys)", "(int64 kf, float[?] ys, int64[?] kss)")
    text = text.replace("kf, ys = Loop", "kf, ys, kss = Loop").replace(
        "k2 = Add(k, step)", "k2 = Add(k, step)\n        ks = Identity(k)"
    )
    model = parse(text)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-counter-index") == 1, report.rules_fired
    x = floats(6)
    for m, k0 in ((3, 5), (6, 2), (0, 1), (-3, 1), (8, 1)):  # the last reads x[-7]: both fail
        feeds = {"x": x, "m": np.array(m, np.int64), "k0": np.array(k0, np.int64)}
        assert_same_or_both_fail(model, lowered, feeds)
