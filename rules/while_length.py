"""A `while` loop that runs until a list it appends to is long enough runs a counted number of
times:

    Loop(M, c0, .., s0, .., body: s1 = SequenceInsert(s, e); c' = Less(SequenceLength(s1), n))
        -> Loop(Min(K, M), true, .., s0, .., body: s1 = SequenceInsert(s, e); c' = true)
           K = Where(c0, Where(Less(len0, n), n - len0, 1), 0), len0 = SequenceLength(s0)
    (also c' = Greater(n, SequenceLength(s1)); no Min where M is the largest int64; a Loop
    carries a list from opset 13 on, where Min reads int64)

This is `while len(out) < n: out.append(x)` as TorchScript exports it: the list grows by one
element per iteration, so after the first iteration (which runs when c0 holds, whatever c0 is)
the loop stops once len0 + k reaches n. `n` must be a value the body does not compute (an input
of the model, or computed before the loop) and the body must append exactly one element to the
list each iteration, with no position. The trip count no longer depends on the list: the rules
for counted loops (appends as scan outputs, batching) apply next. Where len0 < n, n - len0 is
between 1 and n, so no subtraction overflows.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.ops import is_sequence_value
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import appending_insert, loop_body

_LARGEST = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class WhilePlan:
    index: int  # the list, among the carried values
    bound: ir.Value  # n


def _check(node: ir.Node, ctx: Context) -> WhilePlan | Refusal:
    body = loop_body(node)
    if len(node.inputs) < 3 or node.inputs[1] is None:
        return Refusal("the loop has no condition")
    condition = body.outputs[0].producer()
    if condition is None or condition.graph is not body or condition.domain != "":
        return Refusal("the body's condition is not a comparison it computes")
    if condition.op_type not in ("Less", "Greater"):
        return Refusal("the body's condition is not a length compared with `<` to a bound")
    length, bound = condition.inputs if condition.op_type == "Less" else condition.inputs[::-1]
    counted = length.producer() if length is not None else None
    if counted is None or counted.op_type != "SequenceLength" or counted.domain != "":
        return Refusal("the body's condition does not compare a list's length")
    if bound is None or bound.graph is body:
        return Refusal("the bound the length is compared with changes in the body")
    if bound.dtype != ir.DataType.INT64:
        return Refusal("the bound is not an int64 scalar")
    grown = counted.inputs[0]
    outputs = list(body.outputs)
    if grown is None or grown not in outputs[1:] or not is_sequence_value(grown):
        return Refusal("the length compared is not that of a list the loop carries")
    k = outputs.index(grown) - 1
    if k >= len(node.inputs) - 2:
        return Refusal("the length compared is that of a scan output")
    if appending_insert(grown, body.inputs[2 + k], body) is None:
        return Refusal("the list does not grow by exactly one appended element per iteration")
    return WhilePlan(k, bound)


def _rewrite(node: ir.Node, plan: WhilePlan, ctx: Context) -> None:
    """Loop(M, c0, s0, body: s1 = SequenceInsert(s, e); c' = Less(SequenceLength(s1), n))
    -> Loop(Min(K, M), true, s0, body: s1 = SequenceInsert(s, e); c' = true),
       K = Where(c0, Where(Less(len0, n), n - len0, 1), 0)"""
    body = loop_body(node)
    b = ctx.rewriter.before(node)
    start = node.inputs[2 + plan.index]
    c0 = node.inputs[1]
    assert start is not None and c0 is not None
    len0 = b.op("SequenceLength", [start], name="length")
    short = b.op("Less", [len0, plan.bound], name="short")
    missing = b.op("Sub", [plan.bound, len0], name="missing")
    one, zero = b.constant(np.array(1, np.int64), "one"), b.constant(np.array(0, np.int64), "zero")
    runs = b.op("Where", [short, missing, one], name="runs")
    if c0.shape is None or len(c0.shape) != 0:
        c0 = b.op("Reshape", [c0, b.ints([], "scalar")], name="first")
    count = b.op("Where", [c0, runs, zero], name="trip_count")
    trip = node.inputs[0]
    limit = ctx.facts.static_int(trip) if trip is not None else None
    if trip is not None and (limit is None or limit < _LARGEST):
        count = b.op("Min", [count, trip], name="trip_count")
    for value in (len0, short, missing, runs, count):
        value.type = ir.TensorType(ir.DataType.INT64 if value is not short else ir.DataType.BOOL)
        value.shape = ir.Shape([])
    true = b.constant(np.array(True), "true")
    node.replace_input_with(0, count)
    node.replace_input_with(1, true)
    keep_going = ctx.rewriter.before(body.outputs[0].producer()).op(  # type: ignore[arg-type]
        "Identity", [body.inputs[1]], name="continue"
    )
    keep_going.type, keep_going.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    body.outputs[0] = keep_going


RULES = RuleSet([Rule("while-length-bound", "Loop", _check, _rewrite)])
