"""A leading Unsqueeze that broadcasting adds anyway goes; one that changes the result's rank,
is not on leading axes, or is read by another kind of operator stays."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.broadcast_unsqueeze import drop_broadcast_unsqueezes

_VITERBI_STEP = """
agraph (float[4] prev, float[4,4] trans) => (float[4] best, int64[4] arg) {
  axes0 = Constant <value = int64[1] {0}> ()
  u = Unsqueeze (prev, axes0)
  scores = Add (u, trans)
  gt = Greater (u, trans)
  picked = Where (gt, u, trans)
  best = ReduceMax <axes = [1], keepdims = 0> (picked)
  arg = ArgMax <axis = 1, keepdims = 0> (scores)
}"""


def _drop(text: str) -> int:
    model = ir.from_proto(parse(text, opset=17))
    seqlower.passes.infer_shapes(model)
    return drop_broadcast_unsqueezes(model)


def test_an_unsqueeze_that_broadcasting_makes_goes():
    model = parse(_VITERBI_STEP, opset=17)
    lowered, _ = lower(model, target="generic")
    assert "Unsqueeze" not in op_counts(lowered)
    rng = np.random.default_rng(11)
    feeds = {
        "prev": rng.standard_normal(4).astype(np.float32),
        "trans": rng.standard_normal((4, 4)).astype(np.float32),
    }
    assert_same_outputs(model, lowered, feeds)


def test_unsqueezes_that_change_the_result_stay():
    same_rank = _VITERBI_STEP.replace("float[4,4] trans", "float[4] trans").replace(
        "(float[4] best, int64[4] arg)", "(float[1,4] scores)"
    )
    assert _drop(same_rank) == 0  # Add([1, 4], [4]) is [1, 4]; Add([4], [4]) would be [4]
    last_axis = _VITERBI_STEP.replace("int64[1] {0}", "int64[1] {1}")
    assert _drop(last_axis) == 0
    other_reader = _VITERBI_STEP.replace(
        "arg = ArgMax <axis = 1, keepdims = 0> (scores)",
        "arg = ArgMax <axis = 1, keepdims = 0> (u)",
    )
    assert _drop(other_reader) == 0
    assert _drop(_VITERBI_STEP) == 1
