"""The subgraph walks every whole-model pass is built on: which graphs a node holds, with their
attribute names and in attribute order, references to a function's attributes left out."""

import onnx_ir as ir

from seqlower.ops import graph_nodes, graphs_within, iter_all_graphs, node_subgraphs, subgraphs


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


def _chain(count: int) -> tuple[ir.Graph, list[ir.Node]]:
    nodes = [_node("Neg", []) for _ in range(count)]
    return _graph("main", *nodes), nodes


def test_graph_nodes_walks_as_onnx_ir_does_while_the_graph_changes():
    """`graph_nodes` follows onnx_ir's links itself: the same nodes as `iter(graph)`, in the
    same order, when nodes are removed, inserted after and before the current one, or moved
    during the walk."""

    def walk(iterate) -> list[str]:
        graph, nodes = _chain(6)
        for index, node in enumerate(nodes):
            node.name = f"n{index}"
        seen = []
        for node in iterate(graph):
            seen.append(node.name)
            if node.name == "n1":
                graph.remove(nodes[2])  # the next one: passed over
                later = _node("Relu", [])
                later.name = "after n1"
                graph.insert_after(node, later)  # reached
                earlier = _node("Relu", [])
                earlier.name = "before n1"
                graph.insert_before(node, earlier)  # not reached
            if node.name == "n3":
                graph.remove(node)  # the current one: the walk goes on from where it was
                graph.append(node)  # moved to the end: reached again there
            if len(seen) > 20:
                break
        return seen

    expected = walk(iter)
    assert expected == ["n0", "n1", "after n1", "n3", "n4", "n5", "n3"]
    assert walk(graph_nodes) == expected


def test_graph_nodes_walks_anything_else_as_it_walks_itself():
    graph, nodes = _chain(3)
    assert list(graph_nodes(graph)) == nodes
    assert list(graph_nodes(nodes)) == nodes  # a list of nodes, say
    function = ir.Function("local", "f", graph=graph, attributes=[])
    assert list(graph_nodes(function)) == nodes


def test_the_model_walk_reads_each_graph_as_a_node_holds_it():
    """`iter_all_graphs` reads the graph attributes itself (not through `subgraphs`, one call
    and one list per node holding a graph): the same graphs as `subgraphs` gives, in its order,
    a list of graphs included, references to a function's attributes left out, a graph held by
    two nodes once, and a function's graph after the main graph."""
    then, other = _graph("then"), _graph("else")
    first, second = _graph("first"), _graph("second")
    holder = _node(
        "Custom",
        [
            ir.AttrGraph("then_branch", then),
            ir.AttrGraphs("bodies", [first, second]),
            ir.RefAttr("outer", "outer", ir.AttributeType.GRAPH),
            ir.AttrInt64("axis", 0),
            ir.AttrGraph("else_branch", other),
        ],
    )
    again = _node("If", [ir.AttrGraph("then_branch", first)])  # held twice: walked once
    main = _graph("main", holder, again)
    model = ir.Model(main, ir_version=10)
    local = _graph("local", _node("Loop", [ir.AttrGraph("body", _graph("local body"))]))
    model.functions[("local", "f", "")] = ir.Function("local", "f", graph=local, attributes=[])
    order = ["main", "local", "then", "first", "second", "else", "local body"]
    assert [g.name for g in iter_all_graphs(model)] == order
    expected = [main, local, *subgraphs(holder), *subgraphs(local.node(0))]
    assert list(iter_all_graphs(model)) == expected


def test_the_model_walk_makes_no_call_per_node_holding_a_graph(monkeypatch):
    """The whole-model walk of 1,000 Ifs asks `subgraphs` nothing (it was called for every
    node with attributes on every walk: 20,000 calls a walk of 10,000 Ifs' two branches)."""
    import seqlower.ops as ops

    calls = []
    monkeypatch.setattr(ops, "subgraphs", lambda node: calls.append(node) or [])
    branches = [(_graph(f"then{i}"), _graph(f"else{i}")) for i in range(1000)]
    ifs = [
        _node("If", [ir.AttrGraph("then_branch", a), ir.AttrGraph("else_branch", b)])
        for a, b in branches
    ]
    model = ir.Model(_graph("main", *ifs), ir_version=10)
    walked = list(ops.iter_all_graphs(model))
    assert len(walked) == 2001
    assert walked[1:] == [g for pair in branches for g in pair]
    assert calls == []
