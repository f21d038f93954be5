"""A list of static length a Loop carries and edits at static positions only carries its
elements instead, one loop-carried tensor each.

    Loop(M, c, v.., s0, body: s -> edits of s at static positions -> s')   (len(s0) = n)
        -> e_j = SequenceAt(s0, j) for j in 0..n-1;
           Loop(M, c, v.., e_0..e_n-1,
                body: s = SequenceConstruct(t_0..t_n-1); ..; t'_j = SequenceAt(s', j));
           the list out: SequenceConstruct(t'_0..t'_n-1)

A decoder's per-layer cache (`caches[i] = torch.cat([caches[i], k], 1)` for each layer i of
an unrolled layer loop, in every decoding step) is such a list: its elements may differ in
shape from one another and change shape every step, so no one tensor holds them without a
table of sizes rebuilt per step, but each element alone is one tensor the Loop carries. In the
body the list becomes a known list (`SequenceConstruct`), whose reads, erases and inserts at
static positions the access rules fold away (`at-static-position`, `erase-from-known`,
`insert-into-known`): an assignment is then no operator at all.

The body may read the list with SequenceAt at a static position, SequenceLength,
ConcatFromSequence or Identity, and edit it with SequenceErase and SequenceInsert at static
positions (or none), each within the length the edits before it leave, and must give back a
list of the length n it received; nothing in a nested graph may read it. A position out of
range, a run-time position, or a final length other than n, is refused: the list does not keep
its length, or the known form would have to read it with a Gather per element. n is at least 1
(an empty list has nothing to carry) and at most `MAX_ELEMENTS`. The reads `SequenceAt(s0, j)`
run before the loop, even when it runs no iteration: s0 holds n elements, so they succeed, and
the list the Loop gives back is then s0 itself, rebuilt.
"""

from __future__ import annotations

__all__ = ["MAX_ELEMENTS", "RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.ops import is_sequence_value
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import carried_plans, loop_body

MAX_ELEMENTS = 64  # loop-carried tensors made of one list

# operators that read the list without making another
_READERS = {"SequenceAt", "SequenceLength", "ConcatFromSequence"}


@dataclasses.dataclass(frozen=True)
class ElementsPlan:
    index: int  # among the loop-carried values
    length: int
    dtype: ir.DataType


def _check(node: ir.Node, ctx: Context) -> tuple[ElementsPlan, ...] | Refusal:
    return carried_plans(
        node,
        lambda index: _plan(node, index, ctx),
        lambda init, body_input: init is not None and is_sequence_value(body_input),
    )


def _plan(node: ir.Node, index: int, ctx: Context) -> ElementsPlan | str:
    body = loop_body(node)
    init = node.inputs[2 + index]
    body_input = body.inputs[2 + index]
    update = body.outputs[1 + index]
    length = ctx.facts.length(init)
    if length is None:
        return "its initial length is not static"
    if length == 0:  # no element to carry (SequenceConstruct takes one at least)
        return "it starts empty: there is no element to carry"
    if length > MAX_ELEMENTS:
        return f"it holds {length} elements (more than {MAX_ELEMENTS} carried tensors)"
    dtype = element_dtype(init) or element_dtype(body_input)
    if dtype is None:
        return "the element type is unknown"
    lengths = _lengths(body, body_input, length, ctx)
    if isinstance(lengths, str):
        return lengths
    if lengths.get(id(update)) != length:
        return "the body does not give back, by the edits it traces, a list of its length"
    if sum(1 for output in body.outputs if output is update) != 1:
        return "the list the body gives back is more than one of its outputs"
    return ElementsPlan(index, length, dtype)


def _lengths(body: ir.Graph, start: ir.Value, length: int, ctx: Context) -> dict[int, int] | str:
    """The length of every list made from `start` (of `length` elements) by the body's edits,
    by id; or why the body's use of them is refused. Each value is visited once, from its one
    producer: linear in the edits."""
    lengths = {id(start): length}
    pending = [start]
    while pending:
        value = pending.pop()
        n = lengths[id(value)]
        for use in value.uses():
            reader = use.node
            op = reader.op_type
            if reader.graph is not body or reader.domain != "":
                return f"{op} in a nested graph or another domain reads it"
            if use.idx != 0:
                return f"{op} reads it as input {use.idx}"
            if op in _READERS:
                if op == "SequenceAt" and not _within(reader.inputs[1], n, 0, ctx):
                    return "the body reads it at a run-time or out-of-range position"
                continue
            if op == "Identity":
                made = n
            elif op == "SequenceErase":
                position = reader.inputs[1] if len(reader.inputs) > 1 else None
                if position is not None and not _within(position, n, 0, ctx):
                    return "the body erases at a run-time or out-of-range position"
                if n == 0:
                    return "the body erases from a list that is empty there"
                made = n - 1
            elif op == "SequenceInsert":
                position = reader.inputs[2] if len(reader.inputs) > 2 else None
                if position is not None and not _within(position, n, 1, ctx):
                    return "the body inserts at a run-time or out-of-range position"
                made = n + 1
            else:
                return f"the body reads it with {op}"
            output = reader.outputs[0]
            lengths[id(output)] = made
            pending.append(output)
    return lengths


def _within(position: ir.Value | None, n: int, extra: int, ctx: Context) -> bool:
    """Whether `position` is static and in `[-n, n - 1 + extra]`."""
    static = ctx.facts.static_int(position)
    return static is not None and -n <= static < n + extra


def _carry_elements(node: ir.Node, plans: tuple[ElementsPlan, ...], ctx: Context) -> None:
    """Loop(M, c, v.., s0, body: s -> edits at static positions -> s')
    -> Loop(M, c, v.., SequenceAt(s0, 0)..SequenceAt(s0, n-1),
            body: s = SequenceConstruct(t_0..t_n-1); ..; t'_j = SequenceAt(s', j)),
       the list out SequenceConstruct(t'_0..t'_n-1)"""
    body = loop_body(node)
    planned = {plan.index: plan for plan in plans}
    builder = ctx.rewriter.before(node)
    end = Builder(ctx.rewriter, body, None, body.name or "body", ctx.rewriter.opset(body))
    nodes = list(body)
    start = ctx.rewriter.before(nodes[0]) if nodes else end  # the known lists, first
    inputs, body_inputs = list(node.inputs[:2]), list(body.inputs[:2])
    body_outputs = [body.outputs[0]]
    carried = len(node.inputs) - 2
    for index in range(carried):
        init, body_input = node.inputs[2 + index], body.inputs[2 + index]
        plan = planned.get(index)
        if plan is None:
            inputs.append(init)
            body_inputs.append(body_input)
            body_outputs.append(body.outputs[1 + index])
            continue
        element = ir.TensorType(plan.dtype)
        elements = []
        for j in range(plan.length):
            position = builder.constant(np.array(j, np.int64), "element_position")
            inputs.append(builder.op("SequenceAt", [init, position], name="element_initial"))
            inputs[-1].type = element
            carry = ir.Value(name=ctx.rewriter.names.fresh(f"{body_input.name}_{j}"))
            carry.type = element
            body_inputs.append(carry)
            elements.append(carry)
        known = start.op("SequenceConstruct", elements, name="elements")
        known.type = body_input.type
        ctx.rewriter.replace(body_input, known)
        update = body.outputs[1 + index]  # the list passed through: now the known list
        for j in range(plan.length):
            position = end.constant(np.array(j, np.int64), "element_position")
            out = end.op("SequenceAt", [update, position], name="element_out")
            out.type = element
            body_outputs.append(out)
    body_outputs.extend(body.outputs[1 + carried :])  # the scan outputs
    body.inputs.clear()
    body.inputs.extend(body_inputs)
    body.outputs.clear()
    body.outputs.extend(body_outputs)
    added = sum(plan.length - 1 for plan in plans)
    outputs = builder.ops("Loop", inputs, {"body": body}, num_outputs=len(node.outputs) + added)
    after = 0
    for index, old in enumerate(node.outputs):
        plan = planned.get(index) if index < carried else None
        if plan is None:
            new = outputs[index + after]
            new.type = old.type
            ctx.rewriter.replace(old, new)
            continue
        parts = outputs[index + after : index + after + plan.length]
        for part in parts:
            part.type = ir.TensorType(plan.dtype)
        rebuilt = builder.op("SequenceConstruct", list(parts), name="elements_out")
        rebuilt.type = old.type
        ctx.rewriter.replace(old, rebuilt)
        after += plan.length - 1
    ctx.rewriter.fired_more("loop-list-elements", len(plans) - 1)


RULES = RuleSet([Rule("loop-list-elements", "Loop", _check, _carry_elements)])
