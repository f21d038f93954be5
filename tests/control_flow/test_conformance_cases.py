"""ONNX's conformance cases with sequences in control flow lower as far as their interfaces
allow (tests/conformance runs every sequence case; these check what the control-flow rules do
to these three, and the reasons given for what stays)."""

from __future__ import annotations

import numpy as np
from support import (
    assert_outputs_equal,
    lower,
    op_counts,
    parse,
    reasons,
    run_ort,
    sequence_op_counts,
)

# The three models as onnx/backend/test/case/node/{if_,loop}.py export them (collecting them
# with collect_testcases takes seconds; tests/conformance does, and compares every case).
IF_SEQ = parse(
    """test_if_seq (bool cond) => (seq(float) res) {
    res = If(cond) <
        else_branch = else_body () => (seq(float[5]) else_out) {
            y = Constant<value = float[5] {5, 4, 3, 2, 1}>()
            else_out = SequenceConstruct(y)
        },
        then_branch = then_body () => (seq(float[5]) then_out) {
            x = Constant<value = float[5] {1, 2, 3, 4, 5}>()
            then_out = SequenceConstruct(x)
        }
    >
}""",
    opset=13,
    ir_version=7,
)

_SLICE_BODY = """x = Constant<value = float[5] {1, 2, 3, 4, 5}>()
        one = Constant<value = int64 {1}>()
        slice_start = Constant<value = int64[1] {0}>()
        end = Add(iter_count, one)
        axes = Constant<value = int64 {0}>()
        slice_end = Unsqueeze(end, axes)
        slice_out = Slice(x, slice_start, slice_end)"""

LOOP13_SEQ = parse(
    f"""test_loop13_seq (int64 trip_count, bool cond, seq(float) seq_empty)
        => (seq(float) seq_res) {{
    seq_res = Loop(trip_count, cond, seq_empty) <body = loop_body (int64 iter_count,
            bool cond_in, seq(float) seq_in) => (bool cond_out, seq(float) seq_out) {{
        cond_out = Identity(cond_in)
        {_SLICE_BODY}
        seq_out = SequenceInsert(seq_in, slice_out)
    }}>
}}""",
    opset=13,
    ir_version=7,
)

LOOP16_SEQ_NONE = parse(
    f"""test_loop16_seq_none (int64 trip_count, bool cond, optional(seq(float)) opt_seq)
        => (seq(float) seq_res) {{
    seq_res = Loop(trip_count, cond, opt_seq) <body = loop_body (int64 iter_count,
            bool cond_in, optional(seq(float)) opt_seq_in) => (bool cond_out, seq(float) seq_out) {{
        cond_out = Identity(cond_in)
        optional_has_elem = OptionalHasElement(opt_seq_in)
        optional_is_none = Not(optional_has_elem)
        sequence = If(optional_is_none) <
            else_branch = else_body () => (seq(float) seq_in) {{
                seq_in = OptionalGetElement(opt_seq_in)
            }},
            then_branch = then_body () => (seq(float) init_seq_in) {{
                constant_in = Constant<value = float {{0}}>()
                init_seq_in = SequenceConstruct(constant_in)
            }}
        >
        {_SLICE_BODY}
        seq_out = SequenceInsert(sequence, slice_out)
    }}>
}}""",
    opset=16,
    ir_version=8,
)


def test_if_seq_returns_tensors_from_its_branches():
    lowered, report = lower(IF_SEQ, tensor_lists=False)
    # the model output is a sequence (its interface): one SequenceConstruct outside the If
    assert sequence_op_counts(lowered) == {"SequenceConstruct": 1}
    (if_node,) = [n for n in lowered.graph.node if n.op_type == "If"]
    assert all(o.type.HasField("tensor_type") for a in if_node.attribute for o in a.g.output)
    assert "feeds the sequence-typed output 'res' (interface kept)" in reasons(report)
    for flag in (True, False):
        feeds = {"cond": np.array(flag)}
        assert_outputs_equal(run_ort(IF_SEQ, feeds), run_ort(lowered, feeds))


def test_loop13_seq_keeps_its_loop_and_says_why():
    lowered, report = lower(LOOP13_SEQ)
    assert sequence_op_counts(lowered) == {"SequenceInsert": 1}
    why = reasons(report, "SequenceInsert")
    assert "its initial elements are not known ('seq_empty' is a sequence-typed model input" in why
    assert "the trip count 'trip_count' is computed at run time" in why
    feeds = {"trip_count": np.array(5), "cond": np.array(True), "seq_empty": []}
    expected = [np.arange(1, k + 1, dtype=np.float32) for k in range(1, 6)]
    assert_outputs_equal([expected], run_ort(lowered, feeds))


def test_loop16_seq_none_keeps_its_optional_sequence():
    lowered, report = lower(LOOP16_SEQ_NONE)
    assert op_counts(lowered)["SequenceInsert"] == 1
    assert "'opt_seq_in' is an optional value, not a sequence" in reasons(report, "SequenceInsert")
