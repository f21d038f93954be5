"""A list a Loop or If builds that is also a sequence-typed model output: the output stays a
sequence (the interface is kept), but behind it the list is tensors and one SplitToSequence at
the end of the graph makes the output from them, so the Loop carries no sequence:

    Loop(.., s0 = SequenceEmpty, body: s1 = SequenceInsert(s, piece))  -> output s
        -> Loop(.., rows0, sizes0, body: rows1 = Concat(rows, piece), sizes1 = ...)
           s = SplitToSequence(rows, sizes, axis=0)             (ragged: pieces of other rows)
           s = SplitToSequence(data, axis=0, keepdims=0)        (stacked: pieces of one shape)

A list made in the main graph alone stays as it is, and so does one of elements onnxruntime has
no SplitToSequence for (int8): each says it feeds the output.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, reasons, sequence_op_counts

# the body appends x[:i + 1] (ragged: i + 1 rows) or x[0] * i (stacked), m times
LOOP = """g (float[N, 3] x, int64 m) => (seq({elem}) s, float[?, 3] y) {{
    e = SequenceEmpty<dtype = {dtype}>()
    t = Constant<value = bool {{1}}>()
    s = Loop(m, t, e) <body = b (int64 i, bool c, seq({elem}) acc) => (bool c2, seq({elem}) out) {{
        c2 = Identity(c)
        {piece}
        out = SequenceInsert(acc, p)
    }}>
    y = Mul(x, x)
}}"""
RAGGED = """zero = Constant<value = int64[1] {0}>()
        one = Constant<value = int64[1] {1}>()
        ax = Constant<value = int64[1] {0}>()
        ui = Unsqueeze(i, ax)
        stop = Add(ui, one)
        p0 = Slice(x, zero, stop, ax)
        p = Cast<to = DTYPE>(p0)"""
STACKED = """k = Constant<value = int64 {0}>()
        row = Gather<axis = 0>(x, k)
        f = Cast<to = 1>(i)
        p0 = Mul(row, f)
        p = Cast<to = DTYPE>(p0)"""


def _model(piece: str, elem: str, dtype: int):  # type: ignore[no-untyped-def]
    return parse(LOOP.format(piece=piece.replace("DTYPE", str(dtype)), elem=elem, dtype=dtype))


X = np.arange(12, dtype=np.float32).reshape(4, 3) - 5


@pytest.mark.parametrize(
    ("piece", "elem", "expected"),
    [
        (RAGGED, "float[?, 3]", lambda m: [X[: i + 1] for i in range(m)]),
        (STACKED, "float[3]", lambda m: [X[0] * i for i in range(m)]),
    ],
    ids=["ragged", "stacked"],
)
@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_a_returned_list_a_loop_builds_is_split_from_its_tensors(piece, elem, expected, target):
    model = _model(piece, elem, 1)
    for m in (0, 1, 3):
        lowered, report, (s, _) = lower_and_compare(
            model, {"x": X, "m": np.array(m)}, target=target
        )
        assert len(s) == m
        for got, want in zip(s, expected(m), strict=True):
            np.testing.assert_array_equal(got, want)
    if target == "portable":
        assert sequence_op_counts(lowered) == {"SplitToSequence": 1}
        # the Loop carries tensors (the stacked one is batched whole: no Loop at all)
        for loop in [n for n in lowered.graph.node if n.op_type == "Loop"]:
            assert not [n for n in loop.attribute[0].g.node if "Sequence" in n.op_type]
        (op,) = report.remaining
        assert op.reason == "it feeds the sequence-typed output 's' (the interface is kept)"


def test_elements_onnxruntime_cannot_split_keep_the_list_and_say_why():
    # int8: onnxruntime (1.20 to 1.32) has no SplitToSequence kernel for it
    model = _model(STACKED, "int8[3]", 3)
    lowered, report = lower(model, target="portable")
    assert "SplitToSequence" not in op_counts(lowered)
    assert "SequenceInsert" in op_counts(lowered)
    assert "it feeds the sequence-typed output 's' (the interface is kept)" in reasons(report)


def test_a_list_made_in_the_main_graph_alone_is_returned_as_made():
    model = parse("""g (float[3] a, float[3] b) => (seq(float[3]) s) {
        s = SequenceConstruct(a, b, a)
    }""")  # fmt: skip
    lowered, report = lower(model, target="portable")
    assert sequence_op_counts(lowered) == {"SequenceConstruct": 1}
    assert "(the interface is kept)" in reasons(report)


def test_a_list_edited_after_its_loop_and_returned_says_the_interface_is_why():
    # the Loop's list is rebuilt as tensors and split again before the SequenceInsert that
    # makes the output; that split's count is the trip count's, known at run time only, but
    # the tensor form takes such lists: the output is why both nodes stay
    model = parse("""g (float[N, 3] x, int64 m) => (seq(float[3]) s) {
        e = SequenceEmpty<dtype = 1>()
        t = Constant<value = bool {1}>()
        l = Loop(m, t, e) <body = b (int64 i, bool c, seq(float[3]) acc)
                                   => (bool c2, seq(float[3]) out) {
            c2 = Identity(c)
            k = Constant<value = int64 {0}>()
            row = Gather<axis = 0>(x, k)
            f = Cast<to = 1>(i)
            p = Mul(row, f)
            out = SequenceInsert(acc, p)
        }>
        zero = Constant<value = int64 {0}>()
        first = Gather<axis = 0>(x, zero)
        s = SequenceInsert(l, first, zero)
    }""")  # fmt: skip
    for m in (0, 2):
        lowered, report, (s,) = lower_and_compare(model, {"x": X, "m": np.array(m)})
        expected = [X[0]] + [X[0] * i for i in range(m)]
        assert [row.tolist() for row in s] == [row.tolist() for row in expected]
    assert sequence_op_counts(lowered) == {"SplitToSequence": 1, "SequenceInsert": 1}
    assert {op.reason for op in report.remaining} == {
        "it feeds the sequence-typed output 's' (the interface is kept)"
    }
