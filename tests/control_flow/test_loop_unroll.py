"""A Loop with a static trip count, a condition that cannot end it early and only static
sequences is unrolled: the copies of the body fold into tensor code."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    rules_without,
    sequence_op_count,
)

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes import LowerSequencesPass, NormalizePass
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal, RuleSet
from seqlower.rules import default_rules, loops

A, B, C = (np.arange(n, dtype=np.float32) - 1 for n in (2, 3, 4))


def _ragged(trips: int, cond_out: str = "c2 = Identity(cond)") -> str:
    """Reads elements of three different shapes from an outer SequenceConstruct at the
    iteration number and appends their negation: no scan output can hold them."""
    return f"""g (float[2] a, float[3] b, float[4] c) => (float[?] cat) {{
        m = Constant<value = int64 {{{trips}}}>()
        t = Constant<value = bool {{1}}>()
        parts = SequenceConstruct(a, b, c)
        empty = SequenceEmpty<dtype = 1>()
        s = Loop(m, t, empty) <body = body (int64 i, bool cond, seq(float) acc)
                                           => (bool c2, seq(float) grown) {{
            {cond_out}
            e = SequenceAt(parts, i)
            ne = Neg(e)
            grown = SequenceInsert(acc, ne)
        }}>
        cat = ConcatFromSequence<axis = 0>(s)
    }}"""


def test_static_trip_count_over_static_sequences_is_unrolled():
    lowered, report, (cat,) = lower_and_compare(parse(_ragged(3)), {"a": A, "b": B, "c": C})
    np.testing.assert_array_equal(cat, -np.concatenate([A, B, C]))
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Loop"] == 0
    assert report.rules_fired["loop-unroll"] == 1


def test_an_early_exit_prevents_unrolling():
    """The body stops once what it appends sums to 0.5 or less: known at run time only."""
    stop = (
        "e0 = SequenceAt(parts, i)\n            ne0 = Neg(e0)\n"
        "            total = ReduceSum<keepdims = 0>(ne0)\n"
        "            half = Constant<value = float {0.5}>()\n            c2 = Greater(total, half)"
    )
    model = parse(_ragged(3, stop))
    feeds = {"a": A, "b": B, "c": C}
    # the refusals of the rules that leave the Loop (the accumulator would lower it)
    rules = RuleSet(rule for rule in default_rules() if rule.name != "loop-append-to-concat")
    _, report, (cat,) = lower_and_compare(model, feeds, rules=rules, tensor_lists=False)
    np.testing.assert_array_equal(cat, -np.concatenate([A, B]))
    why = reasons(report, "SequenceEmpty")
    assert "loop-unroll: the body computes its condition, so the loop may end early" in why
    assert "loop-append-to-scan: carried sequence 'acc': the appended tensor 'ne' may change" in why


def test_zero_static_trips_leave_the_initial_sequence():
    model = parse(
        """g (float[3] x) => (float[?,3] stacked) {
        m = Constant<value = int64 {0}>()
        t = Constant<value = bool {1}>()
        start = SequenceConstruct(x, x)
        s = Loop(m, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                           => (bool c2, seq(float) grown) {
            c2 = Identity(c)
            grown = SequenceInsert(acc, x)
        }>
        stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    )
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    lowered, _, (stacked,) = lower_and_compare(model, {"x": x})
    np.testing.assert_array_equal(stacked, np.stack([x, x]))
    assert sequence_op_count(lowered) == 0 and op_counts(lowered)["Loop"] == 0


def test_many_iterations_become_a_scan_output_instead():
    model = parse(
        f"""g (float[3] x) => (float[?,3] stacked) {{
        m = Constant<value = int64 {{{loops.MAX_UNROLL + 1}}}>()
        t = Constant<value = bool {{1}}>()
        empty = SequenceEmpty<dtype = 1>()
        s = Loop(m, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                           => (bool c2, seq(float) grown) {{
            c2 = Identity(c)
            fi = Cast<to = 1>(i)
            row = Mul(x, fi)
            grown = SequenceInsert(acc, row)
        }}>
        stacked = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }}"""
    )
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    without = rules_without("loop-batch")  # which would batch it: Range(0, M) for i
    lowered, report, (stacked,) = lower_and_compare(model, {"x": x}, rules=without)
    assert stacked.shape == (loops.MAX_UNROLL + 1, 3)
    assert sequence_op_count(lowered) == 0 and op_counts(lowered)["Loop"] == 1
    assert report.rules_fired == {"loop-append-to-scan": 1, "concat-of-split-to-sequence": 1}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            _ragged(3)
            .replace("Constant<value = int64 {3}>()", "Identity(n)")
            .replace("float[4] c)", "float[4] c, int64 n)"),
            "the trip count 'm' is computed at run time",
        ),
        (
            "g (float[3] x) => (float[3] y) {\n"
            "  m = Constant<value = int64 {2}>()\n  t = Constant<value = bool {1}>()\n"
            "  y = Loop(m, t, x) <body = body (int64 i, bool c, float[3] v)"
            " => (bool c2, float[3] w) {\n    c2 = Identity(c)\n    w = Neg(v)\n  }>\n}",
            "the loop neither carries nor reads a sequence",
        ),
    ],
    ids=["dynamic-trip-count", "no-sequence"],
)
def test_unroll_refusals(text, reason):
    model = ir.from_proto(parse(text))
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    (loop,) = [n for n in model.graph if n.op_type == "Loop"]
    assert loops.check_unroll(loop, ctx) == Refusal(reason)


def test_plain_tensor_loops_are_left_alone():
    model = parse(
        """g (float[3] x) => (float[3] y) {
        m = Constant<value = int64 {2}>()
        t = Constant<value = bool {1}>()
        y = Loop(m, t, x) <body = body (int64 i, bool c, float[3] v) => (bool c2, float[3] w) {
            c2 = Identity(c)
            w = Neg(v)
        }>
    }"""
    )
    lowered, report = lower(model)
    assert report.rules_fired == {} and op_counts(lowered)["Loop"] == 1
    pass_ = LowerSequencesPass()
    pass_(ir.from_proto(model))
    assert pass_.fired == {}


# -- `while` loops whose condition is known in every iteration ------------------------------


def _pops(condition: str, trips: str = "9223372036854775807", start: str = "a, b, c") -> str:
    """U-Net's decoder: `skips = [a, b, c]; while <condition>: h = h + sum(skips.pop())`."""
    return f"""g (float[2] a, float[3] b, float[4] c) => (float h_out) {{
        m = Constant<value = int64 {{{trips}}}>()
        zero = Constant<value = int64 {{0}}>()
        h0 = Constant<value = float {{0}}>()
        skips = SequenceConstruct({start})
        size = SequenceLength(skips)
        go = Greater(size, zero)
        h_out, rest = Loop(m, go, h0, skips) <body = body (int64 i, bool cond, float h,
                                                            seq(float) s)
                                               => (bool c2, float h2, seq(float) s2) {{
            last = Constant<value = int64 {{-1}}>()
            skip = SequenceAt(s, last)
            s2 = SequenceErase(s, last)
            total = ReduceSum<keepdims = 0>(skip)
            h2 = Add(h, total)
            {condition}
        }}>
    }}"""


_NOT_EMPTY = "left = SequenceLength(s2)\n            c2 = Greater(left, zero)"


@pytest.mark.parametrize(
    ("condition", "trips", "start", "runs"),
    [
        (_NOT_EMPTY, "9223372036854775807", "a, b, c", 3),  # until the list is empty
        (_NOT_EMPTY, "2", "a, b, c", 2),  # the trip count ends it first
        (_NOT_EMPTY, "9223372036854775807", "a", 1),
        (  # `while len(s) > 1 and i < 5`
            "left = SequenceLength(s2)\n            one = Constant<value = int64 {1}>()\n"
            "            more = Greater(left, one)\n"
            "            five = Constant<value = int64 {5}>()\n"
            "            few = Less(i, five)\n            c2 = And(more, few)",
            "9223372036854775807",
            "a, b, c",
            2,
        ),
    ],
)
def test_a_while_loop_known_in_every_iteration_is_unrolled(condition, trips, start, runs):
    model = parse(_pops(condition, trips, start))
    feeds = {"a": A, "b": B, "c": C}
    lowered, report, (h_out,) = lower_and_compare(model, feeds)
    popped = [A, B, C][: len(start.split(", "))][::-1][:runs]
    assert h_out == pytest.approx(sum(float(p.sum()) for p in popped))
    assert report.rules_fired["loop-unroll"] == 1
    assert op_counts(lowered)["Loop"] == 0
    assert sequence_op_count(lowered) == 0


def test_a_while_loop_that_pops_past_the_end_stays_a_loop_and_fails_as_given():
    """`while len(s) >= 0: s.pop()`: the fourth iteration pops an empty list."""
    model = parse(_pops("left = SequenceLength(s2)\n            c2 = GreaterOrEqual(left, zero)"))
    lowered, report = lower(model)
    assert "loop-unroll" not in report.rules_fired
    assert op_counts(lowered)["Loop"] == 1
    assert_both_fail(model, lowered, {"a": A, "b": B, "c": C})


def test_a_while_loop_on_a_tensor_condition_stays_a_loop():
    """`while sum(popped) > 0`: known at run time only (c sums to 2, then b to 0: two
    iterations)."""
    condition = "zero_f = Constant<value = float {0}>()\n            c2 = Greater(total, zero_f)"
    model = parse(_pops(condition))
    lowered, report, (h_out,) = lower_and_compare(model, {"a": A, "b": B, "c": C})
    assert h_out == pytest.approx(float(C.sum() + B.sum()))
    assert "loop-unroll" not in report.rules_fired
    assert op_counts(lowered)["Loop"] == 1


# -- a counter of static start, and lists of run-time length read by position ---------------


def _counted(start: str = "zero", bound: int = 3, dtype: str = "int64") -> str:
    """`t = 0; while True: ...; t += 1; if not t < bound: break` as TorchScript writes a `for`
    with a `continue`: no trip count, the condition compares a carried counter to a bound."""
    return f"""g (float[2] a, float[3] b, float[4] c, {dtype} s) => (float[?] cat) {{
        m = Constant<value = int64 {{9223372036854775807}}>()
        t = Constant<value = bool {{1}}>()
        zero = Constant<value = {dtype} {{0}}>()
        parts = SequenceConstruct(a, b, c)
        empty = SequenceEmpty<dtype = 1>()
        k_out, acc_out = Loop(m, t, {start}, empty) <body = body (int64 i, bool cond, {dtype} k,
                                                               seq(float) acc)
                                           => (bool c2, {dtype} k2, seq(float) grown) {{
            e = SequenceAt(parts, k)
            ne = Neg(e)
            grown = SequenceInsert(acc, ne)
            one = Constant<value = {dtype} {{1}}>()
            k2 = Add(k, one)
            bound = Constant<value = {dtype} {{{bound}}}>()
            c2 = Less(k2, bound)
        }}>
        cat = ConcatFromSequence<axis = 0>(acc_out)
    }}"""


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize(("bound", "parts"), [(3, 3), (2, 2), (1, 1), (0, 1)])
def test_a_while_loop_on_a_counter_of_static_start_is_unrolled(bound, parts, dtype):
    """The counter starts at a constant and steps by a constant: its condition is known in
    every iteration (the first always runs, as a `while True` with a break at its end)."""
    model = parse(_counted(bound=bound, dtype=dtype))
    feeds = {"a": A, "b": B, "c": C, "s": np.array(0, dtype)}
    lowered, report, (cat,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(cat, -np.concatenate([A, B, C][:parts]))
    assert report.rules_fired["loop-unroll"] == 1
    assert op_counts(lowered)["Loop"] == 0
    assert sequence_op_count(lowered) == 0


def test_a_while_loop_on_a_counter_of_run_time_start_is_not_unrolled():
    model = ir.from_proto(parse(_counted(start="s")))
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    (loop,) = [n for n in model.graph if n.op_type == "Loop"]
    assert loops.check_unroll(loop, ctx) == Refusal(
        "the body computes its condition, so the loop may end early"
    )
    feeds = {"a": A, "b": B, "c": C, "s": np.array(1)}
    _, report, (cat,) = lower_and_compare(parse(_counted(start="s")), feeds)
    np.testing.assert_array_equal(cat, -np.concatenate([B, C]))
    assert "loop-unroll" not in report.rules_fired


def _reads_of_a_built_list(
    reader: str = "e = SequenceAt(xs, p)", position: str = "Neg", element: str = "r2"
) -> str:
    """SAM 2's memory bank: a list of run-time length built by a Loop over the rows of x, then a
    loop of static count reading its last elements (positions -1, -2, -3; or 0, 1, 2), each
    only when the list holds it (else `continue`), into a list started with one row."""
    at = (
        "one = Constant<value = int64 {1}>()\n            ni = Neg(i)\n            p = Sub(ni, one)"
        if position == "Neg"
        else "p = Identity(i)"
    )
    return f"""g (float[N,3] x, float[1,3] first) => (float[?,3] cat) {{
        n = Shape<start = 0, end = 1>(x)
        n0 = Squeeze(n)
        t = Constant<value = bool {{1}}>()
        empty = SequenceEmpty<dtype = 1>()
        xs = Loop(n0, t, empty) <body = build (int64 j, bool cb, seq(float) ys)
                                        => (bool cb2, seq(float) ys2) {{
            cb2 = Identity(cb)
            row = Gather<axis = 0>(x, j)
            two = Constant<value = float {{2}}>()
            doubled = Mul(row, two)
            axis = Constant<value = int64[1] {{0}}>()
            r2 = Unsqueeze(doubled, axis)
            ys2 = SequenceInsert(ys, {element})
        }}>
        size = SequenceLength(xs)
        m = Constant<value = int64 {{3}}>()
        start = SequenceConstruct(first)
        got = Loop(m, t, start) <body = body (int64 i, bool c, seq(float) acc)
                                    => (bool c2, seq(float) acc2) {{
            c2 = Identity(c)
            held = Less(i, size)
            acc2 = If(held) <then_branch = then () => (seq(float) taken) {{
                {at}
                {reader}
                taken = SequenceInsert(acc, e)
            }}, else_branch = skip () => (seq(float) kept) {{
                kept = Identity(acc)
            }}>
        }}>
        cat = ConcatFromSequence<axis = 0>(got)
    }}"""


@pytest.mark.parametrize("position", ["Neg", "i"])
@pytest.mark.parametrize("rows", [0, 1, 2, 3, 5])
def test_a_static_loop_reading_a_list_of_run_time_length_by_position_is_unrolled(rows, position):
    """The copies read the same elements at the same positions (negative ones included) and
    only where the iterations did: an empty list is never read, as in the original."""
    model = parse(_reads_of_a_built_list(position=position))
    x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) - 4
    first = np.full((1, 3), 7, np.float32)
    lowered, report, (cat,) = lower_and_compare(model, {"x": x, "first": first})
    read = (2 * x)[::-1][:3] if position == "Neg" else (2 * x)[:3]
    np.testing.assert_array_equal(cat, np.concatenate([first, read]))
    assert report.rules_fired["loop-unroll"] == 1
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["If"] == 3  # the copies of the body's If, no Loop of 3 left
    _, kept = lower(model, target="onnxruntime")  # the onnxruntime target lowers it too
    assert "loop-unroll" in kept.rules_fired


@pytest.mark.parametrize(
    ("reader", "reason"),
    [
        (  # the body reads its length: not a read by position
            "e = SequenceAt(xs, p)\n                left = SequenceLength(xs)",
            "sequence 'xs' has no static length",
        ),
        (  # read at the iteration number: walked element by element, left to the map rules
            "e = SequenceAt(xs, i)",
            "sequence 'xs' has no static length",
        ),
        ("e = SequenceAt(xs, p)", None),
    ],
    ids=["length-read-in-body", "read-at-iteration-number", "position-read"],
)
def test_which_reads_of_a_list_of_run_time_length_allow_unrolling(reader, reason):
    model = ir.from_proto(parse(_reads_of_a_built_list(reader=reader)))
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    loop = [n for n in model.graph if n.op_type == "Loop"][-1]
    found = loops.check_unroll(loop, ctx)
    if reason is None:
        assert found == 3
    else:
        assert isinstance(found, Refusal) and found.reason.startswith(reason), found
    for rows in (0, 2, 4):  # lowered or not, the outputs are the original's
        x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        feeds = {"x": x, "first": np.ones((1, 3), np.float32)}
        for target in ("portable", "onnxruntime"):
            lower_and_compare(parse(_reads_of_a_built_list(reader=reader)), feeds, target=target)


def test_a_sequence_input_read_in_a_static_loop_is_not_unrolled():
    """A sequence-typed model input stays a sequence: unrolled, its reads would stay, copied."""
    text = """g (seq(float[3]) xs) => (float[?] cat) {
        m = Constant<value = int64 {2}>()
        t = Constant<value = bool {1}>()
        empty = SequenceEmpty<dtype = 1>()
        got = Loop(m, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                    => (bool c2, seq(float) acc2) {
            c2 = Identity(c)
            e = SequenceAt(xs, i)
            acc2 = SequenceInsert(acc, e)
        }>
        cat = ConcatFromSequence<axis = 0>(got)
    }"""
    model = ir.from_proto(parse(text))
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    (loop,) = [n for n in model.graph if n.op_type == "Loop"]
    found = loops.check_unroll(loop, ctx)
    assert isinstance(found, Refusal) and found.reason.startswith("sequence 'xs' has no static")
    xs = [np.arange(3, dtype=np.float32), np.ones(3, np.float32) * 5]
    lowered, report = lower(parse(text), target="onnxruntime")
    assert "loop-unroll" not in report.rules_fired
    (cat,) = assert_same_outputs(parse(text), lowered, {"xs": xs})
    np.testing.assert_array_equal(cat, np.concatenate(xs))


def test_a_list_of_elements_of_unknown_rank_read_in_a_static_loop_is_not_unrolled():
    """Elements of a rank known only at run time (reshaped to a shape input): a target that
    needs ranks keeps the list, and unrolled, its reads would stay, copied."""
    text = (
        _reads_of_a_built_list(element="shaped")
        .replace(
            "ys2 = SequenceInsert", "shaped = Reshape(r2, dims)\n            ys2 = SequenceInsert"
        )
        .replace("float[1,3] first)", "float[1,3] first, int64[R] dims)")
    )
    model = ir.from_proto(parse(text))
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    loop = [n for n in model.graph if n.op_type == "Loop"][-1]
    found = loops.check_unroll(loop, ctx)
    assert isinstance(found, Refusal) and found.reason.startswith("sequence 'xs' has no static")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    feeds = {"x": x, "first": np.zeros((1, 3), np.float32), "dims": np.array([1, 3])}
    lowered, report = lower(parse(text), target="onnxruntime")
    assert "loop-unroll" not in report.rules_fired
    (cat,) = assert_same_outputs(parse(text), lowered, feeds)
    np.testing.assert_array_equal(cat, np.concatenate([np.zeros((1, 3)), 2 * x[::-1]]))


def test_a_counter_that_wraps_around_is_not_counted():
    """int32 2147483647 + 1 wraps to -2147483648 in a runtime, not in Python: the condition
    `k + 1 < 3` is then true, so no count is derived from Python's arithmetic."""
    text = _counted(start="big", dtype="int32").replace(
        "zero = Constant<value = int32 {0}>()",
        "zero = Constant<value = int32 {0}>()\n"
        "        big = Constant<value = int32 {2147483647}>()",
    )
    model = ir.from_proto(parse(text))
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    (loop,) = [n for n in model.graph if n.op_type == "Loop"]
    assert loops.check_unroll(loop, ctx) == Refusal(
        "the body computes its condition, so the loop may end early"
    )
