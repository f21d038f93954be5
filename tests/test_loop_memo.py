"""What a Loop's shape analysis found is remembered while the model is unchanged, for the
values it was found over, and only then (`seqlower.analysis.loop_memo`)."""

from __future__ import annotations

import onnx_ir as ir
from onnx import TensorProto, helper

from seqlower.analysis.loop_memo import LoopMemo
from seqlower.analysis.loop_shapes import LoopShapes, analysed, carried_output_shape
from seqlower.analysis.static_values import StaticValues
from seqlower.rewriter import Rewriter


def _two_loops() -> ir.Model:
    """A Loop that keeps its carried tensor's shape (adds a row of ones), then one that grows
    it; the second reads what the first carried out."""

    def body(name: str, op: str) -> object:
        nodes = [helper.make_node("Identity", ["c"], ["c_out"])]
        if op == "Add":
            nodes.append(helper.make_node("Add", ["t", "one"], ["t_out"]))
        else:
            nodes.append(helper.make_node("Concat", ["t", "one"], ["t_out"], axis=0))
        floats = [helper.make_tensor_value_info(v, TensorProto.FLOAT, None) for v in ("t", "t_out")]
        flag = [helper.make_tensor_value_info(v, TensorProto.BOOL, []) for v in ("c", "c_out")]
        counter = helper.make_tensor_value_info("i", TensorProto.INT64, [])
        return helper.make_graph(nodes, name, [counter, flag[0], floats[0]], [flag[1], floats[1]])

    one = helper.make_tensor("one", TensorProto.FLOAT, [1, 3], [1, 2, 3])
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["one"], value=one),
            helper.make_node("Loop", ["n", "", "x"], ["kept"], body=body("keeps", "Add")),
            helper.make_node("Loop", ["n", "", "kept"], ["y"], body=body("grows", "Concat")),
        ],
        "two",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_an_analysis_is_remembered_and_read_by_the_next() -> None:
    model = _two_loops()
    keeps, grows = (node for node in model.graph if node.op_type == "Loop")
    values = StaticValues()
    memo = LoopMemo(values, generation=lambda: 0)
    assert memo.invariant_carried(keeps, values) is None  # nothing analysed yet
    found = LoopShapes(keeps, values, memo=memo).invariant_carried()
    assert found == [keeps.attributes["body"].as_graph().inputs[2]]
    assert memo.invariant_carried(keeps, values) == tuple(found)
    # the growing Loop's analysis derives its input's shape from the memo: (2, 3)
    assert carried_output_shape(keeps, keeps.outputs[0], values, memo=memo) == (2, 3)
    assert LoopShapes(grows, values, memo=memo).invariant_carried() == []
    assert memo.invariant_carried(grows, values) == ()


def test_the_memo_forgets_when_the_model_changes_and_answers_only_for_its_values() -> None:
    model = _two_loops()
    keeps = next(node for node in model.graph if node.op_type == "Loop")
    values = StaticValues()
    generation = [0]
    memo = LoopMemo(values, generation=lambda: generation[0])
    LoopShapes(keeps, values, memo=memo)
    assert memo.invariant_carried(keeps, StaticValues()) is None  # other values: not asked
    assert memo.invariant_carried(keeps, values) is not None
    generation[0] += 1
    assert memo.invariant_carried(keeps, values) is None
    # an analysis under hypotheses (here: a list assumed of elements of one shape) is not
    LoopShapes(keeps, values, uniform=[model.graph.inputs[0]], memo=memo)
    assert memo.invariant_carried(keeps, values) is None


def test_the_rules_share_one_analysis_of_a_loop_until_a_rewrite() -> None:
    """`analysed` gives the analysis made last for the same Loop and values while the model is
    unchanged (the rules tried on one Loop in turn share it); after a rewrite through the
    rewriter (here: the body that kept its tensor's shape now grows it) a new analysis is made,
    which sees the change."""
    model = _two_loops()
    keeps, grows = (node for node in model.graph if node.op_type == "Loop")
    rewriter = Rewriter(model)
    values = StaticValues(generation=rewriter.generation)
    memo = LoopMemo(values, generation=rewriter.generation)
    first = analysed(keeps, values, memo)
    body = keeps.attributes["body"].as_graph()
    assert first.invariant_carried() == [body.inputs[2]]
    assert analysed(keeps, values, memo) is first  # nothing changed: shared
    assert analysed(keeps, StaticValues(), memo) is not first  # other values: not shared
    add = next(node for node in body if node.op_type == "Add")
    grown = rewriter.before(add).op("Concat", list(add.inputs), {"axis": 0})
    rewriter.replace(add.outputs[0], grown)
    again = analysed(keeps, values, memo)
    assert again is not first
    assert again.invariant_carried() == []  # the body grows the tensor now
    # only the last analysis is kept: another Loop's replaces it
    other = analysed(grows, values, memo)
    assert analysed(keeps, values, memo) is not again
    assert analysed(grows, values, memo) is not other  # replaced in turn by the line above
