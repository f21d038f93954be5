"""Loops with a static trip count are unrolled; stacks of unbound rows become tensor code.

    Loop(static M, true, v.., body=f)        -> f(0, v..); f(1, ..); ...; f(M-1, ..)   (unrolled)
    ConcatFromSequence(SplitToSequence(x, axis=b, keepdims=0), axis=a, new_axis=1)
        -> Transpose(x, moving axis b to a)
    ConcatFromSequence(SplitToSequence(x, axis=b, keepdims=0), axis=a)
        -> Reshape(Transpose(x, moving axis b to a), merging axes a and a+1)

Appends in a Loop become scan outputs in `seqlower.rules.loop_appends`.

A loop is unrolled only when its trip count is static (at most `MAX_UNROLL`), its condition
cannot end it early or is known in every iteration (`while len(s) > 0: s.pop()` over a list of
static length, or a counter of static start stepped to a bound, as TorchScript writes a `for`
with a `continue`: `seqlower.analysis.loop_counts`), and every sequence it carries or reads has
a static length, so that the copies of the body fold into plain tensor code. A list from
outside of run-time length that the body only reads by SequenceAt (elements of known rank, at
positions other than the iteration number) does not stop it: each copy reads what its
iteration read, one Gather of the list's tensors.

    for t in range(1, 3):                       # SAM 2's memory bank over a video
        if frame - t >= 1: mem.append(bank[frame - t])
    -> two copies, each an If reading bank at frame - t; no Loop
"""

from __future__ import annotations

__all__ = ["MAX_UNROLL", "MAX_UNROLLED_NODES", "RULES", "check_unroll", "unroll", "unrolled_size"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.loop_counts import static_while_count
from seqlower.inline import inline_graph
from seqlower.ops import graph_nodes, graphs_within, is_sequence_value, subgraphs
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.access import _producer
from seqlower.rules.loop_parts import (
    body_always_continues,
    known_bool,
    loop_body,
    outer_sequences,
    uses_sequences,
)
from seqlower.rules.stacks import merged_shape

MAX_UNROLL = 32  # iterations
MAX_UNROLLED_NODES = 4096  # body nodes times iterations


# -- unrolling ------------------------------------------------------------------------------


def check_unroll(
    node: ir.Node,
    ctx: Context,
    max_iterations: int | None = MAX_UNROLL,
    max_nodes: int = MAX_UNROLLED_NODES,
) -> int | Refusal:
    """The static trip count when the loop can be unrolled within `max_iterations` (None: no
    limit) and `max_nodes` (body nodes times iterations), else why not."""
    body = loop_body(node)
    trip = node.inputs[0] if node.inputs else None
    if trip is None:
        return Refusal("no trip count: the number of iterations is known only at run time")
    count = ctx.facts.static_int(trip)
    if count is None:
        return Refusal(f"the trip count '{trip.name}' is computed at run time")
    cond = node.inputs[1] if len(node.inputs) > 1 else None
    if cond is not None:
        start = known_bool(cond, ctx)
        if start is None:
            return Refusal(f"the loop condition '{cond.name}' is computed at run time")
        if not start:
            count = 0
    count = max(count, 0)
    if count > 0 and not body_always_continues(body, ctx):
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
    if not uses_sequences(node, body):
        return Refusal("the loop neither carries nor reads a sequence")
    carried = set(node.inputs[2:])
    for value in [*node.inputs[2:], *outer_sequences(body)]:
        if not is_sequence_value(value):
            continue
        if value not in carried and _read_by_position(value, body, ctx):  # type: ignore[arg-type]
            continue  # each copy reads the same elements; the list becomes tensors
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


def _read_by_position(value: ir.Value, body: ir.Graph, ctx: Context) -> bool:
    """Whether the body reads the outer list `value` only by SequenceAt, each giving a tensor of
    known rank at a position other than the iteration number, and the list is not the model's
    interface: then the unrolled copies read the same elements at the same positions as the
    iterations did, and the list, of run-time length, becomes tensors (`seqlower.lists`), each
    read one Gather or Slice, whatever its length. A list read at the iteration number is walked
    element by element (a cache updated per layer, `cache[i] = f(cache[i])`): the map rules make
    that one Loop over the stacked list, which costs less than a copy of the body per element."""
    main = ctx.rewriter.model.graph
    if value in main.inputs or value in main.outputs:
        return False  # the interface stays a sequence: its reads would stay, copied
    inside = {id(g) for g in graphs_within(body)}
    readers = [user for user, _ in value.uses() if id(user.graph) in inside]
    return bool(readers) and all(
        user.op_type == "SequenceAt"
        and user.domain == ""
        and user.outputs[0].shape is not None
        and user.outputs[0].type is not None
        and (len(user.inputs) < 2 or user.inputs[1] is not body.inputs[0])
        for user in readers
    )


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


def unroll(node: ir.Node, count: int, ctx: Context) -> None:
    """Loop(M static, true, v.., body=f) -> f(0, true, v..) then f(1, true, ..) ... f(M-1, ..),
    scan outputs stacked: Concat(Unsqueeze(y_0, 0), ..., Unsqueeze(y_M-1, 0))"""
    body = loop_body(node)
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
        Rule("loop-unroll", "Loop", check_unroll, unroll),
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
