"""A list a Loop appends to and reads only at its end carries its last element instead.

    Loop(M, c, v.., s0, body: e = SequenceAt(s, -1); ..; s1 = SequenceInsert(s, t))
        -> Loop(M, c, v.., s0, last0 = SequenceAt(s0, -1),
                body: e = last; ..; s1 = SequenceInsert(s, t); last' = t)

The element read at position -1 is the one appended by the previous iteration, or the last of
the initial elements in the first: a value the Loop can carry. A greedy decoder's
`emb = embed(tokens[-1]); ..; tokens.append(tok)` reads its list so. Once the body no longer
reads the list, `loop-append-to-scan` makes the appends scan outputs, where a list read at its
end stays a tensor that grows by one copy per iteration.

The initial list must hold at least one element: SequenceAt(s0, -1) runs before the loop, even
when the loop runs no iteration, where an empty list would make it fail.
"""

from __future__ import annotations

__all__ = ["RULES"]

import collections
import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.ops import is_sequence_value
from seqlower.report.labels import STANDS_FOR_KEY, user_value_label
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import appending_insert, carried_plans, loop_body


@dataclasses.dataclass(frozen=True)
class LastElementPlan:
    index: int  # among the loop-carried values
    reads: tuple[ir.Node, ...]  # the SequenceAt(s, -1) nodes of the body
    appended: ir.Value  # t of SequenceInsert(s, t)
    dtype: ir.DataType


def _check(node: ir.Node, ctx: Context) -> tuple[LastElementPlan, ...] | Refusal:
    # counted once: a loop carrying a hundred lists asks of each whether it is one output
    outputs = collections.Counter(id(output) for output in loop_body(node).outputs)
    plans = carried_plans(
        node,
        lambda index: _plan(node, index, ctx, outputs),
        lambda init, body_input: (
            init is not None and (is_sequence_value(init) or is_sequence_value(body_input))
        ),
    )
    if isinstance(plans, Refusal):
        return plans
    # a list appended with another's last element: that read becomes a body input, so the
    # lists are then carried one at a time
    reads = {id(read.outputs[0]) for plan in plans for read in plan.reads}
    if any(id(plan.appended) in reads for plan in plans):
        return plans[:1]
    return plans


def _plan(
    node: ir.Node, index: int, ctx: Context, outputs: collections.Counter[int]
) -> LastElementPlan | str:
    body = loop_body(node)
    init = node.inputs[2 + index]
    body_input = body.inputs[2 + index]
    assert init is not None
    update = body.outputs[1 + index]
    insert = appending_insert(update, body_input, body)
    if insert is None or update.uses() or outputs[id(update)] != 1:
        # the list as the body leaves it is read by nothing but the body's outputs
        return "the body does not append one tensor at its end"
    reads = []
    for use in body_input.uses():
        reader = use.node
        if reader is insert:
            continue
        if reader.op_type != "SequenceAt" or reader.domain != "" or use.idx != 0:
            return f"the body reads it with {reader.op_type}, not only at position -1"
        if ctx.facts.static_int(reader.inputs[1]) != -1:
            return "the body reads it at a position other than -1"
        reads.append(reader)
    if not reads:
        return "the body reads no element of it"
    length = ctx.facts.length(init)
    if length is None or length < 1:
        return "its initial elements are not known to be at least one (-1 may not exist)"
    appended = insert.inputs[1]
    assert appended is not None
    dtype = appended.dtype or element_dtype(init) or element_dtype(body_input)
    if dtype is None:
        return "the element type is unknown"
    return LastElementPlan(index, tuple(reads), appended, dtype)


def _carry_last(node: ir.Node, plans: tuple[LastElementPlan, ...], ctx: Context) -> None:
    """Loop(M, c, v.., s0, body: e = SequenceAt(s, -1); ..; s1 = SequenceInsert(s, t))
    -> Loop(M, c, v.., s0, SequenceAt(s0, -1), body: e = last; ..; s1 = SequenceInsert(s, t);
    last' = t)"""
    # every planned list of the Loop at once, in one rebuild of the Loop
    body = loop_body(node)
    carried = len(node.inputs) - 2
    builder = ctx.rewriter.before(node)
    firsts = [
        _carry_one(node, builder, plan, carried + added, ctx) for added, plan in enumerate(plans)
    ]
    outputs = builder.ops(
        "Loop",
        [*node.inputs, *firsts],
        {"body": body},
        num_outputs=len(node.outputs) + len(plans),
    )
    for added, first in enumerate(firsts):
        outputs[carried + added].type = first.type
    old = list(node.outputs)
    for position, value in enumerate(old):
        new = outputs[position if position < carried else position + len(plans)]
        new.type = value.type
        ctx.rewriter.replace(value, new)
    ctx.rewriter.fired_more("loop-last-element", len(plans) - 1)


def _carry_one(
    node: ir.Node, builder: Builder, plan: LastElementPlan, carried: int, ctx: Context
) -> ir.Value:
    """The body edits for one list: its last element becomes a carried value of Loop `node`,
    the `carried`-th. Returns its initial value, made before the Loop."""
    body = loop_body(node)
    init = node.inputs[2 + plan.index]
    assert init is not None
    position = builder.constant(np.array(-1, np.int64), "last_position")
    first = builder.op("SequenceAt", [init, position], name="last_initial")
    first.type = ir.TensorType(plan.dtype)
    last = ir.Value(name=ctx.rewriter.names.fresh(f"{body.name or 'body'}_last"), type=first.type)
    # messages name it by what it carries: the value the body appended in the last iteration
    last.meta[STANDS_FOR_KEY] = user_value_label(plan.appended)
    body.inputs.append(last)
    for read in plan.reads:
        ctx.rewriter.replace(read.outputs[0], last)
        read.graph.remove(read, safe=True)  # type: ignore[union-attr]
    appended = plan.appended
    if appended.producer() is None or appended.producer().graph is not body:  # type: ignore[union-attr]
        # a body input or an outer value: a body output of its own
        appended = ctx.rewriter.before(_anchor(body)).op("Identity", [appended], name="last")
        appended.type = first.type
    body.outputs.insert(1 + carried, appended)
    return first


def _anchor(body: ir.Graph) -> ir.Node:
    """A node of `body` to build before: its last one (every body output is made by then)."""
    return list(body)[-1]


RULES = RuleSet([Rule("loop-last-element", "Loop", _check, _carry_last)])
