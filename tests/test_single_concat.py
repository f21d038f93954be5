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
