"""if-to-where: an If in a body that picks one of two small tensors computed elementwise becomes a
Where (both computed), which leaves a loop body without subgraphs for loop-batch."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import lower_and_compare, op_counts, parse

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes.normalize import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import if_select

RNG = np.random.default_rng(5)

# `for t in x.unbind(0): outs.append(t if t.sum() > 0 else -t)`, then stacked
BOTH_APPEND = """g (float[N,4] x) => (float[?,4] y) {
    one = Constant<value = int64 {1}>()
    xs = SplitToSequence<axis = 0, keepdims = 0>(x, one)
    n = SequenceLength(xs)
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    ys = Loop(n, t, empty) <body = b (int64 i, bool c, seq(float) acc)
                                => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        e = SequenceAt(xs, i)
        s = ReduceSum<keepdims = 0>(e)
        zero = Constant<value = float {0}>()
        positive = Greater(s, zero)
        grown = If(positive) <then_branch = g1 () => (seq(float) a) {
            a = SequenceInsert(acc, e)
        }, else_branch = g2 () => (seq(float) b) {
            minus = Neg(e)
            b = SequenceInsert(acc, minus)
        }>
    }>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(ys)
}"""


def test_a_choice_in_a_loop_becomes_a_where_and_the_loop_batches():
    model = parse(BOTH_APPEND)
    for rows in (1, 6):
        x = RNG.standard_normal((rows, 4)).astype(np.float32)
        lowered, report, (y,) = lower_and_compare(model, {"x": x})
        np.testing.assert_array_equal(y, np.where(x.sum(1, keepdims=True) > 0, x, -x))
    assert report.rules_fired["if-to-where"] == 1 and report.rules_fired["loop-batch"] == 1
    counts = op_counts(lowered)
    assert "Loop" not in counts and "If" not in counts and counts["Where"] == 1


# a carried state chosen in every iteration: no batching, the Where stays in the body
STATE = """g ({t}[3] x, int64 m) => ({t}[3] y) {{
    t = Constant<value = bool {{1}}>()
    y = Loop(m, t, x) <body = b (int64 i, bool c, {t}[3] h) => (bool c2, {t}[3] h2) {{
        c2 = Identity(c)
        s = ReduceSum<keepdims = 0>(h)
        zero = Constant<value = {t} {{0}}>()
        positive = Greater(s, zero)
        h2 = If(positive) <then_branch = g1 () => ({t}[3] a) {{
            two = Constant<value = {t} {{2}}>()
            a = Sub(h, two)
        }}, else_branch = g2 () => ({t}[3] b) {{
            three = Constant<value = {t}[3] {{3, 1, 2}}>()
            b = Add(h, three)
        }}>
    }}>
}}"""


@pytest.mark.parametrize(("dtype", "numpy_type"), [("float", np.float32), ("int32", np.int32)])
def test_a_state_chosen_in_each_iteration(dtype, numpy_type):
    model = parse(STATE.format(t=dtype))
    for m in (0, 1, 7):
        x = np.array([1, -3, 1], numpy_type)
        lowered, report, (y,) = lower_and_compare(model, {"x": x, "m": np.array(m)})
        want = x
        for _ in range(m):
            want = want - 2 if want.sum() > 0 else want + np.array([3, 1, 2], numpy_type)
        np.testing.assert_array_equal(y, want)
    assert report.rules_fired == {"if-to-where": 1}
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    assert [n.op_type for n in loop.attribute[0].g.node if n.op_type in ("If", "Where")] == [
        "Where"
    ]


def _refusal(text: str) -> str:
    model = ir.from_proto(onnx.shape_inference.infer_shapes(parse(text)))
    infer_shapes(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    ifs = [n for n in model.graph.all_nodes() if n.op_type == "If"]
    found = if_select._check(ifs[0], ctx)
    assert isinstance(found, Refusal), "if-to-where accepts the If"
    return found.reason


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("a = Sub(h, two)", "a = Div(h, two)", "an integer Div may divide by zero"),
        (  # an index out of range would fail in a branch that does not run
            "a = Sub(h, two)",
            "k = Constant<value = int64[3] {2, 1, 0}>()\n            a = Gather(h, k)",
            "branch op Gather may fail or is not elementwise",
        ),
    ],
)
def test_refuses_a_branch_that_could_fail_when_computed_every_time(old, new, why):
    text = STATE.format(t="int32")
    assert old in text
    assert why in _refusal(text.replace(old, new))


def test_refuses_bool_results_unknown_shapes_and_an_if_of_the_main_graph():
    main = """g (float[3] x, bool c) => (float[3] y) {
        y = If(c) <then_branch = g1 () => (float[3] a) { a = Neg(x) },
                   else_branch = g2 () => (float[3] b) { b = Abs(x) }>
    }"""
    assert "the If is not in a Loop body" in _refusal(main)
    chosen_bools = """g (bool[3] x, int64 m) => (bool[3] y) {
        t = Constant<value = bool {1}>()
        y = Loop(m, t, x) <body = b (int64 i, bool c, bool[3] h) => (bool c2, bool[3] h2) {
            c2 = Identity(c)
            first = Constant<value = int64 {0}>()
            pick = Gather(h, first)
            h2 = If(pick) <then_branch = g1 () => (bool[3] a) { a = Not(h) },
                           else_branch = g2 () => (bool[3] b) { b = Identity(h) }>
        }>
    }"""
    assert "onnxruntime has no Where for BOOL tensors" in _refusal(chosen_bools)
    dynamic = STATE.format(t="float").replace("float[3]", "float[N]")
    dynamic = dynamic.replace("three = Constant<value = float[N] {3, 1, 2}>()", "three = Abs(h)")
    assert "reads a value of a shape not fully static" in _refusal(dynamic)


# --- if-to-logic: a scalar flag chosen by an If ---------------------------------------------

# `while` with `if tok == end: break`: the loop continues while the token is not the end token
BREAK_FLAG = """g (int64[N] tokens, int64 end) => (int64 steps) {{
    t = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    big = Constant<value = int64 {{9223372036854775807}}>()
    steps = Loop(big, t, zero) <body = b (int64 i, bool c, int64 k) => (bool c2, int64 k2) {{
        one = Constant<value = int64 {{1}}>()
        k2 = Add(k, one)
        tok = Gather<axis = 0>(tokens, i)
        hit = Equal(tok, end)
        c2 = If(hit) <then_branch = g1 () => (bool a) {{
            {then}
        }}, else_branch = g2 () => (bool b) {{
            {else_}
        }}>
    }}>
}}"""

FALSE = "a = Constant<value = bool {0}>()"
TRUE_B = "b = Constant<value = bool {1}>()"


def _tokens_until(end_at: int) -> dict:
    tokens = np.arange(10, dtype=np.int64)
    return {"tokens": tokens, "end": np.array(end_at, np.int64)}


def test_a_break_flag_of_constants_is_the_negated_condition():
    model = parse(BREAK_FLAG.format(then=FALSE, else_=TRUE_B))
    for end_at in (0, 3, 9):
        lowered, report, (steps,) = lower_and_compare(model, _tokens_until(end_at))
        assert steps == end_at + 1
    assert report.rules_fired["if-to-logic"] == 1
    counts = op_counts(lowered)
    assert "If" not in counts and counts["Not"] == 1


def test_a_flag_computed_in_one_branch_is_an_and_in_a_loop_body():
    """`keep = (tok != prev) and (tok != 0)`: the else branch is false, the then branch a
    comparison that cannot fail, computed every time instead of through the If."""
    then = """blank = Constant<value = int64 {0}>()
            same = Equal(tok, blank)
            a = Not(same)"""
    model = parse(BREAK_FLAG.format(then=then, else_=FALSE.replace("a =", "b =")))
    for end_at in (0, 4, 9):  # the loop stops at token 0 whatever `end` is
        lowered, report, (steps,) = lower_and_compare(model, _tokens_until(end_at))
        assert steps == 1
    assert report.rules_fired["if-to-logic"] == 1
    counts = op_counts(lowered)
    assert "If" not in counts and counts["And"] == 1


def _flag_check(text: str):  # type: ignore[no-untyped-def]
    model = ir.from_proto(parse(text))
    infer_shapes(model)
    context = Context(Facts(model), Rewriter(model), Options())
    (node,) = [n for n in model.graph.all_nodes() if n.op_type == "If"]
    return if_select._check_flag(node, context)


def test_a_computed_flag_outside_a_loop_body_keeps_its_if():
    """Outside a loop the If runs once, and skipping the branch may save more than the call."""
    match = _flag_check("""g (int64 tok, bool hit) => (bool flag) {
        flag = If(hit) <then_branch = g1 () => (bool a) {
            zero = Constant<value = int64 {0}>()
            same = Equal(tok, zero)
            a = Not(same)
        }, else_branch = g2 () => (bool b) {
            b = Constant<value = bool {0}>()
        }>
    }""")
    assert isinstance(match, Refusal)
    assert match.reason == "a branch computes its flag and the If is not in a Loop body"


def test_constant_flags_outside_a_loop_body_are_rewritten_too():
    model = parse("""g (bool hit) => (bool flag, bool same) {
        flag = If(hit) <then_branch = g1 () => (bool a) {
            a = Constant<value = bool {1}>()
        }, else_branch = g2 () => (bool b) {
            b = Constant<value = bool {0}>()
        }>
        same = If(hit) <then_branch = g3 () => (bool c) {
            c = Constant<value = bool {1}>()
        }, else_branch = g4 () => (bool d) {
            d = Constant<value = bool {1}>()
        }>
    }""")
    for hit in (True, False):
        lowered, report, (flag, same) = lower_and_compare(model, {"hit": np.array(hit)})
        assert flag == hit and same
    assert report.rules_fired["if-to-logic"] == 2
    assert "If" not in op_counts(lowered)
