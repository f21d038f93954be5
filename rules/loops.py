"""Loops with a static trip count are unrolled; stacks of unbound rows become tensor code.

    Loop(static M, true, v.., body=f)        -> f(0, v..); f(1, ..); ...; f(M-1, ..)   (unrolled)
    ConcatFromSequence(SplitToSequence(x, axis=b, keepdims=0), axis=a, new_axis=1)
        -> Transpose(x, moving axis b to a)
    ConcatFromSequence(SplitToSequence(x, axis=b, keepdims=0), axis=a)
        -> Reshape(Transpose(x, moving axis b to a), merging axes a and a+1)

Appends in a Loop become scan outputs in `seqlower.rules.loop_appends`.

A loop is unrolled only when its trip count is static (at most `MAX_UNROLL`), its condition
cannot end it early or is known in every iteration (`while len(s) > 0: s.pop()` over a list of
static length: `seqlower.analysis.loop_counts`), and every sequence it carries or reads has a
static length, so that the copies of the body fold into plain tensor code.
"""

from __future__ import annotations

__all__ = ["MAX_UNROLL", "MAX_UNROLLED_NODES", "RULES", "unrolled_size"]

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import onnx_ir as ir

from seqlower.analysis.loop_counts import static_while_count
from seqlower.analysis.scan_forms import always_continues, static_bool
from seqlower.inline import inline_graph
from seqlower.ops import graph_nodes, graphs_within, is_sequence_op, is_sequence_value, subgraphs
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.access import _producer
from seqlower.rules.stacks import merged_shape
from seqlower.uses import use_count

T = TypeVar("T")

MAX_UNROLL = 32  # iterations
MAX_UNROLLED_NODES = 4096  # body nodes times iterations


def _body(node: ir.Node) -> ir.Graph:
    return node.attributes["body"].as_graph()


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
        {"body": _body(node)},
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


def _outer_sequences(body: ir.Graph) -> list[ir.Value]:
    """Sequence values defined outside `body` that the body (or a graph nested in it) reads."""
    inside = {id(g) for g in graphs_within(body)}
    found: dict[ir.Value, None] = {}
    for graph_node in body.all_nodes():
        for value in graph_node.inputs:
            if is_sequence_value(value) and id(value.graph) not in inside:  # type: ignore[union-attr]
                found[value] = None  # type: ignore[index]
    return list(found)


def _uses_sequences(node: ir.Node, body: ir.Graph) -> bool:
    if any(is_sequence_value(v) for v in node.inputs) or _outer_sequences(body):
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
    body = _body(node)
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


def _static_bool(value: ir.Value | None, ctx: Context) -> bool | None:
    return static_bool(value, ctx.facts.values)


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


def _body_always_continues(body: ir.Graph, ctx: Context) -> bool:
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
    if condition is not None and _static_bool(condition, ctx) is not True:
        return Refusal("the loop may not start (its condition input is not always true)")
    if not _body_always_continues(_body(node), ctx):
        return Refusal("the condition may end the loop early")
    return None


# -- unrolling ------------------------------------------------------------------------------


def _check_unroll(
    node: ir.Node,
    ctx: Context,
    max_iterations: int | None = MAX_UNROLL,
    max_nodes: int = MAX_UNROLLED_NODES,
) -> int | Refusal:
    """The static trip count when the loop can be unrolled within `max_iterations` (None: no
    limit) and `max_nodes` (body nodes times iterations), else why not."""
    body = _body(node)
    trip = node.inputs[0] if node.inputs else None
    if trip is None:
        return Refusal("no trip count: the number of iterations is known only at run time")
    count = ctx.facts.static_int(trip)
    if count is None:
        return Refusal(f"the trip count '{trip.name}' is computed at run time")
    cond = node.inputs[1] if len(node.inputs) > 1 else None
    if cond is not None:
        start = _static_bool(cond, ctx)
        if start is None:
            return Refusal(f"the loop condition '{cond.name}' is computed at run time")
        if not start:
            count = 0
    count = max(count, 0)
    if count > 0 and not _body_always_continues(body, ctx):
        # a `while` loop whose condition is known in every iteration (`while len(s) > 0`)
        limit = MAX_UNROLL if max_iterations is None else min(max_iterations, MAX_UNROLL)
        runs = static_while_count(node, ctx.facts, limit)
        if runs is None:
            return Refusal("the body computes its condition, so the loop may end early")
        count = runs
    too_many = max_iterations is not None and count > max_iterations
    size = unrolled_size(body, ctx, max_nodes // max(count, 1) + 1)
    if too_many or count * size > max_nodes:
        return Refusal(f"{count} iterations of {size} nodes: too many to unroll")
    if not _uses_sequences(node, body):
        return Refusal("the loop neither carries nor reads a sequence")
    for value in [*node.inputs[2:], *_outer_sequences(body)]:
        if not is_sequence_value(value):
            continue
        if ctx.facts.length(value) is None:  # type: ignore[arg-type]
            fact = ctx.facts.sequence(value)  # type: ignore[arg-type]
            return Refusal(f"sequence '{value.name}' has no static length: {fact.reason}")  # type: ignore[union-attr]
        elements = ctx.known_elements(value)
        if isinstance(elements, Refusal):
            # each unrolled copy would keep the body's sequence operators (fuzz seed 44348)
            return Refusal(
                f"the elements of sequence '{value.name}' are not known ({elements.reason}): "
                "the unrolled copies would keep the body's sequence operators"
            )
    n_scan = len(body.outputs) - 1 - (len(node.inputs) - 2)
    if count == 0 and n_scan > 0:
        return Refusal("no iteration runs, and the element shape of its scan outputs is unknown")
    return count


def unrolled_size(graph: ir.Graph, ctx: Context, limit: int = MAX_UNROLLED_NODES) -> int:
    """The nodes of `graph` with those of the graphs nested in it, a nested Loop of static
    trip count t counted t times (what its copies hold once it is unrolled in turn: Loops
    unrolled inside unrolled Loops multiply), counted up to just past `limit`."""
    total = 0
    for node in graph_nodes(graph):
        total += 1
        for inner in subgraphs(node):
            size = unrolled_size(inner, ctx, limit - total + 1)
            if node.op_type == "Loop" and node.inputs and node.inputs[0] is not None:
                trip = ctx.facts.static_int(node.inputs[0])
                size *= max(min(trip, MAX_UNROLL) if trip is not None else 1, 1)
            total += size
        if total > limit:
            break
    return total


def _unroll(node: ir.Node, count: int, ctx: Context) -> None:
    """Loop(M static, true, v.., body=f) -> f(0, true, v..) then f(1, true, ..) ... f(M-1, ..),
    scan outputs stacked: Concat(Unsqueeze(y_0, 0), ..., Unsqueeze(y_M-1, 0))"""
    body = _body(node)
    builder = ctx.rewriter.before(node)
    n_carried = len(node.inputs) - 2
    carried: list[ir.Value] = list(node.inputs[2:])  # type: ignore[arg-type]
    scans: list[list[ir.Value]] = [[] for _ in node.outputs[n_carried:]]
    true = builder.constant(np.array(True), "true") if count else None
    for k in range(count):
        iteration = builder.constant(np.array(k, dtype=np.int64), "iteration")
        results = inline_graph(
            body, [iteration, true, *carried], builder, f"{builder.hint}_iteration{k}"
        )
        carried = results[1 : 1 + n_carried]
        for collected, value in zip(scans, results[1 + n_carried :]):
            collected.append(value)
    for old, new in zip(node.outputs[:n_carried], carried):
        ctx.rewriter.replace(old, new)
    for old, values in zip(node.outputs[n_carried:], scans):
        stacked = builder.stack(values)
        stacked.type = old.type
        ctx.rewriter.replace(old, stacked)


# -- consumers of an unstacked tensor ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class UnbindConcat:
    data: ir.Value
    rank: int
    split_axis: int
    concat_axis: int  # normalized, in the coordinates of the result (new_axis=1) or elements


def _check_unbind(node: ir.Node, ctx: Context, new_axis: bool) -> UnbindConcat | Refusal:
    if (node.attributes.get_int("new_axis", 0) == 1) != new_axis:
        return Refusal(f"new_axis is {1 - int(new_axis)}")
    split = _producer(node.inputs[0], "SplitToSequence")
    if split is None:
        return Refusal("the sequence does not come from SplitToSequence")
    if len(split.inputs) > 1 and split.inputs[1] is not None:
        return Refusal("SplitToSequence has a 'split' input: the elements are not slices")
    if split.attributes.get_int("keepdims", 1) != 0:
        return Refusal("the elements keep the split axis")
    data = split.inputs[0]
    if data is None or data.shape is None:
        return Refusal("the rank of the split input is unknown")
    rank = len(data.shape)
    split_axis = split.attributes.get_int("axis", 0) % rank
    result_rank = rank if new_axis else rank - 1
    axis = node.attributes.get_int("axis", 0)
    if result_rank == 0 or not -result_rank <= axis < result_rank:
        return Refusal(f"axis {axis} is out of range for the elements")
    return UnbindConcat(data, rank, split_axis, axis % result_rank)


def _moved(builder, match: UnbindConcat) -> ir.Value:  # type: ignore[no-untyped-def]
    """`data` with its split axis moved to the concatenation axis."""
    if match.split_axis == match.concat_axis:
        return match.data
    perm = [i for i in range(match.rank) if i != match.split_axis]
    perm.insert(match.concat_axis, match.split_axis)
    moved = builder.op("Transpose", [match.data], {"perm": perm})
    moved.type = match.data.type
    return moved


def _check_stack_of_unbind(node: ir.Node, ctx: Context) -> UnbindConcat | Refusal:
    match = _check_unbind(node, ctx, new_axis=True)
    if isinstance(match, UnbindConcat) and match.split_axis == match.concat_axis:
        return Refusal("the stack undoes the split (concat-of-split-to-sequence)")
    return match


def _stack_of_unbind(node: ir.Node, match: UnbindConcat, ctx: Context) -> None:
    """ConcatFromSequence(SplitToSequence(x, axis=b, keepdims=0), axis=a, new_axis=1)
    -> Transpose(x, moving axis b to a)"""
    builder = ctx.rewriter.before(node)
    ctx.rewriter.replace(node.outputs[0], _moved(builder, match))


def _check_concat_of_unbind(node: ir.Node, ctx: Context) -> UnbindConcat | Refusal:
    match = _check_unbind(node, ctx, new_axis=False)
    if isinstance(match, Refusal) or ctx.rewriter.opset(node.graph) >= 14:
        return match
    shape = ctx.facts.static_shape(match.data)
    if shape is None or 0 in shape:
        return Refusal("Reshape before opset 14 reads a 0 as 'copy this dim': needs a static shape")
    return match


def _concat_of_unbind(node: ir.Node, match: UnbindConcat, ctx: Context) -> None:
    """ConcatFromSequence(SplitToSequence(x, axis=b, keepdims=0), axis=a)
    -> Reshape(Transpose(x, moving axis b to a), merging axes a and a+1)"""
    builder = ctx.rewriter.before(node)
    moved = _moved(builder, match)
    a = match.concat_axis
    attrs = {"allowzero": 1} if builder.opset >= 14 else {}
    order = [i for i in range(match.rank) if i != match.split_axis]
    order.insert(a, match.split_axis)
    data_shape = match.data.shape
    static = ctx.facts.static_shape(match.data)
    if static is not None:
        shape: list | None = [static[i] for i in order]
    else:  # opset >= 14 (checked): the merged dim may be -1 or computed
        shape = None if data_shape is None else [data_shape[i] for i in order]
    target = merged_shape(builder, moved, match.rank, shape, a)
    result = builder.op("Reshape", [moved, target], attrs)
    result.type = match.data.type
    ctx.rewriter.replace(node.outputs[0], result)


RULES = RuleSet(
    [
        Rule("loop-unroll", "Loop", _check_unroll, _unroll),
        # before the split rule: one Transpose/Reshape of x, not N chunks concatenated again
        Rule(
            "stack-of-unbind",
            "ConcatFromSequence",
            _check_stack_of_unbind,
            _stack_of_unbind,
            before_producers=True,
        ),
        Rule(
            "concat-of-unbind",
            "ConcatFromSequence",
            _check_concat_of_unbind,
            _concat_of_unbind,
            before_producers=True,
        ),
    ]
)
