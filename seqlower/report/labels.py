"""How the report names nodes and graphs: one label per node, and the path of every graph.

`NodeLabels` gives each node of the input one label, used in every message; `walk_graphs` yields
every graph with a path such as `main/loop_1:body` built from those labels. A node the lowering
made is never named by its own name in a message (the user's model has no such node): `describe`
names the node of the input it came from (`SplitToSequence made from '/Loop'`), and a graph
path names the origin of the node holding it.
"""

from __future__ import annotations

__all__ = [
    "LABEL_KEY",
    "ORIGIN_KEY",
    "STANDS_FOR_KEY",
    "Label",
    "NodeLabels",
    "describe",
    "in_user_names",
    "path_label",
    "renamed_in",
    "stored_label",
    "subgraph_owners",
    "user_node_label",
    "user_value_label",
    "walk_graphs",
]

import collections
import re
from collections.abc import Callable, Iterator, Mapping

import onnx_ir as ir

from seqlower.ops import graph_nodes, node_subgraphs, subgraphs

Label = Callable[[ir.Node], str]

LABEL_KEY = "seqlower.label"  # a node's label in its (never serialized) `meta`
# for a node the lowering made: the label of the node of the input it came from
ORIGIN_KEY = "seqlower.origin"
# for a value the lowering made that stands for a value of the input (a Loop body input that
# carries what the user's body made in the previous iteration): how messages name it
STANDS_FOR_KEY = "seqlower.stands_for"


def stored_label(node: ir.Node) -> str:
    """The label `NodeLabels` gave `node` during lowering, else its name, else its op type."""
    return node.meta.get(LABEL_KEY) or node.name or node.op_type


def describe(node: ir.Node) -> str:
    """The node as a message names it: `Op 'label'`, or for a node the lowering made,
    `Op made from 'origin'` (the node of the input it came from)."""
    origin = node.meta.get(ORIGIN_KEY)
    if origin:
        return f"{node.op_type} made from '{origin}'"
    return f"{node.op_type} '{stored_label(node)}'"


def user_node_label(model: ir.Model, name: str) -> str:
    """How a message names the node called `name` in a lowered model: `node 'name'` for a node
    of the input, `a node made from 'origin'` for one the lowering made."""
    for _, graph in walk_graphs(model):
        for node in graph_nodes(graph):
            if node.name == name and node.meta.get(ORIGIN_KEY):
                return f"a node made from '{node.meta[ORIGIN_KEY]}'"
    return f"node '{name}'"


def user_value_label(value: ir.Value, initial: ir.Value | None = None) -> str:
    """How a message names a value of a lowered model: `'name'` for a value of the input, `a
    value made from 'origin'` for one the lowering made (a Loop body's input is judged by the
    nodes that give it its value: the body's, then the one making its `initial` value, the
    Loop's input), or by the value it stands for (`STANDS_FOR_KEY`)."""
    if value.meta.get(STANDS_FOR_KEY):
        return value.meta[STANDS_FOR_KEY]
    givers = [value.producer()]
    graph = value.graph
    if givers[0] is None and graph is not None and value in graph.inputs:
        index = graph.inputs.index(value)  # a body's carried input k + 2 is its output k + 1
        if 2 <= index <= len(graph.outputs):
            givers.append(graph.outputs[index - 1].producer())
    if initial is not None:
        givers.append(initial.producer())
    for node in givers:
        if node is not None and node.meta.get(ORIGIN_KEY):
            return f"a value made from '{node.meta[ORIGIN_KEY]}'"
    return f"'{value.name}'"


_NAMED_NODE = re.compile(r"\b([A-Z][A-Za-z]*) '([^']+)'")


def in_user_names(message: str, renamed: Mapping[str, str]) -> str:
    """`message` with each node the lowering made (`Loop '/Loop/scan_loop'`) named by the node
    of the input it came from (`Loop made from '/Loop'`); `renamed` maps a made node's name to
    that label (`NodeLabels.trace`)."""

    def named(found: re.Match[str]) -> str:
        origin = renamed.get(found.group(2))
        return f"{found.group(1)} made from '{origin}'" if origin else found.group(0)

    return _NAMED_NODE.sub(named, message)


def path_label(node: ir.Node) -> str:
    """How a graph path names the node holding a subgraph: its origin for a node the lowering
    made, else its label."""
    return node.meta.get(ORIGIN_KEY) or stored_label(node)


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
        self._inputs: set[ir.Node] = set()  # the nodes of the input (visited before `trace`)
        self._traced = False

    def visit(self, node: ir.Node) -> None:
        if not self._traced:
            self._inputs.add(node)
        if node.name:
            self._first.setdefault(node.name, node)

    def trace(self, model: ir.Model, origins: Mapping[ir.Node, ir.Node]) -> dict[str, str]:
        """After lowering: mark every node the lowering made with the label of the node of the
        input it came from (`origins`, else that of the node holding its graph), for `describe`
        and `path_label`. Returns the names of the nodes and values made -> the origin's label
        (for `renamed_in`)."""
        self._traced = True
        renamed: dict[str, str] = {}
        interface = set(model.graph.outputs)
        pending: list[tuple[ir.Graph, str]] = [(model.graph, "")]
        pending.extend((f.graph, "") for f in model.functions.values())
        while pending:
            graph, around = pending.pop()
            for node in graph_nodes(graph):
                origin = ""
                if node not in self._inputs:
                    source = origins.get(node)
                    origin = self(source) if source is not None else around
                    if origin:
                        node.meta[ORIGIN_KEY] = origin
                        if node.name:
                            renamed.setdefault(node.name, origin)
                        for value in node.outputs:  # a model output keeps the user's name
                            if value.name and value not in interface:
                                renamed.setdefault(value.name, origin)
                inner = node_subgraphs(node) if node.attributes.data else ()
                if inner:
                    inside = origin or (self(node) if node in self._inputs else around)
                    pending.extend((subgraph, inside) for _, subgraph in inner)
        return renamed

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
    label = label or path_label
    queue: collections.deque[tuple[str, ir.Graph]] = collections.deque([("main", model.graph)])
    queue.extend((f"function {f.domain}::{f.name}", f.graph) for f in model.functions.values())
    while queue:
        path, graph = queue.popleft()
        yield path, graph
        for node in graph_nodes(graph):
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


_QUOTED = re.compile(r"(?:\b([A-Z][A-Za-z]*) )?'([^']*)'")


def renamed_in(text: str, renamed: Mapping[str, str]) -> str:
    """`text` (a rule's refusal) with every quoted name of a node or value the lowering made
    replaced by the node of the input it came from: `SplitToSequence '/Loop/elements'` ->
    `SplitToSequence made from '/Loop'`, and a name with no operator before it (a value's)
    `'/Loop/elements_0'` -> `a value made from '/Loop'`, so that the phrase still reads where
    the name stood ("the shape of a value made from '/Loop' depends on ...")."""
    if not renamed or "'" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        op, name = match.group(1), match.group(2)
        origin = renamed.get(name)
        if origin is None:
            return match.group(0)
        return f"{op} made from '{origin}'" if op else f"a value made from '{origin}'"

    return _QUOTED.sub(replace, text)
