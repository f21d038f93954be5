"""Dead-code removal: local (after one rewrite) and over a whole model, what it removes, what
it leaves alone (live nodes, a subgraph another node holds, interface initializers)."""

from __future__ import annotations

import gc

import onnx_ir as ir
from support import lower, op_counts, parse

from seqlower.passes.cleanup import remove_unused_initializers
from seqlower.passes.dead_code import remove_dead_nodes, remove_dead_upstream


def _model(text: str) -> ir.Model:
    return ir.from_proto(parse(text))


def _node(model: ir.Model, name: str) -> ir.Node:
    return next(node for node in model.graph if node.outputs[0].name == name)


CHAIN = """g (float[2] x) => (float[2] y) {
    a = Neg (x)
    b = Abs (a)
    c = Exp (b)
    y = Relu (x)
}"""


def test_local_removal_follows_producers_upstream():
    model = _model(CHAIN)
    assert remove_dead_upstream([_node(model, "c")]) == 3
    assert [node.op_type for node in model.graph] == ["Relu"]


def test_local_removal_leaves_live_candidates():
    model = _model(CHAIN)
    assert remove_dead_upstream([_node(model, "y"), _node(model, "a")]) == 0
    assert len(model.graph) == 4


def test_local_removal_stops_at_a_value_still_read():
    model = _model("""g (float[2] x) => (float[2] y) {
        a = Neg (x)
        b = Abs (a)
        y = Relu (a)
    }""")
    assert remove_dead_upstream([_node(model, "b")]) == 1
    assert [node.op_type for node in model.graph] == ["Neg", "Relu"]


IF_READING_OUTER = """g (float[2] x, bool c) => (float[2] y) {
    s = Neg (x)
    unused = If (c) <
        then_branch = t () => (float[2] n) { n = Abs (s) },
        else_branch = e () => (float[2] m) { m = Identity (x) }
    >
    y = Relu (x)
}"""


def test_removing_a_dead_if_releases_what_its_branches_read():
    model = _model(IF_READING_OUTER)
    remove_dead_upstream([_node(model, "unused")])
    assert [node.op_type for node in model.graph] == ["Relu"]


def test_a_subgraph_held_by_a_live_node_is_not_released():
    """A rewrite that moves a branch to a new If: the dead old If must not cut its reads."""
    model = _model(IF_READING_OUTER)
    dead_if = _node(model, "unused")
    branch = dead_if.attributes["then_branch"].as_graph()
    live = ir.Node(
        "",
        "If",
        [model.graph.inputs[1]],
        [
            ir.AttrGraph("then_branch", branch),
            ir.AttrGraph("else_branch", ir.Graph([], [], nodes=[])),
        ],
    )
    model.graph.insert_before(_node(model, "y"), live)
    model.graph.outputs.append(live.outputs[0])
    remove_dead_upstream([dead_if], holders={id(branch): [dead_if, live]})
    assert op_counts(model)["Neg"] == 1, "the branch the live If holds still reads s"
    assert branch.node(0).inputs[0] is _node(model, "s").outputs[0]


def test_whole_model_removal_reaches_into_bodies_and_reports_change():
    model = _model("""g (int64 m, float[2] x) => (float[2] y) {
        y = Loop (m, , x) <body = b (int64 i, bool cond, float[2] v) => (bool co, float[2] w) {
            co = Identity (cond)
            dead = Neg (v)
            w = Abs (v)
        }>
    }""")
    assert remove_dead_nodes(model)
    body = model.graph.node(0).attributes["body"].as_graph()
    assert [node.op_type for node in body] == ["Identity", "Abs"]
    assert not remove_dead_nodes(model)


def test_whole_model_removal_leaves_unused_optional_outputs_alone():
    model = _model("""g (float[2] x) => (float[2] y) {
        y, mask = Dropout (x)
    }""")
    assert not remove_dead_nodes(model)
    assert len(model.graph.node(0).outputs) == 2


def test_unused_initializers_go_interface_ones_stay():
    model = _model("""g (float[2] x, float[2] w) => (float[2] y) <float[2] w = {1.0, 2.0},
                      float[2] unused = {3.0, 4.0}, float[2] read = {5.0, 6.0}> {
        y = Add (x, read)
    }""")
    assert remove_unused_initializers(model)
    assert sorted(model.graph.initializers) == ["read", "w"]


def test_an_if_folded_to_no_outputs_releases_what_its_branches_read():
    """Fuzz seed 33594: if-sequence-outputs left no new If (both branches empty), and the old
    If's branches, swapped for empty graphs instead of released, kept the outer SequenceEmpty
    alive until a second lowering (not idempotent)."""
    model = parse("""g (bool c) => (seq(float) r) {
        e = SequenceEmpty<dtype = 1>()
        r = If(c) <
            then_branch = t () => (seq(float) i) { i = Identity(e) },
            else_branch = f () => (seq(float) z) { z = SequenceEmpty<dtype = 1>() }
        >
    }""")
    lowered, report = lower(model)
    assert report.rules_fired == {"if-sequence-outputs": 1}
    assert op_counts(lowered) == {"SequenceEmpty": 1}
    again, _ = lower(lowered)
    assert again.SerializeToString() == lowered.SerializeToString()


def test_removed_nodes_are_freed_without_the_cycle_collector():
    # a node and its outputs hold each other: without letting go of them, only Python's cyclic
    # collector would free what dead-code removal drops (a pass over every young object)
    model = _model(CHAIN)
    gc.collect()
    gc.disable()
    try:
        assert remove_dead_upstream([_node(model, "c")]) == 3
        assert gc.collect() == 0  # nothing was left in a cycle
    finally:
        gc.enable()
    assert [node.op_type for node in model.graph] == ["Relu"]
