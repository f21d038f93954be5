"""What the targets say of a list in its tensor form carried by a Loop: a carried tensor that
grows, which TensorRT does not take (its loop-carried values keep one shape)."""

from __future__ import annotations

from support import parse, rules_without

import seqlower
from seqlower.targets import check_target

GROWN_IN_LOOP = """
agraph (float[N,3] x, int64 m) => (float[?,3] y) {
    e = SequenceEmpty <dtype=1> ()
    s = Loop (m, , e) <body = body (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) out) {
        one = Constant <value=int64[1] {1}> ()
        zero = Constant <value=int64[1] {0}> ()
        i1 = Unsqueeze (i, zero)
        end = Add (i1, one)
        piece = Slice (x, zero, end, zero)
        out = SequenceInsert (acc, piece)
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis=0> (s)
}
"""

RUNNING_SUM = """
agraph (float[3] x, int64 m) => (float[3] y) {
    y = Loop (m, , x) <body = body (int64 i, bool c, float[3] acc) => (bool c2, float[3] out) {
        out = Add (acc, acc)
        c2 = Identity (c)
    }>
}
"""


def test_tensorrt_refuses_a_loop_that_carries_a_growing_tensor():
    # loop-batch would take the loop whole (its prefixes are ragged slices, concatenated)
    unbatched = rules_without("loop-batch")
    model, report = seqlower.optimize(parse(GROWN_IN_LOOP), target="tensorrt", rules=unbatched)
    check = check_target(model, report, "tensorrt")
    assert any("whose shape may change between iterations" in e for e in check.errors)
    assert "tensorrt needs loop-carried values of one shape" in "\n".join(check.errors)


def test_tensorrt_accepts_a_loop_whose_carried_tensor_keeps_its_shape():
    model, report = seqlower.optimize(parse(RUNNING_SUM), target="tensorrt")
    assert [node.op_type for node in model.graph.node] == ["Loop"]
    check = check_target(model, report, "tensorrt")
    assert not any("whose shape may change" in e for e in check.errors)


def test_openvino_is_not_asked_for_one_shape():
    model, report = seqlower.optimize(parse(GROWN_IN_LOOP), target="openvino")
    check = check_target(model, report, "openvino")
    assert not any("whose shape may change" in e for e in [*check.errors, *check.warnings])
