"""Analyses that visit each value a bounded number of times: what used to be re-derived along
every path now finishes on shapes whose number of paths is exponential. A regression would
hang, so the models run in a child process with a generous timeout (no timing assertion)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import onnx_ir as ir
from onnx import TensorProto, helper

from seqlower.graph_order import in_graph_order

_DIAMONDS = textwrap.dedent(
    """
    import onnx_ir as ir
    from onnx import TensorProto, helper
    from seqlower.analysis.loop_shapes import LoopShapes
    from seqlower.analysis.static_values import StaticValues

    # h0 = x + x, h1 = h0 + h0, ... 60 times: 2^60 paths from the Loop's initial value to x
    nodes = [helper.make_node("Add", [f"h{k}", f"h{k}"], [f"h{k + 1}"]) for k in range(60)]
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["c2"]), helper.make_node("Relu", ["h"], ["h2"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h2", TensorProto.FLOAT, None)],
    )
    nodes.append(helper.make_node("Loop", ["m", "t", "h60"], ["y"], body=body))
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("h0", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("m", TensorProto.INT64, []),
         helper.make_tensor_value_info("t", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = ir.from_proto(helper.make_model(graph))
    loop = next(node for node in model.graph if node.op_type == "Loop")
    shapes = LoopShapes(loop, StaticValues())
    print([value.name for value in shapes.invariant_carried()], shapes.shape(loop.inputs[2]))
    """
)


def test_a_loop_whose_initial_value_has_exponentially_many_paths_is_analysed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _DIAMONDS],
        capture_output=True,
        text=True,
        timeout=120,  # against a hang only
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['h'] (3, 4)"


def test_nodes_in_graph_order_are_found_walking_back_from_their_reader() -> None:
    nodes = [helper.make_node("Relu", [f"v{k}"], [f"v{k + 1}"]) for k in range(6)]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("v6", TensorProto.FLOAT, [1])],
    )
    model = ir.from_proto(helper.make_model(graph))
    order = list(model.graph)
    # asked in any order, given in the graph's; those after the reader are found too
    assert in_graph_order(model.graph, {order[3], order[1]}, order[4]) == [order[1], order[3]]
    assert in_graph_order(model.graph, [order[5], order[0]], order[2]) == [order[0], order[5]]
    assert in_graph_order(model.graph, [], order[2]) == []
    model.graph.remove(order[2], safe=False)  # a removed node is skipped
    assert in_graph_order(model.graph, {order[3], order[1]}, order[4]) == [order[1], order[3]]


def _residual_chain(length: int) -> ir.Model:
    """x, read back from a list, then `length` residual Adds (h = h + Relu(h)) and a Neg:
    none is static, provisionally (a rule may still replace the list's read)."""
    nodes = [
        helper.make_node("SequenceConstruct", ["x"], ["s"]),
        helper.make_node("SequenceAt", ["s", "zero"], ["h0"]),
    ]
    for k in range(length):
        nodes.append(helper.make_node("Relu", [f"h{k}"], [f"r{k}"]))
        nodes.append(helper.make_node("Add", [f"h{k}", f"r{k}"], [f"h{k + 1}"]))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(f"h{length}", TensorProto.FLOAT, [2])],
        initializer=[helper.make_tensor("zero", TensorProto.INT64, [], [0])],
    )
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_arithmetic_cleanups_walk_a_residual_chain_once(monkeypatch) -> None:
    from seqlower.analysis import static_values
    from seqlower.passes.identity_arithmetic import remove_identity_arithmetic
    from seqlower.passes.negated_terms import fold_negated_terms

    looked_at = []
    operands = static_values._operands
    monkeypatch.setattr(
        static_values, "_operands", lambda value: looked_at.append(value) or operands(value)
    )
    for cleanup in (remove_identity_arithmetic, fold_negated_terms):
        looked_at.clear()
        model = _residual_chain(300)
        assert cleanup(model) == 0
        # each value's operands are found once (300 Adds asked in turn, each reading all the
        # chain before it: 45,000 visits when each question walked it again)
        assert len(looked_at) <= len(set(looked_at)) + 10
        assert len(set(looked_at)) < 1000
