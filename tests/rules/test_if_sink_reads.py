"""Reads of a list an If returns and a Loop carries on (HF transformers' DynamicCache.update:
`if len(cache) <= i: cache.append(k) else: cache[i] = cat(cache[i], k)`, then `cache[i]`): each
read moves into both branches, where a read right after what the branch put is that tensor."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_both_fail,
    lower,
    lower_and_compare,
    parse,
    rule_check,
)

from seqlower.rule import Refusal
from seqlower.rules.control_flow import _check_sink_reads

# per step i: append x * (i + 1) while the list is shorter than k, else assign it at i % len;
# then read the list at `pos` (i itself, or -1); the reads are stacked, the list concatenated
CACHE = """g (int64 m, int64 k, {t}[2] x, {t}[?,2] init) => ({t}[?,2] reads, {t}[?] all) {{
    cond = Constant<value = bool {{1}}>()
    zero = Constant<value = int64[1] {{0}}>()
    s0 = SplitToSequence<axis = 0, keepdims = 0>(init)
    s, reads = Loop(m, cond, s0) <body = b (int64 i, bool c, seq({t}[2]) s_in)
        => (bool c2, seq({t}[2]) s_out, {t}[2] r) {{
        c2 = Identity(c)
        n = SequenceLength(s_in)
        short = Less(n, k)
        one = Constant<value = int64 {{1}}>()
        i1 = Add(i, one)
        f = Cast<to = {code}>(i1)
        v = Mul(x, f)
        {pos}
        s_out = If(short) <
            then_branch = t_g () => (seq({t}[2]) appended) {{
                appended = SequenceInsert(s_in, v)
            }},
            else_branch = e_g () => (seq({t}[2]) assigned) {{
                at = Mod(i, n)
                cut = SequenceErase(s_in, at)
                assigned = SequenceInsert(cut, v, at)
            }}
        >
        r = SequenceAt(s_out, p)
    }}>
    all = ConcatFromSequence<axis = 0>(s)
}}"""
TYPES = {"float": (np.float32, 1), "int64": (np.int64, 7), "float16": (np.float16, 10)}
AT_I = "p = Identity(i)"
AT_LAST = "p = Constant<value = int64 {-1}>()"


def _cache(t="float", pos=AT_LAST):
    return parse(CACHE.format(t=t, code=TYPES[t][1], pos=pos))


def _feeds(t, m, k, rows):
    dtype = TYPES[t][0]
    init = np.arange(rows * 2).reshape(rows, 2).astype(dtype)
    return {"m": np.array(m), "k": np.array(k), "x": np.array([1, -2], dtype), "init": init}


# (steps, the length appends stop at, initial rows): appends only; appends, then assigns at
# i % len; assigns only (reads at i stay within the list in each)
RUNS = ((3, 9, 1), (3, 5, 3), (1, 0, 1))


@pytest.mark.parametrize("t", sorted(TYPES))
@pytest.mark.parametrize("pos", [AT_LAST, AT_I])
def test_reads_of_a_carried_list_after_an_if_give_the_same_numbers(t, pos):
    model = _cache(t, pos)
    for m, k, rows in RUNS:
        feeds = _feeds(t, m, k, rows)
        _, report, _ = lower_and_compare(model, feeds, target="generic")
        assert report.rules_fired.get("if-sink-reads") == 1


KEPT_AND_READ = """g (bool c, float[2] x, seq(float[2]) s0) => (float[2] y, seq(float[2]) s) {
    zero = Constant<value = int64 {0}>()
    s = If(c) <
        then_branch = t_g () => (seq(float[2]) a) { a = SequenceInsert(s0, x, zero) },
        else_branch = e_g () => (seq(float[2]) b) { b = Identity(s0) }
    >
    y = SequenceAt(s, zero)
}"""


def test_what_the_rule_emits():
    import onnx_ir as ir

    from seqlower.analysis import Facts
    from seqlower.options import Options
    from seqlower.passes.normalize import infer_shapes
    from seqlower.rewriter import Rewriter
    from seqlower.rule import Context
    from seqlower.rules.control_flow import _sink_readers

    model = ir.from_proto(parse(KEPT_AND_READ))
    infer_shapes(model)
    ctx = Context(Facts(model), Rewriter(model), Options())
    node = next(n for n in model.graph if n.op_type == "If")
    plan = _check_sink_reads(node, ctx)
    assert not isinstance(plan, Refusal), plan
    _sink_readers(node, plan, ctx)
    if_node = model.graph.outputs[0].producer()  # y: the read, now made in the branches
    assert if_node.op_type == "If" and len(if_node.outputs) == 2  # the read, and the list
    assert model.graph.outputs[1].producer() is if_node
    for key in ("then_branch", "else_branch"):
        branch = if_node.attributes[key].as_graph()
        lists = [v for v in branch.outputs if v.type is not None and "Sequence" in str(v.type)]
        reads = [v.producer() for v in branch.outputs if v not in lists]
        assert len(lists) == 1 and len(reads) == 1
        assert reads[0].op_type == "SequenceAt" and reads[0].inputs[0] is lists[0]


def test_a_read_of_an_empty_list_fails_in_both():
    model = parse(KEPT_AND_READ)
    lowered, report = lower(model, target="generic")
    assert report.rules_fired["if-sink-reads"] == 1
    x = np.array([1.0, 2.0], np.float32)
    assert_both_fail(model, lowered, {"c": np.array(False), "x": x, "s0": []})
    for flag in (True, False):
        feeds = {"c": np.array(flag), "x": x, "s0": [x * 3, x * 4]}
        lower_and_compare(model, feeds, target="generic")


def test_a_read_out_of_range_fails_in_both():
    model = _cache(pos=AT_I)
    lowered, _ = lower(model, target="generic")
    # one row, appends stop at once (k = 0): step 1 assigns at 1 % 1 = 0 and reads at 1
    assert_both_fail(model, lowered, _feeds("float", 2, 0, 1))


def test_a_read_of_a_list_read_only_so_is_left_to_if_sink_readers():
    model = parse("""g (bool c, float[2] x) => (float[2] y) {
        s = If(c) <
            then_branch = t_g () => (seq(float[2]) a) { a = SequenceConstruct(x, x) },
            else_branch = e_g () => (seq(float[2]) b) { b = SequenceConstruct(x) }
        >
        zero = Constant<value = int64 {0}>()
        y = SequenceAt(s, zero)
    }""")
    found = rule_check(model, _check_sink_reads, "If")
    assert isinstance(found, Refusal)
    assert found.reason == "no read of a list the If returns and keeps"


def test_a_list_of_static_lengths_is_not_this_rules():
    model = parse("""g (bool c, float[2] x) => (float[2] y, seq(float[2]) s) {
        s = If(c) <
            then_branch = t_g () => (seq(float[2]) a) { a = SequenceConstruct(x, x) },
            else_branch = e_g () => (seq(float[2]) b) { b = SequenceConstruct(x) }
        >
        zero = Constant<value = int64 {0}>()
        y = SequenceAt(s, zero)
    }""")
    found = rule_check(model, _check_sink_reads, "If")
    assert isinstance(found, Refusal) and "a length is known in a branch" in found.reason


def test_a_position_computed_after_the_if_stays():
    model = parse("""g (bool c, float[2] x, seq(float[2]) s0) => (float[2] y, seq(float[2]) s) {
        s = If(c) <
            then_branch = t_g () => (seq(float[2]) a) { a = SequenceInsert(s0, x) },
            else_branch = e_g () => (seq(float[2]) b) { b = Identity(s0) }
        >
        n = SequenceLength(s)
        one = Constant<value = int64 {1}>()
        p = Sub(n, one)
        y = SequenceAt(s, p)
    }""")
    found = rule_check(model, _check_sink_reads, "If")
    assert isinstance(found, Refusal)
    assert found.reason == "no read of a list the If returns and keeps"
