"""A Concat of one input is the input; one read only by a Concat on the same axis is joined
into it; one that may fail, or is an output, stays."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.single_concat import flatten_nested_concats, remove_single_concats


def test_a_concat_of_one_input_is_the_input():
    """`torch.cat([x], 1)`, as a DenseNet block's first step exports it."""
    model = parse("""
agraph (float[B,4] x, float[6,4] w) => (float[B,6] y) {
  c = Concat <axis = 1> (x)
  y = Gemm <transB = 1> (c, w)
}""")
    lowered, _ = lower(model, target="generic")
    assert "Concat" not in op_counts(lowered)
    rng = np.random.default_rng(3)
    feeds = {
        "x": rng.standard_normal((2, 4)).astype(np.float32),
        "w": rng.standard_normal((6, 4)).astype(np.float32),
    }
    assert_same_outputs(model, lowered, feeds)


def _removed(text: str) -> int:
    model = ir.from_proto(parse(text))
    seqlower.passes.infer_shapes(model)
    return remove_single_concats(model)


def test_a_concat_that_is_an_output_or_whose_axis_is_out_of_range_stays():
    output = """
agraph (float[B,4] x) => (float[B,4] y) {
  y = Concat <axis = 1> (x)
}"""
    assert _removed(output) == 0
    out_of_range = """
agraph (float[B,4] x) => (float[B,4] y) {
  c = Concat <axis = 2> (x)
  y = Relu (c)
}"""
    assert _removed(out_of_range) == 0


def test_a_concat_of_two_inputs_stays():
    model = """
agraph (float[B,4] x) => (float[B,8] y) {
  c = Concat <axis = 1> (x, x)
  y = Relu (c)
}"""
    assert _removed(model) == 0


def _joined(text: str) -> int:
    model = ir.from_proto(parse(text))
    seqlower.passes.infer_shapes(model)
    return flatten_nested_concats(model)


def test_a_concat_read_only_by_a_concat_on_the_same_axis_is_joined_into_it():
    """An erase's pieces joined, then an append: one Concat of three, in the inputs' order
    (also when one axis is written from the end)."""
    model = parse("""
agraph (float[A,3] a, float[B,3] b, float[C,3] c) => (float[?,3] y) {
  inner = Concat <axis = 0> (a, b)
  y = Concat <axis = -2> (c, inner, a)
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Concat"] == 1
    (node,) = [n for n in lowered.graph.node if n.op_type == "Concat"]
    assert list(node.input) == ["c", "a", "b", "a"]
    rng = np.random.default_rng(4)
    for rows in ((2, 0, 1), (0, 0, 0), (1, 3, 2)):
        feeds = {k: rng.standard_normal((n, 3)).astype(np.float32) for k, n in zip("abc", rows)}
        assert_same_outputs(model, lowered, feeds)


def test_a_concat_read_twice_or_on_another_axis_stays_apart():
    """Read by a Relu as well (joining would copy it twice), or concatenated on another axis,
    or an output of the graph: no join."""
    read_twice = """
agraph (float[2,3] a, float[2,3] b) => (float[4,3] y, float[4,3] z) {
  inner = Concat <axis = 0> (a, b)
  y = Concat <axis = 0> (inner)
  z = Relu (inner)
}"""
    assert _joined(read_twice) == 0
    other_axis = """
agraph (float[2,3] a, float[2,3] b) => (float[4,6] y) {
  inner = Concat <axis = 0> (a, b)
  y = Concat <axis = 1> (inner, inner)
}"""
    assert _joined(other_axis) == 0
    an_output = """
agraph (float[2,3] a, float[2,3] b) => (float[4,3] inner, float[6,3] y) {
  inner = Concat <axis = 0> (a, b)
  y = Concat <axis = 0> (inner, a)
}"""
    assert _joined(an_output) == 0


def _chain_of_concats(count: int, side: str) -> str:
    """`count` Concats on axis 0, each read only by the next (the axis written from the end
    every third one); every fifth also reads `side` (read by a Relu too: never joined)."""
    lines = ["  s = Relu (a)", "  c0 = Concat <axis = 0> (a, b)"]
    for k in range(1, count):
        axis = -2 if k % 3 == 0 else 0
        extra = f", {side}" if k % 5 == 0 else ""
        lines.append(f"  c{k} = Concat <axis = {axis}> (c{k - 1}, b{extra})")
    lines.append(f"  y = Concat <axis = 0> (a, c{count - 1})")
    body = "\n".join(lines)
    return f"agraph (float[A,3] a, float[B,3] b) => (float[?,3] y, float[A,3] s) {{\n{body}\n}}"


def test_a_long_chain_of_concats_is_joined_into_one_in_order():
    """2,000 Concats each read only by the next become one Concat of every input in order
    (joined one at a time with every input rewritten after each join, this was cubic);
    the Relu's output, read elsewhere too, is not joined into anything."""
    count = 2000
    model = ir.from_proto(parse(_chain_of_concats(count, "s")))
    seqlower.passes.infer_shapes(model)
    assert flatten_nested_concats(model) == count
    (node,) = [n for n in model.graph if n.op_type == "Concat"]
    want = ["a", "a", "b"] + [
        x for k in range(1, count) for x in ("b", "s")[: 2 if k % 5 == 0 else 1]
    ]
    assert [v.name for v in node.inputs] == want
    assert [u.idx for u in model.graph.inputs[1].uses()] == [
        i for i, name in enumerate(want) if name == "b"
    ]
    lowered, _ = lower(parse(_chain_of_concats(40, "s")), target="generic")
    assert op_counts(lowered)["Concat"] == 1
    rng = np.random.default_rng(5)
    for rows in ((2, 1), (0, 3), (1, 0)):
        feeds = {k: rng.standard_normal((n, 3)).astype(np.float32) for k, n in zip("ab", rows)}
        assert_same_outputs(parse(_chain_of_concats(40, "s")), lowered, feeds)


def test_a_chain_of_concats_broken_by_one_read_twice_joins_on_both_sides():
    """The Concat read by a Relu as well stays; the ones before it join into it, the ones
    after into the last."""
    model = ir.from_proto(
        parse("""
agraph (float[2,3] a, float[2,3] b) => (float[?,3] y, float[?,3] z) {
  c0 = Concat <axis = 0> (a, b)
  c1 = Concat <axis = 0> (c0, a)
  c2 = Concat <axis = -2> (b, c1)
  z = Relu (c2)
  c3 = Concat <axis = 0> (c2, a)
  y = Concat <axis = 0> (c3, c2)
}""")
    )
    seqlower.passes.infer_shapes(model)
    assert flatten_nested_concats(model) == 3
    concats = {
        n.outputs[0].name: [v.name for v in n.inputs] for n in model.graph if n.op_type == "Concat"
    }
    assert concats == {"c2": ["b", "a", "b", "a"], "y": ["c2", "a", "c2"]}
