"""The emitted Split / Squeeze / Unsqueeze take the form the model's opset allows (trap 8):
`split` and `axes` are attributes before opset 13 and inputs from 13 on. The ONNX checker
(full_check) and onnxruntime loading the result are the proof; the form is also asserted."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import (
    MAX_ORT_IR_VERSION,
    NEWEST_ORT_OPSET,
    lower_and_compare,
    op_counts,
    ort_session,
    parse,
    sequence_op_count,
)

# x is cut in two chunks [2,2] and [2,4]; the second is split into its rows and the rows are
# stacked on axis 1 in reverse order: Split (1-D sizes), Squeeze and Unsqueeze appear.
SPLIT_AT_CONCAT = """g (float[2,6] x) => (float[4,2] y) {
    sizes = Constant<value = int64[2] {2, 4}>()
    s = SplitToSequence<axis = 1>(x, sizes)
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    a = SequenceAt(s, one)
    rows = SplitToSequence<axis = 0, keepdims = 0>(a)
    r0 = SequenceAt(rows, zero)
    r1 = SequenceAt(rows, one)
    reversed = SequenceConstruct(r1, r0)
    y = ConcatFromSequence<axis = 1, new_axis = 1>(reversed)
}"""

OPSETS = [11, 12, 13, 17, 18, NEWEST_ORT_OPSET]


def _nodes(model: onnx.ModelProto, op_type: str) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if node.op_type == op_type]


@pytest.mark.parametrize("opset", OPSETS)
def test_split_at_concat_at_each_opset(opset):
    model = parse(SPLIT_AT_CONCAT, opset=opset, ir_version=MAX_ORT_IR_VERSION if opset > 21 else 7)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    lowered, _, (y,) = lower_and_compare(model, {"x": x})
    np.testing.assert_array_equal(y, x[::-1, 2:].T)
    assert sequence_op_count(lowered) == 0
    counts = op_counts(lowered)
    assert counts["Split"] >= 1 and counts["Squeeze"] >= 1 and counts["Unsqueeze"] >= 1
    for op_type, attribute in (("Split", "split"), ("Squeeze", "axes"), ("Unsqueeze", "axes")):
        for node in _nodes(lowered, op_type):
            attributes = {a.name for a in node.attribute}
            if opset < 13:
                assert attribute in attributes and len(node.input) == 1, node
            else:
                assert attribute not in attributes and len(node.input) == 2, node


def test_the_probed_limits_of_onnxruntime_hold():
    """The tests run models at the newest IR version and opset the probe found; one past
    either is refused, unless the probe stopped at what the installed onnx knows."""
    neg = "g (float[2] x) => (float[2] y) { y = Neg(x) }"
    ort_session(parse(neg, opset=NEWEST_ORT_OPSET, ir_version=MAX_ORT_IR_VERSION))
    if onnx.defs.onnx_opset_version() > NEWEST_ORT_OPSET:
        with pytest.raises(Exception, match=r"(?i)opset"):
            ort_session(parse(neg, opset=NEWEST_ORT_OPSET + 1, ir_version=MAX_ORT_IR_VERSION))
    if MAX_ORT_IR_VERSION < onnx.IR_VERSION:
        with pytest.raises(Exception, match=r"(?i)unsupported"):
            ort_session(parse(neg, ir_version=MAX_ORT_IR_VERSION + 1))
