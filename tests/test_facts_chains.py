"""What `Facts.sequence` finds at the end of a chain of Identities, inserts, erases and maps,
the walks it remembers while no list changes, and what it forgets when one may have
(`seqlower.analysis.facts`)."""

from __future__ import annotations

import onnx_ir as ir
from onnx import TensorProto, helper

from seqlower.analysis.facts import Facts, KnownElements, KnownLength, Unknown
from seqlower.rewriter import Rewriter

_STEPS = ("Identity", "SequenceInsert", "SequenceErase", "SequenceMap", "Identity")


def _chain(steps: list[str], start: str) -> ir.Model:
    """A list made by `start` (a SequenceConstruct of a and b, a SplitToSequence of x in 4
    rows, or a model input), then one node per step, each reading the list before it; every
    list a graph output."""
    nodes = []
    if start == "construct":
        nodes.append(helper.make_node("SequenceConstruct", ["a", "b"], ["s0"]))
    elif start == "split":
        nodes.append(helper.make_node("SplitToSequence", ["x"], ["s0"], axis=0, keepdims=0))
    body = helper.make_graph(
        [helper.make_node("Neg", ["e"], ["f"])],
        "body",
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("f", TensorProto.FLOAT, [3])],
    )
    for k, op in enumerate(steps):
        inputs = [f"s{k}", "a"] if op == "SequenceInsert" else [f"s{k}"]
        attributes = {"body": body} if op == "SequenceMap" else {}
        nodes.append(helper.make_node(op, inputs, [f"s{k + 1}"], **attributes))
    element = helper.make_tensor_type_proto(TensorProto.FLOAT, [3])
    listed = helper.make_sequence_type_proto(element)
    inputs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [3]) for v in ("a", "b")]
    inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]))
    if start == "input":
        inputs.append(helper.make_value_info("s0", listed))
    outputs = [helper.make_value_info(f"s{k}", listed) for k in range(len(steps) + 1)]
    graph = helper.make_graph(nodes, "chain", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ir.from_proto(model)


def _expected(model: ir.Model, value: ir.Value) -> object:
    """The fact, found by a walk back of its own (no memory)."""
    change, resized = 0, False
    while (producer := value.producer()) is not None and producer.op_type in _STEPS:
        if producer.op_type != "Identity":
            resized = True
        change += {"SequenceInsert": 1, "SequenceErase": -1}.get(producer.op_type, 0)
        value = producer.inputs[0]
    if producer is None:
        return Unknown
    if producer.op_type == "SequenceConstruct":
        base = len(producer.inputs)
        return KnownLength(base + change) if resized else KnownElements(tuple(producer.inputs))
    return KnownLength(4 + change)


def test_every_value_of_a_chain_has_the_fact_a_walk_of_its_own_finds() -> None:
    steps = [_STEPS[k * 7 % 5] for k in range(40)]
    for start in ("construct", "split", "input"):
        model = _chain(steps, start)
        rewriter = Rewriter(model)
        facts = Facts(model, rewriter.generation, rewriter.list_generation)
        # asked from the end first (one walk remembers every value), then in order
        for value in [model.graph.outputs[-1], *model.graph.outputs]:
            fact, expected = facts.sequence(value), _expected(model, value)
            if expected is Unknown:
                assert isinstance(fact, Unknown), (start, value.name, fact)
                assert "sequence-typed model input" in fact.reason
            else:
                assert fact == expected, (start, value.name)
    # the last list of the split: 40 steps, 8 inserts and 8 erases of them (the rest
    # Identities and maps)
    assert steps.count("SequenceInsert") == 8 and steps.count("SequenceErase") == 8
    model = _chain(steps, "split")
    assert Facts(model).sequence(model.graph.outputs[-1]) == KnownLength(4)
    assert Facts(model).elements(model.graph.outputs[1]) is None


def test_a_remembered_walk_is_forgotten_when_a_list_is_replaced() -> None:
    model = _chain(["Identity", "Identity", "SequenceInsert"], "construct")
    rewriter = Rewriter(model)
    facts = Facts(model, rewriter.generation, rewriter.list_generation)
    s = model.graph.outputs
    a, b = model.graph.inputs[0], model.graph.inputs[1]
    assert facts.sequence(s[3]) == KnownLength(3)
    assert facts.sequence(s[2]) == KnownElements((a, b))
    # the first Identity now reads a list of one element: every walk through it changes
    builder = rewriter.before(s[1].producer())
    shorter = builder.op("SequenceConstruct", [b])
    rewriter.replace(s[0], shorter)
    assert facts.sequence(s[2]) == KnownElements((b,))
    assert facts.sequence(s[3]) == KnownLength(2)
    # remembered while nothing changes: the same answer without walking again
    assert facts.sequence(s[3]) == KnownLength(2)
    # without a list generation nothing is remembered, and the answers are the same
    plain = Facts(model)
    assert plain.sequence(s[3]) == KnownLength(2)
    assert plain.sequence(s[2]) == KnownElements((b,))
