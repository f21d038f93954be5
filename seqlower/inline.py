"""Inline a copy of a subgraph (a SequenceMap body, an If branch) into another graph.

The copy gets fresh names everywhere, nested subgraphs included, so a body can be inlined many
times in one graph. Values the body reads from outer scopes stay shared; body initializers become
Constant nodes.
"""

from __future__ import annotations

__all__ = ["inline_graph"]

from collections.abc import Sequence

import onnx_ir as ir

from seqlower.ops import graph_nodes, subgraphs
from seqlower.rewriter import Builder, NameAllocator


def inline_graph(
    graph: ir.Graph, inputs: Sequence[ir.Value], builder: Builder, prefix: str
) -> list[ir.Value]:
    """Emit a copy of `graph` through `builder`, reading `inputs` for the graph's inputs.

    Returns the values that play the role of the graph's outputs.
    """
    if len(inputs) != len(graph.inputs):
        raise ValueError(f"{len(graph.inputs)} inputs expected, {len(inputs)} given")
    clone = graph.clone(allow_outer_scope_values=True)
    mapping: dict[ir.Value, ir.Value] = dict(zip(clone.inputs, inputs))
    for initializer in list(clone.initializers.values()):
        assert initializer.const_value is not None
        mapping[initializer] = builder.op(
            "Constant", [], {"value": initializer.const_value}, name="body_constant"
        )
        mapping[initializer].type = initializer.type
        mapping[initializer].shape = initializer.shape
    results = [mapping.get(output, output) for output in clone.outputs]
    # The copied nodes leave the clone: its outputs must not keep claiming their values, or the
    # values still look like (orphan) graph outputs to later rewrites of the copy.
    clone.outputs.clear()
    for inner, outer in mapping.items():
        inner.replace_all_uses_with(outer, replace_graph_outputs=True)
    nodes = list(clone)
    clone.remove(nodes)
    names = builder.rewriter.names
    for node in nodes:
        _rename(node, names, prefix)
        builder.add_node(node)
    return results


def _rename(node: ir.Node, names: NameAllocator, prefix: str) -> None:
    node.name = names.fresh(f"{prefix}/{node.name or node.op_type}")
    for output in node.outputs:
        if output.name:
            output.name = names.fresh(f"{prefix}_{output.name}")
    for subgraph in subgraphs(node):
        _rename_graph(subgraph, names, prefix)


def _rename_graph(graph: ir.Graph, names: NameAllocator, prefix: str) -> None:
    if graph.name:
        graph.name = names.fresh(f"{prefix}_{graph.name}")
    for value in graph.inputs:
        if value.name:
            value.name = names.fresh(f"{prefix}_{value.name}")
    for name, value in list(graph.initializers.items()):
        del graph.initializers[name]
        value.name = names.fresh(f"{prefix}_{name}")
        graph.initializers[value.name] = value
    for node in graph_nodes(graph):
        _rename(node, names, prefix)
