"""A loop that may stop early (`break`): its count computed first from the conditions batched,
the counter beside the iteration number read as it, an append in the `if stop: break` If made
an append of no row in its pass-through branch (`loop-break-count`); `loop-batch` then batches
the loop, the If by rows.

Three ways: what they emit (no Loop, no If), what they refuse and why, and the same outputs as
the original under onnxruntime: no iteration, a stop at the first and at the last iteration, no
stop (the range ends), rows of no position, and reads that would fail past the stop.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    rule_check,
    run_ort,
)

from seqlower.rewriter import Rewriter
from seqlower.rule import Refusal
from seqlower.rules import loop_break

RNG = np.random.default_rng(35)

# pack_padded_sequence with lists: for t in range(T): bs = (lengths > t).sum();
# if bs == 0: break; data.append(x[t, :bs]); sizes.append(bs)   (TorchScript's form)
PACK = """g (float[T,B,3] x, int64[B] lengths) => (float[?,3] data, int64[?] sizes) {{
    no = Constant<value = bool {{0}}>()
    yes = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    big = Constant<value = int64 {{9223372036854775807}}>()
    shape = Shape(x)
    steps = Gather(shape, zero)
    c0 = Greater(steps, zero)
    {start}
    last, s1, s2 = Loop(big, c0, zero, e1, e2) <body = body (int64 it, bool c, int64 t,
            seq(float) acc, seq(int64) sizes_in) => (bool c2, int64 t2, seq(float) acc2,
            seq(int64) sizes2) {{
        above = Greater(lengths, t)
        as_int = Cast<to = 7>(above)
        bs = ReduceSum<keepdims = 0>(as_int)
        nothing = Constant<value = int64 {{0}}>()
        stop = Equal(bs, nothing)
        flag, acc2, sizes2 = If(stop) <then_branch = then () => (bool f1, seq(float) a1,
                                                                   seq(int64) b1) {{
            f1 = Identity(no)
            a1 = Identity(acc)
            b1 = Identity(sizes_in)
        }}, else_branch = other () => (bool f2, seq(float) a2, seq(int64) b2) {{
            row = Gather<axis = 0>(x, t)
            starts = Constant<value = int64[1] {{0}}>()
            ax = Constant<value = int64[1] {{0}}>()
            ends = Unsqueeze(bs, ax)
            part = Slice(row, starts, ends, ax)
            a2 = SequenceInsert(acc, part)
            b2 = SequenceInsert(sizes_in, bs)
            f2 = Identity(yes)
        }}>
        one = Constant<value = int64 {{1}}>()
        t2 = Add(t, one)
        more = Less(t2, steps)
        c2 = And(more, flag)
    }}>
    data = ConcatFromSequence<axis = 0>(s1)
    sizes = ConcatFromSequence<axis = 0, new_axis = 1>(s2)
}}"""
EMPTY = """e1 = SequenceEmpty<dtype = 1>()
    e2 = SequenceEmpty<dtype = 7>()"""
# lists that start with one element: every input gives a result, no iteration at all included
HEADED = """head = Constant<value = float[1,3] {-1, -2, -3}>()
    e1 = SequenceConstruct(head)
    minus = Constant<value = int64 {-1}>()
    e2 = SequenceConstruct(minus)"""


def pack(start: str = EMPTY):
    return parse(PACK.format(start=start), opset=17)


def feeds(steps: int, lengths: list[int]) -> dict[str, np.ndarray]:
    x = RNG.standard_normal((steps, len(lengths), 3)).astype(np.float32)
    return {"x": x, "lengths": np.array(lengths, np.int64)}


def assert_batched(model) -> object:
    __tracebackhide__ = True
    lowered, report = lower(model)
    for rule in ("loop-break-count", "loop-batch"):
        assert report.rules_fired.get(rule), report.rules_fired
    ops = op_counts(lowered)
    assert not {"Loop", "If"} & set(ops), ops
    return lowered


@pytest.mark.parametrize(
    ("steps", "lengths"),
    [
        (5, [4, 2, 1]),  # stops in the middle (t = 4)
        (4, [4, 4]),  # no stop: the range ends
        (4, [3, 2]),  # stops at the last iteration (t = 3)
        (3, [1]),  # stops at the second
        (6, [2, 5, 0, 3]),  # a sequence of no row
    ],
)
def test_packing_is_batched_and_the_same(steps, lengths):
    model = pack()
    lowered = assert_batched(model)
    assert_same_outputs(model, lowered, feeds(steps, lengths))


@pytest.mark.parametrize(
    ("steps", "lengths"),
    [(5, [4, 2, 1]), (3, [0, 0]), (0, [2, 1]), (3, []), (4, [3, 2])],
    ids=["middle", "first", "no-iteration", "no-sequence", "last"],
)
def test_lists_that_start_with_an_element(steps, lengths):
    model = pack(HEADED)
    lowered = assert_batched(model)
    assert_same_outputs(model, lowered, feeds(steps, lengths))


def test_a_stop_at_the_first_iteration_concatenates_no_element():
    """The original fails there (ConcatFromSequence of an empty list); the lowered model gives
    the empty concatenation, a documented deviation (docs/design.md, "Deliberate deviations")."""
    model = pack()
    lowered = assert_batched(model)
    for steps, lengths in ((3, [0, 0]), (0, [1])):
        with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own error types
            run_ort(model, feeds(steps, lengths))
        data, sizes = run_ort(lowered, feeds(steps, lengths))
        assert data.shape == (0, 3) and sizes.shape == (0,)


# for t in range(n): if t >= len(y): break; out.append(y[t] * 2): y read past its end would fail
PAST_THE_END = """g (float[L] y, int64 n) => (float[?] out) {
    zero = Constant<value = int64 {0}>()
    big = Constant<value = int64 {9223372036854775807}>()
    c0 = Greater(n, zero)
    e = SequenceEmpty<dtype = 1>()
    last, s = Loop(big, c0, zero, e) <body = body (int64 it, bool c, int64 t, seq(float) acc)
                                              => (bool c2, int64 t2, seq(float) acc2) {
        dims = Shape(y)
        size = Gather(dims, zero)
        stop = GreaterOrEqual(t, size)
        no = Constant<value = bool {0}>()
        yes = Constant<value = bool {1}>()
        flag, acc2 = If(stop) <then_branch = then () => (bool f1, seq(float) a1) {
            f1 = Identity(no)
            a1 = Identity(acc)
        }, else_branch = other () => (bool f2, seq(float) a2) {
            v = Gather<axis = 0>(y, t)
            two = Constant<value = float {2}>()
            w = Mul(v, two)
            a2 = SequenceInsert(acc, w)
            f2 = Identity(yes)
        }>
        one = Constant<value = int64 {1}>()
        t2 = Add(t, one)
        more = Less(t2, n)
        c2 = And(more, flag)
    }>
    out = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}"""


@pytest.mark.parametrize(("size", "n"), [(4, 9), (4, 4), (4, 2), (1, 5)])
def test_reads_past_the_stop_do_not_run(size, n):
    model = parse(PAST_THE_END, opset=17)
    lowered = assert_batched(model)
    y = RNG.standard_normal(size).astype(np.float32)
    assert_same_outputs(model, lowered, {"y": y, "n": np.array(n, np.int64)})


def _refusal(text: str, check) -> str:
    found = rule_check(parse(text, opset=17), check, "Loop")
    assert isinstance(found, Refusal), "accepted"
    return found.reason


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        # a condition that reads an element: it may fail past the stop
        (
            "stop = GreaterOrEqual(t, size)",
            "v0 = Gather(y, zero)\n        z = Constant<value = float {0}>()\n"
            "        stop = Less(v0, z)",
            "may fail past the stop",
        ),
        # no range bound, and the trip count is the largest int64
        ("c2 = And(more, flag)", "c2 = Identity(flag)", "no bound but its condition"),
        # a condition that reads what the loop carries
        (
            "stop = GreaterOrEqual(t, size)",
            "k = SequenceLength(acc)\n        stop = GreaterOrEqual(k, size)",
            "reads a value the loop carries",
        ),
    ],
)
def test_refuses_to_count(old, new, why):
    # the counter read as the iteration number, as `loop-counter-to-iteration` leaves it
    text = PAST_THE_END.replace(old, new).replace("Add(t, one)", "Add(it, one)")
    assert why in _refusal(text.replace("(t, size)", "(it, size)"), loop_break._check_break)


def test_a_counter_whose_final_value_is_read_is_left_as_it_is():
    text = PAST_THE_END.replace("=> (float[?] out)", "=> (float[?] out, int64 last)")
    model = parse(text, opset=17)
    lowered, report = lower(model)
    assert "loop-break-count" not in report.rules_fired  # its condition reads the counter
    y = RNG.standard_normal(3).astype(np.float32)
    for n in (2, 7):
        assert_same_outputs(model, lowered, {"y": y, "n": np.array(n, np.int64)})


# out = cat((out, v.unsqueeze(0))) if v > 0 for v in y: an append in one branch of an If, in a
# loop that never stops early: left to the other rules (one Compress), unchanged here
KEEP_POSITIVE = """g (float[N] y) => (float[?] out) {
    zero = Constant<value = int64 {0}>()
    dims = Shape(y)
    n = Gather(dims, zero)
    yes = Constant<value = bool {1}>()
    init = Constant<value = float[1] {-1}>()
    out = Loop(n, yes, init) <body = body (int64 i, bool c, float[?] acc)
                                       => (bool c2, float[?] acc2) {
        c2 = Identity(c)
        v = Gather(y, i)
        axes = Constant<value = int64[1] {0}>()
        u = Unsqueeze(v, axes)
        z = Constant<value = float {0}>()
        positive = Greater(v, z)
        acc2 = If(positive) <then_branch = a () => (float[?] r1) {
            r1 = Concat<axis = 0>(acc, u)
        }, else_branch = b () => (float[?] r2) {
            r2 = Identity(acc)
        }>
    }>
}"""


def test_refuses_a_loop_that_never_stops_early():
    assert "never ends the loop early" in _refusal(KEEP_POSITIVE, loop_break._check_break)


def test_what_one_branch_appends_is_joined_from_its_own_rows():
    """`sizes.append(bs)` and `x[t, :bs]`, appended by the branch that does not stop, are joined
    from the rows that take it (by `x[t, :bs]`'s own mask; `bs` holds every position): no stack
    of every step is scattered into, nor its mask."""
    lowered = assert_batched(pack())
    ops = op_counts(lowered)
    assert ops["ScatterND"] == 0 and ops["Expand"] == 0, ops


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize(("steps", "lengths"), [(5, [4, 2, 1]), (4, [4, 4]), (4, [3, 2]), (3, [1])])
def test_whole_elements_of_rank_two_appended_until_a_stop(axis, steps, lengths):
    # sizes.append(bs[None, None]) joined along `axis`: one whole position per appending step
    text = PACK.format(start=EMPTY).replace(
        "b2 = SequenceInsert(sizes_in, bs)",
        "a01 = Constant<value = int64[2] {0, 1}>()\n"
        "            bs2 = Unsqueeze(bs, a01)\n"
        "            b2 = SequenceInsert(sizes_in, bs2)",
    )
    text = text.replace("int64[?] sizes)", "int64[?,?] sizes)").replace(
        "sizes = ConcatFromSequence<axis = 0, new_axis = 1>(s2)",
        f"sizes = ConcatFromSequence<axis = {axis}>(s2)",
    )
    model = parse(text, opset=17)
    lowered = assert_batched(model)
    assert op_counts(lowered)["ScatterND"] == 0  # each joined from the rows that append
    assert_same_outputs(model, lowered, feeds(steps, lengths))


# for t, v in enumerate(y[:n]) as TorchScript writes it, with the `and True` a `continue`
# leaves in the condition: c' = And(Less(t + 1, n), true) (the list starts with -1: no iteration
# gives a result too)
RANGE_AND_TRUE = """g (float[N] y, int64 n) => (float[?] out) {
    zero = Constant<value = int64 {0}>()
    big = Constant<value = int64 {9223372036854775807}>()
    c0 = Greater(n, zero)
    head = Constant<value = float[1] {-1}>()
    start = SequenceConstruct(head)
    last, acc = Loop(big, c0, zero, start) <body = body (int64 it, bool c, int64 t,
            seq(float) s) => (bool c2, int64 t2, seq(float) s2) {
        v = Gather(y, t)
        axes = Constant<value = int64[1] {0}>()
        u = Unsqueeze(v, axes)
        s2 = SequenceInsert(s, u)
        one = Constant<value = int64 {1}>()
        t2 = Add(t, one)
        more = Less(t2, n)
        yes = Constant<value = bool {1}>()
        c2 = And(more, yes)
    }>
    out = ConcatFromSequence<axis = 0>(acc)
}"""


@pytest.mark.parametrize("n", [3, 1, 5])
def test_a_true_conjunct_leaves_the_range_alone_to_count(n):
    model = parse(RANGE_AND_TRUE, opset=17)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-break-count") == 1, report.rules_fired
    ops = op_counts(lowered)
    assert "CumSum" not in ops and "ReduceSum" not in ops, ops  # no flags batched to count
    y = RNG.standard_normal(5).astype(np.float32)
    (out,) = assert_same_outputs(model, lowered, {"y": y, "n": np.array(n, np.int64)})
    np.testing.assert_array_equal(out, np.concatenate([[-1], y[:n]]).astype(np.float32))


@pytest.mark.parametrize("n", [0, -2, 7])
def test_a_true_conjunct_no_iteration_and_past_the_end(n):
    """n <= 0: c0 is false, no iteration runs, both give the list's first element; n past the
    end of y: both fail at the read."""
    model = parse(RANGE_AND_TRUE, opset=17)
    lowered, _ = lower(model)
    feeds = {"y": RNG.standard_normal(5).astype(np.float32), "n": np.array(n, np.int64)}
    want, got = (_outcome(m, feeds) for m in (model, lowered))
    assert want[0] == ("fails" if n > 5 else "ok"), want
    assert want[0] == got[0], (want, got)
    if want[0] == "ok":
        np.testing.assert_array_equal(got[1], want[1])


def _outcome(model, feeds):
    try:
        return "ok", run_ort(model, feeds)[0]
    except Exception:  # onnxruntime's failure, compared between the two models
        return "fails", None


def test_refuses_a_range_alone_as_before():
    text = RANGE_AND_TRUE.replace("c2 = And(more, yes)", "c2 = Identity(more)")
    assert "ends early only by its range" in _refusal(text, loop_break._check_break)


# -- the count of the leading flags: an ArgMax -------------------------------------------------
# L = ArgMax(Concat(Cast(stops, int32), [1]), keepdims=0): three kernels where the sum of the
# leading flags (ReduceSum(Cast(Equal(CumSum(Cast(stops)), 0)))) took five.

# the stop (a step no sequence reaches) at every step of 4, and none: lengths per sequence
STOPS = [
    (4, [0, 0]),  # at the first step
    (4, [1, 1]),  # the second
    (4, [3, 2]),  # the last
    (4, [4, 4]),  # none: the range ends
    (4, [2, 4, 1]),  # the sequences end at different steps
    (1, [1]),  # one step of one sequence, no stop
    (0, [2, 1]),  # no step: no iteration
    (3, []),  # no sequence: the first step stops
]


def _lowered(text: str, opset: int, target: str):
    model = parse(text.format(start=HEADED), opset=opset)  # a stop at the first step: a list
    lowered, report = lower(model, target=target)
    assert report.rules_fired.get("loop-break-count") == 1, report.rules_fired
    return model, lowered


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
@pytest.mark.parametrize(("steps", "lengths"), STOPS)
def test_the_first_stop_is_an_argmax(target, steps, lengths):
    model, lowered = _lowered(PACK, 17, target)
    ops = op_counts(lowered)
    assert ops["ArgMax"] == 1 and ops["CumSum"] == 0, ops
    assert not {"Loop", "If"} & set(ops), ops
    data, sizes = assert_same_outputs(model, lowered, feeds(steps, lengths))
    want = [sum(n > t for n in lengths) for t in range(steps)]
    want = want[: want.index(0)] if 0 in want else want
    np.testing.assert_array_equal(sizes, np.array([-1, *want], np.int64))
    assert data.shape == (1 + sum(want), 3)


def _first_stop_model(opset: int):
    """A model of `_first_stop` alone: stops (bool[?]) -> L, built as the rule builds it."""
    b = Rewriter.scratch(opset)
    stops = ir.Value(name="stops", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([None]))
    found = loop_break._first_stop(b, stops)
    found.name = "found"
    found.type, found.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
    b.graph.inputs.append(stops)
    b.graph.outputs.append(found)
    model = ir.Model(b.graph, ir_version=8)
    model.opset_imports[""] = opset
    proto = ir.to_proto(model)
    del proto.graph.value_info[:]  # what inference gives is checked below, not declared here
    return proto


@pytest.mark.parametrize("opset", [13, 17])
def test_the_first_stop_at_every_position_and_none(opset):
    model = _first_stop_model(opset)
    onnx.checker.check_model(model, full_check=True)
    ops = op_counts(model)
    assert (ops["ArgMax"], ops["CumSum"], ops["ReduceSum"]) == (1, 0, 0), ops
    for n in range(5):
        cases = [np.zeros(n, bool), *(np.arange(n) >= k for k in range(n)), np.arange(n) % 2 == 1]
        for stops in cases:
            want = int(np.argmax(stops)) if stops.any() else n
            (got,) = run_ort(model, {"stops": stops})
            assert got.shape == () and int(got) == want, (stops, got)


# x[t, :bs - B]: a slice end counted from the end (bs = B appends nothing)
FROM_END = """starts = Constant<value = int64[1] {{0}}>()
            ax = Constant<value = int64[1] {{0}}>()
            width = Shape<start = 1, end = 2>(x)
            wide = Squeeze(width, ax)
            back = Sub(bs, wide)
            ends = Unsqueeze(back, ax)"""
PLAIN_END = """starts = Constant<value = int64[1] {{0}}>()
            ax = Constant<value = int64[1] {{0}}>()
            ends = Unsqueeze(bs, ax)"""
ONE_BRANCH_CASES = [
    (0, [2, 1]),  # no iteration
    (3, []),  # no sequence: the first step stops
    (1, [1]),  # one step, no stop (the range ends)
    (3, [1]),  # one step, then a stop
    (5, [4, 2, 1]),
    (4, [-3, 2, 0]),  # a negative length counts as none
]


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
@pytest.mark.parametrize("end", ["plain", "from-end"])
@pytest.mark.parametrize(("steps", "lengths"), ONE_BRANCH_CASES)
def test_rows_one_branch_appends_joined_by_their_own_mask(target, end, steps, lengths):
    """The rows the appending branch takes, joined by their mask of positions, give what the
    stack of every step (the other steps holding nothing) joined by its mask gave."""
    text = PACK.format(start=HEADED)
    if end == "from-end":
        text = text.replace(PLAIN_END.format(), FROM_END.format())
    model = parse(text, opset=17)
    lowered, report = lower(model, target=target)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    ops = op_counts(lowered)
    assert ops["ScatterND"] == 0 and ops["Expand"] == 0 and "Loop" not in ops, ops
    fed = feeds(steps, lengths)
    data, sizes = assert_same_outputs(model, lowered, fed)
    want = [sum(n > t for n in lengths) for t in range(steps)]
    want = want[: want.index(0)] if 0 in want else want
    np.testing.assert_array_equal(sizes, np.array([-1, *want], np.int64))
    width = len(lengths)
    rows = [fed["x"][t, : (n if end == "plain" else n - width)] for t, n in enumerate(want)]
    np.testing.assert_array_equal(data, np.concatenate([[[-1, -2, -3]], *rows]).astype(np.float32))


# if n[t] > 0: acc.append(x[t, :n[t]]) else: acc.append(x[t, :-(n[t] + 1)]): both branches
# append rows of their own length (the second's end counted from the end)
BOTH_BRANCHES = """g (float[T,B,3] x, int64[T] n) => (float[?,3] data) {
    yes = Constant<value = bool {1}>()
    zero = Constant<value = int64 {0}>()
    shape = Shape(x)
    steps = Gather(shape, zero)
    head = Constant<value = float[1,3] {-1, -2, -3}>()
    start = SequenceConstruct(head)
    acc = Loop(steps, yes, start) <body = body (int64 t, bool c, seq(float) s) => (bool c2,
            seq(float) s2) {
        k = Gather(n, t)
        nothing = Constant<value = int64 {0}>()
        keep = Greater(k, nothing)
        s2 = If(keep) <then_branch = then () => (seq(float) a1) {
            row = Gather<axis = 0>(x, t)
            starts = Constant<value = int64[1] {0}>()
            ax = Constant<value = int64[1] {0}>()
            ends = Unsqueeze(k, ax)
            part = Slice(row, starts, ends, ax)
            a1 = SequenceInsert(s, part)
        }, else_branch = other () => (seq(float) a2) {
            row2 = Gather<axis = 0>(x, t)
            s0 = Constant<value = int64[1] {0}>()
            ax2 = Constant<value = int64[1] {0}>()
            one = Constant<value = int64 {1}>()
            k1 = Add(k, one)
            back = Neg(k1)
            e2 = Unsqueeze(back, ax2)
            part2 = Slice(row2, s0, e2, ax2)
            a2 = SequenceInsert(s, part2)
        }>
        c2 = Identity(yes)
    }>
    data = ConcatFromSequence<axis = 0>(acc)
}"""


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
@pytest.mark.parametrize(
    ("steps", "n"), [(0, []), (1, [2]), (1, [-2]), (3, [0, 3, -1]), (4, [4, 1, 2, -5])]
)
def test_rows_both_branches_append_keep_their_stack(target, steps, n):
    """Two branches' rows interleave: they are scattered into the stack of every row (values
    and masks), which is joined by its mask, as before."""
    model = parse(BOTH_BRANCHES, opset=17)
    lowered, report = lower(model, target=target)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert op_counts(lowered)["ScatterND"] == 4, op_counts(lowered)  # two values, two masks
    x = RNG.standard_normal((steps, 4, 3)).astype(np.float32)
    (data,) = assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, np.int64)})
    rows = [x[t, :k] if k > 0 else x[t, : -(k + 1)] for t, k in enumerate(n)]
    np.testing.assert_array_equal(data, np.concatenate([[[-1, -2, -3]], *rows]).astype(np.float32))
