"""The fuzz harness's edge feeds (`harness.edge_feeds_problem`): each scalar int64 input at 0 and
-1 and each scalar bool input false, compared wherever the original runs on them. The check must
be able to fail: a lowering that reads a negative trip count as a Slice end is caught."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from generator import generate
from harness import _as_empty_like, edge_feeds, edge_feeds_problem

import seqlower

# for i in range(m): rows.append(x[i]) as a Loop with scan outputs, m a model input
ORIGINAL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[4,3] x, int64 m) => (float[?,3] rows) {
    t = Constant<value = bool {1}>()
    rows = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] row) {
        c2 = Identity(c)
        row = Gather<axis = 0>(x, i)
    }>
}"""

# the same rows as Slice(x, 0, m): right for 0 <= m <= 4, the rows but the last for m = -1
SLICED = """<ir_version: 8, opset_import: ["" : 17]>
g (float[4,3] x, int64 m) => (float[?,3] rows) {
    zero = Constant<value = int64[1] {0}>()
    one = Constant<value = int64[1] {1}>()
    end = Reshape(m, one)
    rows = Slice(x, zero, end, zero)
}"""


def _model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


FEEDS = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "m": np.array(3)}


def test_the_edge_feeds_set_each_scalar_input_in_turn():
    feeds = {**FEEDS, "go": np.array(True), "v": np.array([1, 2])}
    labels = [label for label, _ in edge_feeds(feeds)]
    assert labels == ["m=0", "m=-1", "go=False"]


def test_a_negative_trip_count_read_as_a_slice_end_is_caught():
    problem = edge_feeds_problem(_model(ORIGINAL), _model(SLICED), FEEDS)
    assert problem is not None and problem.startswith("m=-1: output 0: shape (3, 3)"), problem


def test_the_lowered_loop_passes():
    original = _model(ORIGINAL)
    lowered, _ = seqlower.optimize(original, target="portable")
    assert edge_feeds_problem(original, lowered, FEEDS) is None


@pytest.mark.parametrize(
    ("want", "got", "allowed"),
    [((0,), (0, 3), True), ((0, 0), (0, 3), True), ((0, 3), (1, 3), False), ((2,), (2, 1), False)],
)
def test_only_empty_outputs_may_differ_past_their_first_dim(want, got, allowed):
    expected = np.zeros(want, np.float32)
    taken = _as_empty_like(expected, np.zeros(got, np.float32))
    assert (taken is expected) == allowed


@pytest.mark.parametrize("seed", [61, 114, 936])
def test_seeds_that_found_bugs_at_their_edges_pass(seed):
    """114 (a trip count of -1 batched as a Slice end), 61 and 936 (an empty scan output whose
    body output has no shape: allowed)."""
    program = generate(seed)
    lowered, _ = seqlower.optimize(program.model, target="portable", **program.options)
    assert edge_feeds(program.feeds)
    assert edge_feeds_problem(program.model, lowered, program.feeds) is None
