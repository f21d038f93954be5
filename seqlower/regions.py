"""Regions: the independent pieces of list work in a model, each of which may be lowered or kept.

A region is one connected group of sequence values with the nodes that produce and read them:
a SplitToSequence ... SequenceAt / ConcatFromSequence chain, or a Loop that carries a list with
the sequence operators of its body. Two sequence nodes are in one region when one reads a
sequence the other produces, or when one is a Loop, If or SequenceMap and the other, in its
body, reads a sequence the body receives or produces one the body returns. A region also owns

- every node inside the bodies of its control-flow nodes that no other region claims (the work
  a lowering batches, unrolls or keeps: it is part of either form), and
- its private inputs: the nodes whose every result is read by the region only (TorchScript's
  chunk-size arithmetic in front of a SplitToSequence), which a lowering may make dead.

`find_regions` runs on a typed model before lowering; `region_costs` adds up per-node costs
(`seqlower.cost.node_costs`) by region, before lowering or after it (a node a rewrite made
counts for the region of the node it came from: `LowerSequencesPass.origins`).
"""

from __future__ import annotations

__all__ = ["Region", "find_regions", "region_costs", "region_totals"]

import dataclasses
from collections.abc import Iterator, Mapping, Sequence

import onnx_ir as ir

from seqlower.ops import graph_nodes, is_sequence_op, is_sequence_value, subgraphs


@dataclasses.dataclass(frozen=True)
class Region:
    """One region: `sites` are its sequence nodes in walk order (main graph first, then the
    bodies, breadth first), `nodes` every node it owns, sites included."""

    sites: tuple[ir.Node, ...]
    nodes: frozenset[ir.Node]


def find_regions(model: ir.Model) -> list[Region]:
    """The regions of `model` (types inferred), in the walk order of their first sites."""
    walk = list(_walk(model))
    sites = [node for node, _ in walk if _is_site(node)]
    owner_of = dict(walk)
    parent = {node: node for node in sites}

    def find(node: ir.Node) -> ir.Node:
        while parent[node] is not node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def union(a: ir.Node, b: ir.Node) -> None:
        root_a, root_b = find(a), find(b)
        if root_a is not root_b:
            parent[root_b] = root_a

    for node in sites:
        owner = owner_of[node]
        for value in node.inputs:
            if not is_sequence_value(value):
                continue
            assert value is not None
            producer = value.producer()
            if producer is not None and producer in parent:
                union(node, producer)
            elif producer is None and owner in parent and value.graph is node.graph:
                union(node, owner)  # a sequence the body receives
        for value in node.outputs:
            if is_sequence_value(value) and owner in parent and value.is_graph_output():
                union(node, owner)  # a sequence the body returns
            for reader in value.consumers():
                if reader in parent and is_sequence_value(value):
                    union(node, reader)
    members: dict[ir.Node, list[ir.Node]] = {}
    for node in sites:
        members.setdefault(find(node), []).append(node)
    region_of: dict[ir.Node, int] = {}
    for index, group in enumerate(members.values()):
        region_of.update(dict.fromkeys(group, index))
    # bodies belong to the region of the node that holds them, unless claimed by another
    for node, owner in walk:
        if node not in region_of and owner is not None and owner in region_of:
            region_of[node] = region_of[owner]
    _add_private_inputs(model, region_of)
    owned: list[set[ir.Node]] = [set() for _ in members]
    for node, index in region_of.items():
        owned[index].add(node)
    return [
        Region(tuple(group), frozenset(nodes))
        for group, nodes in zip(members.values(), owned, strict=True)
    ]


def region_costs(
    model: ir.Model,
    regions: list[Region],
    costs: Mapping[ir.Node, float],
    origins: Mapping[ir.Node, ir.Node] | None = None,
) -> list[float]:
    """The cost of each region in `model`: the shares (`costs`) of the nodes it owns, where
    `origins` maps a node a rewrite made to the node it came from (after lowering); a node
    with no origin of its own inside a body counts for the region of the node holding it."""
    return region_totals(model, regions, [costs], origins)[0]


def region_totals(
    model: ir.Model,
    regions: list[Region],
    costs: Sequence[Mapping[ir.Node, float]],
    origins: Mapping[ir.Node, ir.Node] | None = None,
) -> list[list[float]]:
    """`region_costs` for each of several per-node `costs` (the estimates at two trip counts,
    say), in one walk of the model: the same sums, added in the same order."""
    origins = origins or {}
    region_of = {node: index for index, region in enumerate(regions) for node in region.nodes}
    totals = [[0.0] * len(regions) for _ in costs]
    found: dict[ir.Node, int | None] = {}  # the region of each node walked so far
    for node, owner in _walk(model):
        index = region_of.get(origins.get(node, node))
        if index is None and owner is not None:
            index = found.get(owner)
        found[node] = index
        if index is not None:
            for each, shares in zip(totals, costs):
                each[index] += shares.get(node, 0.0)
    return totals


def _walk(model: ir.Model) -> Iterator[tuple[ir.Node, ir.Node | None]]:
    """Every node with the node whose subgraph holds it (None in a root graph): the main
    graph, then the functions, then the subgraphs, breadth first (owners come first)."""
    queue: list[tuple[ir.Graph, ir.Node | None]] = [(model.graph, None)]
    queue += [(function.graph, None) for function in model.functions.values()]
    for graph, owner in queue:  # grows while iterating
        for node in graph_nodes(graph):
            yield node, owner
            if node.attributes.data:  # most nodes have no attribute, so no subgraph
                queue.extend((subgraph, node) for subgraph in subgraphs(node))


def _is_site(node: ir.Node) -> bool:
    return is_sequence_op(node) or any(
        is_sequence_value(value) for value in (*node.inputs, *node.outputs)
    )


def _add_private_inputs(model: ir.Model, region_of: dict[ir.Node, int]) -> None:
    """Give each region the nodes whose every result only it reads (transitively)."""
    graphs = [graph for graph, _ in _graphs(model)]
    for graph in reversed(graphs):  # bodies first: their nodes read the outer values
        for node in reversed(list(graph_nodes(graph))):
            if node in region_of or not node.outputs:
                continue
            private = True
            readers: set[int | None] = set()
            for value in node.outputs:
                readers.update(region_of.get(reader) for reader in value.consumers())
                if value.is_graph_output() or None in readers or len(readers) > 1:
                    private = False  # read outside any region, or by two: whatever follows
                    break
            if private and len(readers) == 1:
                region_of[node] = readers.pop()


def _graphs(model: ir.Model) -> Iterator[tuple[ir.Graph, ir.Node | None]]:
    queue: list[tuple[ir.Graph, ir.Node | None]] = [(model.graph, None)]
    queue += [(function.graph, None) for function in model.functions.values()]
    for graph, owner in queue:
        yield graph, owner
        for node in graph_nodes(graph):
            if node.attributes.data:
                queue.extend((subgraph, node) for subgraph in subgraphs(node))
