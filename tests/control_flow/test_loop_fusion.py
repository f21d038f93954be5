"""`loop-fusion`: a Loop that reads element i of a list in its iteration i, where the list was
built by another Loop appending once per iteration, becomes one Loop with the other: the element
read is the tensor appended in the same iteration, and no list is built."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    sequence_op_count,
)

from seqlower.rule import Refusal
from seqlower.rules.loop_fusion import _check

# the first Loop appends x[0 : i + 1] (i + 1 rows: a ragged list), counts in k and scans i * 2;
# the second sums each element into a total and scans the sums. Both bodies name values alike.
TEMPLATE = """g (int64 m, float[N,3] x, float[3] bias) => (int64 k, int64[?] evens, float[3] total,
                                               float[?,3] sums) {{
    t = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    empty = SequenceEmpty<dtype = 1>()
    k, s, evens = Loop(m, {cond}, zero, {start}) <body = build (int64 i, bool c, int64 k_in,
            seq(float) acc) => (bool c1, int64 k_out, seq(float) grown, int64 even) {{
        one = Constant<value = int64 {{1}}>()
        k_out = Add(k_in, one)
        two = Constant<value = int64 {{2}}>()
        even = Mul(i, two)
        begin = Constant<value = int64[1] {{0}}>()
        axes = Constant<value = int64[1] {{0}}>()
        stop = Add(i, one)
        end = Unsqueeze(stop, axes)
        piece = Slice(x, begin, end)
        {first_cond}
        grown = SequenceInsert(acc, piece)
    }}>
    {between}
    n = SequenceLength(s)
    total, sums = Loop(n, {second_cond}, {total0}) <body = read (int64 j, bool c, float[3] tot)
            => (bool c2, float[3] more, float[3] sum) {{
        c2 = Identity(c)
        one = Constant<value = int64[1] {{0}}>()
        piece = SequenceAt(s, {position})
        sum = ReduceSum<keepdims = 0>(piece, one)
        {more}
    }}>
}}"""
DEFAULTS = {
    "cond": "t",
    "start": "empty",
    "first_cond": "c1 = Identity(c)",
    "between": "start_total = Neg(bias)",
    "second_cond": "t",
    "total0": "start_total",
    "position": "j",
    "more": "more = Add(tot, sum)",
}


def _model(**changes: str) -> onnx.ModelProto:
    return parse(TEMPLATE.format(**{**DEFAULTS, **changes}))


X = np.arange(15, dtype=np.float32).reshape(5, 3)
BIAS = np.array([1.0, 2.0, 3.0], np.float32)


def _feeds(m: int) -> dict:
    return {"m": np.array(m), "x": X, "bias": BIAS}


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_two_loops_become_one_without_a_list(trips):
    model = _model()
    lowered, report = lower(model, target="generic")
    assert report.rules_fired["loop-fusion"] == 1
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Loop"] <= 1  # one Loop, which later rules may batch away
    k, evens, total, sums = assert_same_outputs(model, lowered, _feeds(trips))
    want = np.stack([X[: i + 1].sum(0) for i in range(trips)]) if trips else np.zeros((0, 3))
    assert k == trips
    np.testing.assert_array_equal(evens, np.arange(trips) * 2)
    np.testing.assert_allclose(sums, want)
    np.testing.assert_allclose(total, -BIAS + want.sum(0))


@pytest.mark.parametrize("limit", [0, 2, 9])
def test_a_while_loop_builds_as_many_as_the_other_reads(limit):
    """The first Loop stops when k reaches `limit`: the second reads what was built."""
    model = _model(
        first_cond="""lim = Constant<value = int64 {LIMIT}>()
        c1 = Less(k_out, lim)""".replace("LIMIT", str(limit)),
    )
    lowered, report = lower(model, target="generic")
    assert report.rules_fired["loop-fusion"] == 1
    for trips in (1, 3, 5):
        assert_same_outputs(model, lowered, _feeds(trips))


def test_what_the_second_loop_needs_moves_in_front():
    model = _model(
        between="scale = Constant<value = float {2}>()\n    start_total = Mul(bias, scale)"
    )
    lowered, report = lower(model, target="generic")
    assert report.rules_fired["loop-fusion"] == 1
    onnx.checker.check_model(lowered, full_check=True)
    assert_same_outputs(model, lowered, _feeds(3))


def test_a_failure_in_the_second_body_fails_both():
    """The second body gathers row j + 2 of its element, which the first two lack."""
    model = _model(
        more="""two = Constant<value = int64 {2}>()
        row = Gather<axis = 0>(piece, two)
        more = Add(tot, row)"""
    )
    lowered, report = lower(model, target="generic")
    assert report.rules_fired["loop-fusion"] == 1
    assert_both_fail(model, lowered, _feeds(3))


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"position": "zero"}, "read elsewhere than at the iteration number"),
        (
            {"second_cond": "t", "more": "more = Add(tot, sum)\n        c2b = Identity(c)"},
            None,  # control: the same model fuses
        ),
        (
            {"between": "start_total = Neg(bias)\n    len2 = SequenceLength(s)"},
            "read elsewhere",
        ),
        ({"start": "first_list"}, "does not start empty"),
        ({"between": "start_total = Cast<to = 1>(k)"}, "reads what the Loop that builds"),
        ({"second_cond": "flag"}, "may stop before the end"),
    ],
    ids=["constant-position", "control", "length-read", "not-empty", "reads-first", "stops"],
)
def test_refusals_say_why(changes, reason):
    text = TEMPLATE.format(**{**DEFAULTS, **changes})
    if changes.get("start") == "first_list":
        text = text.replace(
            "empty = SequenceEmpty<dtype = 1>()", "first_list = SequenceConstruct(x)"
        )
    if changes.get("second_cond") == "flag":
        text = text.replace("float[3] bias)", "float[3] bias, bool flag)")
    if "len2" in text:
        text = text.replace("float[?,3] sums)", "float[?,3] sums, int64 len2)")
    model = parse(text)
    loops = [n for n in model.graph.node if n.op_type == "Loop"]
    found = _second_check(model)
    if reason is None:
        assert not isinstance(found, Refusal)
        return
    assert isinstance(found, Refusal), found
    assert reason in found.reason
    assert len(loops) == 2


def _second_check(model: onnx.ModelProto):
    """`_check` of the second Loop, once shapes are inferred as the lowering infers them."""
    import onnx_ir as ir

    from seqlower.analysis import Facts
    from seqlower.options import Options
    from seqlower.passes.normalize import infer_shapes
    from seqlower.rewriter import Rewriter
    from seqlower.rule import Context

    graph_model = ir.from_proto(model)
    infer_shapes(graph_model)
    context = Context(Facts(graph_model), Rewriter(graph_model), Options())
    second = [n for n in graph_model.graph if n.op_type == "Loop"][1]
    return _check(second, context)


def _enumerated(big: str = "9223372036854775807", extra: str = "") -> onnx.ModelProto:
    """The second Loop over `enumerate(s)`: TorchScript's count min(INT64_MAX, len(s))."""
    text = TEMPLATE.format(**DEFAULTS).replace(
        "    n = SequenceLength(s)\n",
        f"""    length = SequenceLength(s)
    big = Constant<value = int64[1] {{{big}}}>()
    ax = Constant<value = int64[1] {{0}}>()
    length1 = Unsqueeze(length, ax)
    both = Concat<axis = 0>(big, length1)
    n = ReduceMin<keepdims = 0>(both)
    {extra}
""",
    )
    if extra:
        text = text.replace("float[?,3] sums)", "float[?,3] sums, int64 copy)")
    return parse(text)


@pytest.mark.parametrize("trips", [1, 4])
def test_a_loop_over_enumerate_of_the_list_is_fused(trips):
    model = _enumerated()
    lowered, report = lower(model, target="generic")
    assert report.rules_fired["loop-fusion"] == 1
    assert sequence_op_count(lowered) == 0
    assert_same_outputs(model, lowered, _feeds(trips))


@pytest.mark.parametrize(
    ("big", "extra"),
    [("3", ""), ("9223372036854775807", "copy = Identity(both)")],
    ids=["a-smaller-bound", "count-read-elsewhere"],
)
def test_a_count_that_is_not_the_length_alone_is_refused(big, extra):
    found = _second_check(_enumerated(big, extra))
    assert isinstance(found, Refusal)
    assert "the trip count is not the length of a list" in found.reason
