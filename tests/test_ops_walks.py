"""The subgraph walks every whole-model pass is built on: which graphs a node holds, with their
attribute names and in attribute order, references to a function's attributes left out."""

import onnx_ir as ir

from seqlower.ops import graphs_within, iter_all_graphs, node_subgraphs, subgraphs


def _graph(name: str, *nodes: ir.Node) -> ir.Graph:
    return ir.Graph([], [], nodes=list(nodes), name=name)


def _node(op: str, attributes: list[ir.Attr]) -> ir.Node:
    return ir.Node("", op, [], attributes, num_outputs=1)


def test_a_node_holds_its_graphs_in_attribute_order_with_their_names():
    then, other = _graph("then"), _graph("else")
    first, second = _graph("first"), _graph("second")
    node = _node(
        "Custom",
        [
            ir.AttrInt64("axis", 0),
            ir.AttrGraph("then_branch", then),
            ir.AttrGraphs("bodies", [first, second]),
            ir.AttrGraph("else_branch", other),
        ],
    )
    assert node_subgraphs(node) == [
        ("then_branch", then),
        ("bodies[0]", first),
        ("bodies[1]", second),
        ("else_branch", other),
    ]
    assert subgraphs(node) == [then, first, second, other]


def test_nodes_without_graphs_and_references_hold_none():
    constant = _node("Constant", [ir.AttrInt64("value_int", 3)])
    reference = _node("If", [ir.RefAttr("then_branch", "outer", ir.AttributeType.GRAPH)])
    for node in (constant, reference, _node("Relu", [])):
        assert node_subgraphs(node) == []
        assert subgraphs(node) == []


def test_the_model_walk_visits_parents_before_children():
    inner = _graph("inner")
    body = _graph("body", _node("If", [ir.AttrGraph("then_branch", inner)]))
    side = _graph("side")
    main = _graph(
        "main",
        _node("Loop", [ir.AttrGraph("body", body)]),
        _node("If", [ir.AttrGraph("then_branch", side)]),
    )
    model = ir.Model(main, ir_version=10)
    assert [g.name for g in iter_all_graphs(model)] == ["main", "body", "side", "inner"]
    assert [g.name for g in graphs_within(main)] == ["main", "body", "side", "inner"]
