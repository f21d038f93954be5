"""A whole-model walk for the passes that visit every node several times per run.

`all_graphs` lists the graphs `seqlower.ops.iter_all_graphs` yields, in the same order, but only
looks for subgraphs in nodes that have attributes: most nodes have none, and the scan of each
node's attributes was the largest part of a walk at 100k nodes.
"""

from __future__ import annotations

__all__ = ["all_graphs", "held_subgraphs"]

import onnx_ir as ir

from seqlower.ops import subgraphs


def held_subgraphs(node: ir.Node) -> list[ir.Graph]:
    """`seqlower.ops.subgraphs(node)`, answered at once for a node without attributes."""
    return subgraphs(node) if node.attributes.data else []


def all_graphs(model: ir.Model) -> list[ir.Graph]:
    """The main graph, the graph of every model-local function, then every subgraph (nested
    ones included), breadth first: the order of `seqlower.ops.iter_all_graphs`."""
    graphs = [model.graph, *(function.graph for function in model.functions.values())]
    for graph in graphs:  # grows while iterating
        for node in graph:
            if node.attributes.data:
                graphs.extend(subgraphs(node))
    return graphs
