"""What sequence operators remain after lowering, where they are, and why each one stays.

The definition of legal output is simple: no operator of `SEQUENCE_OPS`. Everything else found
here is reported with every reason the rules gave when they refused it, or, for the builders of a
sequence (SequenceConstruct, SequenceEmpty), with the consumers that still need the sequence; of
those, the one that matters (the root of the unknown: a model input, a run-time value) is the
headline, with what to try about it (`passes/outcomes.py`).
"""

from __future__ import annotations

__all__ = [
    "count_sequence_ops",
    "expanded_count",
    "remaining_sequence_ops",
    "sequence_op_budget",
    "subgraph_owners",
    "walk_graphs",
]

import collections
from collections.abc import Callable, Iterator, Mapping

import onnx_ir as ir

from seqlower.ops import is_sequence_op, iter_all_nodes, node_subgraphs, subgraphs
from seqlower.passes.outcomes import deepest_reason, hint_for, reason_rank, stored_label
from seqlower.report import RemainingOp

Label = Callable[[ir.Node], str]


def _name(node: ir.Node) -> str:
    return stored_label(node)  # the pipeline's label when it gave one


def walk_graphs(model: ir.Model, label: Label | None = None) -> Iterator[tuple[str, ir.Graph]]:
    """(path, graph) for the main graph, every function and every subgraph, parents first.
    `label` names the node holding a subgraph in the path (default: the pipeline's label, its
    name or its op type)."""
    label = label or _name
    queue: collections.deque[tuple[str, ir.Graph]] = collections.deque([("main", model.graph)])
    queue.extend((f"function {f.domain}::{f.name}", f.graph) for f in model.functions.values())
    while queue:
        path, graph = queue.popleft()
        yield path, graph
        for node in graph:
            for name, subgraph in node_subgraphs(node):
                queue.append((f"{path}/{label(node)}:{name}", subgraph))


def count_sequence_ops(model: ir.Model) -> dict[str, int]:
    """How many nodes of each sequence operator the model holds, subgraphs included."""
    counts = collections.Counter(
        node.op_type for node in iter_all_nodes(model) if is_sequence_op(node)
    )
    return dict(sorted(counts.items()))


def sequence_op_budget(model: ir.Model) -> int:
    """The sequence-op count against which "lowering never adds sequence ops" is measured:
    `expanded_count` over every node of the model."""
    return sum(expanded_count(node) for _, graph in walk_graphs(model) for node in graph)


def expanded_count(node: ir.Node) -> int:
    """How many sequence ops `node` counts as: 0 for a node that is no sequence op, 1 for most,
    and for a SequenceMap the ops of ONNX's own function expansion of it (SequenceLength, one
    SequenceAt per sequence input, one SequenceEmpty and one SequenceInsert per output): no
    SequenceMap survives lowering, and over a sequence of unknown length the Loop that replaces
    it needs those ops (fewer with scan outputs)."""
    if not is_sequence_op(node):
        return 0
    if node.op_type != "SequenceMap":
        return 1
    # the first input is a sequence by definition; the others count by declared type (give an
    # untyped model shape inference first)
    sequence_inputs = 1 + sum(
        isinstance(v.type, ir.SequenceType) for v in node.inputs[1:] if v is not None
    )
    return 1 + sequence_inputs + 2 * len(node.outputs)


def remaining_sequence_ops(
    model: ir.Model, refusals: Mapping[ir.Node, list[str]], label: Label | None = None
) -> list[RemainingOp]:
    """Every sequence operator left in `model`, with the reason it stays and what to try.
    `label` names nodes (the pipeline's `NodeLabels`; default: the label the pipeline gave, the
    name, or the op type)."""
    label = label or _name
    found = [
        (path, node)
        for path, graph in walk_graphs(model, label)
        for node in graph
        if is_sequence_op(node)
    ]
    owners = subgraph_owners(model) if found else {}
    remaining = []
    for path, node in found:
        reasons = _reasons(node, refusals, label) + _owner_reasons(node, owners, refusals, label)
        remaining.append(
            RemainingOp(
                path,
                label(node),
                node.op_type,
                _headline(node, refusals, owners, label),
                hint_for(node, model, owners),
                tuple(v.name or "" for v in node.outputs),
                tuple(reasons),
            )
        )
    return remaining


def _headline(
    node: ir.Node,
    refusals: Mapping[ir.Node, list[str]],
    owners: Mapping[int, ir.Node],
    label: Label,
    depth: int = 0,
) -> str:
    """The one reason that matters: the node's own deepest refusal; for a node that only builds
    a sequence, why the node reading it stays; for one on a body's edge, why the Loop or If
    around it stays, when that goes deeper."""
    own = refusals.get(node)
    if own:
        reason = deepest_reason(own)
        if reason_rank(reason) > 0 and depth < 8:  # a kept producer upstream goes deeper
            for value in node.inputs:
                producer = value.producer() if value is not None else None
                if producer is not None and producer in refusals and is_sequence_op(producer):
                    why = _headline(producer, refusals, owners, label, depth + 1)
                    return f"{producer.op_type} '{label(producer)}' stays: {why}"
        owner = owners.get(id(node.graph)) if node.graph is not None else None
        if owner is not None and owner in refusals and _touches_body_edge(node):
            around = deepest_reason(refusals[owner])
            if reason_rank(around) < reason_rank(reason):
                return f"{owner.op_type} '{label(owner)}' stays: {around}"
        return reason
    for output in node.outputs:
        if output.is_graph_output():
            return f"it feeds the sequence-typed output '{output.name}' (the interface is kept)"
        for consumer in output.consumers():
            if consumer in refusals and depth < 8:
                why = _headline(consumer, refusals, owners, label, depth + 1)
                return f"{consumer.op_type} '{label(consumer)}' reads it and stays: {why}"
            return f"{consumer.op_type} '{label(consumer)}' reads it and stays"
    return "no rule applies"


def _touches_body_edge(node: ir.Node) -> bool:
    return any(v is not None and v.is_graph_input() for v in node.inputs) or any(
        v.is_graph_output() for v in node.outputs
    )


def subgraph_owners(model: ir.Model) -> dict[int, ir.Node]:
    """The node owning each subgraph (by the subgraph's id)."""
    return {
        id(subgraph): node
        for _, graph in walk_graphs(model)
        for node in graph
        for subgraph in subgraphs(node)
    }


def _owner_reasons(
    node: ir.Node,
    owners: Mapping[int, ir.Node],
    refusals: Mapping[ir.Node, list[str]],
    label: Label,
) -> list[str]:
    """For an operator on a body's inputs or outputs (a loop-carried sequence, a branch
    result): why the Loop or If around it stays."""
    graph = node.graph
    owner = owners.get(id(graph)) if graph is not None else None
    if owner is None or owner not in refusals or not _touches_body_edge(node):
        return []
    return [f"{owner.op_type} '{label(owner)}' stays: {why}" for why in _dedupe(refusals[owner])]


def _reasons(node: ir.Node, refusals: Mapping[ir.Node, list[str]], label: Label) -> list[str]:
    if node in refusals:
        return _dedupe(refusals[node])
    uses = []
    for output in node.outputs:
        if output.is_graph_output():
            uses.append(f"feeds the sequence-typed output '{output.name}' (interface kept)")
        for consumer in output.consumers():
            why = refusals.get(consumer)  # a Loop or If that stays says why
            suffix = f" ({'; '.join(_dedupe(why))})" if why else ""
            uses.append(f"read by {consumer.op_type} '{label(consumer)}', which stays{suffix}")
    return _dedupe(uses) if uses else ["no rule applies"]


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
