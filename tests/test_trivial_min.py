"""The minimum of a value and the largest int64 (TorchScript's trip count of `enumerate(xs)`)
is the value; any other minimum stays."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.trivial_min import fold_trivial_mins

MAX = 9223372036854775807

# `for i, x in enumerate(xs)` over the rows of x: the loop runs min(MAX, len(xs)) times
ENUMERATE = """
agraph (float[N,3] x) => (float[N,3] y) {{
  t = Constant <value = bool {{1}}> ()
  xs = SplitToSequence <axis = 0, keepdims = 0> (x)
  n = SequenceLength (xs)
  big = Constant <value = int64[1] {{{big}}}> ()
  axes = Constant <value = int64[1] {{0}}> ()
  n1 = Unsqueeze (n, axes)
  both = Concat <axis = 0> (big, n1)
  {reduce}
  ys = Loop (trips, t) <body = body (int64 i, bool c) => (bool c2, float[3] row) {{
    r = SequenceAt (xs, i)
    f = Cast <to = 1> (i)
    row = Mul (r, f)
    c2 = Identity (c)
  }}>
  y = Identity (ys)
}}"""

REDUCE_ATTRIBUTE = "trips = ReduceMin <keepdims = 0> (both)"
REDUCE_INPUT = "trips = ReduceMin <keepdims = 0> (both, axes)"  # opset 18: axes an input


@pytest.mark.parametrize("reduce", [REDUCE_ATTRIBUTE, REDUCE_INPUT])
def test_the_minimum_of_a_length_and_the_largest_int64_is_the_length(reduce):
    model = parse(ENUMERATE.format(big=MAX, reduce=reduce))
    lowered, _ = lower(model, target="generic")
    counts = op_counts(lowered)
    assert "ReduceMin" not in counts and "Concat" not in counts
    for rows in (0, 1, 4):
        x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        assert_same_outputs(model, lowered, {"x": x})


def _folded(text: str) -> int:
    model = ir.from_proto(parse(text))
    seqlower.passes.infer_shapes(model)
    return fold_trivial_mins(model)


def test_a_minimum_with_another_constant_stays():
    assert _folded(ENUMERATE.format(big=1000, reduce=REDUCE_ATTRIBUTE)) == 0


@pytest.mark.parametrize(
    "text",
    [
        # keepdims 1: a [1] tensor, not the scalar
        ENUMERATE.format(
            big=MAX,
            reduce="trips1 = ReduceMin <keepdims = 1> (both)\n  trips = Squeeze (trips1, axes)",
        ),
        # two values: their minimum is not either one
        ENUMERATE.format(
            big=MAX,
            reduce="both2 = Concat <axis = 0> (both, n1)\n"
            "  trips = ReduceMin <keepdims = 0> (both2)",
        ),
    ],
)
def test_a_minimum_that_is_not_the_one_value_stays(text):
    assert _folded(text) == 0


def test_a_minimum_that_is_a_graph_output_stays_computed():
    model = parse(f"""
agraph (int64 n) => (int64 m) {{
  big = Constant <value = int64[1] {{{MAX}}}> ()
  axes = Constant <value = int64[1] {{0}}> ()
  n1 = Unsqueeze (n, axes)
  both = Concat <axis = 0> (big, n1)
  m = ReduceMin <keepdims = 0> (both)
}}""")
    ir_model = ir.from_proto(model)
    assert fold_trivial_mins(ir_model) == 0
    assert [node.op_type for node in ir_model.graph][-1] == "ReduceMin"
