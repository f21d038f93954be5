"""A pushed row made by the operators that compute it: the Unsqueeze on axis 0 goes where the
producers can make the axis for nothing; where one cannot, or a value on the way has another
reader, nothing changes."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.row_axes import fold_row_axes

_CONSTANTS = """
  minus1 = Constant <value = int64 {-1}> ()
  zero = Constant <value = int64 {0}> ()
  axes0 = Constant <value = int64[1] {0}> ()
  axes1 = Constant <value = int64[1] {1}> ()
  shape8 = Constant <value = int64[1] {8}> ()
  shape04 = Constant <value = int64[2] {0, 4}> ()"""

_PUSH = (
    """
agraph (int64 i, float[N,8] s, float[16,8] w, float[8] b) => (float[M,8] y) {"""
    + _CONSTANTS
    + """
  right = Gather <axis = 0> (s, minus1)
  left = Gather <axis = 0> (s, zero)
  both = Concat <axis = -1> (left, right)
  m = MatMul (both, w)
  a = Add (b, m)
  t = Tanh (a)
  row = Unsqueeze (t, axes0)
  y = Concat <axis = 0> (s, row)
}"""
)


def _feeds(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    return {
        "i": np.array(0, dtype=np.int64),
        "s": rng.standard_normal((n, 8)).astype(np.float32),
        "w": rng.standard_normal((16, 8)).astype(np.float32),
        "b": rng.standard_normal(8).astype(np.float32),
    }


def _fold(text: str) -> int:
    model = ir.from_proto(parse(text))
    seqlower.passes.infer_shapes(model)
    return fold_row_axes(model)


def test_a_pushed_row_is_made_by_its_producers():
    """A stack's push of `tanh(W [left; right] + b)`: the two reads give rows, the MatMul of a
    row and the Add keep it, the Unsqueeze goes."""
    assert _fold(_PUSH) == 1
    model = parse(_PUSH)
    lowered, _ = lower(model, target="generic")
    assert "Unsqueeze" not in op_counts(lowered)
    for n in (1, 3):
        assert_same_outputs(model, lowered, _feeds(n))
    assert_both_fail(model, lowered, _feeds(0))  # a read of an empty stack fails in both


def test_reshapes_unsqueezes_and_concats_on_axis_0_make_the_row():
    model = parse(
        """
agraph (float[2,4] x, float[3] z, float q) => (float[2,12] y) {"""
        + _CONSTANTS
        + """
  r = Reshape (x, shape8)
  u = Unsqueeze (z, axes1)
  v = Reshape (u, minus1_1)
  p = Unsqueeze (q, axes0)
  c = Concat <axis = 0> (r, v, p)
  e = Relu (c)
  row = Unsqueeze (e, axes0)
  y = Concat <axis = 0> (row, row)
}""".replace("minus1_1", "shape3").replace(
            "  r = Reshape", "  shape3 = Constant <value = int64[1] {-1}> ()\n  r = Reshape"
        )
    )
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Unsqueeze"] == 2  # of z and of q; the row's is gone
    rng = np.random.default_rng(7)
    feeds = {
        "x": rng.standard_normal((2, 4)).astype(np.float32),
        "z": rng.standard_normal(3).astype(np.float32),
        "q": np.array(2.5, dtype=np.float32),
    }
    assert_same_outputs(model, lowered, feeds)


def test_a_value_read_twice_keeps_its_unsqueeze():
    read_twice = _PUSH.replace(
        "y = Concat <axis = 0> (s, row)", "y = Concat <axis = 0> (s, row)\n  z = Neg (t)"
    )
    read_twice = read_twice.replace("=> (float[M,8] y)", "=> (float[M,8] y, float[8] z)")
    assert _fold(read_twice) == 0


def test_what_cannot_make_the_axis_for_nothing_keeps_the_unsqueeze():
    runtime_index = _PUSH.replace("Gather <axis = 0> (s, zero)", "Gather <axis = 0> (s, i)")
    assert _fold(runtime_index) == 0
    batched_weight = _PUSH.replace("float[16,8] w", "float[2,16,8] w").replace(
        "float[M,8] y", "float[M,2,8] y"
    )
    assert _fold(batched_weight) == 0
    graph_input = (
        """
agraph (float[3] z) => (float[1,3] y) {"""
        + _CONSTANTS
        + """
  e = Relu (z)
  y = Unsqueeze (e, axes0)
}"""
    )
    assert _fold(graph_input) == 0
    zero_in_target = (
        """
agraph (float[2,4] x) => (float[1,2,4] y) {"""
        + _CONSTANTS
        + """
  r = Reshape (x, shape04)
  e = Relu (r)
  y = Unsqueeze (e, axes0)
}"""
    )
    assert _fold(zero_in_target) == 0
    not_leading = _PUSH.replace("row = Unsqueeze (t, axes0)", "row = Unsqueeze (t, axes1)")
    not_leading = not_leading.replace("y = Concat <axis = 0> (s, row)", "y = Identity (row)")
    assert _fold(not_leading) == 0


_BRANCH_PUSH = """
agraph (float[N] s, float[3] x, bool c) => (float[M] y) {
  empty = Constant <value = int64[0] {}> ()
  last = Constant <value = int64[1] {-1}> ()
  stop = Constant <value = int64[1] {3}> ()
  piece = Slice (x, last, stop)
  scalar = Reshape (piece, empty)
  y = If (c) <
    then_branch = then_g () => (float[P] pushed) {
      axes = Constant <value = int64[1] {0}> ()
      row = Unsqueeze (scalar, axes)
      pushed = Concat <axis = 0> (s, row)
    },
    else_branch = else_g () => (float[N] kept) {
      kept = Identity (s)
    }
  >
}"""


def test_a_row_pushed_in_a_branch_is_made_by_a_producer_outside_it():
    """The Reshape that makes the scalar sits outside the branch that pushes it (sinking moves it
    in only after this pass): it makes the row there, so that lowering the result again finds
    nothing left to fold."""
    assert _fold(_BRANCH_PUSH) == 1
    model = parse(_BRANCH_PUSH)
    lowered, _ = lower(model, target="generic")
    assert "Unsqueeze" not in op_counts(lowered)
    again, report = seqlower.optimize(lowered)
    assert not report.rules_fired
    assert seqlower.io.model_to_bytes(again) == seqlower.io.model_to_bytes(lowered)
    rng = np.random.default_rng(3)
    for n, c in ((0, True), (2, True), (2, False)):
        feeds = {
            "s": rng.standard_normal(n).astype(np.float32),
            "x": rng.standard_normal(3).astype(np.float32),
            "c": np.array(c),
        }
        assert_same_outputs(model, lowered, feeds)
