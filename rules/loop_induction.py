"""A Loop whose only work is counters is its induction variables: Range arithmetic, no Loop.

    Loop(M, true, v0, body(i, c, v): v' = Add(v, d); scan outputs v' (or v))
        -> final v = Add(v0, Mul(Cast(max(M, 0)), d))
           scan of v' = Add(Unsqueeze(v0, 0), Mul(K, d)), K = Range(1, max(M, 0) + 1) (as [M, 1..])
           scan of v  = the same with K = Range(0, max(M, 0))
        (no Mul where d is 1)
    Loop(M, true, body(i, c): scan output w)   (w defined outside the body, or a Constant)
        -> Expand(Unsqueeze(w, 0), [max(M, 0), *shape(w)])

PyTorch's `for _ in range(n): x = x + 1; outs.append(x)` exports as such a Loop once its list is
a scan output (`loop-append-to-scan`). Every carried value must be a counter (`v' = v + d`,
with `d` the same in every iteration and no larger than `v`, so broadcasting never changes `v`'s
shape) or passed on unchanged, and every scan output a counter or a value the same in every
iteration (`for _ in range(k): out.append(pad)`, as `while len(out) < n` becomes once it counts
its iterations); the body may hold nothing else but Identity and Constant; the condition must
stay true and the trip count be given. Floating-point counters may round
differently: `v0 + k * d` rounds once where the loop rounds after each addition.
"""

from __future__ import annotations

__all__ = ["NUMERIC", "RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import counted_loop_refusal, loop_body

_ALLOWED = frozenset({"Add", "Identity", "Constant"})
NUMERIC = frozenset(
    {
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.FLOAT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
    }
)


@dataclasses.dataclass(frozen=True)
class Counter:
    index: int  # among the carried values
    step: ir.Value | None  # d; None when passed on unchanged
    dtype: ir.DataType
    rank: int


@dataclasses.dataclass(frozen=True)
class InductionPlan:
    counters: tuple[Counter, ...]
    # per scan output: (counter index, after the update), or the value it gives in every
    # iteration
    scans: tuple[tuple[int, bool] | ir.Value, ...]


def _peel(value: ir.Value) -> ir.Value:
    while (producer := value.producer()) is not None and producer.op_type == "Identity":
        value = producer.inputs[0]  # type: ignore[assignment]
    return value


def _invariant(value: ir.Value, body: ir.Graph) -> bool:
    """Defined outside the body, or a Constant in it."""
    producer = value.producer()
    if producer is None:
        return value.graph is not body
    return producer.graph is not body or producer.op_type == "Constant"


def _copyable(value: ir.Value, body: ir.Graph) -> bool:
    """Whether `value` (invariant) can be read outside the body: an outer value, or a body
    Constant given by a `value` tensor (copied out)."""
    producer = value.producer()
    if producer is None or producer.graph is not body:
        return value.graph is not body  # not an input of the body
    return "value" in producer.attributes


def _no_larger(step: ir.Value, value: ir.Value) -> bool:
    """Broadcasting `value` with `step` keeps `value`'s shape."""
    if step.shape is None or value.shape is None or len(step.shape) > len(value.shape):
        return False
    dims = zip(reversed(step.shape), reversed(value.shape), strict=False)
    return all(a == 1 or a == b for a, b in dims)


def _check(node: ir.Node, ctx: Context) -> InductionPlan | Refusal:
    body = loop_body(node)
    refusal = counted_loop_refusal(node, ctx)
    if refusal is not None:
        return refusal
    if any(n.op_type not in _ALLOWED or n.domain != "" for n in body):
        return Refusal("the body computes more than counters")
    carried = len(node.inputs) - 2
    counters = []
    for k in range(carried):
        before, after = body.inputs[2 + k], _peel(body.outputs[1 + k])
        dtype = before.dtype
        if dtype not in NUMERIC or before.shape is None:
            return Refusal(f"carried value '{before.name}' is not a numeric tensor of known rank")
        if after is before:
            counters.append(Counter(k, None, dtype, len(before.shape)))
            continue
        add = after.producer()
        if add is None or add.op_type != "Add" or before not in add.inputs:
            return Refusal(f"carried value '{before.name}' is not a counter (v' = v + d)")
        step = add.inputs[1] if add.inputs[0] is before else add.inputs[0]
        step = _peel(step) if step is not None else None
        if step is None or step is before or not _invariant(step, body):
            return Refusal(f"the step of '{before.name}' changes between iterations")
        if step.dtype != dtype or not _no_larger(step, before):
            return Refusal(f"the step of '{before.name}' may broadcast it to another shape")
        counters.append(Counter(k, step, dtype, len(before.shape)))
    scans: list[tuple[int, bool] | ir.Value] = []
    for output in body.outputs[1 + carried :]:
        source = _peel(output)
        found: tuple[int, bool] | ir.Value | None = None
        if _invariant(source, body) and _copyable(source, body):
            found = source  # the same in every iteration
        for counter in counters:
            before = body.inputs[2 + counter.index]
            if counter.step is not None and source is _peel(body.outputs[1 + counter.index]):
                found = (counter.index, True)
            elif source is before and counter.step is not None:
                found = (counter.index, False)
        if found is None:
            return Refusal(
                f"scan output '{output.name}' is neither a counter nor the same in every iteration"
            )
        scans.append(found)
    if not scans:
        return Refusal("the loop has no scan output (nothing to batch)")
    if any(v.uses() for v in (body.inputs[0],)):
        return Refusal("the iteration number is read")
    return InductionPlan(tuple(counters), tuple(scans))


def _outer_step(step: ir.Value, body: ir.Graph, builder) -> ir.Value:  # type: ignore[no-untyped-def]
    """`step` as a value of the graph around the loop (a Constant of the body is copied)."""
    producer = step.producer()
    if producer is None or producer.graph is not body:
        return step
    value = producer.attributes["value"].as_tensor().numpy()
    copied = builder.constant(np.asarray(value), "step")
    copied.type, copied.shape = step.type, step.shape
    return copied


def _induction(node: ir.Node, plan: InductionPlan, ctx: Context) -> None:
    """Loop(M, true, v0, body: v' = Add(v, d); scan outputs v', v)
    -> final Add(v0, Mul(Cast(max(M, 0)), d)); scans Add(Unsqueeze(v0, 0), Mul(K, d)),
    K = Range(1, max(M, 0) + 1) for v', Range(0, max(M, 0)) for v, as [M, 1, ..]"""
    builder = ctx.rewriter.before(node)
    int64 = int(ir.DataType.INT64)
    count = builder.op("Cast", [node.inputs[0]], {"to": int64})  # type: ignore[list-item]
    zero = builder.constant(np.array(0, dtype=np.int64), "zero")
    one = builder.constant(np.array(1, dtype=np.int64), "one")
    # a Range from 0 or 1 has max(M, 0) entries by itself; the finals need max(M, 0)
    steps = {
        True: builder.op("Range", [one, builder.op("Add", [count, one]), one]),
        False: builder.op("Range", [zero, count, one]),
    }
    count = builder.op("Max", [count, zero])
    carried = len(node.inputs) - 2
    by_index = {counter.index: counter for counter in plan.counters}
    body = loop_body(node)
    outer = {
        c.index: _outer_step(c.step, body, builder) for c in plan.counters if c.step is not None
    }
    for counter in plan.counters:
        start = node.inputs[2 + counter.index]
        assert start is not None
        final = start
        if counter.step is not None:
            times = builder.op("Cast", [count], {"to": int(counter.dtype)})
            final = builder.op("Add", [start, _times(times, outer[counter.index], builder, ctx)])
            final.type, final.shape = start.type, start.shape
        ctx.rewriter.replace(node.outputs[counter.index], final)
    for position, scanned in enumerate(plan.scans):
        if isinstance(scanned, ir.Value):
            ctx.rewriter.replace(
                node.outputs[carried + position], _repeated(scanned, count, body, builder)
            )
            continue
        index, after = scanned
        counter = by_index[index]
        start = node.inputs[2 + index]
        assert start is not None
        ks = builder.op("Cast", [steps[after]], {"to": int(counter.dtype)})
        ks = builder.unsqueeze(ks, list(range(1, counter.rank + 1))) if counter.rank else ks
        scan = builder.op(
            "Add", [builder.unsqueeze(start, [0]), _times(ks, outer[index], builder, ctx)]
        )
        scan.type = start.type
        ctx.rewriter.replace(node.outputs[carried + position], scan)


def _repeated(value: ir.Value, count: ir.Value, body: ir.Graph, builder: Builder) -> ir.Value:
    """`value` (the same in every iteration) stacked `count` times: Expand(Unsqueeze(value, 0),
    [count, *shape(value)])."""
    outer = _outer_step(value, body, builder)
    count1 = builder.op("Reshape", [count, builder.ints([1], "one_d")])
    shape = builder.op("Concat", [count1, builder.op("Shape", [outer])], {"axis": 0})
    stacked = builder.op("Expand", [builder.unsqueeze(outer, [0]), shape], name="repeated")
    stacked.type = outer.type
    if outer.shape is not None:
        stacked.shape = ir.Shape([None, *outer.shape])
    return stacked


def _times(ks: ir.Value, step: ir.Value, builder: Builder, ctx: Context) -> ir.Value:
    """ks * step; ks itself for a step of one element, 1 (`x = x + 1`: no Mul to run)."""
    value = ctx.facts.values.get(step)
    if value is not None and value.size == 1 and value.reshape(-1)[0] == 1:
        return ks
    return builder.op("Mul", [ks, step])


RULES = RuleSet([Rule("loop-induction", "Loop", _check, _induction)])
