"""What decides a list's layout in TorchScript decoding loops: an element made by an If whose
condition is static (`x.squeeze(0)` exported as If(dim 0 == 1, Squeeze, Identity)) is the branch
that runs, and one SequenceEmpty returned for several lists (a `while True: ... break` exit path)
is one empty list per use."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_same_or_both_fail,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    rule_check,
    run_ort,
    sequence_op_count,
)

from seqlower.passes.shared_empty_lists import unshare_empty_lists
from seqlower.rule import Refusal
from seqlower.rules.control_flow import _check_static_condition

# TorchScript's `x.squeeze(0)` of a value whose shape the exporter did not know, appended in a
# loop: `for _ in range(m): h = h + x; out.append(h.squeeze(0))`; `stack(out)`, `out[-1]`
SQUEEZED_APPENDS = """g (int64 m, {t}[{rows},3] x) => ({t}[?,3] y, {t}[3] last) {{
    e = SequenceEmpty<dtype = {code}>()
    cond = Constant<value = bool {{1}}>()
    zero = Constant<value = int64[1] {{0}}>()
    one = Constant<value = int64[1] {{1}}>()
    h_out, out = Loop(m, cond, x, e) <body = b (int64 i, bool c, {t}[{rows},3] h, seq({t}) s)
        => (bool c2, {t}[{rows},3] h2, seq({t}) s2) {{
        c2 = Identity(c)
        h2 = Add(h, x)
        shape = Shape(h2)
        d = Gather<axis = 0>(shape, zero)
        is_one = Equal(d, one)
        flag = Squeeze(is_one)
        el = If(flag) <
            then_branch = t_g () => ({t}[3] sq) {{ sq = Squeeze(h2, zero) }},
            else_branch = e_g () => ({t}[{rows},3] same) {{ same = Identity(h2) }}
        >
        s2 = SequenceInsert(s, el)
    }}>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(out)
    minus_one = Constant<value = int64 {{-1}}>()
    last = SequenceAt(out, minus_one)
}}"""

TYPES = {"float": (np.float32, 1), "int64": (np.int64, 7), "double": (np.float64, 11)}


def _squeezed(t: str = "float", rows: str = "1") -> onnx.ModelProto:
    return parse(SQUEEZED_APPENDS.format(t=t, code=TYPES[t][1], rows=rows))


@pytest.mark.parametrize("t", sorted(TYPES))
def test_an_element_made_by_a_static_squeeze_if_is_the_squeeze(t):
    dtype = TYPES[t][0]
    x = np.array([[1, -2, 3]], dtype=dtype)
    for m in (3, 1):
        feeds = {"m": np.array(m, np.int64), "x": x}
        lowered, report, (y, last) = lower_and_compare(_squeezed(t), feeds)
        np.testing.assert_array_equal(y, np.stack([x[0] * (k + 2) for k in range(m)]))
        np.testing.assert_array_equal(last, x[0] * (m + 1))
    assert report.rules_fired["if-static-condition"] == 1
    assert op_counts(lowered)["If"] == 0 and op_counts(lowered)["Squeeze"] >= 1
    assert sequence_op_count(lowered) == 0 and not report.remaining
    # no iteration: both stop (a stack of nothing, a read of nothing)
    feeds = {"m": np.array(0, np.int64), "x": x}
    assert_same_or_both_fail(_squeezed(t), lower(_squeezed(t), target="generic")[0], feeds)


def test_the_portable_target_needed_the_fold():
    # before it, the element's rank was 1 or 2 (the If's branches) and the list stayed
    lowered, report = lower(_squeezed(), target="portable")
    assert sequence_op_count(lowered) == 0 and not report.remaining


def test_a_squeeze_if_decided_at_run_time_stays():
    model = _squeezed(rows="n")
    x = np.ones((2, 3), np.float32)
    lowered, report, (y, _) = lower_and_compare(
        model, {"m": np.array(2, np.int64), "x": x}, target="generic"
    )
    assert y.shape == (2, 2, 3)
    assert op_counts(lowered)["If"] == 1
    assert "if-static-condition" not in report.rules_fired


def test_a_tensor_if_whose_branches_agree_on_ranks_is_not_the_rules():
    text = """g (float[1,3] x) => (float[3] y) {
        zero = Constant<value = int64[1] {0}>()
        one = Constant<value = int64[1] {1}>()
        shape = Shape(x)
        d = Gather<axis = 0>(shape, zero)
        flag = Equal(d, one)
        c = Squeeze(flag)
        y = If(c) <
            then_branch = t_g () => (float[3] sq) { sq = Squeeze(x, zero) },
            else_branch = e_g () => (float[3] same) { same = Reshape(x, one) }
        >
    }"""
    model = parse(text)
    found = rule_check(model, _check_static_condition, "If")
    assert isinstance(found, Refusal)
    assert found.reason == "no sequence in the outputs or the branches"
    # with an else branch of another rank, the rule takes it
    other = parse(
        text.replace("same = Reshape(x, one)", "same = Identity(x)").replace(
            "(float[3] same)", "(float[1,3] same)"
        )
    )
    assert isinstance(rule_check(other, _check_static_condition, "If"), ir.Graph)


# -- one SequenceEmpty for several lists -----------------------------------------------------

# two lists of different element ranks that start from one SequenceEmpty: `a` gets rows of x
# (rank 1), `b` gets x itself (rank 2)
SHARED_EMPTY = """g (int64 m, {t}[2,3] x) => ({t}[?,3] ya, {t}[?,2,3] yb, int64 n) {{
    e = SequenceEmpty<dtype = {code}>()
    cond = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    a, b = Loop(m, cond, e, e) <body = body (int64 i, bool c, seq({t}) sa, seq({t}) sb)
        => (bool c2, seq({t}) sa2, seq({t}) sb2) {{
        c2 = Identity(c)
        row = Gather<axis = 0>(x, zero)
        sa2 = SequenceInsert(sa, row)
        sb2 = SequenceInsert(sb, x)
    }}>
    ya = ConcatFromSequence<axis = 0, new_axis = 1>(a)
    yb = ConcatFromSequence<axis = 0, new_axis = 1>(b)
    n = SequenceLength(e)
}}"""


def _shared(t: str = "float") -> onnx.ModelProto:
    return parse(SHARED_EMPTY.format(t=t, code=TYPES[t][1]))


def test_a_shared_empty_list_becomes_one_per_use():
    model = ir.from_proto(_shared())
    assert unshare_empty_lists(model) == 2  # three readers: the Loop twice, SequenceLength
    empties = [n for n in model.graph if n.op_type == "SequenceEmpty"]
    assert len(empties) == 3
    assert len({n.outputs[0].name for n in empties}) == 3
    assert all(len(n.outputs[0].uses()) == 1 for n in empties)
    assert all(n.attributes.get_int("dtype") == 1 for n in empties)
    assert all(n.outputs[0].type == empties[0].outputs[0].type for n in empties)
    assert [n.op_type for n in model.graph][:3] == ["SequenceEmpty"] * 3  # in order, first


def test_an_empty_list_returned_as_several_graph_outputs_gets_one_each():
    text = """g (bool c, float[2] x) => (float[?] y, float[?] z) {
        s, t = If(c) <
            then_branch = t_g () => (seq(float[2]) s1, seq(float[2]) t1) {
                s1 = SequenceConstruct(x)
                t1 = SequenceConstruct(x, x)
            },
            else_branch = e_g () => (seq(float[2]) s2, seq(float[2]) t2) {
                e = SequenceEmpty()
                s2 = Identity(e)
                t2 = Identity(e)
            }
        >
        y = ConcatFromSequence<axis = 0>(s)
        z = ConcatFromSequence<axis = 0>(t)
    }"""
    model = ir.from_proto(parse(text))
    branch = next(n for n in model.graph if n.op_type == "If").attributes["else_branch"].as_graph()
    (empty,) = [n for n in branch if n.op_type == "SequenceEmpty"]
    branch.outputs[:] = [empty.outputs[0], empty.outputs[0]]  # as TorchScript returns it
    for node in [n for n in branch if n.op_type == "Identity"]:
        branch.remove(node, safe=True)
    assert unshare_empty_lists(model) == 1
    first, second = branch.outputs
    assert first is empty.outputs[0] and second is not first
    assert second.producer().op_type == "SequenceEmpty" and second.producer().graph is branch
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    x = np.array([1.0, 2.0], np.float32)
    lowered, _, (_, z) = lower_and_compare(proto, {"c": np.array(True), "x": x}, target="generic")
    np.testing.assert_array_equal(z, np.concatenate([x, x]))
    _empty_where_the_original_fails(proto, lowered, {"c": np.array(False), "x": x})


def _empty_where_the_original_fails(original, lowered, feeds):
    """A concatenation of no element: onnxruntime fails the original, the tensor form gives
    an empty tensor (docs/design.md, where the two forms may differ outside the spec)."""
    with pytest.raises(Exception, match="Must have 1 or more inputs"):
        run_ort(original, feeds)
    for value in run_ort(lowered, feeds):
        assert value.ndim == 0 or value.shape[0] == 0  # a length stays a number


def test_a_single_reader_is_left_alone():
    model = ir.from_proto(_shared())
    node = next(n for n in model.graph if n.op_type == "SequenceLength")
    model.graph.outputs.pop()
    model.graph.remove(node, safe=True)
    loop = next(n for n in model.graph if n.op_type == "Loop")
    empty = next(n for n in model.graph if n.op_type == "SequenceEmpty")
    assert len(empty.outputs[0].uses()) == 2  # the Loop reads it for both lists
    second = ir.Node("", "SequenceEmpty", [], attributes=list(empty.attributes.values()))
    second.outputs[0].name, second.outputs[0].type = "e2", empty.outputs[0].type
    model.graph.insert_after(empty, second)
    loop.replace_input_with(3, second.outputs[0])
    assert unshare_empty_lists(model) == 0  # each read once already


@pytest.mark.parametrize("t", sorted(TYPES))
def test_lists_of_different_ranks_from_one_empty_lower_apart(t):
    dtype = TYPES[t][0]
    x = np.arange(6).reshape(2, 3).astype(dtype)
    for m in (2, 1):
        feeds = {"m": np.array(m, np.int64), "x": x}
        lowered, report, (ya, yb, n) = lower_and_compare(_shared(t), feeds)
        np.testing.assert_array_equal(ya, np.stack([x[0]] * m))
        np.testing.assert_array_equal(yb, np.stack([x] * m))
        assert n == 0
        assert sequence_op_count(lowered) == 0 and not report.remaining
    _empty_where_the_original_fails(_shared(t), lowered, {"m": np.array(0, np.int64), "x": x})
