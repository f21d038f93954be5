"""Static lengths of lists as given (seqlower.analysis.static_lengths), and the trip counts the
cost model reads from them: a Loop over SequenceLength of a list whose length is static, a
Loop's carried list that every iteration keeps at its length."""

from __future__ import annotations

import onnx
import onnx_ir as ir
from support import parse

from seqlower.analysis.static_lengths import StaticLengths
from seqlower.analysis.static_values import StaticValues
from seqlower.cost import DYNAMIC_COUNT, NESTED_DYNAMIC_COUNT, node_costs

# a list of 3 carried by an outer Loop, rebuilt with 3 (or, with GROW, 4) elements every
# iteration; an inner Loop runs once per element (SequenceLength of the carried list)
CARRIED = """g (float[2] x, int64 n) => (float[?] y) {
    t = Constant<value = bool {1}>()
    s = SequenceConstruct(x, x, x)
    out = Loop(n, t, s) <body = outer (int64 i, bool c, seq(float) hs)
                                     => (bool c2, seq(float) hs2) {
        c2 = Identity(c)
        k = SequenceLength(hs)
        e = SequenceEmpty<dtype = 1>()
        parts = Loop(k, t, e) <body = inner (int64 j, bool d, seq(float) acc)
                                         => (bool d2, seq(float) acc2) {
            d2 = Identity(d)
            h = SequenceAt(hs, j)
            acc2 = SequenceInsert(acc, h)
        }>
        a = SequenceAt(parts, i)
        hs2 = REBUILD
    }>
    y = ConcatFromSequence<axis = 0>(out)
}"""
KEEPS = "SequenceConstruct(a, a, a)"
GROWS = "SequenceInsert(hs, a)"


def _model(rebuild: str) -> ir.Model:
    text = CARRIED.replace("REBUILD", rebuild)
    return ir.from_proto(onnx.shape_inference.infer_shapes(parse(text, opset=17)))


def _nodes(graph: ir.Graph, op: str) -> list[ir.Node]:
    found = []
    for node in graph:
        if node.op_type == op:
            found.append(node)
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                found += _nodes(attr.as_graph(), op)
    return found


def _lengths(model: ir.Model) -> StaticLengths:
    lengths = StaticLengths(StaticValues(17))
    for loop in _nodes(model.graph, "Loop"):
        lengths.register(loop)
    return lengths


def test_a_list_each_iteration_rebuilds_at_its_length_keeps_it():
    model = _model(KEEPS)
    lengths = _lengths(model)
    outer = _nodes(model.graph, "Loop")[0]
    carried = outer.attributes["body"].as_graph().inputs[2]
    assert lengths.of(carried) == 3
    assert lengths.of(outer.outputs[0]) == 3
    (inner_list,) = [n.inputs[0] for n in _nodes(model.graph, "SequenceLength")]
    assert lengths.of(inner_list) == 3


def test_a_list_that_grows_every_iteration_has_no_static_length():
    model = _model(GROWS)
    lengths = _lengths(model)
    outer = _nodes(model.graph, "Loop")[0]
    assert lengths.of(outer.attributes["body"].as_graph().inputs[2]) is None
    assert lengths.of(outer.outputs[0]) is None
    # the inner list built by appends has no static length either
    inner = _nodes(model.graph, "Loop")[1]
    assert lengths.of(inner.outputs[0]) is None


def test_inserts_erases_and_splits_count():
    model = ir.from_proto(onnx.shape_inference.infer_shapes(parse("""
        g (float[6,4] x, float[2] a, int64 p) => (float[?,4] y) {
            two = Constant<value = int64 {2}>()
            s = SplitToSequence<axis = 0>(x, two)
            u = SequenceInsert(s, a, p)
            v = SequenceErase(u)
            w = SequenceErase(v, p)
            r = SplitToSequence<axis = 0>(x, p)
            y = ConcatFromSequence<axis = 0>(w)
        }""", opset=17)))  # fmt: skip
    lengths = StaticLengths(StaticValues(17))
    found = {n.outputs[0].name: lengths.of(n.outputs[0]) for n in model.graph if n.outputs}
    assert (found["s"], found["u"], found["v"], found["w"]) == (3, 4, 3, 2)
    assert found["r"] is None  # a split by a run-time size


def test_the_cost_model_runs_the_inner_loop_once_per_element_of_a_static_list():
    def inner_body_cost(model: ir.Model) -> float:
        costs = node_costs(model)
        inner = _nodes(model.graph, "Loop")[1]
        # its Identity: one launch per run (the SequenceAt also carries the slowdown of a body
        # reading a list from outside it)
        step = next(n for n in inner.attributes["body"].as_graph() if n.op_type == "Identity")
        return costs[step]

    outer_runs = DYNAMIC_COUNT  # n is known at run time only
    kept, grown = inner_body_cost(_model(KEEPS)), inner_body_cost(_model(GROWS))
    # per run: the outer loop's iterations times the inner one's (3, or assumed when unknown:
    # a loop of run-time count inside a loop body, NESTED_DYNAMIC_COUNT)
    assert round(kept / outer_runs) == 3
    assert round(grown / outer_runs) == NESTED_DYNAMIC_COUNT
