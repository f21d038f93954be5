"""A bounded `while` loop becomes a masked Scan over its bound, for `--target tract` only (tract
has no Loop; probed with tract 0.23.9).

    Loop(M, c0, v.., body: (i, c, v..) -> (c', v'.., s..))
        -> active, count, v.., s_all.. = Scan(c0, 0, v.., Range(0, Max(M, 1), 1),
               body: (active, count, v.., i) ->
                   run = And(active, Less(i, M))
                   c', v'.., s.. = the loop body, its condition input read as `run`
                   (And(run, c'), count + Where(run, 1, 0), Where(run, v', v).., s..))
           each s = Gather(s_all, Range(0, count), axis=0)

The Scan runs every iteration up to the trip count M (at least one: a Scan must not be empty);
an iteration runs for real while the loop would still be running (`run`, which stays false once
the condition is false, so the real iterations come first), the carried values keep what the
last real iteration gave (a bool one with And/Or/Not: onnxruntime has no Where for bool), and
the scan outputs keep their first `count` rows. The body is thus also computed after the loop
would have stopped, on the values it stopped with: the rewrite applies only when that cannot
fail or blow up, judged conservatively from the operators (`seqlower.analysis.masked_loops`:
no positions, sizes or shapes computed from the values the loop changes, no integer division
by them, carried values that keep their shape, a bound M that is given and, when static, at
most `MAX_MASKED_ITERATIONS`). Otherwise the Loop stays, and the reason says which condition
failed: PyTorch's unbounded `while` (M = 2**63 - 1), say. A loop that cannot stop early is
left to `seqlower.rules.target_tract` (Scan over a tensor axis, unrolling, Scan over Range).
A Gather at the iteration number of an outer tensor whose dim is the trip count reads the same
rows in the Scan; that dim must not be 0 (the one iteration a Scan runs would read row 0), so
the rewrite warns unless it is static.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.masked_loops import (
    MAX_MASKED_ITERATIONS,
    gathers_at_iteration,
    masked_scan_problem,
)
from seqlower.analysis.scan_forms import give_ranks, unknown_output_rank
from seqlower.ops import graphs_within
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import uses_sequences
from seqlower.rules.runtime_position import WHERE_TYPES
from seqlower.rules.target_tract import _copy_read_scan_outputs, _only_for_tract, _while_problem

_BOOL = ir.DataType.BOOL
_INT64 = ir.DataType.INT64


@dataclasses.dataclass(frozen=True)
class MaskedPlan:
    count: int | None  # the static trip count, or None
    walked: tuple[str, ...]  # the outer tensors read at the iteration number, not of static size


def _check_masked_scan(node: ir.Node, ctx: Context) -> MaskedPlan | Refusal:
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    body = node.attributes["body"].as_graph()
    if uses_sequences(node, body):
        return Refusal("the loop carries or reads sequences (loop-unroll, loop-append-to-scan)")
    if _while_problem(node, body, ctx) is None:
        return Refusal("the loop cannot stop early (tract-loop-to-scan, tract-loop-unroll, "
                       "tract-loop-to-range-scan)")  # fmt: skip
    problem = masked_scan_problem(node, ctx.facts.values)
    if problem:
        return Refusal(problem)
    if body.inputs[0].is_graph_output():
        return Refusal("the iteration number is a body output")
    for value in body.inputs[2:]:
        if value.dtype != _BOOL and value.dtype not in WHERE_TYPES:
            name = value.dtype.name.lower() if value.dtype is not None else "unknown"
            return Refusal(
                f"the carried value '{value.name}' is {name}: onnxruntime has no Where for it"
            )
    unknown = unknown_output_rank(body)
    if unknown:
        return Refusal(unknown)
    walked = []
    for gather in gathers_at_iteration(node, ctx.facts.values):
        data = gather.inputs[0]
        assert data is not None and data.shape is not None
        dim = data.shape[gather.attributes.get_int("axis", 0) % len(data.shape)]
        if not (isinstance(dim, int) and dim > 0):
            walked.append(data.name or "")
    return MaskedPlan(ctx.facts.static_int(node.inputs[0]), tuple(dict.fromkeys(walked)))


def _scalar(builder: Builder, value: ir.Value, dtype: ir.DataType) -> ir.Value:
    if value.shape is None or len(value.shape) != 0:
        value = builder.op("Reshape", [value, builder.ints([], "scalar_shape")])
    value.type, value.shape = ir.TensorType(dtype), ir.Shape([])
    return value


def _typed(value: ir.Value, like: ir.Value | ir.DataType) -> ir.Value:
    if isinstance(like, ir.DataType):
        value.type, value.shape = ir.TensorType(like), ir.Shape([])
    else:
        value.type, value.shape = like.type, like.shape
    return value


def _fresh_input(ctx: Context, hint: str, dtype: ir.DataType) -> ir.Value:
    return _typed(ir.Value(name=ctx.rewriter.names.fresh(hint)), dtype)


def _keep(end: Builder, run: ir.Value, new: ir.Value, old: ir.Value) -> ir.Value:
    """`new` where the iteration runs, else `old`."""
    if old.dtype != _BOOL:
        return _typed(end.op("Where", [run, new, old], name="masked"), old)
    taken = end.op("And", [run, new], name="taken")
    stopped = end.op("Not", [run], name="stopped")
    kept = end.op("And", [stopped, old], name="kept")
    return _typed(end.op("Or", [taken, kept], name="masked"), old)


def _masked_scan(node: ir.Node, plan: MaskedPlan, ctx: Context) -> None:
    """Loop(M, c0, v.., body: (i, c, v..) -> (c', v'.., s..)) -> Scan(c0, 0, v..,
    Range(0, Max(M, 1), 1)) whose body runs the loop's with run = And(active, i < M), keeps
    Where(run, v', v).., carries And(run, c') and counts the iterations that ran; each scan
    output cut to that count (a while loop with a bound, whose body cannot fail on the values
    it sees after the exit). --target tract only."""
    body = node.attributes["body"].as_graph()
    give_ranks(body)
    builder = ctx.rewriter.before(node)
    trip = _scalar(builder, node.inputs[0], _INT64)  # type: ignore[arg-type]
    zero = builder.constant(np.array(0, np.int64), "zero")
    one = builder.constant(np.array(1, np.int64), "one")
    maybe_empty = plan.count is None or plan.count <= 0
    stop = builder.op("Max", [trip, one], name="at_least_one") if maybe_empty else trip
    steps = builder.op("Range", [zero, stop, one], name="iterations")
    steps.type, steps.shape = ir.TensorType(_INT64), ir.Shape([None])
    start = node.inputs[1] if len(node.inputs) > 1 else None
    if start is None:
        start = builder.constant(np.array(True), "true")
    start = _scalar(builder, start, _BOOL)
    n_carried = len(node.inputs) - 2
    n_scan = len(body.outputs) - 1 - n_carried
    for name in plan.walked:
        ctx.rewriter.warn(
            f"Loop '{node.name}' became a Scan that reads '{name}' at each iteration number; "
            "it runs at least once, so that dim must not be 0 where the Loop ran zero times"
        )

    # the body: its iteration number scanned, its condition input the mask
    iteration, condition, carried = body.inputs[0], body.inputs[1], list(body.inputs[2:])
    outputs = list(body.outputs)
    element = _fresh_input(ctx, f"{iteration.name}_element", _INT64)
    active = _fresh_input(ctx, "active", _BOOL)
    count = _fresh_input(ctx, "count", _INT64) if n_scan else None
    head = Builder(ctx.rewriter, body, body[0], node.name or "Loop", ctx.rewriter.opset(body))
    index = _typed(head.op("Reshape", [element, head.ints([], "scalar_shape")]), _INT64)
    within = _typed(head.op("Less", [index, trip], name="within"), _BOOL)
    run = _typed(head.op("And", [active, within], name="run"), _BOOL)
    renamed = {id(iteration): index, id(condition): run}
    iteration.replace_all_uses_with(index)
    condition.replace_all_uses_with(run)
    outputs = [renamed.get(id(value), value) for value in outputs]
    end = Builder(ctx.rewriter, body, None, node.name or "Loop", ctx.rewriter.opset(body))
    new_outputs = [_typed(end.op("And", [run, outputs[0]], name="still"), _BOOL)]
    if count is not None:
        # Where, not Cast: tract types these int64 constants as dims (TDim), a Cast as I64
        yes = end.constant(np.array(1, np.int64), "one")
        no = end.constant(np.array(0, np.int64), "zero")
        ran = _typed(end.op("Where", [run, yes, no], name="ran"), _INT64)
        new_outputs.append(_typed(end.op("Add", [count, ran], name="counted"), _INT64))
    new_outputs += [_keep(end, run, new, old) for new, old in zip(outputs[1:], carried)]
    new_outputs += outputs[1 + n_carried :]
    body.inputs.clear()
    body.inputs.extend([active, *([count] if count is not None else []), *carried, element])
    body.outputs.clear()
    body.outputs.extend(new_outputs)
    n_states = len(new_outputs) - n_scan
    _copy_read_scan_outputs(body, n_states, ctx)

    counted = [builder.constant(np.array(0, np.int64), "none_yet")] if count is not None else []
    initial = [start, *counted, *node.inputs[2:]]
    results = builder.ops(
        "Scan",
        [*initial, steps],
        {"body": body, "num_scan_inputs": 1},
        num_outputs=n_states + n_scan,
    )
    # the body moves to the Scan; dead-code removal knows the new holder and leaves it
    finals, stacked = results[n_states - n_carried : n_states], results[n_states:]
    for old, new in zip(node.outputs[:n_carried], finals):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)
    if not stacked:
        return
    ran_steps = builder.op("Range", [zero, results[1], one], name="ran_steps")
    for old, new in zip(node.outputs[n_carried:], stacked):
        new.type = old.type
        kept = builder.op("Gather", [new, ran_steps], {"axis": 0}, name="ran")
        kept.type = old.type
        ctx.rewriter.replace(old, kept)


# -- a while loop that counts: its trip count -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CountedPlan:
    start: ir.Value  # the counter's initial value
    bound: ir.Value  # the loop stops once the counter reaches it
    step: int  # added to the counter each iteration (positive)
    strict: bool  # counter < bound (else counter <= bound)
    checked_first: bool  # the initial condition is start < bound (else the first may run)
    keep_condition: bool  # the condition tests more than the counter: it stays
    counter: ir.Value  # the carried counter, in the body
    add: ir.Node  # counter + step


def _static_step(value: ir.Value | None, ctx: Context) -> int | None:
    """A static int, looking through CastLike (which dynamo exports put around constants)."""
    while value is not None and value.producer() is not None:
        producer = value.producer()
        if producer.op_type != "CastLike" or producer.domain != "":  # type: ignore[union-attr]
            break
        value = producer.inputs[0]  # type: ignore[union-attr]
    return ctx.facts.static_int(value)


def _same(a: ir.Value | None, b: ir.Value | None, ctx: Context) -> bool:
    """The same value, or two static values equal."""
    if a is b:
        return True
    x, y = ctx.facts.static(a), ctx.facts.static(b)
    return x is not None and y is not None and x.shape == y.shape and bool((x == y).all())


def _check_counted(node: ir.Node, ctx: Context) -> CountedPlan | Refusal:
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    body = node.attributes["body"].as_graph()
    if uses_sequences(node, body):
        return Refusal("the loop carries or reads sequences (loop-unroll, loop-append-to-scan)")
    trip = node.inputs[0] if node.inputs else None
    count = ctx.facts.static_int(trip) if trip is not None else None
    if trip is not None and (count is None or count <= MAX_MASKED_ITERATIONS):
        return Refusal("the loop has a trip count (tract-while-to-masked-scan)")
    found = _counter_test(body.outputs[0], body, body)
    if isinstance(found, Refusal):
        return found
    (following, bound, strict), keep = found
    add = _producer(following, "Add", body)
    carried = list(body.inputs[2:])
    if add is None or following not in body.outputs[1 : 1 + len(carried)]:
        return Refusal("the counter is not a carried value plus a step")
    counter, step = add.inputs
    if counter not in carried:
        counter, step = step, counter
    index = carried.index(counter) if counter in carried else -1
    if index < 0 or body.outputs[1 + index] is not following:
        return Refusal("the counter is not a carried value plus a step")
    increment = _static_step(step, ctx)
    if increment is None or increment <= 0:
        return Refusal("the counter's step is not a static positive integer")
    if counter.dtype != _INT64:
        return Refusal("the counter is not int64")
    start = node.inputs[2 + index]
    assert start is not None and counter is not None
    first = node.inputs[1] if len(node.inputs) > 1 else None
    if first is not None and ctx.facts.static(first) is not None:
        if not bool(ctx.facts.static(first).reshape(-1)[0]):  # type: ignore[union-attr]
            return Refusal("the loop never runs")
        first = None
    checked = False
    if first is not None:
        tested = _counter_test(first, node.graph, None)  # type: ignore[arg-type]
        if not isinstance(tested, Refusal):
            (a, b, first_strict), extra = tested
            checked = _same(a, start, ctx) and b is bound and first_strict == strict
            keep = keep or extra
        keep = keep or not checked  # a first condition of its own: it stays
    return CountedPlan(start, bound, increment, strict, checked, keep, counter, add)


_FLIPPED = {"Less": (0, 1, True), "Greater": (1, 0, True)}
_FLIPPED |= {"LessOrEqual": (0, 1, False), "GreaterOrEqual": (1, 0, False)}


def _producer(value: ir.Value | None, op_type: str, graph: ir.Graph) -> ir.Node | None:
    node = value.producer() if value is not None else None
    if node is None or node.op_type != op_type or node.domain != "" or node.graph is not graph:
        return None
    return node


def _peeled(value: ir.Value | None, graph: ir.Graph) -> ir.Node | None:
    """The node that makes `value` in `graph`, through Identity and Cast to bool (TorchScript
    casts its conditions)."""
    node = value.producer() if value is not None else None
    while node is not None and node.graph is graph and node.domain == "":
        if node.op_type == "Identity" or (
            node.op_type == "Cast" and node.attributes.get_int("to", 0) == _BOOL
        ):
            node = node.inputs[0].producer() if node.inputs[0] is not None else None
            continue
        return node
    return None


def _comparison(node: ir.Node | None) -> tuple[ir.Value, ir.Value, bool] | None:
    """(a, b, strict) when `node` is a < b (strict) or a <= b, else None."""
    if node is None or node.op_type not in _FLIPPED:
        return None
    left, right, strict = _FLIPPED[node.op_type]
    a, b = node.inputs[left], node.inputs[right]
    return None if a is None or b is None else (a, b, strict)


def _counter_test(
    value: ir.Value | None, graph: ir.Graph, body: ir.Graph | None
) -> tuple[tuple[ir.Value, ir.Value, bool], bool] | Refusal:
    """((k, B, strict), more) when `value` is k < B or k <= B, with B defined outside `body`
    when given (`more`: False), or that And something else (`more`: True), else why not."""
    node = _peeled(value, graph)
    more = False
    if node is not None and node.op_type == "And":
        more = True
        for side in node.inputs:
            if _comparison(_peeled(side, graph)) is not None:
                node = _peeled(side, graph)
                break
    compared = _comparison(node)
    if compared is None:
        return Refusal("the body's condition is not `counter < bound` (nor <=), alone or in an And")
    if body is not None:
        inside = {id(g) for g in graphs_within(body)}
        if compared[1].graph is None or id(compared[1].graph) in inside:
            return Refusal("the bound of the body's condition is computed in the body")
    return compared, more


def _counted(node: ir.Node, plan: CountedPlan, ctx: Context) -> None:
    """Loop(M?, s < B, s, .., body: k' = k + c, cond = k' < B)
    -> Loop(Max(B - s, 0) ceil-divided by c (at most M), true, s, .., body: cond = cond_in,
            k read as s + c * i)
    (k' <= B: B - s + 1; a first iteration whose condition is not s < B: at least 1; a
    condition that tests more, `And(k' < B, other)`, stays, the trip count a bound for the
    masked Scan). --target tract only."""
    body = node.attributes["body"].as_graph()
    builder = ctx.rewriter.before(node)
    bound = _scalar(builder, plan.bound, _INT64)
    start = ctx.facts.static_int(plan.start)
    simple = start == 0 and plan.step == 1 and plan.strict and plan.checked_first
    if simple:  # Loop reads a trip count B <= 0 as no iteration
        trips = bound
    else:
        left = builder.op("Sub", [bound, _scalar(builder, plan.start, _INT64)], name="left")
        if not plan.strict:  # k <= B: one more
            left = builder.op("Add", [left, builder.constant(np.array(1, np.int64), "one_more")])
        zero = builder.constant(np.array(0, np.int64), "zero")
        trips = builder.op("Max", [left, zero], name="left_or_none")
        if plan.step > 1:
            extra = builder.constant(np.array(plan.step - 1, np.int64), "round_up")
            step = builder.constant(np.array(plan.step, np.int64), "step")
            trips = builder.op("Div", [builder.op("Add", [trips, extra]), step], name="trips")
        if not plan.checked_first:
            trips = builder.op("Max", [trips, builder.constant(np.array(1, np.int64), "one")])
    given = node.inputs[0] if node.inputs else None
    limit = ctx.facts.static_int(given) if given is not None else None
    if given is not None and limit != np.iinfo(np.int64).max:  # a trip count, large: kept
        trips = builder.op("Min", [trips, _scalar(builder, given, _INT64)], name="bounded")
    trips.type, trips.shape = ir.TensorType(_INT64), ir.Shape([])
    if start is not None:  # the counter is s + c * i in every iteration that runs
        _count_with_iteration(body, plan, start, ctx)
    condition = node.inputs[1] if len(node.inputs) > 1 else None
    if not plan.keep_condition:
        condition = builder.constant(np.array(True), "true")
        carry = ir.Node("", "Identity", [body.inputs[1]], name=ctx.rewriter.names.fresh("go_on"))
        carry.outputs[0].name = ctx.rewriter.names.fresh("go_on")
        carry.outputs[0].type, carry.outputs[0].shape = ir.TensorType(_BOOL), ir.Shape([])
        body.append(carry)
        body.outputs[0] = carry.outputs[0]
    outputs = builder.ops(
        "Loop",
        [trips, condition, *node.inputs[2:]],
        {"body": body},
        num_outputs=len(node.outputs),
        name="counted",
    )
    # the body moves to the new Loop; dead-code removal knows the new holder and leaves it
    for old, new in zip(node.outputs, outputs):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)


def _count_with_iteration(body: ir.Graph, plan: CountedPlan, start: int, ctx: Context) -> None:
    """The body reads its counter as start + step * i (the iteration number itself for 0 and
    1), so that a row read at the counter is a row read at the iteration number."""
    iteration = body.inputs[0]
    value = iteration
    if start != 0 or plan.step != 1:
        head = Builder(ctx.rewriter, body, body[0], "counter", ctx.rewriter.opset(body))
        scaled = head.op("Mul", [iteration, head.constant(np.array(plan.step, np.int64), "step")])
        value = head.op("Add", [scaled, head.constant(np.array(start, np.int64), "start")])
        value.type, value.shape = ir.TensorType(_INT64), ir.Shape([])
    # the Add that counts still reads it: tract 0.23.9 cannot plan a Scan whose body reads
    # not one of its states (it drops the input, not the output: probed)
    for use in list(plan.counter.uses()):
        if use.node is not plan.add:
            use.node.replace_input_with(use.idx, value)


RULES = RuleSet(
    [
        Rule("tract-counted-while", "Loop", _check_counted, _counted),
        Rule("tract-while-to-masked-scan", "Loop", _check_masked_scan, _masked_scan),
    ]
)
