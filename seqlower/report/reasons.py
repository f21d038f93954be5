"""Why a sequence operator stays, said once: among every refusal the rules gave, the one that
matters (the root of the unknown: a model input, a run-time value) is the headline; for the
builders of a sequence (SequenceConstruct, SequenceEmpty), why the node reading it stays.
`remaining_sequence_ops` gives every sequence operator left with its headline and a hint
(`report.hints`)."""

from __future__ import annotations

__all__ = ["deepest_reason", "reason_rank", "remaining_sequence_ops"]

import re
from collections.abc import Mapping

import onnx_ir as ir

from seqlower.ops import graph_nodes, is_sequence_op, is_sequence_value
from seqlower.report.data import KEPT_FOR_SPEED, RemainingOp
from seqlower.report.hints import hint_for
from seqlower.report.labels import (
    ORIGIN_KEY,
    Label,
    describe,
    renamed_in,
    stored_label,
    subgraph_owners,
    walk_graphs,
)

# refusals that say a rule's pattern does not match: true, but never the cause
_MISMATCH = re.compile(
    r"does not come from|handled by|not produced by|no position|not a |is not |only for "
)
# refusals that name where the unknown comes from
_ROOT = re.compile(r"model input|computed at run time|depends on|run-time|symbolic dim")


_RULE_PREFIX = re.compile(r"^[a-z0-9-]+: ")


# a Loop's trip count or an If's condition known at run time only: why a rule that needs it
# static does not apply, never why a list stays (the tensor form of lists runs through them)
_RUN_TIME_CONTROL = re.compile(r"(trip count|condition)[^;]* (is )?computed at run time")

# a sequence-typed model input or output kept as given: the one cause no other rule's refusal
# outranks (the tensor form of lists takes every other list, whatever its length or sizes)
_INTERFACE = re.compile(r"\(the interface is kept\)")


def reason_rank(text: str) -> int:
    """-1 for the model's interface kept, 0 for a reason naming the root of an unknown, 1 for
    another cause, 2 for a mismatch (or a run-time trip count or condition, which stops no
    list)."""
    if _INTERFACE.search(text):
        return -1
    if _RUN_TIME_CONTROL.search(text):
        return 2
    if _ROOT.search(text):
        return 0
    return 2 if _MISMATCH.search(text) else 1


def deepest_reason(reasons: list[str]) -> str:
    """The one refusal that matters among `rule: why` entries: one naming the root of the
    unknown (a model input, a run-time value) before others, pattern mismatches last, the
    first rule's (the preferred lowering's) among equals; the rule's name is left off."""
    texts = [_RULE_PREFIX.sub("", reason, count=1) for reason in reasons]
    return min(texts, key=reason_rank) if texts else "no rule applies"


def remaining_sequence_ops(
    model: ir.Model,
    refusals: Mapping[ir.Node, list[str]],
    label: Label | None = None,
    renamed: Mapping[str, str] | None = None,
) -> list[RemainingOp]:
    """Every sequence operator left in `model`, with the reason it stays and what to try.
    `label` gives each node its label (the pipeline's `NodeLabels`; default: the label the
    pipeline gave, the name, or the op type); messages name a node the lowering made by the
    node it came from (`describe`; `renamed`, from `NodeLabels.trace`, for the rules' texts)."""
    label = label or stored_label
    renamed = renamed or {}
    found = [
        (path, node)
        for path, graph in walk_graphs(model)
        for node in graph_nodes(graph)
        if is_sequence_op(node)
    ]
    owners = subgraph_owners(model) if found else {}
    remaining = []
    for path, node in found:
        reasons = _reasons(node, refusals) + _owner_reasons(node, owners, refusals)
        remaining.append(
            RemainingOp(
                path,
                label(node),
                node.op_type,
                renamed_in(_headline(node, refusals, owners), renamed),
                hint_for(node, model, owners),
                tuple(v.name or "" for v in node.outputs),
                tuple(renamed_in(reason, renamed) for reason in reasons),
                node.meta.get(ORIGIN_KEY, ""),
            )
        )
    return remaining


def _headline(
    node: ir.Node,
    refusals: Mapping[ir.Node, list[str]],
    owners: Mapping[int, ir.Node],
) -> str:
    """The one reason that matters, said once: the node's own deepest refusal; or, where that
    only follows from another kept node (a producer upstream, the Loop or If around it), that
    node and its own reason (never a chain of "X stays: Y stays: ..."); for a node that only
    builds a sequence, the node reading it and why that one stays. A node that makes a
    sequence-typed model output stays for the interface, whatever a rule said of it."""
    for output in node.outputs:
        main_output = output.is_graph_output() and id(node.graph) not in owners
        if main_output and is_sequence_value(output):
            return f"it feeds the sequence-typed output '{output.name}' (the interface is kept)"
    if refusals.get(node):
        root, reason = _cause(node, refusals, owners)
        reason = reason.removeprefix(f"{root.op_type}: ")  # the node is named already
        return reason if root is node else f"{describe(root)} stays: {reason}"
    for output in node.outputs:
        if output.is_graph_output():
            return f"it feeds the sequence-typed output '{output.name}' (the interface is kept)"
        for consumer in output.consumers():
            if not refusals.get(consumer):
                return f"{describe(consumer)} reads it and stays"
            root, reason = _cause(consumer, refusals, owners)
            if root is consumer:
                return f"{describe(consumer)} reads it and stays: {reason}"
            return f"{describe(consumer)} reads it and stays, as {describe(root)} does: {reason}"
    return "no rule applies"


def _cause(
    node: ir.Node,
    refusals: Mapping[ir.Node, list[str]],
    owners: Mapping[int, ir.Node],
    depth: int = 0,
) -> tuple[ir.Node, str]:
    """The kept node where the cause of `node`'s refusals lies, and its own deepest reason:
    `node` itself, unless its reason names no root and a kept sequence producer upstream (or
    the Loop or If around a node on a body's edge, whose reason goes deeper) explains it."""
    own = refusals[node]
    reason = deepest_reason(own)
    if all(r.startswith(f"{KEPT_FOR_SPEED}:") for r in own) or depth >= 8:
        return node, reason  # a choice for speed is its own cause
    if reason_rank(reason) > 0:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and refusals.get(producer) and is_sequence_op(producer):
                return _cause(producer, refusals, owners, depth + 1)
    owner = owners.get(id(node.graph)) if node.graph is not None else None
    if owner is not None and refusals.get(owner) and _touches_body_edge(node):
        around = deepest_reason(refusals[owner])
        if reason_rank(around) < reason_rank(reason):
            return owner, around
    return node, reason


def _touches_body_edge(node: ir.Node) -> bool:
    return any(v is not None and v.is_graph_input() for v in node.inputs) or any(
        v.is_graph_output() for v in node.outputs
    )


def _owner_reasons(
    node: ir.Node, owners: Mapping[int, ir.Node], refusals: Mapping[ir.Node, list[str]]
) -> list[str]:
    """For an operator on a body's inputs or outputs (a loop-carried sequence, a branch
    result): why the Loop or If around it stays."""
    graph = node.graph
    owner = owners.get(id(graph)) if graph is not None else None
    if owner is None or owner not in refusals or not _touches_body_edge(node):
        return []
    return [f"{describe(owner)} stays: {why}" for why in _dedupe(refusals[owner])]


def _reasons(node: ir.Node, refusals: Mapping[ir.Node, list[str]]) -> list[str]:
    if node in refusals:
        return _dedupe(refusals[node])
    uses = []
    for output in node.outputs:
        if output.is_graph_output():
            uses.append(f"feeds the sequence-typed output '{output.name}' (interface kept)")
        for consumer in output.consumers():
            why = refusals.get(consumer)  # a Loop or If that stays says why
            suffix = f" ({'; '.join(_dedupe(why))})" if why else ""
            uses.append(f"read by {describe(consumer)}, which stays{suffix}")
    return _dedupe(uses) if uses else ["no rule applies"]


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
