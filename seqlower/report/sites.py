"""The report's view of the input before lowering: the nodes that produce or read a sequence
(`Site`s), and the tier a rewrite ended in (`rewrite_tier`), which the lowering driver records."""

from __future__ import annotations

__all__ = ["Site", "collect_sites", "rewrite_tier"]

import collections
import dataclasses
from collections.abc import Iterable

import onnx_ir as ir

from seqlower.ops import graph_nodes, is_sequence_op, is_sequence_value, node_subgraphs
from seqlower.report.labels import NodeLabels


@dataclasses.dataclass
class Site:
    """A node of the input that produces or reads a sequence value, before lowering."""

    node: ir.Node
    graph: str
    label: str
    op_type: str
    outputs: tuple[str, ...]
    readers: tuple[ir.Node, ...]  # nodes that read its sequence outputs
    writers: tuple[ir.Node, ...]  # nodes that produce its sequence inputs
    owner: ir.Node | None  # the node whose subgraph holds it


def collect_sites(model: ir.Model, labels: NodeLabels) -> list[Site]:
    """Every node that produces or reads a sequence value, in every graph (types inferred):
    one walk, in which every node is also `visit`ed for `labels`."""
    # the exact class, not ir.SequenceType: its isinstance goes through a slow protocol check,
    # and this loop looks at every output of the model
    sequence_type = type(ir.SequenceType(ir.TensorType(ir.DataType.FLOAT)))
    readers: set[ir.Node] = set()  # nodes reading a sequence seen so far (producers first)
    sites = []
    # walk_graphs' order and paths, with the owner of each graph
    queue: collections.deque[tuple[str, ir.Graph, ir.Node | None]] = collections.deque(
        [("main", model.graph, None)]
    )
    queue.extend(
        (f"function {f.domain}::{f.name}", f.graph, None) for f in model.functions.values()
    )
    while queue:
        path, graph, owner = queue.popleft()
        for value in graph.inputs:
            if type(value.type) is sequence_type:
                readers.update(value.consumers())
        for node in graph_nodes(graph):
            labels.visit(node)
            for name, subgraph in node_subgraphs(node):
                queue.append((f"{path}/{labels(node)}:{name}", subgraph, node))
            outputs = [v for v in node.outputs if type(v.type) is sequence_type]
            if not (outputs or node in readers or is_sequence_op(node)):
                continue
            for output in outputs:
                readers.update(output.consumers())
            producers = (v.producer() for v in node.inputs if is_sequence_value(v))
            sites.append(
                Site(
                    node,
                    path,
                    labels(node),
                    node.op_type if node.domain == "" else f"{node.domain}::{node.op_type}",
                    tuple(v.name or "" for v in outputs),
                    tuple(c for output in outputs for c in output.consumers()),
                    tuple(p for p in producers if p is not None),
                    owner,
                )
            )
    return sites


def rewrite_tier(rule_name: str, created: Iterable[ir.Node]) -> str:
    """The tier of one rewrite, from the rule's name and the nodes it made."""
    if "batch" in rule_name:
        return "batch"
    # each Loop once: a rewrite that rewires every output of a Loop lists it once per output
    loops = {id(n): n for n in created if n.op_type in ("Loop", "Scan") and n.domain == ""}
    if loops:
        carries_sequence = any(
            is_sequence_value(v) for loop in loops.values() for v in loop.outputs
        )
        return "loop" if carries_sequence else "scan"
    if "unroll" in rule_name:
        return "unroll"
    return "direct"
