"""A counter a counted Loop carries beside its iteration number is that number, scaled.

    Loop(M, true, k0, body(i, c, k): k' = Add(k, d); .. f(k) ..)
        -> Loop(M, true, body(i, c): .. f(Add(k0, Mul(Cast(i), d))) ..)
    body: k' = Sub(k, d)
        -> f(Sub(k0, Mul(Cast(i), d)))
    the final k, where it is read after the loop
        -> Add(k0, Mul(Cast(Max(M, 0)), d))     (Sub for a Sub)
    (no Mul where d is 1, no Cast for int64)

TorchScript writes `for c, x in zip(coeffs, reversed(xs))` (diffusers' LMS scheduler sums
its derivatives so) as a Loop that carries `k = len(xs) - 1` and decrements it beside the
iteration number, reading `xs[k]`. Read at the iteration number's arithmetic instead, the body
no longer depends on the previous iteration, and `loop-batch` batches it (a read at a batched
position is one Gather of every position); the Loop carries one value fewer either way.

The counter must be an integer scalar (int32 or int64: `k0 + i * d` is then exactly what the
loop computes, wrap-around included), its step d a scalar of its type that is the same in every
iteration (an outer value or a Constant), and the loop must run its trip count (a condition that
stays true). Only the Add or Sub reads the counter's next value, and neither the counter nor its
next value is a scan output (`loop-induction` takes a loop of counters only).
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import counted_loop_refusal, loop_body, rebuild_with_scans

_INTEGERS = frozenset({ir.DataType.INT32, ir.DataType.INT64})


@dataclasses.dataclass(frozen=True)
class CounterPlan:
    index: int  # among the carried values
    update: ir.Node  # the Add or Sub making the next value
    chain: tuple[ir.Node, ...]  # Identity nodes between the update and the body output
    step: ir.Value


def _scalar(value: ir.Value | None) -> bool:
    return value is not None and value.shape is not None and len(value.shape) == 0


def _invariant(value: ir.Value, body: ir.Graph) -> bool:
    """Defined outside the body, or a Constant of the body given by a `value` tensor."""
    producer = value.producer()
    if producer is None or producer.graph is not body:
        return value.graph is not body  # not an input of the body
    return (
        producer.op_type == "Constant" and producer.domain == "" and "value" in producer.attributes
    )


def _chain(output: ir.Value, body: ir.Graph) -> tuple[ir.Value, list[ir.Node]] | None:
    """The value an output of `body` passes on through Identity nodes, with those nodes; None
    when a value on the way has another reader."""
    nodes: list[ir.Node] = []
    value = output
    while (producer := value.producer()) is not None and producer.op_type == "Identity":
        if producer.graph is not body or producer.domain != "":
            return None
        nodes.append(producer)
        value = producer.inputs[0]  # type: ignore[assignment]
        if value is None or len(value.uses()) != 1 or value.is_graph_output():
            return None
    return value, nodes


def _plan(node: ir.Node, body: ir.Graph, k: int) -> CounterPlan | str:
    """The plan for carried value `k`, or why it is no counter ("" when it is plainly none)."""
    state, output = body.inputs[2 + k], body.outputs[1 + k]
    if state.dtype not in _INTEGERS or not _scalar(state):
        return ""
    initial = node.inputs[2 + k]
    if initial is None or (initial.shape is not None and len(initial.shape) != 0):
        return ""
    found = _chain(output, body)
    if found is None:
        return f"the next value of '{state.name}' is read in the body"
    after, chain = found
    update = after.producer()
    if update is None or update.graph is not body or update.domain != "":
        return ""
    if update.op_type not in ("Add", "Sub") or len(update.inputs) != 2:
        return ""
    if update.inputs[0] is state:
        step = update.inputs[1]
    elif update.op_type == "Add" and update.inputs[1] is state:
        step = update.inputs[0]
    else:
        return ""
    if step is None or step is state or not _invariant(step, body):
        return f"the step of '{state.name}' changes between iterations"
    if step.dtype != state.dtype or not _scalar(step):
        return f"the step of '{state.name}' is not a scalar of its type"
    if (after.uses() and not chain) or body.outputs.count(output) != 1:
        return f"the next value of '{state.name}' is read in the body"
    if state in body.outputs or after in body.outputs[1 + len(node.inputs) - 2 :]:
        return f"'{state.name}' is a scan output"
    if all(use.node is update for use in state.uses()):
        return ""  # not read: the removal of dead carried values takes it
    return CounterPlan(k, update, tuple(chain), step)


def _check(node: ir.Node, ctx: Context) -> tuple[CounterPlan, ...] | Refusal:
    body = loop_body(node)
    carried = len(node.inputs) - 2
    if len(body.inputs) != 2 + carried or len(body.outputs) < 1 + carried:
        return Refusal("the body does not match the node")
    plans, reasons = [], []
    for k in range(carried):
        plan = _plan(node, body, k)
        if isinstance(plan, CounterPlan):
            plans.append(plan)
        elif plan:
            reasons.append(plan)
    if not plans:
        return Refusal(reasons[0] if reasons else "the loop carries no counter read in its body")
    refusal = counted_loop_refusal(node, ctx)
    if refusal is not None:
        return refusal
    return tuple(plans)


def _step(step: ir.Value, builder: Builder) -> ir.Value:
    """`step` where `builder` builds: a Constant of the body is copied (it may come later in
    the body, or be out of reach after the loop)."""
    producer = step.producer()
    if producer is None or producer.op_type != "Constant" or "value" not in producer.attributes:
        return step  # an outer value (a body Constant holds `value`: `_invariant`)
    copied = builder.constant(np.asarray(producer.attributes["value"].as_tensor().numpy()), "step")
    copied.type, copied.shape = step.type, step.shape
    return copied


def _counted(
    start: ir.Value, times: ir.Value, plan: CounterPlan, builder: Builder, ctx: Context
) -> ir.Value:
    """start + times * d (start - times * d for a Sub), times an int64 count."""
    dtype = plan.step.dtype
    assert dtype is not None
    if dtype != ir.DataType.INT64:
        times = builder.op("Cast", [times], {"to": int(dtype)})
    known = ctx.facts.values.get(plan.step)
    unit = known is not None and known.size == 1 and int(known.reshape(-1)[0]) == 1
    scaled = times if unit else builder.op("Mul", [times, _step(plan.step, builder)])
    value = builder.op(plan.update.op_type, [start, scaled], name="counter")
    value.type, value.shape = ir.TensorType(dtype), ir.Shape([])
    return value


def _to_iteration_number(node: ir.Node, plans: tuple[CounterPlan, ...], ctx: Context) -> None:
    """Loop(M, true, k0, body(i, c, k): k' = Add(k, d); .. f(k) ..)
    -> Loop(M, true, body(i, c): .. f(Add(k0, Mul(Cast(i), d))) ..)
    (Sub for Sub; the final k, where read, is Add(k0, Mul(Cast(Max(M, 0)), d)))"""
    body = loop_body(node)
    inner = ctx.rewriter.before(next(iter(body)))
    for plan in plans:
        state = body.inputs[2 + plan.index]
        initial = node.inputs[2 + plan.index]
        assert initial is not None
        value = _counted(initial, body.inputs[0], plan, inner, ctx)
        for use in list(state.uses()):
            if use.node is not plan.update:
                use.node.replace_input_with(use.idx, value)
    for done, plan in enumerate(plans):  # ascending: each removal moves the later ones up
        k = plan.index - done
        body.outputs.pop(1 + k)
        for identity in plan.chain:
            body.remove(identity, safe=True)
        body.remove(plan.update, safe=True)
        body.inputs.pop(2 + k)
    dropped, _ = rebuild_with_scans(node, [plan.index for plan in plans], 0, ctx)
    builder = ctx.rewriter.before(node)
    count = None
    for plan, final in zip(plans, dropped):
        if not final.uses() and not final.is_graph_output():
            continue
        if count is None:
            trips = builder.op("Cast", [node.inputs[0]], {"to": int(ir.DataType.INT64)})  # type: ignore[list-item]
            count = builder.op("Max", [trips, builder.constant(np.array(0, np.int64), "zero")])
        initial = node.inputs[2 + plan.index]
        assert initial is not None
        ctx.rewriter.replace(final, _counted(initial, count, plan, builder, ctx))
    ctx.rewriter.fired_more("loop-counter-index", len(plans) - 1)


RULES = RuleSet([Rule("loop-counter-index", "Loop", _check, _to_iteration_number)])
