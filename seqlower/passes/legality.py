"""What sequence operators remain after lowering, where they are, and why each one stays.

The definition of legal output is simple: no operator of `SEQUENCE_OPS`. Everything else found
here is reported with the reason the rules gave when they refused it, or, for the builders of a
sequence (SequenceConstruct, SequenceEmpty), with the consumers that still need the sequence.
"""

from __future__ import annotations

__all__ = [
    "count_sequence_ops",
    "remaining_sequence_ops",
    "sequence_op_budget",
    "subgraph_owners",
    "walk_graphs",
]

import collections
from collections.abc import Iterator, Mapping

import onnx_ir as ir

from seqlower.ops import is_sequence_op, node_subgraphs, subgraphs
from seqlower.report import RemainingOp


def walk_graphs(model: ir.Model) -> Iterator[tuple[str, ir.Graph]]:
    """(path, graph) for the main graph, every function and every subgraph, parents first."""
    queue: collections.deque[tuple[str, ir.Graph]] = collections.deque([("main", model.graph)])
    queue.extend((f"function {f.domain}::{f.name}", f.graph) for f in model.functions.values())
    while queue:
        path, graph = queue.popleft()
        yield path, graph
        for node in graph:
            for name, subgraph in node_subgraphs(node):
                queue.append((f"{path}/{node.name or node.op_type}:{name}", subgraph))


def count_sequence_ops(model: ir.Model) -> dict[str, int]:
    """How many nodes of each sequence operator the model holds, subgraphs included."""
    counts: collections.Counter[str] = collections.Counter()
    for _, graph in walk_graphs(model):
        counts.update(node.op_type for node in graph if is_sequence_op(node))
    return dict(sorted(counts.items()))


def sequence_op_budget(model: ir.Model) -> int:
    """The sequence-op count against which "lowering never adds sequence ops" is measured.

    Each SequenceMap counts as the ops of ONNX's own function expansion of it (SequenceLength,
    one SequenceAt per sequence input, one SequenceEmpty and one SequenceInsert per output): no
    SequenceMap survives lowering, and over a sequence of unknown length the Loop that replaces
    it needs those ops (fewer with scan outputs). Every other sequence op counts as one.
    """
    total = 0
    for _, graph in walk_graphs(model):
        for node in graph:
            if not is_sequence_op(node):
                continue
            if node.op_type != "SequenceMap":
                total += 1
                continue
            # the first input is a sequence by definition; the others count by declared type
            # (give an untyped model shape inference first)
            sequence_inputs = 1 + sum(
                isinstance(v.type, ir.SequenceType) for v in node.inputs[1:] if v is not None
            )
            total += 1 + sequence_inputs + 2 * len(node.outputs)
    return total


def remaining_sequence_ops(
    model: ir.Model, refusals: Mapping[ir.Node, list[str]]
) -> list[RemainingOp]:
    """Every sequence operator left in `model`, with the reason it stays."""
    found = [
        (path, node) for path, graph in walk_graphs(model) for node in graph if is_sequence_op(node)
    ]
    owners = subgraph_owners(model) if found else {}
    return [
        RemainingOp(
            path,
            node.name or "",
            node.op_type,
            _reason(node, refusals) + _owner_reason(node, owners, refusals),
        )
        for path, node in found
    ]


def subgraph_owners(model: ir.Model) -> dict[int, ir.Node]:
    """The node owning each subgraph (by the subgraph's id)."""
    return {
        id(subgraph): node
        for _, graph in walk_graphs(model)
        for node in graph
        for subgraph in subgraphs(node)
    }


def _owner_reason(
    node: ir.Node, owners: Mapping[int, ir.Node], refusals: Mapping[ir.Node, list[str]]
) -> str:
    """For an operator on a body's inputs or outputs (a loop-carried sequence, a branch
    result): why the Loop or If around it stays."""
    graph = node.graph
    owner = owners.get(id(graph)) if graph is not None else None
    if owner is None or owner not in refusals:
        return ""
    touches_interface = any(v is not None and v.is_graph_input() for v in node.inputs) or any(
        v.is_graph_output() for v in node.outputs
    )
    if not touches_interface:
        return ""
    return f"; {owner.op_type} '{owner.name}' stays: {'; '.join(_dedupe(refusals[owner]))}"


def _reason(node: ir.Node, refusals: Mapping[ir.Node, list[str]]) -> str:
    if node in refusals:
        return "; ".join(_dedupe(refusals[node]))
    uses = []
    for output in node.outputs:
        if output.is_graph_output():
            uses.append(f"feeds the sequence-typed output '{output.name}' (interface kept)")
        for consumer in output.consumers():
            why = refusals.get(consumer)  # a Loop or If that stays says why
            suffix = f" ({'; '.join(_dedupe(why))})" if why else ""
            uses.append(f"read by {consumer.op_type} '{consumer.name}', which stays{suffix}")
    if uses:
        return "; ".join(_dedupe(uses))
    return "no rule applies"


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
