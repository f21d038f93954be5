"""Dead-code removal: after a rewrite (local: the work is proportional to what died) or over a
whole model.

A node is dead when none of its outputs is used or is a graph output. Removing a node that holds
subgraphs (a Loop, an If, a SequenceMap) first disconnects the nodes of those subgraphs from the
outer values they read: otherwise those reads keep their producers looking alive until the model
is reloaded, and a second lowering would remove more (not idempotent). A subgraph that another,
live node holds too (a rewrite moved it there) is left connected.
"""

from __future__ import annotations

__all__ = ["is_dead", "remove_dead_nodes", "remove_dead_upstream"]

import collections
import collections.abc
from collections.abc import Iterable, Mapping, Sequence

import onnx_ir as ir

from seqlower.ops import graph_nodes, iter_all_graphs, subgraphs
from seqlower.release import let_go
from seqlower.uses import detach_inputs, is_used, remove_node

Holders = Mapping[int, Sequence[ir.Node]]  # id(subgraph) -> the nodes that hold it


def is_dead(node: ir.Node) -> bool:
    return not any(is_used(output) or output.is_graph_output() for output in node.outputs)


def remove_dead_upstream(candidates: Iterable[ir.Node], holders: Holders | None = None) -> int:
    """Remove those of `candidates` that are dead, then what that leaves dead upstream (the
    producers of their inputs and of the outer values their subgraphs read), transitively.
    `holders` names other nodes that may hold a dead node's subgraphs. Returns how many nodes
    were removed."""
    queue = list(candidates)
    removed = 0
    while queue:
        node = queue.pop()
        graph = node.graph
        if graph is None or not is_dead(node):
            continue
        read = [value for value in node.inputs if value is not None]
        for subgraph in subgraphs(node):
            if not _held_elsewhere(subgraph, node, holders or {}):
                _release(subgraph, read)
        detach_inputs(node)
        # dead (no use, not a graph output) and detached: the safe removal would only check
        # that again (`remove_node` builds no set of the graph's outputs for each node)
        remove_node(graph, node)
        let_go(node)
        removed += 1
        queue.extend(producer for value in read if (producer := value.producer()) is not None)
    return removed


def remove_dead_nodes(model: ir.Model) -> bool:
    """Dead-code elimination over the whole model, subgraphs and functions included. True when
    something was removed."""
    graphs = list(iter_all_graphs(model))
    # built on first use: a node that dies upstream of the dead ones may hold a subgraph that
    # a rewrite moved to a live node
    holders = _LazyHolders(graphs)
    removed = 0
    for graph in graphs:
        dead = [node for node in graph_nodes(graph) if is_dead(node)]
        # users are taken before their producers (the last node first): whole dead chains go,
        # and what dies in other graphs follows from the subgraph reads released
        removed += remove_dead_upstream(dead, holders)
    return removed > 0


class _LazyHolders(collections.abc.Mapping):
    """The holders of every subgraph of `graphs`, walked for only when first asked."""

    def __init__(self, graphs: list[ir.Graph]) -> None:
        self._graphs = graphs
        self._holders: dict[int, list[ir.Node]] | None = None

    def _built(self) -> dict[int, list[ir.Node]]:
        if self._holders is None:
            self._holders = _holders(self._graphs)
        return self._holders

    def __getitem__(self, key: int) -> Sequence[ir.Node]:
        return self._built()[key]

    def __iter__(self):
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


def _holders(graphs: list[ir.Graph]) -> dict[int, list[ir.Node]]:
    holders: dict[int, list[ir.Node]] = collections.defaultdict(list)
    for graph in graphs:
        for node in graph_nodes(graph):
            for subgraph in subgraphs(node):
                holders[id(subgraph)].append(node)
    return holders


def _held_elsewhere(subgraph: ir.Graph, node: ir.Node, holders: Holders) -> bool:
    return any(
        other is not node and other.graph is not None and not is_dead(other)
        for other in holders.get(id(subgraph), ())
    )


def _release(graph: ir.Graph, read: list[ir.Value]) -> None:
    """Disconnect the nodes of a dead node's subgraph (nested ones too) from the values they
    read; those values are added to `read`."""
    for node in graph_nodes(graph):
        read.extend(value for value in node.inputs if value is not None)
        node.resize_inputs(0)
        for subgraph in subgraphs(node):
            _release(subgraph, read)
