"""A Loop whose condition has another rank than its body declares for it is bad input (exit 2,
naming the Loop), as onnxruntime refuses to load it; what onnxruntime runs (a condition of
shape [1] into a body that declares no shape for it, a trip count of shape [1]) is not refused.
And a list a Loop carries whose output inference left untyped stays a sequence, with the reason,
instead of crashing the list converter (the mutation fuzzer's m14_92: yolov5's per-image NMS
with one ReduceMin made keepdims=1)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from seqlower.errors import InvalidModelError
from seqlower.input_check import check_input_proto
from seqlower.lists import find_lists, lower_lists
from seqlower.loop_condition import loop_condition_problem
from seqlower.rewriter import Rewriter


def _loop(cond_keepdims: int, body_cond_shape, trip_shape=()) -> onnx.ModelProto:
    """y = Loop(M, ReduceMin(x, keepdims) > 0, a, body(i, cond, a) -> (cond, a + a)); the body
    declares its condition input with `body_cond_shape` (None: no shape)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Add", ["a", "a"], ["a_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, body_cond_shape),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, None),
            helper.make_tensor_value_info("a_out", TensorProto.FLOAT, [2]),
        ],
    )
    nodes = [
        helper.make_node("ReduceMin", ["x"], ["least"], keepdims=cond_keepdims),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", 1, [], [0.0])),
        helper.make_node("Greater", ["least", "zero"], ["go"]),
        helper.make_node("Loop", ["M", "go", "a"], ["y"], body=body, name="the_loop"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("M", TensorProto.INT64, list(trip_shape)),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what the oldest supported onnxruntime loads
    return model


def _feeds(trip_shape=()) -> dict[str, np.ndarray]:
    return {
        "M": np.full(trip_shape, 3, np.int64),
        "x": np.ones(3, np.float32),
        "a": np.ones(2, np.float32),
    }


def test_a_condition_of_rank_1_into_a_scalar_body_condition_is_refused():
    model = _loop(cond_keepdims=1, body_cond_shape=[])
    with pytest.raises(Exception, match="Mismatch between number of inferred and declared"):
        ort.InferenceSession(model.SerializeToString())  # what the rule stands for
    with pytest.raises(InvalidModelError) as caught:
        check_input_proto(model, "m.onnx")
    said = str(caught.value)
    assert "the input model itself is invalid: Loop 'the_loop'" in said
    assert "its condition 'go' has rank 1" in said and "'cond' of rank 0" in said


def test_a_scalar_condition_into_a_body_condition_of_rank_1_is_refused():
    model = _loop(cond_keepdims=0, body_cond_shape=[1])
    problem = loop_condition_problem(model.graph, _inferred(model))
    assert problem is not None and "has rank 0" in problem and "of rank 1" in problem


@pytest.mark.parametrize(
    ("cond_keepdims", "body_cond_shape", "trip_shape"),
    [
        (1, None, ()),  # [1] into a body that declares no shape: onnxruntime runs it
        (0, [], (1,)),  # a trip count of shape [1]: the body never sees it
        (0, [], ()),
    ],
)
def test_what_onnxruntime_runs_is_not_refused(cond_keepdims, body_cond_shape, trip_shape):
    model = _loop(cond_keepdims, body_cond_shape, trip_shape)
    (y,) = ort.InferenceSession(model.SerializeToString()).run(None, _feeds(trip_shape))
    np.testing.assert_array_equal(y, np.full(2, 8, np.float32))
    assert loop_condition_problem(model.graph, _inferred(model)) is None
    check_input_proto(model, "m.onnx")


def test_the_command_line_says_it_in_one_line_with_exit_2(tmp_path):
    source = tmp_path / "m.onnx"
    onnx.save(_loop(cond_keepdims=1, body_cond_shape=[]), source)
    result = subprocess.run(
        [sys.executable, "-m", "seqlower", "optimize", str(source), str(tmp_path / "o.onnx")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Loop 'the_loop'" in lines[0], result.stderr
    assert "Traceback" not in result.stderr and "a bug in seqlower" not in result.stderr
    assert not (tmp_path / "o.onnx").exists()


def _inferred(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    found = onnx.shape_inference.infer_shapes(model).graph
    return {value.name: value for value in [*found.input, *found.value_info, *found.output]}


def _carried_list(output_typed: bool) -> ir.Model:
    """s = Loop(M, true, SequenceEmpty(), body: SequenceInsert(s, x)); y = ConcatFromSequence(s)
    in onnx_ir as read, without inference: the Loop's output typed as a sequence or not."""
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    body = helper.make_graph(
        [
            helper.make_node("SequenceInsert", ["s_in", "x"], ["s_out"]),
            helper.make_node("Identity", ["cond"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_value_info("s_in", seq),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_value_info("s_out", seq),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.FLOAT),
            helper.make_node("Constant", [], ["t"], value=helper.make_tensor("t", 9, [], [True])),
            helper.make_node("Loop", ["M", "t", "s0"], ["s"], body=body, name="builds"),
            helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
        ],
        "g",
        [
            helper.make_tensor_value_info("M", TensorProto.INT64, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        value_info=[helper.make_value_info("s0", seq)]
        + ([helper.make_value_info("s", seq)] if output_typed else []),
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return ir.from_proto(proto)


def test_a_carried_list_whose_loop_output_is_untyped_stays_with_its_reason():
    model = _carried_list(output_typed=False)
    loop = next(node for node in model.graph if node.op_type == "Loop")
    plans = find_lists(model, 17)
    (plan,) = [p for p in plans if loop.inputs[2] in p.values]
    assert not plan.convertible
    assert plan.reason == (
        "Loop 'builds' carries it, but its output 's' has no sequence type (ONNX inference "
        "could not type the Loop)"
    )
    body = loop.attributes["body"].as_graph()
    assert body.inputs[2] in plan.values and body.outputs[1] in plan.values
    outcome = lower_lists(model, Rewriter(model))  # raised KeyError before
    assert outcome.converted == []
    assert [node.op_type for node in model.graph][2] == "Loop"


def test_a_carried_list_whose_loop_output_is_typed_is_still_converted():
    model = _carried_list(output_typed=True)
    (plan,) = find_lists(model, 17)
    assert plan.convertible, plan.reason
    outcome = lower_lists(model, Rewriter(model))
    assert {node.op_type for node, _ in outcome.converted} >= {"Loop", "SequenceEmpty"}
