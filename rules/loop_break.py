"""A loop that may stop early (`break`) runs a number of times its conditions alone decide, when
they read nothing the loop carries: that count is computed first, batched, and the Loop runs it.

    Loop(M, c0, .., body(i, c, ..): c' = And(Less(i + 1, X), f(i)))   (f: i and outer values)
        -> Loop(N, true, .., body(i, c, ..): c' = c)
           N = Where(c0, Min(B, L + 1), 0), B = Min(M, Max(X, 1)),
           L = how many of f'(Range(0, B)) lead before the first false (f batched)

The body still runs in the iteration that stops the loop (ONNX checks the condition after the
body): that iteration's scan outputs are kept, as they were. f is computed for every iteration
below B, also those past the stop, so it may hold only operators that fail on no value
(`seqlower.batching.branches.never_fails`); an If output that is a constant in each branch
(`if stop: break`, as TorchScript writes it) is its condition or Not(it). Without a
`Less(i + 1, X)` conjunct the trip count M bounds the batch and must not be the largest int64.
A conjunct that is statically true stops nothing and is left out (TorchScript's `for xi, x in
enumerate(t)` with a `continue` in the body ends its condition with `and True`); where only the
range is left, nothing is batched: N = Where(c0, B, 0). A range alone, as written, is refused
(left to the rules that read `Less(i + 1, X)` as they are).

The same rewrite prepares the loop for `loop-batch`:

    a counter beside the iteration number: t' = t + 1 from a constant t0, its final value unread
        -> t0 + i wherever the body reads t (the condition may read it: it is batched so)
    in the `break` If: then: s, else: Concat(s, p, axis), s carried and read nowhere else
        -> Concat(s, If(c, then: Slice(s0, 0, 0, axis), else: p), axis)
           (s0 the Loop's initial value: its dims off the axis are those of every s; the If's
           rows with no position are batched by `seqlower.batching.branches`)
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.scan_forms import static_bool
from seqlower.batching.body import emit_body, plan_region
from seqlower.batching.branches import never_fails
from seqlower.batching.core import Emitter, Operand
from seqlower.ops import is_sequence_value, outer_reads, peel_identity
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_batching import _region
from seqlower.rules.loop_parts import body_always_continues, loop_body

_LARGEST = 2**63 - 1


# -- the count ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BreakPlan:
    bounds: tuple[ir.Value, ...]  # the X of each Less(i + 1, X)
    flags: tuple[ir.Value, ...]  # the other conjuncts (body values)
    region: tuple[ir.Node, ...]  # the body nodes that compute the flags from i
    flips: tuple[tuple[ir.Value, ir.Value, bool], ...]  # (If output, its condition, negated)
    counters: tuple[tuple[int, int], ...] = ()  # (carried index, start) of t' = t + 1


def _conjuncts(value: ir.Value, body: ir.Graph) -> list[ir.Value]:
    value = peel_identity(value)
    node = value.producer()
    if node is not None and node.graph is body and node.op_type == "And" and node.domain == "":
        return [part for v in node.inputs if v is not None for part in _conjuncts(v, body)]
    return [value]


def _range_bound(
    value: ir.Value, body: ir.Graph, indices: set[ir.Value], ctx: Context
) -> ir.Value | None:
    """X when `value` is Less(i + 1, X) (or Greater(X, i + 1)), X read from outside the body;
    `indices` are the iteration number and the counters that equal it."""
    node = value.producer()
    if node is None or node.graph is not body or node.domain != "" or len(node.inputs) != 2:
        return None
    if node.op_type == "Less":
        step, bound = node.inputs
    elif node.op_type == "Greater":
        bound, step = node.inputs
    else:
        return None
    add = step.producer() if step is not None else None
    if add is None or add.op_type != "Add" or add.graph is not body or bound is None:
        return None
    others = [v for v in add.inputs if v not in indices]
    if len(others) != 1 or len(add.inputs) != 2 or ctx.facts.static_int(others[0]) != 1:
        return None
    if _inside(bound, body) or bound.dtype != ir.DataType.INT64:
        return None
    if bound.shape is None or len(bound.shape) != 0:
        return None
    return bound


def _inside(value: ir.Value, body: ir.Graph) -> bool:
    producer = value.producer()
    return (value.graph if producer is None else producer.graph) is body


def _flip(value: ir.Value, body: ir.Graph, ctx: Context) -> tuple[ir.Value, bool] | None:
    """(c, negated) when `value` is an output of If(c) in `body` that is a constant bool in each
    branch, true in one and false in the other."""
    node = value.producer()
    if node is None or node.op_type != "If" or node.graph is not body or node.domain != "":
        return None
    index = list(node.outputs).index(value)
    found = []
    for name in ("then_branch", "else_branch"):
        attr = node.attributes.get(name)
        if attr is None or attr.type != ir.AttributeType.GRAPH:
            return None
        found.append(static_bool(attr.as_graph().outputs[index], ctx.facts.values))
    cond = node.inputs[0]
    if cond is None or None in found or found[0] == found[1]:
        return None
    return cond, not found[0]


def _check_break(node: ir.Node, ctx: Context) -> BreakPlan | Refusal:
    body = loop_body(node)
    cond = node.inputs[1] if len(node.inputs) > 1 else None
    count = node.inputs[0] if node.inputs else None
    if count is None or cond is None:
        return Refusal("the loop has no trip count or no condition")
    if body_always_continues(body, ctx):
        return Refusal("the body never ends the loop early")
    counters = _counters(node, ctx)
    counted = {body.inputs[2 + k] for k, _ in counters}
    indices = {body.inputs[0], *(body.inputs[2 + k] for k, start in counters if start == 0)}
    bounds, flags = [], []
    constant = False
    flips: list[tuple[ir.Value, ir.Value, bool]] = []
    for part in _conjuncts(body.outputs[0], body):
        bound = _range_bound(part, body, indices, ctx)
        if bound is not None:
            bounds.append(bound)
            continue
        if static_bool(part, ctx.facts.values) is True:
            constant = True  # `and True` stops nothing: TorchScript's `continue` leaves one
            continue
        flipped = _flip(part, body, ctx)
        if flipped is not None:
            flips.append((part, *flipped))
            part = flipped[0]
        flags.append(part)
    if not flags and not (constant and bounds):
        return Refusal("the loop ends early only by its range")
    limit = ctx.facts.static_int(count)
    if not bounds and (limit is None or limit >= _LARGEST):
        return Refusal("the loop has no bound but its condition")
    stops = {body.inputs[0], *counted, *(v for v, _, _ in flips)}
    region = _region(body, flags, stops)
    states = set(body.inputs[1:]) - counted
    for each in region:
        label = f"{each.op_type} '{each.name}'" if each.name else each.op_type
        if any(v in states for v in each.inputs):
            return Refusal(f"the condition reads a value the loop carries ({label})")
        if not never_fails(each, ctx.facts.values) or each.domain != "" or outer_reads(each):
            return Refusal(f"the condition reads {label}, which may fail past the stop")
    if any(is_sequence_value(v) for v in node.inputs[2:]):
        return Refusal("the loop carries a list: it is counted once the list is tensors")
    return BreakPlan(tuple(bounds), tuple(flags), tuple(region), tuple(flips), tuple(counters))


def _rewrite_break(node: ir.Node, plan: BreakPlan, ctx: Context) -> None:
    """Loop(M, c0, .., body: c' = And(Less(i + 1, X), f(i))) -> Loop(N, true, .., body: c' = c),
    N = Where(c0, Min(B, L + 1), 0), B = Min(M, Max(X, 1)), L: leading trues of f'(Range(0, B));
    counters t0 + i; the `break` If's pass-through of an appended value an append of no row"""
    body = loop_body(node)
    b = ctx.rewriter.before(node)
    count, c0 = node.inputs[0], node.inputs[1]
    assert count is not None and c0 is not None
    int64 = ir.TensorType(ir.DataType.INT64)

    def scalar(value: ir.Value) -> ir.Value:
        if value.shape is not None and len(value.shape) == 0:
            return value
        return b.op("Reshape", [value, b.ints([], "scalar")], name="scalar")

    zero, one = b.constant(np.array(0, np.int64), "zero"), b.constant(np.array(1, np.int64), "one")
    bound = scalar(count)
    limit = ctx.facts.static_int(count)
    for x in plan.bounds:
        at_least_one = b.op("Max", [x, one], name="range_bound")
        bound = at_least_one if limit is not None and limit >= _LARGEST else bound
        if bound is not at_least_one:
            bound = b.op("Min", [bound, at_least_one], name="bound")
        limit = None
    if not plan.bounds:  # a negative trip count runs nothing
        bound = b.op("Max", [bound, zero], name="bound")
    bound.type, bound.shape = int64, ir.Shape([])
    # with no flag left (the other conjuncts are true), only the range ends it: B iterations
    runs = _leading_runs(node, plan, b, (bound, zero, one), ctx) if plan.flags else bound
    trip = b.op("Where", [scalar(c0), runs, zero], name="trip_count")
    trip.type, trip.shape = int64, ir.Shape([])
    node.replace_input_with(0, trip)
    node.replace_input_with(1, b.constant(np.array(True), "true"))
    anchor = body[0] if len(body) else None
    assert anchor is not None
    keep_going = ctx.rewriter.before(anchor).op("Identity", [body.inputs[1]], name="continue")
    keep_going.type, keep_going.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    body.outputs[0] = keep_going
    for k, start in plan.counters:  # read as the iteration number from now on
        counter = _plus(ctx.rewriter.before(body[0]), body.inputs[0], start)
        ctx.rewriter.replace(body.inputs[2 + k], counter)
    stops = {v.producer() for v, _, _ in plan.flips}
    for append in [a for a in _appends(node) if a.branch_if in stops]:
        _rewrite_append(node, append, ctx)


def _leading_runs(  # type: ignore[no-untyped-def]
    node: ir.Node, plan: BreakPlan, b, values: tuple[ir.Value, ir.Value, ir.Value], ctx: Context
) -> ir.Value:
    """Min(B, L + 1): L how many of the flags f'(Range(0, B)) (batched) lead before the first
    false; the iteration that finds it false runs too."""
    body = loop_body(node)
    int64 = ir.TensorType(ir.DataType.INT64)
    bound, zero, one = values  # B and the constants 0 and 1
    numbers = b.op("Range", [zero, bound, one], name="iteration_numbers")
    numbers.type, numbers.shape = int64, ir.Shape([None])
    seeds = {body.inputs[0]: Operand(True, ir.Shape([]))}
    fed = [numbers]
    for k, start in plan.counters:  # t = t0 + i
        seeds[body.inputs[2 + k]] = Operand(True, ir.Shape([]))
        fed.append(_plus(b, numbers, start))
    flipped = {v: (c, negated) for v, c, negated in plan.flips}
    opset = ctx.rewriter.opset(node.graph)
    batch = plan_region(body, seeds, plan.region, list(plan.flags), ctx.facts.values, opset)
    assert not isinstance(batch, Refusal)
    emitter = Emitter(b, numbers, None)
    flags = emit_body(batch, fed, emitter, None)
    going = None
    for flag, value in zip(flags, plan.flags):
        for _, (c, negated) in flipped.items():
            if c is value and negated:
                flag = b.op("Not", [flag], name="continues")
        flag = b.op("Reshape", [flag, b.ints([-1], "rows")], name="flag")
        going = flag if going is None else b.op("And", [going, flag], name="continues")
    assert going is not None
    ran = _first_stop(b, b.op("Not", [going], name="stops"))
    runs = b.op("Min", [bound, b.op("Add", [ran, one])], name="runs")
    for value in (ran, runs):
        value.type, value.shape = int64, ir.Shape([])
    return runs


def _first_stop(b, stopped: ir.Value) -> ir.Value:  # type: ignore[no-untyped-def]
    """L, the flags that lead before the first stop: the position of the first true of
    `stopped` (a bool vector), its length where none is.

        ArgMax(Concat(Cast(stopped, int32), [1]), keepdims=0)

    The 1 appended is found when no flag stops, at the position that is the length; ArgMax
    gives the first of equal maxima (opset 12 on: a Loop carries lists from opset 13, so every
    loop this rule counts is there). Three kernels where the sum of the leading flags
    (`ReduceSum(Cast(Equal(CumSum(Cast(stopped)), 0)))`) took five."""
    as_int = b.op("Cast", [stopped], {"to": int(ir.DataType.INT32)})
    end = b.constant(np.array([1], np.int32), "end")
    marks = b.op("Concat", [as_int, end], {"axis": 0}, name="stops_then_end")
    attributes = {"axis": 0, "keepdims": 0, "select_last_index": 0}
    return b.op("ArgMax", [marks], attributes, name="leading")


def _plus(b, value: ir.Value, start: int) -> ir.Value:  # type: ignore[no-untyped-def]
    if not start:
        return value
    total = b.op("Add", [value, b.constant(np.array(start, np.int64), "start")], name="counter")
    total.type, total.shape = ir.TensorType(ir.DataType.INT64), value.shape
    return total


# -- a counter beside the iteration number -----------------------------------------------------


def _counters(node: ir.Node, ctx: Context) -> list[tuple[int, int]]:
    """(k, t0) of each value carried as t' = t + 1 from a constant int64 scalar t0, whose final
    value nothing reads: it is t0 + i in iteration i."""
    body = loop_body(node)
    found = []
    for k in range(len(node.inputs) - 2):
        initial, state = node.inputs[2 + k], body.inputs[2 + k]
        if 1 + k >= len(body.outputs) or initial is None:
            continue
        add = peel_identity(body.outputs[1 + k]).producer()
        if add is None or add.op_type != "Add" or add.graph is not body or add.domain != "":
            continue
        if state not in add.inputs or len(add.inputs) != 2:
            continue
        other = add.inputs[1] if add.inputs[0] is state else add.inputs[0]
        start = ctx.facts.static_int(initial)
        if other is None or ctx.facts.static_int(other) != 1 or start is None:
            continue
        if state.dtype != ir.DataType.INT64 or initial.dtype != ir.DataType.INT64:
            continue
        if initial.shape is None or len(initial.shape) != 0:
            continue
        if node.outputs[k].uses() or node.outputs[k].is_graph_output():
            continue
        found.append((k, start))
    return found


# -- an append in one branch -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BranchAppend:
    branch_if: ir.Node
    index: int  # among the If's outputs
    slot: int  # among the carried values
    concat: ir.Node  # Concat(s, p) in the appending branch
    passing: ir.Graph  # the branch that passes s on
    appending: ir.Graph


def _branches(node: ir.Node) -> tuple[ir.Graph, ir.Graph] | None:
    found = []
    for name in ("then_branch", "else_branch"):
        attr = node.attributes.get(name)
        if attr is None or attr.type != ir.AttributeType.GRAPH:
            return None
        found.append(attr.as_graph())
    return found[0], found[1]


def _appends(loop: ir.Node) -> list[BranchAppend]:
    """The carried values s of `loop` appended to in one branch of an If and passed on in the
    other: If(c, then: s, else: Concat(s, p)), s read nowhere else."""
    found = []
    body = loop_body(loop)
    outputs = list(body.outputs)
    for k in range(len(loop.inputs) - 2):
        if 1 + k >= len(outputs) or loop.inputs[2 + k] is None:
            continue
        result = peel_identity(outputs[1 + k])
        node = result.producer()
        if node is None or node.op_type != "If" or node.graph is not body or node.domain != "":
            continue
        if any(use.node.op_type != "Identity" for use in result.uses()):
            continue  # read otherwise than passed on
        index = list(node.outputs).index(result)
        branches = _branches(node)
        state = body.inputs[2 + k]
        if branches is None or state.shape is None:
            continue
        passing = [g for g in branches if peel_identity(g.outputs[index]) is state]
        if len(passing) != 1:
            continue
        appending = branches[1] if passing[0] is branches[0] else branches[0]
        concat = peel_identity(appending.outputs[index]).producer()
        if concat is None or concat.op_type != "Concat" or concat.domain != "":
            continue
        if concat.graph is not appending or len(concat.inputs) != 2:
            continue
        if concat.inputs[0] is not state or concat.inputs[1] is state:
            continue
        if concat.outputs[0].uses() and any(
            use.node.op_type != "Identity" for use in concat.outputs[0].uses()
        ):
            continue
        readers = {use.node for use in state.uses()}
        if readers - {concat} - {n for n in passing[0] if n.op_type == "Identity"}:
            continue  # the state is read otherwise
        found.append(BranchAppend(node, index, k, concat, passing[0], appending))
    return found


def _rewrite_append(loop: ir.Node, plan: BranchAppend, ctx: Context) -> None:
    """If(c, then: s, else: Concat(s, p, axis)) -> Concat(s, If(c, then: Slice(s0, 0, 0, axis),
    else: p), axis), s0 the Loop's initial value of s"""
    body = loop_body(loop)
    names = ctx.rewriter.names
    initial = loop.inputs[2 + plan.slot]
    state = body.inputs[2 + plan.slot]
    assert initial is not None and state.shape is not None
    rank = len(state.shape)
    axis = plan.concat.attributes.get_int("axis", 0)
    axis = axis % rank if rank else 0
    b = ctx.rewriter.before(loop)
    zero = b.ints([0], "zero")
    empty = b.op("Slice", [initial, zero, zero, b.ints([axis], "axis")], name="no_rows")
    dims = list(state.shape)
    dims[axis] = 0
    empty.type, empty.shape = state.type, ir.Shape(dims)
    piece = plan.concat.inputs[1]
    assert piece is not None
    for graph, value in ((plan.passing, empty), (plan.appending, piece)):
        carrier = ir.Node("", "Identity", [value], name=names.fresh("piece"))
        carrier.outputs[0].name = names.fresh("piece")
        carrier.outputs[0].type, carrier.outputs[0].shape = state.type, value.shape
        graph.append(carrier)
        old = graph.outputs[plan.index]
        graph.outputs[plan.index] = carrier.outputs[0]
        _drop_dead(graph, old)
    result = plan.branch_if.outputs[plan.index]
    dims[axis] = None
    result.shape = ir.Shape(dims)
    grown = ir.Node("", "Concat", [state, result], [ir.Attr("axis", ir.AttributeType.INT, axis)])
    grown.name = names.fresh("appended")
    grown.outputs[0].name = names.fresh("appended")
    grown.outputs[0].type, grown.outputs[0].shape = state.type, ir.Shape(dims)
    body.insert_after(plan.branch_if, grown)
    body.outputs[1 + plan.slot] = grown.outputs[0]


def _drop_dead(graph: ir.Graph, value: ir.Value) -> None:
    """Remove the chain of Identity and Concat nodes of `graph` that made `value`, now unread."""
    node = value.producer()
    while node is not None and node.graph is graph and not any(o.uses() for o in node.outputs):
        if any(o.is_graph_output() for o in node.outputs):
            return
        upstream = node.inputs[0]
        graph.remove(node, safe=True)
        node = upstream.producer() if upstream is not None else None


RULES = RuleSet([Rule("loop-break-count", "Loop", _check_break, _rewrite_break)])
