"""A list a Loop grows from empty, whose elements' shape only the analysis of a Loop inside the
body proves (`LoopShapes._nested_loop`: a running total that starts from `zeros_like(a)`) or
the Conv rule (a sample convolved each step), joined by a ConcatFromSequence after the loop.
Without those rules the list was flat, and
its join of no element failed as the original's does (the specification and onnxruntime
reject a ConcatFromSequence of an empty sequence); stacked, or made scan outputs, the join of
no row would be an empty tensor. Both forms check the row count (`_concatenate_nonempty` in
`loop-append-to-scan`, `Layout.nonempty_join` in the stacked layout): a Gather from a Range
of n values, which fails for n = 0, feeds the last Reshape to the join's own shape.

What is emitted, where the check is not (no Loop in the body, a loop that surely runs), and
the numbers under onnxruntime: no element (both fail), one and three, axes 0 and -1 and a
stack, a negative read position, float, int64 and float16 elements.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse

CODES = {"float": (1, np.float32), "int64": (7, np.int64), "float16": (10, np.float16)}

# made = []; a = x; for i in range(n): total = zeros_like(a); for _ in range(2): total += a;
# d = total - a; made.append(d); a = {carry}; y = cat(made, {axis}) (or stack)
MODEL = """
g ({t}[2,3] x, int64 n) => ({t}[?,?,?] y) {{
    empty = SequenceEmpty <dtype = {code}> ()
    cond = Constant <value = bool {{1}}> ()
    two = Constant <value = int64 {{2}}> ()
    last, made = Loop ({count}, cond, x, empty) <body = body (int64 i, bool c, {t}[2,3] a,
                                                        seq({t}) l)
                                                 => (bool c_out, {t}[2,3] a_out, seq({t}) l_out) {{
        s = Shape (a)
        z = ConstantOfShape <value = {t}[1] {{1}}> (s)
        {total}
        d = Sub (total, a)
        l_out = SequenceInsert (l, d)
        {carry}
        c_out = Identity (c)
    }}>
    y = ConcatFromSequence <axis = {axis}, new_axis = {new_axis}> (made)
}}
"""
INNER = """total = Loop (two, c, z) <body = inner (int64 j, bool c2, {t}[2,3] t)
                                         => (bool c2_out, {t}[2,3] t_out) {{
            t_out = Add (t, a)
            c2_out = Identity (c2)
        }}>"""
PLAIN = "once = Add (z, a)\n        total = Add (once, a)"
# the body reads the list (its newest element, at -1), so loop-append-to-scan leaves it to the
# tensor form of lists, which stacks it
SCANNED = "a_out = Identity (d)"
READ = "m1 = Constant <value = int64 {{-1}}> ()\n        a_out = SequenceAt (l_out, m1)"


def _unshaped(model: onnx.ModelProto) -> onnx.ModelProto:
    """The Loop bodies' tensors declared without a shape, as ONNX inference leaves a carried
    value: only the loop analysis can give them one."""

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            if node.op_type != "Loop":
                continue
            body = node.attribute[0].g
            for value in [*body.input[2:], *body.output[1:]]:
                if value.type.HasField("tensor_type"):
                    value.type.tensor_type.ClearField("shape")
            walk(body)

    walk(model.graph)
    return model


def model(
    t: str = "float",
    axis: int = 0,
    new_axis: int = 0,
    carry: str = SCANNED,
    total: str = INNER,
    count: str = "n",
) -> onnx.ModelProto:
    text = MODEL.format(
        t=t,
        code=CODES[t][0],
        count=count,
        total=total.format(t=t),
        carry=carry.format(),
        axis=axis,
        new_axis=new_axis,
    )
    if not new_axis:
        text = text.replace(f"({t}[?,?,?] y)", f"({t}[?,?] y)")
    return _unshaped(parse(text))


def _feeds(t: str, n: int) -> dict:
    x = (np.arange(6).reshape(2, 3) - 2).astype(CODES[t][1])
    return {"x": x, "n": np.array(n, np.int64)}


def _checked(lowered: onnx.ModelProto) -> bool:
    """Whether the lowered model checks the row count before the join (the Range it gathers
    from)."""
    return any("nonempty" in node.name for node in lowered.graph.node)


@pytest.mark.parametrize("t", sorted(CODES))
@pytest.mark.parametrize(("axis", "new_axis"), [(0, 0), (-1, 0), (1, 1)])
@pytest.mark.parametrize("carry", [SCANNED, READ], ids=["scanned", "stacked"])
def test_the_join_of_no_element_fails_as_the_original(t, axis, new_axis, carry):
    original = model(t, axis, new_axis, carry)
    lowered, report = lower(original)
    assert not any(n.op_type.startswith("Sequence") for n in lowered.graph.node)
    assert "ConcatFromSequence" not in op_counts(lowered)
    if carry == SCANNED:
        assert report.rules_fired["loop-append-to-scan"] == 1
    else:
        assert {node.tier for node in report.nodes} == {"stacked"}
    assert _checked(lowered)
    assert op_counts(lowered)["Range"] == 1
    for n in (1, 3):
        (y,) = assert_same_outputs(original, lowered, _feeds(t, n))
        rows = {(0, 0): (2 * n, 3), (-1, 0): (2, 3 * n), (1, 1): (2, n, 3)}[(axis, new_axis)]
        assert y.shape == rows
    assert_both_fail(original, lowered, _feeds(t, 0))


@pytest.mark.parametrize("carry", [SCANNED, READ], ids=["scanned", "stacked"])
def test_no_check_where_no_loop_in_the_body_proves_the_shape(carry):
    """The same total added without an inner Loop: the analysis proves the shape as it did
    before the nested analyses, the join is as it was (no check), and computes the same."""
    original = model(carry=carry, total=PLAIN)
    lowered, _ = lower(original)
    assert not _checked(lowered)
    assert "Range" not in op_counts(lowered)
    for n in (1, 3):
        assert_same_outputs(original, lowered, _feeds("float", n))


def test_no_check_where_the_loop_surely_runs():
    """Three iterations, a condition always true: the list is never empty."""
    original = model(count="three_trips").graph
    three = onnx.helper.make_node(
        "Constant",
        [],
        ["three_trips"],
        value=onnx.helper.make_tensor("v", onnx.TensorProto.INT64, [], [3]),
    )
    original.node.insert(0, three)
    full = onnx.helper.make_model(original, opset_imports=[onnx.helper.make_opsetid("", 18)])
    full.ir_version = 10
    lowered, _ = lower(full)
    assert not _checked(lowered)
    (y,) = assert_same_outputs(full, lowered, _feeds("float", 0))  # n is not read
    assert y.shape == (6, 3)


# a sample convolved each step (pads of one: its shape kept), each result appended; the body
# reads the list's newest element at -1 where `read` (the tensor form then stacks it)
CONV = """
agraph (float[B, 2, H, W] x, int64 steps, float[2, 2, 3, 3] w) => (float[?, 2, ?, ?] y) {{
    c = Constant <value = bool {{1}}> ()
    empty = SequenceEmpty <dtype = 1> ()
    last, hist = Loop (steps, c, x, empty) <body = b (
            int64 i, bool ci, float[?, ?, ?, ?] s, seq(float[?, ?, ?, ?]) acc)
            => (bool co, float[?, ?, ?, ?] s2, seq(float[?, ?, ?, ?]) acc2) {{
        co = Identity (ci)
        e = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (s, w)
        acc2 = SequenceInsert (acc, e)
        {carry}
    }}>
    y = ConcatFromSequence <axis = 0> (hist)
}}"""


@pytest.mark.parametrize(
    "carry",
    [
        "s2 = Identity (e)",
        "m1 = Constant <value = int64 {{-1}}> ()\n        s2 = SequenceAt (acc2, m1)",
    ],
    ids=["scanned", "stacked"],
)
def test_a_list_of_convolved_samples_keeps_the_failure_of_its_empty_join(carry):
    original = parse(CONV.format(carry=carry.format()))
    lowered, report = lower(original)
    assert not any(n.op_type.startswith("Sequence") for n in lowered.graph.node)
    assert _checked(lowered)
    if carry.startswith("s2 = Identity"):
        assert report.rules_fired["loop-append-to-scan"] == 1
    else:
        assert {node.tier for node in report.nodes} == {"stacked"}
    rng = np.random.default_rng(3)
    feeds = {
        "x": rng.standard_normal((2, 2, 4, 5)).astype(np.float32),
        "w": (rng.standard_normal((2, 2, 3, 3)) / 6).astype(np.float32),
    }
    for steps in (1, 3):
        (y,) = assert_same_outputs(original, lowered, {**feeds, "steps": np.array(steps)})
        assert y.shape == (2 * steps, 2, 4, 5)
    assert_both_fail(original, lowered, {**feeds, "steps": np.array(0)})
