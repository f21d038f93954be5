"""Flat lists joined on one axis a other than 0 and read no other way store each element with a
moved first (`seqlower.lists.axis_first`): the join is one Reshape of the data and one
Transpose back, not a Loop over the elements (`repeated_refinement`: `torch.cat(outs, 1)` of
crops of run-time size).

What is emitted, what keeps the elements as they are and why, and the numbers under
onnxruntime: lists of no element (both fail), one element, elements of different sizes along
a, negative axes, rank 3, edits at run-time positions, and int64, bool and float16 elements.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_both_fail,
    assert_same_or_both_fail,
    assert_same_outputs,
    lower,
    lower_tensor_form,
    op_counts,
    parse,
    sequence_op_count,
)

from seqlower.lists import find_lists
from seqlower.lists.axis_first import moved_axis
from seqlower.passes import NormalizePass

CODES = {"float": (1, np.float32), "int64": (7, np.int64), "bool": (9, np.bool_),
         "float16": (10, np.float16)}  # fmt: skip
OPS = {"bool": "Not"}

# outs = []; for i in range(m): outs.append(f(f(x[1:, :i + 1]))); torch.cat(outs, {axis}): the
# rows after the first (N - 1: no dim loop-append-to-concat reads before the loop), i + 1
# columns (at most 3): elements [N - 1, min(i + 1, 3)] joined along their columns; f (Neg, or
# Not for bool) in a Loop of its own, which keeps loop-batch from taking the growing Loop
GROWN = """
agraph ({t}[N,3] x, int64 m) => ({t}[?,?] y) {{
    s0 = SequenceEmpty <dtype={code}> ()
    yes = Constant <value=bool {{1}}> ()
    s = Loop (m, yes, s0) <body = grow (int64 i, bool c, seq({t}) acc) => (bool c2,
                                                                         seq({t}) out) {{
        one = Constant <value=int64[1] {{1}}> ()
        zero = Constant <value=int64[1] {{0}}> ()
        big = Constant <value=int64[1] {{9223372036854775807}}> ()
        rows = Slice (x, one, big, zero)
        axes = Constant <value=int64[1] {{0}}> ()
        i1 = Unsqueeze (i, axes)
        end = Add (i1, one)
        cut = Slice (rows, zero, end, one)
        twice = Constant <value=int64 {{2}}> ()
        piece = Loop (twice, c, cut) <body = again (int64 k, bool ck, {t}[?,?] v) => (bool ck2,
                                                                               {t}[?,?] v2) {{
            v2 = {op} (v)
            ck2 = Identity (ck)
        }}>
        out = SequenceInsert (acc, piece)
        c2 = Identity (c)
    }}>
    {read}
}}
"""


def grown(t: str = "float", axis: int = 1, read: str | None = None) -> onnx.ModelProto:
    read = read or f"y = ConcatFromSequence <axis={axis}> (s)"
    return parse(GROWN.format(t=t, code=CODES[t][0], op=OPS.get(t, "Neg"), read=read))


def _x(dtype, rows: int = 4) -> np.ndarray:
    values = np.arange(rows * 3).reshape(rows, 3) - 5
    return (values % 3 == 0) if dtype == np.bool_ else values.astype(dtype)


def _moved(model: onnx.ModelProto) -> list[int | None]:
    """`Layout.moved` of each list `find_lists` plans, on the model as normalized."""
    normalized = ir.from_proto(model)
    NormalizePass()(normalized)
    plans = find_lists(normalized, 18)
    return [plan.layout.moved for plan in plans if plan.layout is not None]


@pytest.mark.parametrize("t", sorted(CODES))
@pytest.mark.parametrize("axis", [1, -1])
def test_joined_by_one_reshape_and_one_transpose(t, axis):
    model = grown(t, axis)
    assert _moved(model) == [1]
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} == {"flat"}
    # one Loop (the growing one): the join is no Loop over the elements
    assert [n.op_type for n in lowered.graph.node].count("Loop") == 1
    assert op_counts(lowered)["Transpose"] == 2  # each element moved first, the join back
    (last,) = [n for n in lowered.graph.node if "y" in n.output]
    assert last.op_type == "Transpose" and list(last.attribute[0].ints) == [1, 0]
    dtype = CODES[t][1]
    for m in (1, 2, 5):  # one element; elements of 1, 2, 3 columns
        (y,) = assert_same_outputs(model, lowered, {"x": _x(dtype), "m": np.array(m)})
        assert y.shape == (3, sum(min(k + 1, 3) for k in range(m)))
    assert_same_outputs(model, lowered, {"x": _x(dtype, rows=1), "m": np.array(3)})  # 0 rows
    # no element: ConcatFromSequence of an empty list fails, in both
    assert_both_fail(model, lowered, {"x": _x(dtype), "m": np.array(0)})


def test_rank_3_on_the_last_axis():
    """[N, 2, c] joined on axis 2: stored [c, N, 2], moved back by perm [1, 2, 0]. The crop is
    negated as the scan output of a Loop of one iteration (squeezed): the loop shape analysis
    follows an inner Loop's carried values, not its scan outputs, so the elements' shape stays
    unknown to it; a carried crop would be seen through, its dims N and 2 read before the
    growing Loop, and the list built by `loop-append-to-concat` instead."""
    model = parse(
        """
agraph (float[N,2,3] x, int64 m) => (float[?,?,?] y) {
    s0 = SequenceEmpty <dtype=1> ()
    yes = Constant <value=bool {1}> ()
    s = Loop (m, yes, s0) <body = grow (int64 i, bool c, seq(float) acc) => (bool c2,
                                                                          seq(float) out) {
        one = Constant <value=int64[1] {1}> ()
        zero = Constant <value=int64[1] {0}> ()
        two = Constant <value=int64[1] {2}> ()
        axes = Constant <value=int64[1] {0}> ()
        i1 = Unsqueeze (i, axes)
        end = Add (i1, one)
        cut = Slice (x, zero, end, two)
        once = Constant <value=int64 {1}> ()
        scanned = Loop (once, c) <body = again (int64 k, bool ck) => (bool ck2, float[?,?,?] v) {
            v = Neg (cut)
            ck2 = Identity (ck)
        }>
        piece = Squeeze (scanned, axes)
        out = SequenceInsert (acc, piece)
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis=2> (s)
}
"""
    )
    assert _moved(model) == [2]
    lowered, _ = lower(model)
    (last,) = [n for n in lowered.graph.node if "y" in n.output]
    assert last.op_type == "Transpose" and list(last.attribute[0].ints) == [1, 2, 0]
    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    for m in (1, 4):
        assert_same_outputs(model, lowered, {"x": x, "m": np.array(m)})
    assert_both_fail(model, lowered, {"x": x, "m": np.array(0)})


# made, edited at run-time positions, measured and joined on axis 1 (the tensor form alone)
EDITED = """
agraph (float[2,3] a, float[2,1] b, float[2,4] c, int64 p, int64 q) => (float[2,?] y,
                                                                       int64 n) {{
    s = SequenceConstruct (a, b)
    s2 = SequenceInsert (s, c, p)
    s3 = SequenceErase (s2, q)
    s4 = Identity (s3)
    y = ConcatFromSequence <axis={axis}> (s4)
    n = SequenceLength (s3)
}}
"""


def test_edits_at_run_time_positions():
    model = parse(EDITED.format(axis=1))
    assert _moved(model) == [1]
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} == {"flat"}
    assert "Loop" not in op_counts(lowered)
    rng = np.random.default_rng(5)
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in zip("abc", [3, 1, 4])}
    feeds = {k: rng.standard_normal((2, v.shape[0])).astype(np.float32) for k, v in feeds.items()}
    for p in range(-2, 3):  # insert: [-2, 2]
        for q in range(-3, 3):  # erase: [-3, 2]
            assert_same_outputs(model, lowered, {**feeds, "p": np.array(p), "q": np.array(q)})
    for p, q in ((3, 0), (-3, 0), (0, 3), (0, -4)):
        assert_both_fail(model, lowered, {**feeds, "p": np.array(p), "q": np.array(q)})


REFUSED = {
    # the reading of the list, what moved_axis says
    "axis 0": ("y = ConcatFromSequence <axis=0> (s)", "concatenated on axis 0"),
    "an element read": (
        "y = ConcatFromSequence <axis=1> (s)\n    zero_p = Constant <value=int64 {0}> ()\n"
        "    first = SequenceAt (s, zero_p)",
        "a SequenceAt reads it",
    ),
    "two axes": (
        "y = ConcatFromSequence <axis=1> (s)\n    z = ConcatFromSequence <axis=0> (s)",
        "concatenated on several axes",
    ),
    "stacked": ("y = ConcatFromSequence <axis=1, new_axis=1> (s)", "new_axis=1"),
}


def _plan_values(model: onnx.ModelProto):
    normalized = ir.from_proto(model)
    NormalizePass()(normalized)
    (plan,) = find_lists(normalized, 18)
    return plan, normalized.graph


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_with_the_reason(case):
    read, reason = REFUSED[case]
    text = GROWN.format(t="float", code=1, op="Neg", read=read)
    text = text.replace("=> (float[?,?] y)", "=> (float[?,?] y, float[?,?] z, float[?,?] first)")
    model = parse(text.replace(", float[?,?] z, float[?,?] first)", _outputs(read)))
    plan, main = _plan_values(model)
    found = moved_axis(plan.values, plan.layout, main)
    assert isinstance(found, str) and reason in found, found
    assert plan.layout.moved is None
    lowered, _ = lower(model)  # the elements as they are: lowered as before
    for m in (1, 3):  # joined on axis 0 or stacked, elements of 1 and 2 columns fail in both
        assert_same_or_both_fail(model, lowered, {"x": _x(np.float32), "m": np.array(m)})


def _outputs(read: str) -> str:
    """The extra outputs the reading `read` makes (z, first), as the graph's signature ends."""
    extra = [name for name in ("z", "first") if f"    {name} = " in read]
    return "".join(f", float[?,?] {name}" for name in extra) + ")"


def test_a_list_the_model_returns_keeps_its_elements():
    text = EDITED.format(axis=1).replace("int64 n) {", "int64 n, seq(float) r) {")
    returned = "    n = SequenceLength (s3)\n    r = Identity (s3)"
    model = parse(text.replace("    n = SequenceLength (s3)", returned))
    plan, main = _plan_values(model)
    assert moved_axis(plan.values, plan.layout, main) == "the model returns it"


def test_a_split_list_keeps_its_chunks():
    model = parse(
        """
agraph (float[2,N] x, int64[K] sizes, int64 q) => (float[2,?] y) {
    s = SplitToSequence <axis=1> (x, sizes)
    s2 = SequenceErase (s, q)
    y = ConcatFromSequence <axis=1> (s2)
}
"""
    )
    plan, main = _plan_values(model)
    found = moved_axis(plan.values, plan.layout, main)
    assert found in ("a SplitToSequence makes it", "not a flat list of elements of rank 2 or more")
