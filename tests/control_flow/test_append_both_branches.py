"""An If whose two branches each append one tensor to the same list, and give other values too
(minbpe's `merge`: `newids.append(idx); i += 2` in one branch, `newids.append(ids[i]); i += 1`
in the other), gives the appended tensor instead: the list is then appended to in every
iteration, and the while loop builds it as a scan output, not by a Concat per iteration.

Checked three ways: what it emits (no Concat left in the loop body, a scan output), what it
refuses and why, and onnxruntime outputs on zero, one and several iterations, with the list's
output in either place among the If's outputs and elements of several dtypes.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, reasons, sequence_op_count


def subgraphs(node):
    """The subgraphs of a NodeProto."""
    return [a.g for a in node.attribute if a.HasField("g")]


DTYPES = {"int64": np.int64, "float": np.float32, "int32": np.int32}


def _merge(dtype: str, list_first: bool, else_grow: str = "b = SequenceInsert(acc, xi)") -> str:
    """`while i < n: if x[i] > 0: out.append(2 * x[i]); i += 2 else: out.append(x[i]); i += 1`,
    the list starting with one element (-7) so that an empty input still concatenates."""
    then_out = "seq({d}) a, int64 a_i" if list_first else "int64 a_i, seq({d}) a"
    else_out = "seq({d}) b, int64 b_i" if list_first else "int64 b_i, seq({d}) b"
    if_out = "grown, i2" if list_first else "i2, grown"
    return f"""g ({dtype}[N] x) => ({dtype}[?] y, int64 end) {{
    zero = Constant<value = int64 {{0}}>()
    big = Constant<value = int64 {{9223372036854775807}}>()
    first = Constant<value = {dtype} {{-7}}>()
    shape = Shape(x)
    n = Gather(shape, zero)
    go = Less(zero, n)
    start = SequenceConstruct(first)
    end, s = Loop(big, go, zero, start) <body = body (int64 it, bool c, int64 i, seq({dtype}) acc)
                                                 => (bool c2, int64 i2, seq({dtype}) grown) {{
        xi = Gather(x, i)
        nothing = Constant<value = {dtype} {{0}}>()
        positive = Greater(xi, nothing)
        {if_out} = If(positive) <then_branch = then () => ({then_out.format(d=dtype)}) {{
            two = Constant<value = int64 {{2}}>()
            a_i = Add(i, two)
            twice = Add(xi, xi)
            a = SequenceInsert(acc, twice)
        }}, else_branch = orelse () => ({else_out.format(d=dtype)}) {{
            one = Constant<value = int64 {{1}}>()
            b_i = Add(i, one)
            {else_grow}
        }}>
        c2 = Less(i2, n)
    }}>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""


def _expected(x: np.ndarray) -> tuple[np.ndarray, int]:
    out, i = [-7], 0
    while i < len(x):
        if x[i] > 0:
            out.append(2 * x[i])
            i += 2
        else:
            out.append(x[i])
            i += 1
    return np.array(out, x.dtype), i


VALUES = np.array([3, -1, 0, 5, 2, -4, 1], np.int64)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("list_first", [False, True], ids=["list-second", "list-first"])
def test_an_if_appending_in_both_branches_and_giving_a_counter_becomes_a_scan(dtype, list_first):
    model = parse(_merge(dtype, list_first))
    for n in (0, 1, 2, 7):  # no iteration, one, and several (some stepping by two)
        x = VALUES[:n].astype(DTYPES[dtype])
        lowered, report, (y, end) = lower_and_compare(model, {"x": x})
        want, i = _expected(x)
        np.testing.assert_array_equal(y, want)
        assert end == i
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["if-append-both-branches"] == 1
    assert report.rules_fired["loop-append-to-scan"] == 1
    (loop,) = [node for node in lowered.graph.node if node.op_type == "Loop"]
    (body,) = subgraphs(loop)
    assert len(loop.output) == 2 and len(body.output) == 3  # the counter and one scan output
    inside = [node.op_type for node in body.node]
    inside += [n.op_type for node in body.node for graph in subgraphs(node) for n in graph.node]
    assert "Concat" not in inside  # nothing regrows in the loop


def test_the_if_keeps_its_other_values_in_their_places():
    """Both the counter and the list come out of the one If, the list's place now a tensor."""
    model = parse(_merge("int64", list_first=True))
    lowered, _ = lower(model)
    (loop,) = [node for node in lowered.graph.node if node.op_type == "Loop"]
    (body,) = subgraphs(loop)
    (if_node,) = [node for node in body.node if node.op_type == "If"]
    assert len(if_node.output) == 2
    assert [v.name for v in body.output[1:]] == [if_node.output[1], if_node.output[0]]  # i2, scan


def test_a_branch_that_inserts_at_a_position_is_refused():
    model = parse(
        _merge(
            "int64",
            list_first=False,
            else_grow="front = Constant<value = int64 {0}>()\n            "
            "b = SequenceInsert(acc, xi, front)",
        )
    )
    lowered, report = lower(model, tensor_lists=False)
    assert "if-append-both-branches: the else_branch inserts at a given position" in reasons(report)
    assert op_counts(lowered)["SequenceInsert"] == 2
    for n in (0, 3, 7):
        lower_and_compare(model, {"x": VALUES[:n]})


def test_a_branch_that_passes_the_list_on_is_refused():
    """Only one branch appends: the conditional append's form (a Compress), not this rule."""
    model = parse(_merge("int64", list_first=False, else_grow="b = Identity(acc)"))
    _, report = lower(model, tensor_lists=False)
    assert "if-append-both-branches" not in report.rules_fired
    for n in (0, 3, 7):
        lower_and_compare(model, {"x": VALUES[:n]})


def test_the_refusal_names_each_sequence_output():
    """Two lists out of one If, neither appended to in both branches: one reason per list."""
    text = """g (float[N] x) => (float[?] y, float[?] z) {
    zero = Constant<value = int64 {0}>()
    shape = Shape(x)
    n = Gather(shape, zero)
    t = Constant<value = bool {1}>()
    first = Constant<value = float {-7}>()
    s0 = SequenceConstruct(first)
    r0 = SequenceConstruct(first)
    s, r = Loop(n, t, s0, r0) <body = body (int64 i, bool c, seq(float) acc, seq(float) acc2)
                                         => (bool c2, seq(float) g1, seq(float) g2) {
        c2 = Identity(c)
        xi = Gather(x, i)
        nothing = Constant<value = float {0}>()
        positive = Greater(xi, nothing)
        g1, g2 = If(positive) <then_branch = then () => (seq(float) a1, seq(float) a2) {
            a1 = SequenceInsert(acc, xi)
            a2 = Identity(acc2)
        }, else_branch = orelse () => (seq(float) b1, seq(float) b2) {
            b1 = Identity(acc)
            b2 = SequenceInsert(acc2, xi)
        }>
    }>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    z = ConcatFromSequence<axis = 0, new_axis = 1>(r)
}"""
    model = parse(text)
    _, report = lower(model, tensor_lists=False)
    assert (
        "if-append-both-branches: output 0: the else_branch does not end with a SequenceInsert; "
        "output 1: the then_branch does not end with a SequenceInsert"
    ) in reasons(report)
    x = np.array([1, -2, 3, 0], np.float32)
    for n in (0, 1, 4):
        _, _, (y, z) = lower_and_compare(model, {"x": x[:n]})
        np.testing.assert_array_equal(y, [-7, *[v for v in x[:n] if v > 0]])
        np.testing.assert_array_equal(z, [-7, *[v for v in x[:n] if not v > 0]])
