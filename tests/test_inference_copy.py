"""The copy whole-model inference reads is the one onnx_ir's `call_onnx_api` makes, byte for
byte, with the same lasting effects on the model, also when nodes are copied from the last copy
and the model changed in between."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_ir.passes.common import _c_api_utils

from seqlower.passes.inference_copy import call_with_copy


def _model() -> ir.Model:
    """Weights large and small, a Constant, a Loop whose body reads an outer value and runs a
    Loop of its own."""
    inner = helper.make_graph(
        [helper.make_node("Neg", ["g"], ["g2"], name="inner_neg")],
        "inner",
        [
            helper.make_tensor_value_info("j", TensorProto.INT64, []),
            helper.make_tensor_value_info("d", TensorProto.BOOL, None),
            helper.make_tensor_value_info("g", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("d", TensorProto.BOOL, None),
            helper.make_tensor_value_info("g2", TensorProto.FLOAT, None),
        ],
    )
    body = helper.make_graph(
        [
            helper.make_node("Add", ["h", "b"], ["h1"], name="body_add"),
            helper.make_node("Loop", ["", "c", "h1"], ["h2"], name="inner_loop", body=inner),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 250]),
        ],
        [
            helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h2", TensorProto.FLOAT, [2, 250]),
        ],
    )
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["y"], name="matmul"),
        helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.int64(2))),
        helper.make_node("Reshape", ["y", "shape"], ["r"], name="reshape"),
        helper.make_node("Loop", ["two", "", "r"], ["out"], name="loop", body=body),
        helper.make_node("Relu", ["out"], ["z"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 250])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(np.ones([250, 250], np.float32), "W"),
            numpy_helper.from_array(np.array([2, 250], np.int64), "shape"),
            numpy_helper.from_array(np.ones([250], np.float32), "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ir.serde.deserialize_model(model)


def _both(edit) -> None:
    """Copies made the two ways, each on its own model, after the same edits, compared."""
    ours, theirs = _model(), _model()
    for model in (ours, theirs):
        model.graph.initializers["shape"].shape = None  # given back from its tensor
    for step in range(3):
        mine = call_with_copy(lambda proto: proto.SerializeToString(), ours)
        reference = _c_api_utils.call_onnx_api(lambda proto: proto.SerializeToString(), theirs)
        assert mine == reference, f"copy {step}"
        assert list(ours.graph.initializers) == list(theirs.graph.initializers)
        assert [v.name for v in ours.graph.inputs] == [v.name for v in theirs.graph.inputs]
        assert ours.graph.initializers["shape"].shape == theirs.graph.initializers["shape"].shape
        edit(ours, step)
        edit(theirs, step)


def _node(model: ir.Model, op_type: str) -> ir.Node:
    return next(node for node in model.graph if node.op_type == op_type)


def _rename_value(model, step):
    _node(model, "MatMul").outputs[0].name = f"y{step}"


def _rename_node(model, step):
    _node(model, "Relu").name = f"relu{step}"


def _replace_attribute(model, step):
    _node(model, "Reshape").attributes["allowzero"] = ir.AttrInt64("allowzero", step % 2)


def _rename_attribute_tensor(model, step):
    constant = next(node for node in model.graph if node.op_type == "Constant")
    constant.attributes["value"].value.name = f"t{step}"


def _type_and_shape(model, step):
    value = _node(model, "Relu").outputs[0]
    value.type = ir.TensorType(ir.DataType.FLOAT)
    value.shape = ir.Shape([2, step]) if step else None
    _node(model, "MatMul").outputs[0].type = ir.TensorType(ir.DataType.FLOAT)


def _body_shape(model, step):
    body = _node(model, "Loop").attributes["body"].as_graph()
    body.inputs[2].shape = ir.Shape([2, 250]) if step % 2 == 0 else None


def _inner_body(model: ir.Model) -> ir.Graph:
    body = _node(model, "Loop").attributes["body"].as_graph()
    return next(node for node in body if node.op_type == "Loop").attributes["body"].as_graph()


def _body_value_and_node(model, step):
    body = _node(model, "Loop").attributes["body"].as_graph()
    add = next(node for node in body if node.op_type == "Add")
    add.outputs[0].name = f"h1_{step}"
    add.name = f"add{step}"
    neg = next(iter(_inner_body(model)))
    neg.name = f"inner_neg{step}"


def _body_attribute_and_type(model, step):
    neg = next(iter(_inner_body(model)))
    neg.attributes["note"] = ir.AttrString("note", str(step))  # not ONNX's: only copied
    neg.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
    neg.outputs[0].shape = ir.Shape([step]) if step else None


def _body_insert_and_remove(model, step):
    inner = _inner_body(model)
    neg = next(node for node in inner if node.op_type == "Neg")
    if step == 0:
        made = ir.node("Relu", [neg.inputs[0]], name="inner_relu")
        inner.insert_before(neg, made)
        neg.replace_input_with(0, made.outputs[0])
    elif step == 1:
        made = neg.inputs[0].producer()
        neg.replace_input_with(0, made.inputs[0])
        inner.remove(made, safe=True)


def _insert_node(model, step):
    relu = _node(model, "Relu")
    made = ir.node("Neg", [relu.inputs[0]], name=f"neg{step}")
    model.graph.insert_before(relu, made)
    relu.replace_input_with(0, made.outputs[0])


def _remove_node(model, step):
    if step == 0:
        relu = _node(model, "Relu")
        model.graph.outputs[0] = _node(model, "Loop").outputs[0]
        model.graph.remove(relu, safe=True)


def _doc_string(model, step):
    _node(model, "MatMul").doc_string = f"doc {step}"


def _metadata(model, step):
    _node(model, "MatMul").metadata_props["k"] = str(step)
    _node(model, "MatMul").outputs[0].doc_string = f"value {step}"


EDITS = [
    _rename_value,
    _rename_node,
    _replace_attribute,
    _rename_attribute_tensor,
    _type_and_shape,
    _body_shape,
    _body_value_and_node,
    _body_attribute_and_type,
    _body_insert_and_remove,
    _insert_node,
    _remove_node,
    _doc_string,
    _metadata,
]


@pytest.mark.parametrize("edit", EDITS, ids=[edit.__name__.strip("_") for edit in EDITS])
def test_the_copy_is_call_onnx_apis_after_each_edit(edit):
    _both(edit)


def test_an_edit_of_the_copy_does_not_reach_the_next():
    model = _model()

    def edit(proto: onnx.ModelProto) -> bytes:
        for node in proto.graph.node:  # as inference's caller does with folded arguments
            node.name = "edited"
        return proto.SerializeToString()

    call_with_copy(edit, model)
    again = call_with_copy(lambda proto: proto.SerializeToString(), model)
    assert again == _c_api_utils.call_onnx_api(lambda proto: proto.SerializeToString(), model)


def test_the_weights_are_left_out_and_the_model_keeps_them():
    model = _model()
    copy = call_with_copy(lambda proto: proto, model)
    assert [t.name for t in copy.graph.initializer] == ["shape", "b"]  # 1,000 bytes or less
    assert [v.name for v in copy.graph.input] == ["x", "W", "shape", "b"]
    assert list(model.graph.initializers) == ["shape", "b", "W"]  # as call_onnx_api leaves it
    assert [v.name for v in model.graph.inputs] == ["x"]
    assert model.graph.initializers["W"].const_value is not None


def test_the_nodes_of_a_body_are_copied_from_the_last_copy():
    """Each node of a body, at every depth, is kept for the next copy, not written anew; the
    Loops that hold the bodies are written anew every time (their bodies' shapes change)."""
    from seqlower.passes import inference_copy

    model = _model()
    call_with_copy(lambda proto: None, model)
    cached = model.meta[inference_copy._CACHE_KEY]
    names = sorted(node.name or node.op_type for node in cached)
    assert names == ["Constant", "Identity", "body_add", "inner_neg", "matmul", "relu", "reshape"]
    body_add = next(node for node in cached if node.name == "body_add")
    entry = cached[body_add]
    call_with_copy(lambda proto: None, model)
    assert model.meta[inference_copy._CACHE_KEY][body_add] is entry  # copied, not made again
