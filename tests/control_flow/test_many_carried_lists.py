"""A Loop carrying more lists than there are rewrite sweeps: a rule that rebuilds the Loop with
one list fewer rewrites the rebuilt Loop again in the same sweep, so every list is lowered,
not one per sweep until the sweep limit (50) leaves the rest as sequences."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from support import assert_same_outputs, lower, sequence_op_count

LISTS = 60  # more than Options.max_iterations


def _sequence_info(name: str) -> onnx.ValueInfoProto:
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [3])
    return helper.make_value_info(name, helper.make_sequence_type_proto(element))


def _loop_of_lists(lists: int, last_read: bool) -> onnx.ModelProto:
    """Loop(m) carrying `lists` lists, each starting as [x] and appended x * (k + 1) every
    iteration (the body also reads each list's last element when `last_read`), each stacked
    after the loop."""
    body_nodes = [helper.make_node("Identity", ["c"], ["c_out"])]
    body_inputs = [
        helper.make_tensor_value_info("i", TensorProto.INT64, []),
        helper.make_tensor_value_info("c", TensorProto.BOOL, []),
    ]
    body_outputs = [helper.make_tensor_value_info("c_out", TensorProto.BOOL, [])]
    nodes = [helper.make_node("Constant", [], ["minus_one"], value=helper.make_tensor(
        "minus_one", TensorProto.INT64, [], [-1]))]  # fmt: skip
    for k in range(lists):
        scale = helper.make_tensor(f"scale{k}", TensorProto.FLOAT, [], [k + 1.0])
        body_nodes.append(helper.make_node("Constant", [], [f"s{k}"], value=scale))
        piece = f"x{k}"
        body_nodes.append(helper.make_node("Mul", ["x", f"s{k}"], [piece]))
        if last_read:
            body_nodes.append(helper.make_node("SequenceAt", [f"q{k}", "minus_one"], [f"l{k}"]))
            body_nodes.append(helper.make_node("Add", [f"x{k}", f"l{k}"], [f"p{k}"]))
            piece = f"p{k}"
        body_nodes.append(helper.make_node("SequenceInsert", [f"q{k}", piece], [f"qo{k}"]))
        body_inputs.append(_sequence_info(f"q{k}"))
        body_outputs.append(_sequence_info(f"qo{k}"))
        nodes.append(helper.make_node("SequenceConstruct", ["x"], [f"e{k}"]))
    body = helper.make_graph(body_nodes, "body", body_inputs, body_outputs)
    nodes.append(
        helper.make_node(
            "Loop", ["m", "", *(f"e{k}" for k in range(lists))],
            [f"l_out{k}" for k in range(lists)], body=body,
        )
    )  # fmt: skip
    outputs = []
    for k in range(lists):
        nodes.append(
            helper.make_node("ConcatFromSequence", [f"l_out{k}"], [f"y{k}"], axis=0, new_axis=1)
        )
        outputs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, ["n", 3]))
    graph = helper.make_graph(
        nodes,
        "many_lists",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("m", TensorProto.INT64, []),
        ],
        outputs,
    )
    # IR 10: onnxruntime 1.20, the oldest supported, reads no newer
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


@pytest.mark.parametrize("last_read", [False, True], ids=["appends", "appends-reading-last"])
def test_every_list_of_a_loop_carrying_more_lists_than_sweeps_is_lowered(last_read: bool) -> None:
    model = _loop_of_lists(LISTS, last_read)
    assert sequence_op_count(model) == 3 * LISTS + LISTS * last_read
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert report.stop_reason.startswith("fixpoint"), report.stop_reason
    x = np.array([1.0, -2.0, 0.5], np.float32)
    for trips in (0, 1, 3):
        outputs = assert_same_outputs(model, lowered, {"x": x, "m": np.array(trips, np.int64)})
        assert outputs[LISTS - 1].shape == (trips + 1, 3)
