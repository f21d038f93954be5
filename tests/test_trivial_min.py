"""The minimum of a value and the largest int64 (TorchScript's trip count of `enumerate(xs)`)
is the value; any other minimum stays."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_same_or_both_fail, assert_same_outputs, lower, op_counts, parse

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


# the same trip count over a loop that keeps the rows not kept before (a list it grows under an
# If, read back by an inner loop; it starts with a row of 9s): no rule takes the loop, the list
# tier lowers it, and that tier's index vectors ran before any fold of the minimum: the Concat
# was rebuilt as `Concat([MAX], Slice(Shape(x), 0, 1))` and the ReduceMin ran
UNIQUE_ROWS = """
agraph (float[N,3] x) => (float[M,3] y) {{
  t = Constant <value = bool {{1}}> ()
  xs = SplitToSequence <axis = 0, keepdims = 0> (x)
  n = SequenceLength (xs)
  big = Constant <value = int64[1] {{{big}}}> ()
  axes = Constant <value = int64[1] {{0}}> ()
  n1 = Unsqueeze (n, axes)
  both = Concat <axis = 0> (big, n1)
  trips = ReduceMin <keepdims = 0> (both)
  first = Constant <value = float[3] {{9, 9, 9}}> ()
  e = SequenceConstruct (first)
  out = Loop (trips, t, e) <body = body (int64 i, bool c, seq(float) acc)
      => (bool c2, seq(float) acc2) {{
    r = SequenceAt (xs, i)
    k = SequenceLength (acc)
    seen = Loop (k, t, t) <body = inner (int64 j, bool c3, bool f) => (bool c4, bool f2) {{
      q = SequenceAt (acc, j)
      d = Sub (q, r)
      a = ReduceL1 <keepdims = 0> (d)
      z = Constant <value = float {{0}}> ()
      g = Greater (a, z)
      f2 = And (f, g)
      c4 = Identity (c3)
    }}>
    acc2 = If (seen) <then_branch = th () => (seq(float) o1) {{
      o1 = SequenceInsert (acc, r)
    }}, else_branch = el () => (seq(float) o2) {{
      o2 = Identity (acc)
    }}>
    c2 = Identity (c)
  }}>
  y = ConcatFromSequence <axis = 0, new_axis = 1> (out)
}}"""


def _unique_rows_inputs() -> list[np.ndarray]:
    """No row (the loop runs no iteration), one, two equal, and four with a repeat, some
    negative."""
    rows = np.array([[1, -2, 3], [1, -2, 3], [0, 0, 0], [-5, 4, 1]], dtype=np.float32)
    return [rows[:0], rows[:1], rows[:2], rows]


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
def test_the_list_tier_folds_the_minimum_before_it_builds_index_vectors(target):
    model = parse(UNIQUE_ROWS.format(big=MAX))
    lowered, report = lower(model, target=target)
    assert report.remaining == []
    counts = op_counts(lowered)
    # the trip count is the number of rows, read from the Shape: no minimum nor its vector (the
    # one Concat left is the list's append)
    assert "ReduceMin" not in counts and "Slice" not in counts and counts["Concat"] == 1
    ran = [assert_same_or_both_fail(model, lowered, {"x": x}) for x in _unique_rows_inputs()]
    assert all(ran)


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
def test_the_list_tier_keeps_a_minimum_with_another_constant(target):
    # min(2, n): the loop runs at most twice, whatever the rows
    model = parse(UNIQUE_ROWS.format(big=2))
    lowered, _ = lower(model, target=target)
    assert op_counts(lowered)["ReduceMin"] == 1
    ran = [assert_same_or_both_fail(model, lowered, {"x": x}) for x in _unique_rows_inputs()]
    assert all(ran)
