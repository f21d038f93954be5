"""A list filtered in place from its end: each position erased where a condition of it holds.

    for k in range(len(xs) - 1, -1, -1):    Loop(M, true, s0, body(i, c, s): s' =
        if bad(k): del xs[k]                    If(f(i), then: SequenceErase(s, A - i), else: s))
    -> erased = f'(Range(0, M))               (f batched over the iteration numbers, first)
       Loop(L, true, SequenceEmpty(), body(j, c, r):
            r' = If(Gather(erased, A - j), then: r, else: SequenceInsert(r, SequenceAt(s0, j))))
    where L = len(s0), A = L - 1 and M = A + 1 (`range(len(xs) - 1, -1, -1)`)

Erasing from the end never moves an element the loop has still to visit: in iteration i the
list holds s0's elements 0..A - i unmoved, so position A - i is element A - i of s0, and the
erase is always in range. The list after the loop is s0's elements whose condition is false, in
order: a loop of conditional appends, which `loop-append-to-scan` and `loop-batch` make one
Compress where the elements have one shape. The conditions are computed for every iteration,
as the loop does (where one fails, both fail). TorchScript counts the iterations of a backwards
range in float32 (`ceil((-1 - A) / -1)`), which is A + 1 for lists of fewer than 2**24
elements: the count is taken for A + 1 there.

Refused: a list the body reads otherwise, another carried value or scan output, a position not
counted down from the last one, a condition that reads the list or cannot be batched.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.batching.body import BodyPlan, emit_body, plan_region
from seqlower.batching.core import Emitter, Operand
from seqlower.ops import is_sequence_value, peel_identity
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_batching import _count_terms, _reads, _region, _sequence_length_term
from seqlower.rules.loop_parts import counted_loop_refusal, loop_body


@dataclasses.dataclass(frozen=True)
class ReverseErasePlan:
    choice: ir.Node  # the If that erases or keeps
    erase_in_then: bool  # the then branch erases
    last: ir.Value  # A = len(s0) - 1, an outer value
    length: ir.Value  # len(s0), an outer value
    condition: BodyPlan  # the body nodes that compute the If's condition from i, batched
    dtype: ir.DataType


def _branch_output(branch: ir.Graph) -> ir.Value | None:
    return branch.outputs[0] if len(branch.outputs) == 1 else None


def _erased_at(value: ir.Value, state: ir.Value, branch: ir.Graph) -> ir.Value | None:
    """p when `value` is SequenceErase(state, p) made in `branch`."""
    node = value.producer()
    if (
        node is None
        or node.graph is not branch
        or node.op_type != "SequenceErase"
        or node.domain != ""
        or len(node.inputs) != 2
        or node.inputs[0] is not state
    ):
        return None
    return node.inputs[1]


def _passes(value: ir.Value, state: ir.Value) -> bool:
    return peel_identity(value) is state


def _minus_one(value: ir.Value, ctx: Context) -> ir.Value | None:
    """x when `value` is Sub(x, 1)."""
    node = value.producer()
    if node is None or node.op_type != "Sub" or node.domain != "" or len(node.inputs) != 2:
        return None
    x, one = node.inputs
    return x if one is not None and ctx.facts.static_int(one) == 1 else None


def _counts_down_to_zero(count: ir.Value, last: ir.Value, ctx: Context) -> bool:
    """Whether `count` is TorchScript's trip count of `range(last, -1, -1)`:
    Cast(Ceil(Div(Cast(Sub(-1, last)), -1))), which is last + 1 (see the module docstring)."""
    node = peel_identity(count).producer()
    if node is None or node.op_type != "Cast":
        return False
    ceil = node.inputs[0].producer() if node.inputs[0] is not None else None
    if ceil is None or ceil.op_type != "Ceil":
        return False
    div = ceil.inputs[0].producer() if ceil.inputs[0] is not None else None
    if div is None or div.op_type != "Div" or len(div.inputs) != 2:
        return False
    numerator, step = div.inputs
    if step is None or numerator is None:
        return False
    step_value = ctx.facts.static(step)
    if step_value is None or step_value.size != 1 or float(step_value.reshape(-1)[0]) != -1.0:
        return False
    cast = numerator.producer()
    if cast is None or cast.op_type != "Cast" or cast.inputs[0] is None:
        return False
    sub = cast.inputs[0].producer()
    if sub is None or sub.op_type != "Sub" or len(sub.inputs) != 2:
        return False
    stop, start = sub.inputs
    return stop is not None and ctx.facts.static_int(stop) == -1 and start is last


def _check(node: ir.Node, ctx: Context) -> ReverseErasePlan | Refusal:
    body = loop_body(node)
    if len(node.inputs) != 3 or len(body.inputs) != 3 or len(body.outputs) != 2:
        return Refusal("the loop carries more than one value, or has scan outputs")
    count, _, initial = node.inputs
    if count is None or initial is None or not is_sequence_value(initial):
        return Refusal("the loop carries no list, or has no trip count")
    refused = counted_loop_refusal(node, ctx)
    if refused is not None:
        return refused
    iteration, state = body.inputs[0], body.inputs[2]
    choice = body.outputs[1].producer()
    if choice is None or choice.op_type != "If" or choice.graph is not body:
        return Refusal("the list is not erased from or kept by an If")
    then, other = (choice.attributes[a].as_graph() for a in ("then_branch", "else_branch"))
    outs = _branch_output(then), _branch_output(other)
    if outs[0] is None or outs[1] is None:
        return Refusal("an If branch gives more than the list")
    position = _erased_at(outs[0], state, then)
    erase_in_then = position is not None and _passes(outs[1], state)
    if not erase_in_then:
        position = _erased_at(outs[1], state, other)
        if position is None or not _passes(outs[0], state):
            return Refusal(
                "the If does not erase from the list in one branch and keep it in the other"
            )
    assert position is not None
    if any(use.node.graph not in (then, other) for use in state.uses()):
        return Refusal("the body reads the list otherwise")
    down = position.producer()
    if (
        down is None
        or down.op_type != "Sub"
        or down.graph is not body
        or len(down.inputs) != 2
        or down.inputs[1] is not iteration
        or down.inputs[0] is None
        or down.inputs[0].graph is body
    ):
        return Refusal(
            "the position erased is not counted down from an outer value by the iteration number"
        )
    last = down.inputs[0]
    length = _minus_one(last, ctx)
    terms = _count_terms(length, ctx) if length is not None else None
    if length is None or terms is None or _sequence_length_term(initial, ctx) not in terms:
        return Refusal("the position counted down from is not the last of the list")
    if not _counts_down_to_zero(count, last, ctx):
        count_terms = _count_terms(count, ctx)
        if count_terms is None or _sequence_length_term(initial, ctx) not in count_terms:
            return Refusal("the trip count is not known to be the list's length")
    flag = choice.inputs[0]
    if flag is None:
        return Refusal("the If has no condition")
    region = _region(body, [flag], set())
    if any(v in (body.inputs[1], state) for n in region for v in _reads(n)):
        return Refusal("the condition reads the list or the loop's condition")
    seeds = {iteration: Operand(True, ir.Shape([]))}
    opset = ctx.rewriter.opset(node.graph)
    batch = plan_region(body, seeds, region, [flag], ctx.facts.values, opset)
    if isinstance(batch, Refusal):
        return Refusal(f"the condition cannot be batched: {batch.reason}")
    dtype = element_dtype(initial)
    if dtype is None:
        return Refusal("the element type is unknown")
    return ReverseErasePlan(choice, erase_in_then, last, length, batch, dtype)


def _filter(node: ir.Node, plan: ReverseErasePlan, ctx: Context) -> None:
    """Loop(M, true, s0, body: s' = If(f(i), then: SequenceErase(s, A - i), else: s))
    -> erased = f'(Range(0, M)); Loop(len(s0), true, SequenceEmpty(), body: r' =
    If(erased[A - j], then: r, else: SequenceInsert(r, SequenceAt(s0, j))))"""
    count, _, initial = node.inputs
    assert count is not None and initial is not None
    b = ctx.rewriter.before(node)
    int64 = ir.TensorType(ir.DataType.INT64)
    zero, one = b.constant(np.array(0, np.int64), "zero"), b.constant(np.array(1, np.int64), "one")
    trip = count
    if trip.shape is None or len(trip.shape) != 0:
        trip = b.op("Reshape", [trip, b.ints([], "scalar")], name="scalar")
    runs = b.op("Max", [trip, zero], name="runs")
    runs.type, runs.shape = int64, ir.Shape([])
    numbers = b.op("Range", [zero, runs, one], name="iteration_numbers")
    numbers.type, numbers.shape = int64, ir.Shape([None])
    opset = ctx.rewriter.opset(node.graph)
    (flags,) = emit_body(plan.condition, [numbers], Emitter(b, numbers, None), None)
    erased = b.op("Reshape", [flags, b.ints([-1], "rows")], name="erased")
    if erased.dtype != ir.DataType.BOOL:
        erased = b.op("Cast", [erased], {"to": int(ir.DataType.BOOL)}, name="erased")
    if not plan.erase_in_then:  # the else branch erases: where the condition is false
        erased = b.op("Not", [erased], name="erased")
    erased.type, erased.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([None])

    names = ctx.rewriter.names
    new_body = ctx.rewriter.new_graph(f"{b.hint}_filter_body", opset)
    position = ir.Value(name=names.fresh(f"{b.hint}_j"), type=int64, shape=ir.Shape([]))
    going = ir.Value(
        name=names.fresh(f"{b.hint}_cond"), type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([])
    )
    seq_type = ir.SequenceType(ir.TensorType(plan.dtype))
    kept = ir.Value(name=names.fresh(f"{b.hint}_kept"), type=seq_type)
    new_body.graph.inputs.extend([position, going, kept])
    visit = new_body.op("Sub", [plan.last, position], name="iteration")
    visit.type, visit.shape = int64, ir.Shape([])
    gone = new_body.op("Gather", [erased, visit], {"axis": 0}, name="erased")
    gone.type, gone.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    keep_branch = ctx.rewriter.new_graph(f"{b.hint}_erased", opset)
    same = keep_branch.op("Identity", [kept], name="kept")
    same.type = seq_type
    keep_branch.graph.outputs.append(same)
    put_branch = ctx.rewriter.new_graph(f"{b.hint}_kept", opset)
    element = put_branch.op("SequenceAt", [initial, position], name="element")
    element.type = ir.TensorType(plan.dtype)
    grown = put_branch.op("SequenceInsert", [kept, element], name="kept")
    grown.type = seq_type
    put_branch.graph.outputs.append(grown)
    branches = {"then_branch": keep_branch.graph, "else_branch": put_branch.graph}
    (chosen,) = new_body.ops("If", [gone], branches, num_outputs=1, name="filter")
    chosen.type = seq_type
    continues = new_body.op("Identity", [going], name="cond_out")
    continues.type, continues.shape = going.type, going.shape
    new_body.graph.outputs.extend([continues, chosen])

    empty = b.op("SequenceEmpty", [], {"dtype": int(plan.dtype)}, name="kept")
    empty.type = seq_type
    true = b.constant(np.array(True), "true")
    length = plan.length
    if length.shape is None or len(length.shape) != 0:
        length = b.op("Reshape", [length, b.ints([], "scalar")], name="length")
        length.type, length.shape = int64, ir.Shape([])
    (result,) = b.ops("Loop", [length, true, empty], {"body": new_body.graph}, num_outputs=1)
    result.type = node.outputs[0].type
    ctx.rewriter.replace(node.outputs[0], result)


RULES = RuleSet([Rule("loop-reverse-erase", "Loop", _check, _filter)])
