"""Move the operators whose every reader is in one branch of an If into that branch.

    n = Reshape(Shape(data, end=1), [])          If(c) {
    If(c) {                                 ->     then: ..
      then: ..                                     else: n = Reshape(Shape(data, end=1), [])
      else: g = Greater(n, 0) ..                         g = Greater(n, 0) ..
    }                                            }

Lowering builds what the readers of a list share (its length, its bounds) in the graph that
defines the list, before the node that holds the first reader; when every reader is in one
branch of an If (a stack popped only when a shift is taken), onnxruntime still runs them on
every pass, taken branch or not (about 0.2 microseconds a launch, once per iteration of a Loop
around the If). The dual of `hoist_invariants`: there a node leaves a Loop body; here a node
enters the one branch that reads it, and runs only when that branch runs.

A node moves when it is an operator in the standard domain without subgraphs that cannot fail
(the operators `hoist_invariants` moves, an Unsqueeze or CumSum of constant axes within the
rank, and a Reshape whose input's static shape holds as many elements as its constant target
asks for), none of its outputs is a graph output, and every
reader of its outputs is inside the same branch of the same If of its graph (nested graphs of
that branch included). Run last to first, so that a chain moves whole, in its order.
"""

from __future__ import annotations

__all__ = ["sink_into_branches"]

import math

import onnx_ir as ir

from seqlower.ops import graph_nodes, graphs_within, node_subgraphs, subgraphs
from seqlower.passes.hoist_invariants import SINKABLE, _cannot_fail, _constant, is_constant_fill


def sink_into_branches(model: ir.Model) -> int:
    """Move every node that may move (see the module docstring) into the If branch that alone
    reads it, in every graph; returns how many nodes moved."""
    moved = _sink_in(model.graph)
    for function in model.functions.values():
        moved += _sink_in(function.graph)
    return moved


def _sink_in(graph: ir.Graph) -> int:
    """Sink the nodes of `graph`, then those of its subgraphs: a node moved into a branch may
    move on into a branch within it."""
    moved = _sink_here(graph)
    for node in list(graph_nodes(graph)):
        for inner in subgraphs(node):
            moved += _sink_in(inner)
    return moved


def _sink_here(graph: ir.Graph) -> int:
    moved = 0
    # the branch (and its graphs) of each If of `graph`, by the id of a graph inside it
    branch_of: dict[int, ir.Graph] = {}
    for node in graph_nodes(graph):
        if node.domain == "" and node.op_type == "If":
            for _, branch in node_subgraphs(node):
                for inner in graphs_within(branch):
                    branch_of[id(inner)] = branch
    if not branch_of:
        return moved
    for node in reversed(list(graph_nodes(graph))):
        branch = _only_branch(node, branch_of)
        if branch is None or not _may_move(node):
            continue
        graph.remove(node)
        if len(branch) > 0:
            branch.insert_before(branch[0], node)
        else:
            branch.append(node)
        moved += 1
    return moved


def _only_branch(node: ir.Node, branch_of: dict[int, ir.Graph]) -> ir.Graph | None:
    """The one If branch that holds every reader of `node`'s outputs, else None."""
    found: ir.Graph | None = None
    for output in node.outputs:
        if output.is_graph_output():
            return None
        for use in output.uses():
            branch = branch_of.get(id(use.node.graph))
            if branch is None or (found is not None and branch is not found):
                return None
            found = branch
    return found


def _may_move(node: ir.Node) -> bool:
    if node.domain != "" or subgraphs(node) or is_constant_fill(node):
        return False
    if node.op_type == "Reshape":
        return _reshape_fits(node)
    return node.op_type in SINKABLE and _cannot_fail(node)


def _reshape_fits(node: ir.Node) -> bool:
    """A Reshape of a value of static shape to a constant target of as many elements (no 0,
    no -1): it cannot fail."""
    data = node.inputs[0]
    target = _constant(node.inputs[1]) if len(node.inputs) > 1 else None
    if data is None or data.shape is None or target is None or target.ndim != 1:
        return False
    dims = list(data.shape)
    if not all(isinstance(d, int) for d in dims) or any(int(t) <= 0 for t in target):
        return False
    return math.prod(dims) == math.prod(int(t) for t in target)  # type: ignore[arg-type]
