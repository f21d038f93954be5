"""A Concat of one input is the input; one that may fail, or is an output, stays."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.single_concat import remove_single_concats


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
