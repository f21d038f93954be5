"""More tiny hostile files (the sequel to tests/test_hostile_inputs.py): shapes that made the
optimizer crash, recurse too deep or go quadratic. Only outcomes are checked here (the refusal
text, the exit code, the numbers the lowered model computes); bench/scaling.py times them at
the sizes that failed."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper

from seqlower.analysis.static_lengths import StaticLengths
from seqlower.analysis.static_values import StaticValues
from tests.support import assert_same_outputs, lower, sequence_op_count

OPSET = [helper.make_opsetid("", 17)]


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, initializer=list(initializers))
    # IR 10: onnxruntime 1.20, the oldest supported, reads no newer
    return helper.make_model(graph, opset_imports=OPSET, ir_version=10)


def _float(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _int(name: str, shape=()) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.INT64, list(shape))


def _position(name: str, value: int) -> onnx.NodeProto:
    tensor = helper.make_tensor(f"{name}_value", TensorProto.INT64, [], [value])
    return helper.make_node("Constant", [], [name], value=tensor)


def inserts_at_the_front(count: int) -> onnx.ModelProto:
    """`count` SequenceInserts of x at position 0 of a list made empty, stacked."""
    nodes = [
        helper.make_node("SequenceEmpty", [], ["s0"], dtype=TensorProto.FLOAT),
        _position("p", 0),
    ]
    nodes += [
        helper.make_node("SequenceInsert", [f"s{k}", "x", "p"], [f"s{k + 1}"]) for k in range(count)
    ]
    nodes.append(helper.make_node("ConcatFromSequence", [f"s{count}"], ["y"], axis=0, new_axis=1))
    return _model(nodes, [_float("x", [2])], [_float("y", [count, 2])])


def lengths_as_outputs(count: int) -> onnx.ModelProto:
    """The length of one split, `count` times over, each a graph output of its own."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0)]
    nodes += [helper.make_node("SequenceLength", ["s"], [f"n{k}"]) for k in range(count)]
    return _model(nodes, [_float("x", ["m", 2])], [_int(f"n{k}") for k in range(count)])


def test_the_static_length_at_the_end_of_a_long_chain_of_edits() -> None:
    # the cost model's lengths recursed once per edit: RecursionError at 1,000 inserts
    model = ir.from_proto(inserts_at_the_front(5000))
    lengths = StaticLengths(StaticValues())
    concat = model.graph.node(-1)
    assert lengths.of(concat.inputs[0]) == 5000
    # and a chain of erases from a split of static length, erasing at the default position
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s0"], axis=0, keepdims=0)]
    nodes += [helper.make_node("SequenceErase", [f"s{k}"], [f"s{k + 1}"]) for k in range(3000)]
    nodes.append(helper.make_node("SequenceLength", ["s3000"], ["n"]))
    erased = ir.from_proto(_model(nodes, [_float("x", [3001, 2])], [_int("n")]))
    assert StaticLengths(StaticValues()).of(erased.graph.node(-1).inputs[0]) == 1


def test_three_thousand_inserts_at_the_front_under_the_default_target() -> None:
    # the default target costs the model as given before lowering it (`node_costs`)
    model = inserts_at_the_front(3000)
    lowered, report = lower(model, target="generic")
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["insert-into-known"] == 3000
    x = np.array([1.5, -2.0], np.float32)
    (y,) = assert_same_outputs(model, lowered, {"x": x})
    np.testing.assert_array_equal(y, np.tile(x, (3000, 1)))


def test_hundreds_of_graph_outputs_each_rewritten_keep_their_names_and_order() -> None:
    # each rewritten output was found by a walk of all the outputs (16 s at 10,000)
    model = lengths_as_outputs(300)
    # the same value twice among the outputs, and an output that is the split's input
    model.graph.output.append(_int("n7"))
    model.graph.output.append(_float("x", ["m", 2]))
    lowered, _ = lower(model, target="generic")
    assert sequence_op_count(lowered) == 0
    assert [o.name for o in lowered.graph.output] == [o.name for o in model.graph.output]
    x = np.zeros((5, 2), np.float32)
    outputs = assert_same_outputs(model, lowered, {"x": x})
    assert [int(n) for n in outputs[:-1]] == [5] * 301
