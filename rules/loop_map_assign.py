"""A Loop that assigns every element of a list once, at its iteration number, maps the list.

    Loop(M = SequenceLength(s0), true, v.., s0,
         body(i, c, v.., s): a = SequenceAt(s, i); ..; x = f(a, v..)
                             u = SequenceInsert(SequenceErase(s, i), x, i); b = SequenceAt(u, i))
        -> Loop(M, true, v.., SequenceEmpty(),
                body(i, c, v.., s): a = SequenceAt(s0, i); ..; x = f(a, v..)
                                    u = SequenceInsert(s, x); b = x)

`for i in range(len(xs)): xs[i] = f(xs[i], state)` (a decoder's per-layer cache, per-branch
states) visits each position once, in order: in iteration i, element i is still the initial
one, and after the last iteration every element is the one its iteration put. So the body reads
the initial list (loop-invariant), and the list after the loop is the elements put, in order:
appends, which `loop-append-to-scan` makes scan outputs (one stacked tensor, no per-iteration
edit of the list). `SequenceLength` of the list in the body is the initial length.

Needs: the trip count is the initial list's length (SequenceLength of it, or both static), the
loop never ends early, and the body touches the list only so: reads at i, one erase at i, one
insert at i of the erased list, reads of the result at i, lengths.

Where that plan does not apply, the plan of `seqlower.rules.loop_map_puts` may: lists the body
appends to or assigns in at i by branch (`if len(keys) <= i: keys.append(k) else: keys[i] =
..`), with a static trip count that bounds the initial length:

    Loop(M, true, s0, body: u = If(SequenceLength(s) <= i, then: SequenceInsert(s, x),
                                   else: SequenceInsert(SequenceErase(s, i), f(s[i]), i)))
        -> Loop(M, true, SequenceEmpty(), body: u = SequenceInsert(s, If(SequenceLength(s0) <= 0,
                                                                 then: x, else: f(s0[i]))))
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.ops import is_sequence_value
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_map_puts import PutsPlan, plan_puts, rewrite_puts
from seqlower.rules.loop_parts import body_always_continues, carried_plans, known_bool, loop_body
from seqlower.uses import use_count


@dataclasses.dataclass(frozen=True)
class MapPlan:
    index: int  # among the loop-carried values
    reads: tuple[ir.Node, ...]  # SequenceAt(s, i) and SequenceLength(s or u) of the body
    insert: ir.Node  # SequenceInsert(SequenceErase(s, i), x, i)
    put_reads: tuple[ir.Node, ...]  # SequenceAt(u, i)
    dtype: ir.DataType


def _check(node: ir.Node, ctx: Context) -> tuple[MapPlan, ...] | PutsPlan | Refusal:
    body = loop_body(node)
    cond = node.inputs[1] if len(node.inputs) > 1 else None
    if cond is not None and known_bool(cond, ctx) is not True:
        return Refusal("the loop condition is not known to be true")
    if not body_always_continues(body, ctx):
        return Refusal("the body computes its condition, so the loop may end early")
    plans = carried_plans(
        node,
        lambda index: _plan(node, index, ctx),
        lambda init, _: init is not None and is_sequence_value(init),
    )
    if not isinstance(plans, Refusal):
        return plans
    puts = plan_puts(node, ctx)
    if isinstance(puts, PutsPlan):
        return puts
    return Refusal(f"{plans.reason}; as appends or assignments at i: {puts}")


def _plan(node: ir.Node, index: int, ctx: Context) -> MapPlan | str:
    body = loop_body(node)
    init = node.inputs[2 + index]
    state = body.inputs[2 + index]
    counter = body.inputs[0]
    assert init is not None
    if not _trip_is_length(node.inputs[0], init, ctx):
        return "the trip count is not the length of its initial value"
    update = body.outputs[1 + index]
    insert = update.producer()
    if (
        insert is None
        or insert.op_type != "SequenceInsert"
        or insert.domain != ""
        or insert.graph is not body
        or len(insert.inputs) < 3
        or insert.inputs[2] is not counter
        or insert.inputs[1] is None
    ):
        return "the body does not insert one tensor at the iteration number"
    erase = insert.inputs[0].producer() if insert.inputs[0] is not None else None
    if (
        erase is None
        or erase.op_type != "SequenceErase"
        or erase.domain != ""
        or erase.inputs[0] is not state
        or len(erase.inputs) < 2
        or erase.inputs[1] is not counter
    ):
        return "the body does not erase the element at the iteration number before the insert"
    erased = erase.outputs[0]
    if erased.is_graph_output() or use_count(erased) != 1:
        return "the list without the element is read elsewhere"
    if state.is_graph_output() or sum(o is update for o in body.outputs) != 1:
        return "the body returns the list elsewhere too"
    reads = []
    for use in state.uses():
        if use.node is erase:
            continue
        if not _reads_at(use.node, use.idx, counter):
            return f"the body reads it with {use.node.op_type}, not only at the iteration number"
        reads.append(use.node)
    put_reads = []
    for use in update.uses():
        if not _reads_at(use.node, use.idx, counter):
            return (
                f"the body reads the new list with {use.node.op_type}, not at the iteration number"
            )
        if use.node.op_type == "SequenceLength":
            reads.append(use.node)
        else:
            put_reads.append(use.node)
    dtype = element_dtype(init) or element_dtype(state) or insert.inputs[1].dtype
    if dtype is None:
        return "the element type is unknown"
    return MapPlan(index, tuple(reads), insert, tuple(put_reads), dtype)


def _reads_at(reader: ir.Node, idx: int, counter: ir.Value) -> bool:
    """A SequenceLength of the list, or a SequenceAt of it at the iteration number."""
    if reader.domain != "" or idx != 0:
        return False
    if reader.op_type == "SequenceLength":
        return True
    return reader.op_type == "SequenceAt" and reader.inputs[1] is counter


def _trip_is_length(trip: ir.Value | None, init: ir.Value, ctx: Context) -> bool:
    """Whether the trip count `trip` is the length of the list `init`."""
    if trip is None:
        return False
    value: ir.Value | None = trip
    while value is not None:  # under Identity, and a Cast to int64 of an int64
        producer = value.producer()
        if producer is None or producer.domain != "":
            break
        if producer.op_type == "SequenceLength":
            return producer.inputs[0] is init
        if producer.op_type not in ("Identity", "Cast"):
            break
        if producer.op_type == "Cast" and producer.inputs[0].dtype != ir.DataType.INT64:  # type: ignore[union-attr]
            break
        value = producer.inputs[0]
    static = ctx.facts.static_int(trip)
    return static is not None and static == ctx.facts.length(init)


def _to_appends(node: ir.Node, plan: tuple[MapPlan, ...] | PutsPlan, ctx: Context) -> None:
    """Loop(SequenceLength(s0), true, s0, body: SequenceInsert(SequenceErase(s, i), x, i))
    -> Loop(SequenceLength(s0), true, SequenceEmpty(), body: SequenceInsert(s, x)), the body
    reading s0 where it read s at i, and x where it read the new list at i"""
    if isinstance(plan, PutsPlan):
        rewrite_puts(node, plan, ctx)
        return
    # every planned list of the Loop at once, in one rebuild of the Loop
    builder = ctx.rewriter.before(node)
    inputs = list(node.inputs)
    for one in plan:
        inputs[2 + one.index] = _map_one(node, builder, one, ctx)
    outputs = builder.ops("Loop", inputs, {"body": loop_body(node)}, num_outputs=len(node.outputs))
    for old, new in zip(node.outputs, outputs):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)
    ctx.rewriter.fired_more("loop-map-assign", len(plan) - 1)


def _map_one(node: ir.Node, builder: Builder, plan: MapPlan, ctx: Context) -> ir.Value:
    """The body edits for one list of Loop `node`; returns its new initial value, the empty
    list made before the Loop."""
    body = loop_body(node)
    init = node.inputs[2 + plan.index]
    assert init is not None
    for read in plan.reads:
        read.replace_input_with(0, init)  # the initial list, an outer value of the body
    x = plan.insert.inputs[1]
    assert x is not None
    for read in plan.put_reads:
        ctx.rewriter.replace(read.outputs[0], x)
    state = body.inputs[2 + plan.index]
    appended = ctx.rewriter.before(plan.insert).op("SequenceInsert", [state, x], name="appended")
    appended.type = plan.insert.outputs[0].type or ir.SequenceType(ir.TensorType(plan.dtype))
    ctx.rewriter.replace(plan.insert.outputs[0], appended)
    empty = builder.op("SequenceEmpty", [], {"dtype": int(plan.dtype)}, name="mapped")
    empty.type = ir.SequenceType(ir.TensorType(plan.dtype))
    return empty


# before the producers: the trip count is read as the SequenceLength it is written as
RULES = RuleSet([Rule("loop-map-assign", "Loop", _check, _to_appends, before_producers=True)])
