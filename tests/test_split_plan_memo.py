"""The plans of SplitToSequence nodes that `Facts.split_plan` keeps across rewrites, and what
makes it make one again: a replaced input, a new shape of the data, sizes that were only
provisionally unknown once the model changes (`seqlower.analysis.facts`)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

from seqlower.analysis import facts as facts_module
from seqlower.analysis.facts import Facts, KnownLength, Unknown
from seqlower.analysis.split_plan import SplitPlan
from seqlower.rewriter import Rewriter


def _split_model(sizes: str) -> ir.Model:
    """x[6, 2] split on axis 0 by `sizes`: "constant" (a Constant [1, 5]), "runtime" (a model
    input of k sizes), "length" (the Concat of a list's length and 2: provisional until the
    length is lowered), "none" (no sizes, keepdims 0). The list is a graph output."""
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, None)
    listed = helper.make_sequence_type_proto(element)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 2])
    inputs, nodes = [x], []
    if sizes == "constant":
        tensor = helper.make_tensor("k", TensorProto.INT64, [2], [1, 5])
        nodes.append(helper.make_node("Constant", [], ["sizes"], value=tensor))
    elif sizes == "runtime":
        inputs.append(helper.make_tensor_value_info("sizes", TensorProto.INT64, ["k"]))
    elif sizes == "length":
        inputs.append(helper.make_value_info("t", listed))
        two = helper.make_tensor("two", TensorProto.INT64, [1], [2])
        nodes += [
            helper.make_node("SequenceLength", ["t"], ["n"]),
            helper.make_node("Unsqueeze", ["n", "zero"], ["n1"]),
            helper.make_node("Constant", [], ["two"], value=two),
            helper.make_node("Concat", ["n1", "two"], ["sizes"], axis=0),
        ]
        zero = helper.make_tensor("z", TensorProto.INT64, [1], [0])
        nodes.insert(0, helper.make_node("Constant", [], ["zero"], value=zero))
    if sizes == "none":
        nodes.append(helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0))
    else:
        nodes.append(helper.make_node("SplitToSequence", ["x", "sizes"], ["s"], axis=0))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_value_info("s", listed)])
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    if sizes in ("constant", "length"):
        _made(model, "sizes").outputs[0].shape = ir.Shape([2])
    return model


def _made(model: ir.Model, name: str) -> ir.Node:
    """The node that makes the value `name`."""
    return next(n for n in model.graph if n.outputs and n.outputs[0].name == name)


def _split(model: ir.Model) -> ir.Node:
    return next(n for n in model.graph if n.op_type == "SplitToSequence")


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[ir.Node]:
    """Each node `plan_split` is called for, in order."""
    asked: list[ir.Node] = []
    original = facts_module.plan_split

    def counted(node, values):  # type: ignore[no-untyped-def]
        asked.append(node)
        return original(node, values)

    monkeypatch.setattr(facts_module, "plan_split", counted)
    return asked


def test_a_plan_is_made_once_while_nothing_it_read_changes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    asked = _counting(monkeypatch)
    for sizes, expected in (("constant", (1, 5)), ("none", (1,) * 6)):
        model = _split_model(sizes)
        rewriter = Rewriter(model)
        facts = Facts(model, rewriter.generation, rewriter.list_generation)
        split = _split(model)
        plan = facts.split_plan(split)
        assert isinstance(plan, SplitPlan) and plan.sizes == expected
        # rewrites elsewhere (a node emitted, a rewrite done) keep it
        rewriter.before(split).constant(np.array(3, dtype=np.int64), "unrelated")
        rewriter.take_touched()
        assert facts.split_plan(split) is plan
        assert facts.sequence(model.graph.outputs[0]) == KnownLength(len(expected))
        assert asked.count(split) == 1, sizes
    # a refusal (sizes known at run time only) is kept the same way: it is final
    model = _split_model("runtime")
    rewriter = Rewriter(model)
    facts = Facts(model, rewriter.generation, rewriter.list_generation)
    split = _split(model)
    reason = facts.split_plan(split)
    assert isinstance(reason, str)
    rewriter.take_touched()
    assert facts.split_plan(split) is reason and asked.count(split) == 1


def test_a_replaced_input_makes_the_plan_again(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    asked = _counting(monkeypatch)
    model = _split_model("constant")
    rewriter = Rewriter(model)
    facts = Facts(model, rewriter.generation, rewriter.list_generation)
    split = _split(model)
    assert facts.split_plan(split).sizes == (1, 5)  # type: ignore[union-attr]
    other = rewriter.before(split).constant(np.array([4, 2], dtype=np.int64), "other")
    other.shape = ir.Shape([2])
    rewriter.replace(split.inputs[1], other)  # type: ignore[arg-type]
    rewriter.take_touched()
    assert facts.split_plan(split).sizes == (4, 2)  # type: ignore[union-attr]
    assert facts.sequence(model.graph.outputs[0]) == KnownLength(2)
    # and an input replaced by a rule's own edit, not through the rewriter
    third = rewriter.before(split).constant(np.array([6], dtype=np.int64), "third")
    third.shape = ir.Shape([1])
    split.replace_input_with(1, third)
    assert facts.split_plan(split).sizes == (6,)  # type: ignore[union-attr]
    assert asked.count(split) == 3


def test_a_new_shape_of_the_data_makes_the_plan_again() -> None:
    model = _split_model("none")
    rewriter = Rewriter(model)
    facts = Facts(model, rewriter.generation, rewriter.list_generation)
    split = _split(model)
    assert facts.split_plan(split).count == 6  # type: ignore[union-attr]
    split.inputs[0].shape = ir.Shape([3, 2])  # type: ignore[union-attr]
    assert facts.split_plan(split).count == 3  # type: ignore[union-attr]
    split.inputs[0].shape = ir.Shape(["m", 2])  # type: ignore[union-attr]
    fact = facts.sequence(model.graph.outputs[0])
    assert isinstance(fact, Unknown) and "unknown before run time" in fact.reason


def test_provisional_sizes_are_asked_again_once_the_model_changed(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    asked = _counting(monkeypatch)
    model = _split_model("length")
    rewriter = Rewriter(model)
    facts = Facts(model, rewriter.generation, rewriter.list_generation)
    split = _split(model)
    first = facts.split_plan(split)
    # the sizes read a SequenceLength a rule may still lower: not static, for now
    assert isinstance(first, SplitPlan) and first.sizes is None  # sizes computed at run time
    assert facts.split_plan(split) is first and asked.count(split) == 1  # the same generation
    length = _made(model, "n")
    four = rewriter.before(length).constant(np.array(4, dtype=np.int64), "four")
    rewriter.replace(length.outputs[0], four)
    rewriter.take_touched()
    assert split.inputs[1].producer().op_type == "Concat"  # type: ignore[union-attr]
    plan = facts.split_plan(split)  # the split's inputs are the same: the generation tells
    assert isinstance(plan, SplitPlan) and plan.sizes == (4, 2)
    assert asked.count(split) == 2
    # now settled: kept across later rewrites
    rewriter.take_touched()
    assert facts.split_plan(split) is plan and asked.count(split) == 2


def test_without_a_generation_a_provisional_plan_lasts_one_question(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    asked = _counting(monkeypatch)
    model = _split_model("length")
    facts = Facts(model)
    split = _split(model)
    assert facts.split_plan(split).sizes is None  # type: ignore[union-attr]
    assert facts.split_plan(split).sizes is None  # type: ignore[union-attr]
    assert asked.count(split) == 2
