"""Remove what lowering left unused: dead nodes (subgraphs included), unused initializers,
functions and opset imports; forget the dim names that shape inference made up."""

from __future__ import annotations

__all__ = ["CleanupPass", "remove_dead_nodes"]

import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedFunctionsPass, RemoveUnusedNodesPass

from seqlower.ops import iter_all_graphs, subgraphs


def remove_dead_nodes(model: ir.Model) -> bool:
    """Dead-code elimination over the whole model. True when something was removed.

    onnx_ir's RemoveUnusedNodesPass removes a dead If/Loop, but the nodes of its subgraphs still
    count as users of the outer values they read, which then look alive until the model is
    reloaded (so a second lowering would remove more: not idempotent). Here a dead node's
    subgraphs drop those reads first; the pass then removes unused initializers.
    """
    modified = False
    changed = True
    # in these graphs a node's producers precede it, so one reversed pass removes dead chains
    top_level = {id(model.graph), *(id(f.graph) for f in model.functions.values())}
    while changed:
        changed = False
        removed_subgraphs: list[ir.Graph] = []
        for graph in list(iter_all_graphs(model)):
            for node in reversed(list(graph)):
                if node.graph is not graph or any(
                    output.uses() or output.is_graph_output() for output in node.outputs
                ):
                    continue
                graph.remove(node, safe=True)
                removed_subgraphs.extend(subgraphs(node))
                modified = True
                # a node removed in a subgraph may leave an outer producer dead: go again
                changed |= id(graph) not in top_level
        if removed_subgraphs:
            # a rule may have moved a subgraph to a new node: release only the orphans. One
            # walk of the model per round (not per removed node) keeps this linear.
            live = {id(g) for g in iter_all_graphs(model)}
            freed: list[ir.Value] = []
            for subgraph in removed_subgraphs:
                _release(subgraph, live, freed)
            changed |= any(_lost_last_use(value, live) for value in freed)
    modified |= RemoveUnusedNodesPass()(model).modified
    _restore_loop_arity(model)
    return modified


def _restore_loop_arity(model: ir.Model) -> None:
    """onnx_ir's pass drops trailing empty inputs, so Loop(M, "") with no carried value becomes
    Loop(M), which the checker refuses (Loop takes at least two inputs): put the empty one back."""
    for graph in iter_all_graphs(model):
        for node in graph:
            if node.op_type == "Loop" and node.domain == "" and len(node.inputs) < 2:
                node.resize_inputs(2)


def _release(graph: ir.Graph, live: set[int], freed: list[ir.Value]) -> None:
    """Disconnect the nodes of a removed subgraph (nested ones too) from the values they read,
    which are collected in `freed`."""
    if id(graph) in live:
        return
    for node in graph:
        freed.extend(value for value in node.inputs if value is not None)
        node.resize_inputs(0)
        for subgraph in subgraphs(node):
            _release(subgraph, live, freed)


def _lost_last_use(value: ir.Value, live: set[int]) -> bool:
    """True when a value produced by a node of a live graph is now unused."""
    producer = value.producer()
    return (
        producer is not None
        and producer.graph is not None
        and id(producer.graph) in live
        and not value.uses()
        and not value.is_graph_output()
    )


class CleanupPass(ir.passes.InPlacePass):
    """Dead nodes, then unused initializers and functions."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = remove_dead_nodes(model)
        modified |= RemoveUnusedFunctionsPass()(model).modified
        modified |= _forget_inferred_dim_names(model)
        return ir.passes.PassResult(model, modified)


def _forget_inferred_dim_names(model: ir.Model) -> bool:
    """ONNX shape inference names unknown dims `unk__<n>`, numbered after the names already in
    the model; kept, they would make a second lowering number them differently (not
    idempotent). They become anonymous dims; the model inputs keep theirs."""
    modified = False
    main_inputs = set(model.graph.inputs)
    for graph in iter_all_graphs(model):
        values = [*graph.inputs, *graph.outputs, *(o for node in graph for o in node.outputs)]
        for value in values:
            if value in main_inputs or value.shape is None:
                continue
            dims = list(value.shape)
            if any(_inferred_name(d) for d in dims):
                value.shape = ir.Shape([None if _inferred_name(d) else d for d in dims])
                modified = True
    return modified


def _inferred_name(dim: object) -> bool:
    return isinstance(dim, ir.SymbolicDim) and (dim.value or "").startswith("unk__")
