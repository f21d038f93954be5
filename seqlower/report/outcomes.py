"""Per-node outcomes of a lowering: the tier every sequence node ended in, and for what stays, the
one reason that matters and what to try.

The pipeline labels the nodes of the input (`NodeLabels`), collects the nodes that produce or read
a sequence value before lowering (`collect_sites`), lets `LowerSequencesPass` record which rule
rewrote which node, and after cleanup turns it all into `NodeOutcome`s (`node_outcomes`). This is
the one source of truth that `optimize --report` and `seqlower inspect` both show.

A node removed without a rule firing on it (a SplitToSequence whose readers now read the tensor)
takes the costliest tier of its readers, else of its writers, else of the node whose body holds it.
"""

from __future__ import annotations

__all__ = ["node_outcomes"]

from collections.abc import Mapping

import onnx_ir as ir

from seqlower.analysis import Facts, Unknown
from seqlower.ops import is_sequence_op, is_sequence_value
from seqlower.report.data import TIERS, NodeOutcome, RemainingOp
from seqlower.report.hints import hint_for, hint_for_value
from seqlower.report.labels import NodeLabels, renamed_in, walk_graphs
from seqlower.report.sites import Site

_COST = {tier: rank for rank, tier in enumerate(TIERS)}


def node_outcomes(
    model: ir.Model,
    sites: list[Site],
    remaining: list[RemainingOp],
    rewrites: Mapping[ir.Node, list[tuple[str, str]]],
    labels: NodeLabels,
    interface: tuple[list[str], list[str]],
    renamed: Mapping[str, str] | None = None,
) -> list[NodeOutcome]:
    """The outcome of every site, of the model's sequence inputs and outputs, and of each kept
    node the lowering made (placed after the site it came from). `renamed` maps the names the
    lowering made to the input's nodes they came from (`NodeLabels.trace`)."""

    final: set[ir.Node] | None = None  # the nodes left, walked for only when needed
    kept_ops = {op.node: op for op in remaining}
    by_node = {site.node: site for site in sites}
    tiers: dict[ir.Node, str] = {}
    outcomes: dict[ir.Node, NodeOutcome] = {}
    for site in sites:
        if site.node.graph is None:  # removed
            continue
        if final is None:
            final = {node for _, graph in walk_graphs(model) for node in graph}
        if site.node in final and _is_sequence_node(site.node):
            tiers[site.node] = "kept"
            outcomes[site.node] = _kept(site, kept_ops.get(site.label), rewrites, model, labels)
    for site in sites:
        if site.node not in outcomes:
            tier = _resolved_tier(site.node, by_node, rewrites, tiers, set())
            fired = tuple(rule for rule, _ in rewrites.get(site.node, []))
            outcomes[site.node] = NodeOutcome(
                site.graph, site.label, site.op_type, tier, site.outputs, fired
            )
    result = _interface(model, interface, labels, renamed or {})
    result += [outcomes[site.node] for site in sites]

    original = {site.label for site in sites}
    made: dict[str, list[NodeOutcome]] = {}
    for op in remaining:
        if op.node in original:
            continue
        made.setdefault(op.created_by, []).append(
            NodeOutcome(
                op.graph, op.node, op.op_type, "kept", op.outputs, (), op.reason, op.hint,
                op.reasons, op.created_by,
            )
        )  # fmt: skip
    if made:
        placed = []
        for outcome in result:
            placed.append(outcome)
            placed.extend(made.pop(outcome.node, []) if outcome.op_type != "input" else [])
        result = placed + [outcome for group in made.values() for outcome in group]
    return result


def _kept(
    site: Site,
    op: RemainingOp | None,
    rewrites: Mapping[ir.Node, list[tuple[str, str]]],
    model: ir.Model,
    labels: NodeLabels,
) -> NodeOutcome:
    fired = tuple(rule for rule, _ in rewrites.get(site.node, []))
    if op is not None:
        reason, hint, reasons = op.reason, op.hint, op.reasons
    else:  # a Loop or If that still carries sequences
        inside = "its body holds sequence operators" if site.node.attributes else "no rule applies"
        reason = f"it still carries sequence values ({inside})"
        lowerable = site.node.op_type in ("Loop", "If", "Identity") and site.node.domain == ""
        hint = hint_for(site.node, model) if lowerable else ""  # no rule lowers the others
        reasons = (reason,)
    return NodeOutcome(
        site.graph, site.label, site.op_type, "kept", site.outputs, fired, reason, hint, reasons
    )


def _resolved_tier(
    node: ir.Node,
    sites: Mapping[ir.Node, Site],
    rewrites: Mapping[ir.Node, list[tuple[str, str]]],
    tiers: dict[ir.Node, str],
    seen: set[ir.Node],
) -> str:
    """A node's tier: that of the last rewrite of it, or for a node removed without a rewrite of
    its own, the costliest tier of its readers (a split absorbed into the loop that reads it),
    or else of the nodes that wrote its sequence inputs (a concat the rewrite of its producer
    made useless), or else of the node whose body holds it (an append in a Loop that became a
    scan)."""
    if node in tiers:
        return tiers[node]
    fired = rewrites.get(node)
    if fired:
        tier = fired[-1][1]
    else:
        seen.add(node)
        tier = "direct"
        site = sites.get(node)
        groups = (site.readers, site.writers, (site.owner,)) if site is not None else ()
        for neighbours in groups:
            found = [
                _resolved_tier(other, sites, rewrites, tiers, seen)
                for other in neighbours
                if other is not None and other not in seen
            ]
            found = [t for t in found if t not in ("kept", "flattened")]
            if found:
                tier = max(found, key=_COST.__getitem__)
                break
    tiers[node] = tier
    return tier


def _interface(
    model: ir.Model,
    interface: tuple[list[str], list[str]],
    labels: NodeLabels,
    renamed: Mapping[str, str],
) -> list[NodeOutcome]:
    """The outcome of the sequence-typed inputs and outputs the input model had."""
    inputs, outputs = interface
    result = []
    final_inputs = {v.name: v for v in model.graph.inputs}
    for name in inputs:
        value = final_inputs.get(name)
        if value is not None and is_sequence_value(value):
            reason = "the model's interface is kept unless asked"
            hint = f"--flatten-sequence-io --seq-len {name}=<n> (one tensor input per element)"
            if value.shape is None:  # flattening needs the elements' rank at least
                reason += "; its elements declare no shape, so it cannot be flattened"
                hint = ""
            result.append(NodeOutcome("main", name, "input", "kept", (name,), (), reason, hint))
        else:
            result.append(NodeOutcome("main", name, "input", "flattened", (name,)))
    final_outputs = {v.name: v for v in model.graph.outputs}
    facts: Facts | None = None
    for name in outputs:
        value = final_outputs.get(name)
        if value is None or not is_sequence_value(value):
            result.append(NodeOutcome("main", name, "output", "flattened", (name,)))
            continue
        facts = facts or Facts(model)
        fact = facts.sequence(value)
        if isinstance(fact, Unknown):
            reason = renamed_in(f"its length is unknown: {fact.reason}", renamed)
            hint = hint_for_value(value, model)
            if hint and "--flatten-sequence-io" not in hint:  # static then, but still a sequence
                flags, why = hint.split(" (", 1)
                hint = f"{flags} --flatten-sequence-io ({why}"
        else:
            reason = "the model's interface is kept unless asked"
            names = ", ".join(f"{name}_{k}" for k in range(min(fact.length, 3)))
            more = ", ..." if fact.length > 3 else ""
            hint = f"--flatten-sequence-io (gives {fact.length} outputs {names}{more})"
        result.append(NodeOutcome("main", name, "output", "kept", (name,), (), reason, hint))
    return result


def _is_sequence_node(node: ir.Node) -> bool:
    return is_sequence_op(node) or any(is_sequence_value(v) for v in (*node.inputs, *node.outputs))
