"""If nodes with sequence outputs: a static condition inlines its branch; otherwise, branches
that yield the same static number of elements return them as tensors."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, sequence_op_count

X = np.array([[1.0, -2.0], [3.0, -4.0]], dtype=np.float32)

TWO_EACH = """g ({cond_decl}float[2,2] x) => (float[4,2] y) {{
    {cond}
    s = If(c) <
        then_branch = then_g () => (seq(float[2,2]) r1) {{
            nx = Neg(x)
            r1 = SequenceConstruct(x, nx)
        }},
        else_branch = else_g () => (seq(float[2,2]) r2) {{
            ax = Abs(x)
            r2 = SequenceConstruct(ax, x)
        }}
    >
    y = ConcatFromSequence<axis = 0>(s)
}}"""


@pytest.mark.parametrize("flag", [True, False])
def test_a_static_condition_inlines_its_branch(flag):
    text = TWO_EACH.format(cond_decl="", cond=f"c = Constant<value = bool {{{int(flag)}}}>()")
    lowered, report, (y,) = lower_and_compare(parse(text), {"x": X})
    np.testing.assert_array_equal(y, np.concatenate([X, -X] if flag else [abs(X), X]))
    assert sequence_op_count(lowered) == 0 and op_counts(lowered)["If"] == 0
    assert report.rules_fired["if-static-condition"] == 1


def test_equal_static_lengths_become_tensor_outputs():
    model = parse(TWO_EACH.format(cond_decl="bool c, ", cond=""))
    for flag in (True, False):
        lowered, report, (y,) = lower_and_compare(model, {"c": np.array(flag), "x": X})
        np.testing.assert_array_equal(y, np.concatenate([X, -X] if flag else [abs(X), X]))
    assert sequence_op_count(lowered) == 0
    (if_node,) = [n for n in lowered.graph.node if n.op_type == "If"]
    assert len(if_node.output) == 2
    assert all(o.type.HasField("tensor_type") for o in if_node.attribute[0].g.output)
    assert report.rules_fired["if-sequence-outputs"] == 1


def test_branches_reading_an_outer_split():
    """PyTorch's `xs = list(x.chunk(2)); xs.append(...)` in both branches of an `if`."""
    model = parse(
        """g (bool c, float[4,2] x) => (float[8,2] y) {
        half = Constant<value = int64 {2}>()
        xs = SplitToSequence<axis = 0>(x, half)
        s = If(c) <
            then_branch = then_g () => (seq(float) r1) {
                x2 = Add(x, x)
                r1 = SequenceInsert(xs, x2)
            },
            else_branch = else_g () => (seq(float) r2) {
                nx = Neg(x)
                r2 = SequenceInsert(xs, nx)
            }
        >
        y = ConcatFromSequence<axis = 0>(s)
    }"""
    )
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    for flag in (True, False):
        lowered, _, (y,) = lower_and_compare(model, {"c": np.array(flag), "x": x})
        np.testing.assert_array_equal(y, np.concatenate([x, 2 * x if flag else -x]))
    assert sequence_op_count(lowered) == 0


def test_a_tensor_output_next_to_a_sequence_output_keeps_its_place():
    model = parse(
        """g (bool c, float[2] x) => (float[2] t, float[2,2] y) {
        t, s = If(c) <
            then_branch = then_g () => (float[2] a, seq(float[2]) r1) {
                a = Neg(x)
                r1 = SequenceConstruct(x, a)
            },
            else_branch = else_g () => (float[2] b, seq(float[2]) r2) {
                b = Abs(x)
                r2 = SequenceConstruct(b, b)
            }
        >
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }"""
    )
    x = np.array([1.0, -3.0], dtype=np.float32)
    for flag in (True, False):
        lowered, _, (t, y) = lower_and_compare(model, {"c": np.array(flag), "x": x})
        np.testing.assert_array_equal(t, -x if flag else abs(x))
        np.testing.assert_array_equal(y, np.stack([x, -x] if flag else [abs(x), abs(x)]))
    assert sequence_op_count(lowered) == 0


def test_different_lengths_become_tensors_and_the_returned_list_is_split_back():
    # the branches yield 1 and 2 elements, and the list is also a model output: the If returns
    # the list's tensors, ConcatFromSequence reads them, and one SplitToSequence after the If
    # makes the sequence-typed output (the interface is kept)
    model = parse(
        """g (bool c, float[2] x) => (float[?] y, seq(float[2]) s) {
        s = If(c) <
            then_branch = then_g () => (seq(float[2]) r1) {
                r1 = SequenceConstruct(x)
            },
            else_branch = else_g () => (seq(float[2]) r2) {
                nx = Neg(x)
                r2 = SequenceConstruct(x, nx)
            }
        >
        y = ConcatFromSequence<axis = 0>(s)
    }"""
    )
    x = np.array([1.0, -3.0], dtype=np.float32)
    for flag in (True, False):
        lowered, report, _ = lower_and_compare(model, {"c": np.array(flag), "x": x})
    counts = op_counts(lowered)
    assert sequence_op_count(lowered) == 1 and counts["SplitToSequence"] == 1
    (op,) = report.remaining
    assert op.reason == "it feeds the sequence-typed output 's' (the interface is kept)"


def test_empty_sequences_in_both_branches():
    model = parse(
        """g (bool c, float[2] x) => (int64 n) {
        s = If(c) <
            then_branch = then_g () => (seq(float) r1) {
                r1 = SequenceEmpty<dtype = 1>()
            },
            else_branch = else_g () => (seq(float) r2) {
                r2 = SequenceEmpty<dtype = 1>()
            }
        >
        n = SequenceLength(s)
    }"""
    )
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0 and op_counts(lowered)["If"] == 0
    lower_and_compare(model, {"c": np.array(True), "x": np.zeros(2, np.float32)})
