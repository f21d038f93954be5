"""How the report names nodes and graphs: one label per node, and the path of every graph.

`NodeLabels` gives each node of the input one label, used in every message; `walk_graphs` yields
every graph with a path such as `main/loop_1:body` built from those labels.
"""

from __future__ import annotations

__all__ = ["LABEL_KEY", "Label", "NodeLabels", "stored_label", "subgraph_owners", "walk_graphs"]

import collections
from collections.abc import Callable, Iterator

import onnx_ir as ir

from seqlower.ops import node_subgraphs, subgraphs

Label = Callable[[ir.Node], str]

LABEL_KEY = "seqlower.label"  # a node's label in its (never serialized) `meta`


def stored_label(node: ir.Node) -> str:
    """The label `NodeLabels` gave `node` during lowering, else its name, else its op type."""
    return node.meta.get(LABEL_KEY) or node.name or node.op_type


class NodeLabels:
    """One label per node, used everywhere a node is named: its name when no node before it
    has that name, else `<op_type>#<k> (<first output>)` for an unnamed node (`<name>#<k>` for
    a repeated name), numbered per op type in the order labels are asked for (the pipeline asks
    in the order of the graphs, once per sequence node, before lowering). `visit` each node in
    that order first, so that the first of two nodes with one name keeps it."""

    def __init__(self) -> None:
        self._labels: dict[ir.Node, str] = {}
        self._first: dict[str, ir.Node] = {}  # name -> the first node visited with it
        self._counters: dict[str, int] = {}

    def visit(self, node: ir.Node) -> None:
        if node.name:
            self._first.setdefault(node.name, node)

    def __call__(self, node: ir.Node) -> str:
        label = self._labels.get(node)
        if label is None:
            self.visit(node)
            name = node.name
            label = name if name and self._first[name] is node else self._fresh(node)
            self._labels[node] = label
            node.meta[LABEL_KEY] = label  # for what reads the lowered model later (targets)
        return label

    def _fresh(self, node: ir.Node) -> str:
        base = node.name or node.op_type
        while True:
            self._counters[base] = self._counters.get(base, -1) + 1
            label = f"{base}#{self._counters[base]}"
            if label not in self._first:
                break
        first = node.outputs[0].name if node.outputs and not node.name else ""
        return f"{label} ({first})" if first else label


def walk_graphs(model: ir.Model, label: Label | None = None) -> Iterator[tuple[str, ir.Graph]]:
    """(path, graph) for the main graph, every function and every subgraph, parents first.
    `label` names the node holding a subgraph in the path (default: the pipeline's label, its
    name or its op type)."""
    label = label or stored_label
    queue: collections.deque[tuple[str, ir.Graph]] = collections.deque([("main", model.graph)])
    queue.extend((f"function {f.domain}::{f.name}", f.graph) for f in model.functions.values())
    while queue:
        path, graph = queue.popleft()
        yield path, graph
        for node in graph:
            for name, subgraph in node_subgraphs(node):
                queue.append((f"{path}/{label(node)}:{name}", subgraph))


def subgraph_owners(model: ir.Model) -> dict[int, ir.Node]:
    """The node owning each subgraph (by the subgraph's id)."""
    return {
        id(subgraph): node
        for _, graph in walk_graphs(model)
        for node in graph
        for subgraph in subgraphs(node)
    }
