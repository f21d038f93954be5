"""The parts of a Loop that the loop rules read and rebuild: its body, whether its condition
can end it early, the lists it carries or reads from outside, and a rebuild that trades carried
lists for scan outputs. Rules in `seqlower.rules.loop_*` ask these questions the same way.
"""

from __future__ import annotations

__all__ = [
    "appending_insert",
    "body_always_continues",
    "carried_plans",
    "concatenation_axes",
    "counted_loop_refusal",
    "known_bool",
    "loop_body",
    "outer_sequences",
    "rebuild_with_scans",
    "single_append",
    "uses_sequences",
]

from collections.abc import Callable, Sequence
from typing import TypeVar

import onnx_ir as ir

from seqlower.analysis.scan_forms import always_continues, static_bool
from seqlower.ops import graphs_within, is_sequence_op, is_sequence_value
from seqlower.rule import Context, Refusal
from seqlower.uses import use_count

T = TypeVar("T")


def loop_body(node: ir.Node) -> ir.Graph:
    """The body graph of Loop `node`."""
    return node.attributes["body"].as_graph()


def known_bool(value: ir.Value | None, ctx: Context) -> bool | None:
    """The boolean `value` always holds (a loop's condition), None when it is not known."""
    return static_bool(value, ctx.facts.values)


def body_always_continues(body: ir.Graph, ctx: Context) -> bool:
    """True when the body's condition output is always true, given a true condition input."""
    return always_continues(body, ctx.facts.values)


def counted_loop_refusal(node: ir.Node, ctx: Context) -> Refusal | None:
    """Why Loop `node` may not run exactly its trip count's iterations: no trip count given
    (a while loop), a condition input not always true, or a body that may end it early; None
    when it runs them all."""
    count = node.inputs[0] if node.inputs else None
    if count is None:
        return Refusal("the trip count is not given (a while loop)")
    condition = node.inputs[1] if len(node.inputs) > 1 else None
    if condition is not None and known_bool(condition, ctx) is not True:
        return Refusal("the loop may not start (its condition input is not always true)")
    if not body_always_continues(loop_body(node), ctx):
        return Refusal("the condition may end the loop early")
    return None


def outer_sequences(body: ir.Graph) -> list[ir.Value]:
    """Sequence values defined outside `body` that the body (or a graph nested in it) reads."""
    inside = {id(g) for g in graphs_within(body)}
    found: dict[ir.Value, None] = {}
    for graph_node in body.all_nodes():
        for value in graph_node.inputs:
            if is_sequence_value(value) and id(value.graph) not in inside:  # type: ignore[union-attr]
                found[value] = None  # type: ignore[index]
    return list(found)


def uses_sequences(node: ir.Node, body: ir.Graph) -> bool:
    if any(is_sequence_value(v) for v in node.inputs) or outer_sequences(body):
        return True
    return any(is_sequence_op(n) for n in body.all_nodes())


def carried_plans(
    node: ir.Node,
    plan_for: Callable[[int], T | str],
    carried: Callable[[ir.Value | None, ir.Value], bool],
) -> tuple[T, ...] | Refusal:
    """The plans `plan_for(k)` gives for every carried value k of Loop `node` that
    `carried(initial, body input)` takes and that it can plan, in order; else a refusal naming
    why each such value was not planned (`plan_for` answers why with a string). The rule then
    rewrites them all in one rebuild of the Loop: a rebuild per value, each rewiring every
    output of the Loop after a check that plans every value anew, is quadratic in the values
    a Loop carries."""
    body = loop_body(node)
    reasons = []
    plans: list[T] = []
    for index, init in enumerate(node.inputs[2:]):
        body_input = body.inputs[2 + index]
        if not carried(init, body_input):
            continue
        plan = plan_for(index)
        if not isinstance(plan, str):
            plans.append(plan)
        elif not plans:
            reasons.append(f"carried sequence '{body_input.name}': {plan}")
    if plans:
        return tuple(plans)
    return Refusal("; ".join(reasons) or "the loop carries no sequence")


def rebuild_with_scans(
    node: ir.Node, indices: Sequence[int], scans: int, ctx: Context
) -> tuple[list[ir.Value], list[ir.Value]]:
    """Replace Loop `node` by one without its carried values `indices` (ascending) and with
    `scans` more scan outputs, over the same body (its inputs and outputs for `indices` already
    taken out, the new scan outputs appended). The readers of the other outputs read the new
    Loop's. Returns the dropped carried outputs (still read where they were), in the order of
    `indices`, and the new Loop's outputs. One rebuild for every value dropped: a rule that
    lowers several carried values rebuilds the Loop once, not once per value (each rebuild
    rewires every output, so one per value is quadratic in the carried values)."""
    drop = set(indices)
    inputs = [v for i, v in enumerate(node.inputs) if i - 2 not in drop]
    new_outputs = ctx.rewriter.before(node).ops(
        "Loop",
        inputs,
        {"body": loop_body(node)},
        num_outputs=len(node.outputs) - len(drop) + scans,
        name="scan_loop",
    )
    # the body moves to the new Loop; dead-code removal knows the new holder and leaves it
    kept = [v for i, v in enumerate(node.outputs) if i not in drop]
    dropped = [node.outputs[i] for i in indices]
    for old, new in zip(kept, new_outputs):
        new.type = old.type
        ctx.rewriter.replace(old, new)
    return dropped, new_outputs


def single_append(update: ir.Value, state: ir.Value, body: ir.Graph) -> ir.Node | None:
    """The SequenceInsert that makes `update` by appending one tensor at the end of the carried
    list `state`, which nothing else in `body` reads; None when `update` is not made so."""
    insert = appending_insert(update, state, body)
    return insert if insert is not None and use_count(state) == 1 else None


def appending_insert(update: ir.Value, state: ir.Value, body: ir.Graph) -> ir.Node | None:
    """The SequenceInsert of `body` that makes `update` by appending one tensor at the end of
    the carried list `state` (which the body may read elsewhere too); else None."""
    insert = update.producer()
    if (
        insert is None
        or insert.op_type != "SequenceInsert"
        or insert.domain != ""
        or insert.graph is not body
        or insert.inputs[0] is not state
        or (len(insert.inputs) > 2 and insert.inputs[2] is not None)
        or insert.inputs[1] is None
    ):
        return None
    return insert


def concatenation_axes(output: ir.Value) -> set[int] | None:
    """The axes, as written, of the ConcatFromSequence(new_axis=0) nodes that alone read the list
    `output`; None when anything else reads it or the model returns it."""
    if output.is_graph_output():
        return None
    axes = set()
    for use in output.uses():
        reader = use.node
        if reader.op_type != "ConcatFromSequence" or reader.domain != "":
            return None
        if reader.attributes.get_int("new_axis", 0) != 0:
            return None
        axes.add(reader.attributes.get_int("axis", 0))
    return axes
