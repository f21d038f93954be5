"""Rewrites for `--target tract` only: tract has no Loop, and infers an If's outputs from both
branches at once (probed with tract 0.23.9; see `seqlower.targets`).

    If(c, then: a = f(..), else: b = g(..))        -> Where(c, f(..), g(..))
    Loop(Gather(Shape(x), a), true, v.., body: f(i, v.., Gather(x, i, axis=a)))
        -> Scan(v.., x, scan_input_axes=[a], body: f(v.., x_i))
    Loop(M static, true, v.., body=f)               -> f(0, v..); f(1, ..); ...; f(M-1, ..)
    Loop(M, true, v.., body: f(i, v..))             -> Scan(v.., Range(0, M, 1), body: f(v.., i))
                                                       (at least one iteration, dropped if M <= 0;
                                                       or in If(M > 0, Scan.., else: v..), or
                                                       body: If(i < M, f(..), else: v.., 0..))
    Loop(M, true, v.., body: f(v..))  (i not read)  -> Scan(v.., Range(0, M, 1),
                                                         body: Where(i < M, f(v..), v..))

Each runs only when `Options.target == "tract"`: the default output never changes. An If becomes
Where only when both branches are cheap (at most `MAX_BRANCH_NODES` nodes, no subgraph) and cannot
fail or have effects (operators in `SAFE_OPS`, and `BROADCASTING_OPS` whose input shapes are known
to fit: `x.size(1) == 4 ? x @ W : x` keeps its If), and each output has one dtype and one fully
known shape in both branches: both branches are then computed, one result kept. A Loop becomes Scan
when its iteration number only indexes one outer tensor along one axis whose size is the trip count
(that size must not be 0: a Scan over an empty axis fails in onnxruntime and OpenVINO and is wrong
in tract, so the rewrite warns unless the size is static); otherwise a tensor Loop with a static
trip count is unrolled when its copies stay within `Options.unroll_budget` nodes, and any other
Loop that cannot stop early (a trip count known only at run time, or over the budget) becomes a
Scan over its iteration numbers, Range(0, M) (a body that does not read them keeps each carried
value where i >= M, Where(i < M, new, old): tract 0.23.9 drops a Scan input that is not read,
then cannot plan the Scan); a Scan must not be empty, so for a trip count that
may be 0 the Scan runs at least once and what that iteration gives is dropped (the body must then
be able to run once on the loop's inputs: judged from its operators as for a masked Scan,
`seqlower.analysis.masked_loops.zero_trip_problem`). Where it may not (`x[i]` of a tensor whose
dim is the trip count 0, say), the Scan over Range(0, M) sits in If(M > 0) whose else-branch
gives the initial carried values, so no iteration runs for M <= 0; tract runs such an If, but
only when both branches give outputs of one shape (probed with tract 0.23.9), which the scan
outputs of no iteration do not. With a scan output read, the Scan keeps its one iteration and
its body runs in If(i < M), whose else-branch gives the carried values and zeros of each scan
output's static shape (dropped as before); where a scan output's shape is not static, the
body runs unguarded and the rewrite warns, as for a Scan over an axis. A loop
whose condition is computed at run time (a data-dependent while loop) is left to
`seqlower.rules.tract_while` (a masked Scan over its bound, when its body is safe to run past
the exit). Loops that carry or read
sequences are left to `loop-unroll` and `loop-append-to-scan` (whose tensor Loops these rules then
take over), except that past `loop-unroll`'s own limits (`MAX_UNROLL` iterations) they are unrolled
within `Options.unroll_budget` too.
"""

from __future__ import annotations

__all__ = ["BROADCASTING_OPS", "MAX_BRANCH_NODES", "RULES", "SAFE_OPS"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.loop_shapes import LoopShapes
from seqlower.analysis.masked_loops import zero_trip_problem
from seqlower.analysis.scan_forms import (
    condition_chain,
    give_ranks,
    unknown_output_rank,
    walked_tensor,
)
from seqlower.inline import inline_graph
from seqlower.ops import has_subgraph
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import body_always_continues, known_bool, uses_sequences
from seqlower.rules.loops import check_unroll as _check_sequence_unroll
from seqlower.rules.loops import unroll
from seqlower.rules.runtime_position import WHERE_TYPES
from seqlower.uses import remove_node

MAX_BRANCH_NODES = 32
# operators that cannot fail, whatever the shapes, and have no effect: an untaken branch may
# compute them on values that the taken branch would never see
SAFE_OPS = frozenset(
    {
        *("Identity", "Constant", "Shape", "Size", "Cast", "CastLike", "Transpose", "Flatten"),
        *("Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Exp", "Erf", "Sign", "Floor", "Ceil"),
        *("Round", "Not", "Softmax", "LogSoftmax", "Unsqueeze"),
    }
)
# operators that fail only on shapes that do not broadcast (or concatenate, or multiply):
# safe when the shapes inferred for their inputs show that they always do
BROADCASTING_OPS = frozenset(
    {
        *("Add", "Sub", "Mul", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less"),
        *("Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Concat", "MatMul"),
    }
)
_FLOAT_ONLY = frozenset({"Div", "Sqrt", "Log", "Reciprocal", "Pow"})  # NaN or inf, not an error


def _only_for_tract(ctx: Context) -> Refusal | None:
    if ctx.options.target != "tract":
        return Refusal("a rewrite for --target tract only")
    return None


# -- If -> Where ---------------------------------------------------------------------------------


def _branch_problem(branch: ir.Graph) -> str | None:
    if branch.num_nodes() > MAX_BRANCH_NODES:
        return f"branch '{branch.name}' has {branch.num_nodes()} nodes (at most {MAX_BRANCH_NODES})"
    for node in branch:
        if has_subgraph(node):
            return f"branch '{branch.name}' holds a {node.op_type} with a subgraph"
        if node.domain not in ("", "ai.onnx"):
            return f"branch '{branch.name}' uses {node.domain}::{node.op_type}"
        if node.op_type in SAFE_OPS:
            continue
        if node.op_type in _FLOAT_ONLY and _all_float(node):
            continue
        if node.op_type in BROADCASTING_OPS or node.op_type in _FLOAT_ONLY:
            if not _always_compatible(node):
                return (
                    f"branch '{branch.name}' computes {node.op_type} on shapes not known to fit, "
                    "which may fail when the branch is not taken"
                )
            if node.op_type in BROADCASTING_OPS:
                continue
        return (
            f"branch '{branch.name}' computes {node.op_type}, which may fail or differ when "
            "the branch is not taken"
        )
    return None


def _all_float(node: ir.Node) -> bool:
    return all(
        v is not None and v.dtype is not None and v.dtype.is_floating_point() for v in node.inputs
    )


def _dims(value: ir.Value | None) -> list[int | str] | None:
    """The dims of `value` as ints and dim names, or None when any is unknown."""
    if value is None or value.shape is None:
        return None
    dims: list[int | str] = []
    for dim in value.shape:
        if isinstance(dim, int):
            dims.append(dim)
        elif dim.value is not None:
            dims.append(dim.value)
        else:
            return None
    return dims


def _fit(dims: list[int | str]) -> bool:
    """Dims that broadcast together whatever their run-time sizes: equal, or 1."""
    return len({d for d in dims if d != 1}) <= 1


def _always_compatible(node: ir.Node) -> bool:
    """True when the inferred shapes of `node`'s inputs show it cannot fail on their sizes
    (dims with one name have one size in a model)."""
    shapes = [_dims(v) for v in node.inputs]
    if any(shape is None for shape in shapes) or not shapes:
        return False
    known: list[list[int | str]] = shapes  # type: ignore[assignment]
    if node.op_type == "Concat":
        rank = len(known[0])
        axis = node.attributes.get_int("axis", 0) % max(rank, 1)
        return all(len(s) == rank for s in known) and all(
            len({s[i] for s in known}) == 1 for i in range(rank) if i != axis
        )
    if node.op_type == "MatMul":
        a, b = known
        if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
            return False
        known = [a[:-2], b[:-2]]
    rank = max(len(s) for s in known)
    padded = [[1] * (rank - len(s)) + list(s) for s in known]
    return all(_fit([s[i] for s in padded]) for i in range(rank))


def _one_element(shape: ir.Shape) -> bool:
    return all(isinstance(d, int) and d == 1 for d in shape)


def _same_shape(a: ir.Value, b: ir.Value) -> bool:
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return False
    return all(
        isinstance(x, int) or (isinstance(x, ir.SymbolicDim) and x.value is not None)
        for x in a.shape
    ) and list(a.shape) == list(b.shape)


def _check_if_to_where(node: ir.Node, ctx: Context) -> bool | Refusal:
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    condition = node.inputs[0]
    if ctx.facts.static(condition) is not None:
        return Refusal("the condition is static: tract takes the branch itself")
    if condition is None or condition.shape is None or not _one_element(condition.shape):
        return Refusal("the condition's shape is unknown")
    branches = [node.attributes[key].as_graph() for key in ("then_branch", "else_branch")]
    for branch in branches:
        problem = _branch_problem(branch)
        if problem:
            return Refusal(problem)
    for index, (then_out, else_out) in enumerate(zip(*(b.outputs for b in branches))):
        if not isinstance(node.outputs[index].type, ir.TensorType):
            return Refusal(f"output {index} is not a tensor")
        if then_out is else_out:
            continue
        if then_out.dtype not in WHERE_TYPES:
            name = then_out.dtype.name.lower() if then_out.dtype is not None else "unknown"
            return Refusal(f"output {index}: onnxruntime has no Where for {name}")
        if then_out.dtype != else_out.dtype or not _same_shape(then_out, else_out):
            return Refusal(
                f"output {index} may differ in shape or type between the branches "
                f"({then_out.shape} and {else_out.shape}): Where needs one shape"
            )
    return True


def _if_to_where(node: ir.Node, _: bool, ctx: Context) -> None:
    """If(c, then: a = f(..), else: b = g(..)) -> Where(c, f(..), g(..)), both branches
    computed (cheap, side-effect free branches whose outputs have one shape). --target tract
    only."""
    builder = ctx.rewriter.before(node)
    condition = node.inputs[0]
    assert condition is not None and condition.shape is not None
    if len(condition.shape) != 0:
        condition = builder.op("Reshape", [condition, builder.ints([], "scalar_shape")])
        condition.type, condition.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    results = [
        inline_graph(node.attributes[key].as_graph(), [], builder, f"{builder.hint}_{key}")
        for key in ("then_branch", "else_branch")
    ]
    for old, then_value, else_value in zip(node.outputs, *results):
        new = then_value
        if then_value is not else_value:
            new = builder.op("Where", [condition, then_value, else_value], name="where")
            new.type, new.shape = old.type or then_value.type, then_value.shape
        ctx.rewriter.replace(old, new)


# -- Loop -> Scan ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ScanPlan:
    data: ir.Value  # the outer tensor the loop walks
    axis: int  # non-negative
    gathers: tuple[ir.Node, ...]  # Gather(data, i, axis) in the body
    condition_node: ir.Node | None  # Identity(cond_in) -> cond_out, removed with the condition


def _while_problem(node: ir.Node, body: ir.Graph, ctx: Context) -> str | None:
    """Why the loop may run a number of times decided by its data (a while loop), or None."""
    if not node.inputs or node.inputs[0] is None:
        return "no trip count: a data-dependent while loop, which tract cannot run"
    condition = node.inputs[1] if len(node.inputs) > 1 else None
    if condition is not None and known_bool(condition, ctx) is not True:
        return (
            "its condition is computed at run time: a data-dependent while loop, which tract "
            "cannot run"
        )
    if not body_always_continues(body, ctx):
        return (
            "the body computes its condition: a data-dependent while loop, which tract cannot run"
        )
    return None


def _scan_refusal(node: ir.Node, body: ir.Graph, ctx: Context) -> Refusal | None:
    """Why no Loop-to-Scan rewrite applies to `node` at all (the target, sequences, an early
    exit), or None."""
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    if uses_sequences(node, body):
        return Refusal("the loop carries or reads sequences (loop-unroll, loop-append-to-scan)")
    problem = _while_problem(node, body, ctx)
    return Refusal(problem) if problem else None


def _check_loop_to_scan(node: ir.Node, ctx: Context) -> ScanPlan | Refusal:
    body = node.attributes["body"].as_graph()
    refused = _scan_refusal(node, body, ctx)
    if refused:
        return refused
    chain = condition_chain(body)
    if isinstance(chain, str):
        return Refusal(chain)
    walked = walked_tensor(node, body, ctx.facts.values)
    if isinstance(walked, str):
        return Refusal(walked)
    changing = _carry_changing_shape(node, body, ctx)
    if changing:
        return changing
    unknown = unknown_output_rank(body)
    if unknown:
        return Refusal(unknown)
    return ScanPlan(walked.data, walked.axis, walked.gathers, chain)


def _loop_to_scan(node: ir.Node, plan: ScanPlan, ctx: Context) -> None:
    """Loop(Gather(Shape(x), a), true, v.., body: f(i, v.., Gather(x, i, axis=a)))
    -> Scan(v.., x, scan_input_axes=[a], body: f(v.., x_i)). --target tract only."""
    body = node.attributes["body"].as_graph()
    give_ranks(body)
    builder = ctx.rewriter.before(node)
    dims = list(plan.data.shape or [])
    element = ir.Value(
        name=ctx.rewriter.names.fresh(f"{plan.data.name}_element"),
        type=plan.data.type,
        shape=ir.Shape(dims[: plan.axis] + dims[plan.axis + 1 :]),
    )
    for gather in plan.gathers:
        ctx.rewriter.replace(gather.outputs[0], element)
    for gather in plan.gathers:
        if not gather.outputs[0].uses() and not gather.outputs[0].is_graph_output():
            body.remove(gather, safe=True)
    body.outputs.pop(0)
    if plan.condition_node is not None:
        body.remove(plan.condition_node, safe=True)
    del body.inputs[:2]
    body.inputs.append(element)
    size = dims[plan.axis] if plan.axis < len(dims) else None
    if not (isinstance(size, int) and size > 0):
        ctx.rewriter.warn(
            f"Loop '{node.name}' became a Scan over dim {plan.axis} of '{plan.data.name}', which "
            "must not be empty: over an empty axis onnxruntime and OpenVINO fail and tract "
            "returns a wrong final state, where the Loop ran zero times"
        )
    attributes = {"body": body, "num_scan_inputs": 1, "scan_input_axes": [plan.axis]}
    outputs = builder.ops(
        "Scan", [*node.inputs[2:], plan.data], attributes, num_outputs=len(node.outputs)
    )
    # the body moves to the Scan; dead-code removal knows the new holder and leaves it
    for old, new in zip(node.outputs, outputs):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)


# -- Loop -> Scan over the iteration numbers -----------------------------------------------------


def _check_loop_to_range_scan(
    node: ir.Node, ctx: Context
) -> tuple[ir.Node | None, int | None] | Refusal:
    """(the node that makes the body's condition, removed with it; the static trip count) or
    why not."""
    body = node.attributes["body"].as_graph()
    refused = _scan_refusal(node, body, ctx)
    if refused:
        return refused
    count = ctx.facts.static_int(node.inputs[0])
    if count is not None and count * body.num_nodes() <= ctx.options.unroll_budget:
        return Refusal("the trip count is static: tract-loop-unroll unrolls it")
    if body.inputs[0].is_graph_output():
        return Refusal("the iteration number is a body output")
    if not body.inputs[0].uses():
        # tract 0.23.9 drops a Scan input the body does not read, then cannot plan the Scan:
        # the carried values are masked with the iteration number (Where(i < M, new, old))
        maskable = [v for v in body.inputs[2:] if v.dtype in WHERE_TYPES]
        if not maskable:
            return Refusal(
                "the body does not read the iteration number and carries no value of a type "
                "Where takes: tract 0.23.9 drops a Scan input the body does not read, and then "
                "cannot plan a Scan left with none"
            )
    changing = _carry_changing_shape(node, body, ctx)
    if changing:
        return changing
    chain = condition_chain(body)
    if isinstance(chain, str):
        return Refusal(chain)
    unknown = unknown_output_rank(body)
    return Refusal(unknown) if unknown else (chain, count)


def _carry_changing_shape(node: ir.Node, body: ir.Graph, ctx: Context) -> Refusal | None:
    """Why a carried value of `node` cannot be a Scan's state (its shape may change between
    iterations), or None."""
    kept = set(LoopShapes(node, ctx.facts.values, memo=ctx.facts.loops).invariant_carried())
    for value in body.inputs[2:]:
        if value not in kept:
            return Refusal(
                f"the carried value '{value.name}' may change shape between iterations: a "
                "Scan's state keeps one shape"
            )
    return None


def _loop_to_range_scan(
    node: ir.Node, plan: tuple[ir.Node | None, int | None], ctx: Context
) -> None:
    """Loop(M, true, v.., body: f(i, v..))
        -> Scan(v.., Range(0, Max(M, 1), 1), body: f(v.., i)), then for M <= 0 the states
           Where(M > 0, final, v..) and each scan output Gather(.., Range(0, Max(M, 0)))
    (a trip count known only at run time, no early exit; a Scan must not be empty, so one
    iteration runs even for M <= 0, its results dropped); a body that does not read i keeps
    each carried value as Where(i < M, new, old) instead (tract drops a Scan input that is not
    read). Where that one iteration may fail (`zero_trip_problem`) and no scan output is read,
        -> If(M > 0, then: Scan(v.., Range(0, M, 1), body: f(v.., i)), else: v..)
    so that no iteration runs for M <= 0; with scan outputs of static shapes read, the body
    becomes If(i < M, then: f(v.., i), else: (v.., zeros)) instead. --target tract only."""
    condition_node, count = plan
    body = node.attributes["body"].as_graph()
    maybe_empty = count is None or count <= 0
    problem = zero_trip_problem(node) if maybe_empty else None
    states = node.inputs[2:]
    guarded = problem is not None and _guardable(node, len(states))
    masked_body = problem is not None and not guarded and _static_elements(body, len(states))
    if problem and not guarded and not masked_body:
        ctx.rewriter.warn(
            f"Loop '{node.name}' became a Scan over its iteration numbers, which runs the body "
            "once even where the trip count is 0 (on iteration number 0 and the initial "
            f"carried values), and {problem.removeprefix('the body computes ')}: the lowered "
            "model may fail where the Loop ran zero times (no If on the trip count guards it: "
            "tract types an If only when both branches give outputs of one shape, and the "
            "scan outputs of no iteration have none, and the body's scan outputs have no "
            "static shape for an If in the body)"
        )
    give_ranks(body)
    builder = ctx.rewriter.before(node)
    trip = node.inputs[0]
    assert trip is not None
    if trip.shape is None or len(trip.shape) != 0:
        trip = builder.op("Reshape", [trip, builder.ints([], "scalar_shape")])
    trip.type, trip.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
    if masked_body:
        condition_node = _run_body_in_if(body, trip, len(states), condition_node, ctx)
    zero = builder.constant(np.array(0, np.int64), "zero")
    # guarded: the Scan is built in the If's then-branch, which runs only for M > 0
    inner = ctx.rewriter.new_graph(f"{builder.hint}_ran", builder.opset) if guarded else builder
    start = inner.constant(np.array(0, np.int64), "zero") if guarded else zero
    one = inner.constant(np.array(1, np.int64), "one")
    stop = (
        inner.op("Max", [trip, one], name="at_least_one") if maybe_empty and not guarded else trip
    )
    steps = inner.op("Range", [start, stop, one], name="iterations")
    steps.type, steps.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([None])
    iteration = body.inputs[0]
    iteration.type, iteration.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
    within: set[int] = set()
    if iteration.uses():  # tract 0.23.9 slices a 1-D scan input as shape [1]: made a scalar
        element = ir.Value(name=ctx.rewriter.names.fresh(f"{iteration.name}_element"))
        element.type, element.shape = iteration.type, iteration.shape
        in_body = ctx.rewriter.before(body[0])
        scalar = in_body.op(
            "Reshape", [element, in_body.ints([], "scalar_shape")], name="iteration"
        )
        scalar.type, scalar.shape = iteration.type, iteration.shape
        iteration.replace_all_uses_with(scalar)
        body.inputs[0] = iteration = element
    else:  # read, or tract drops it: a carried value is kept where i >= M (no iteration runs)
        within = _mask_with_iteration(body, trip, ctx)
        iteration = body.inputs[0]
    body.outputs.pop(0)
    if condition_node is not None:
        body.remove(condition_node, safe=True)
    del body.inputs[:2]
    body.inputs.append(iteration)
    _copy_passed_through(body, ctx)
    _copy_read_scan_outputs(body, len(states), ctx)
    attributes = {"body": body, "num_scan_inputs": 1}
    outputs = inner.ops("Scan", [*states, steps], attributes, num_outputs=len(node.outputs))
    # the body moves to the Scan; dead-code removal knows the new holder and leaves it
    for old, new in zip(node.outputs, outputs):
        new.type, new.shape = old.type, old.shape
    ran = builder.op("Greater", [trip, zero], name="ran") if maybe_empty else None
    if guarded:
        assert ran is not None
        _guard(node, ran, outputs[: len(states)], inner, builder, ctx)
        return
    ran_steps = None
    for index, (old, new) in enumerate(zip(node.outputs, outputs)):
        if ran is not None and (old.uses() or old.is_graph_output()):
            if index < len(states) and index in within:  # masked in the body already
                pass
            elif index < len(states):  # the state the Loop would give: the initial one
                new = builder.op("Where", [ran, new, states[index]], name="final")
            else:  # the iterations the Loop would run: none
                if ran_steps is None:  # a Gather: tract 0.23.9 fails on this Slice (probed)
                    count_run = builder.op("Max", [trip, zero], name="count")
                    ran_steps = builder.op("Range", [zero, count_run, one], name="ran_steps")
                new = builder.op("Gather", [new, ran_steps], {"axis": 0}, name="run")
            new.type = old.type
        ctx.rewriter.replace(old, new)


def _guardable(node: ir.Node, states: int) -> bool:
    """True when the Scan of Loop `node` can sit in an If on M > 0 whose else-branch gives the
    initial carried values: it has carried values and none of its scan outputs is read (tract
    types an If only when both branches give outputs of one shape, probed with tract 0.23.9:
    the scan outputs of no iteration would be [0, ..] beside the Scan's [M, ..], and a
    Range of run-time length read from outside a branch has no fact there)."""
    scans = node.outputs[states:]
    return states > 0 and not any(v.uses() or v.is_graph_output() for v in scans)


def _static_elements(body: ir.Graph, states: int) -> bool:
    """True when every scan output of Loop body `body` (after its condition and `states`
    carried values) has a known dtype and a static shape."""
    for value in body.outputs[1 + states :]:
        if value.dtype is None or value.shape is None:
            return False
        if not all(isinstance(dim, int) for dim in value.shape):
            return False
    return True


def _run_body_in_if(
    body: ir.Graph, trip: ir.Value, states: int, condition_node: ir.Node | None, ctx: Context
) -> ir.Node | None:
    """Loop body (i, c, v..) -> (c', v'.., s..)
        -> (i, c, v..) -> (c', If(i < M, then: (v'.., s..), else: (v.., zeros like s..)))
    every node but the condition's moved into the then-branch, so that an iteration past the
    trip count (the one a Scan over Range(0, Max(M, 1)) runs for M <= 0) computes nothing.
    tract types the If (probed with tract 0.23.9): the scan outputs' shapes are static. Returns
    the condition's node, None when it was moved (it makes a scan output or a state too)."""
    opset = ctx.rewriter.opset(body)
    iteration = body.inputs[0]
    then_branch = ctx.rewriter.new_graph(f"{body.name}_ran", opset)
    else_branch = ctx.rewriter.new_graph(f"{body.name}_past", opset)
    kept = condition_node
    if condition_node is not None and any(
        v.is_graph_output() and body.outputs.index(v) > 0 for v in condition_node.outputs
    ):
        kept = None
    for inner in list(body):
        if inner is not kept:
            remove_node(body, inner)
            then_branch.add_node(inner)
    produced = {id(v) for inner in then_branch.graph for v in inner.outputs}
    given = [body.outputs.pop() for _ in range(len(body.outputs) - 1)][::-1]
    results = []
    for index, value in enumerate(given):
        if id(value) not in produced or value in then_branch.graph.outputs:
            value = then_branch.op("Identity", [value], name="kept")
            value.type, value.shape = given[index].type, given[index].shape
        then_branch.graph.outputs.append(value)
        if index < states:
            past = else_branch.op("Identity", [body.inputs[2 + index]], name="state")
        else:
            dtype = value.dtype
            assert dtype is not None and value.shape is not None
            shape = [int(dim) for dim in value.shape]  # static: _static_elements
            past = else_branch.constant(np.zeros(shape, dtype.numpy()), "nothing")
        past.type, past.shape = value.type, value.shape
        else_branch.graph.outputs.append(past)
        results.append(value)
    inner_builder = Builder(ctx.rewriter, body, None, "past", opset)
    within = inner_builder.op("Less", [iteration, trip], name="within")
    within.type, within.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    branches = {"then_branch": then_branch.graph, "else_branch": else_branch.graph}
    outputs = inner_builder.ops("If", [within], branches, num_outputs=len(results), name="run")
    for new, value in zip(outputs, results):
        new.type, new.shape = value.type, value.shape
        body.outputs.append(new)
    return kept


def _guard(
    node: ir.Node,
    ran: ir.Value,
    finals: list[ir.Value],
    then_branch: Builder,
    builder: Builder,
    ctx: Context,
) -> None:
    """The states of Loop `node` as If(ran, then: the Scan's `finals` (built in
    `then_branch`), else: the initial carried values)."""
    states = node.inputs[2:]
    else_branch = ctx.rewriter.new_graph(f"{builder.hint}_none", builder.opset)
    for final, initial in zip(finals, states):
        then_branch.graph.outputs.append(final)
        assert initial is not None
        kept = else_branch.op("Identity", [initial], name="initial")
        kept.type, kept.shape = final.type, final.shape
        else_branch.graph.outputs.append(kept)
    branches = {"then_branch": then_branch.graph, "else_branch": else_branch.graph}
    results = builder.ops("If", [ran], branches, num_outputs=len(finals), name="guard")
    for old, new in zip(node.outputs, results):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)


def _mask_with_iteration(body: ir.Graph, trip: ir.Value, ctx: Context) -> set[int]:
    """Make the body of a Loop read its iteration number i, which it does not: each carried
    value of a type Where takes becomes Where(i < M, new, old). Returns the indices (among the
    carried values) of those masked. The body is still the Loop's (i, cond, v.. -> cond, ..)."""
    iteration = body.inputs[0]
    element = ir.Value(name=ctx.rewriter.names.fresh(f"{iteration.name}_element"))
    element.type, element.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
    anchor = body[0] if len(body) else None
    inner = Builder(ctx.rewriter, body, anchor, "masked", ctx.rewriter.opset(body))
    scalar = inner.op("Reshape", [element, inner.ints([], "scalar_shape")], name="iteration")
    within = inner.op("Less", [scalar, trip], name="within")
    within.type, within.shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    masked = set()
    for index, (old, new) in enumerate(zip(body.inputs[2:], body.outputs[1:])):
        if old.dtype not in WHERE_TYPES:
            continue
        node = ir.Node("", "Where", [within, new, old], name=ctx.rewriter.names.fresh("masked"))
        node.outputs[0].name = ctx.rewriter.names.fresh(f"{old.name}_masked")
        node.outputs[0].type, node.outputs[0].shape = old.type, old.shape
        body.append(node)
        body.outputs[1 + index] = node.outputs[0]
        masked.add(index)
    body.inputs[0] = element
    return masked


def _copy_read_scan_outputs(body: ir.Graph, states: int, ctx: Context) -> None:
    """A scan output that the body also reads becomes an Identity of it: tract 0.23.9 gives
    such a value the stacked shape inside the body too ("Unifying shapes 4 and 1,4": probed)."""
    for index in range(states, len(body.outputs)):
        value = body.outputs[index]
        if value.uses() or body.outputs.count(value) > 1:
            copy = ir.Node("", "Identity", [value], name=ctx.rewriter.names.fresh("scan_out"))
            copy.outputs[0].name = ctx.rewriter.names.fresh(f"{value.name}_out")
            copy.outputs[0].type, copy.outputs[0].shape = value.type, value.shape
            body.append(copy)
            body.outputs[index] = copy.outputs[0]


def _copy_passed_through(body: ir.Graph, ctx: Context) -> None:
    """A Scan body output that is a body input (a state passed through unchanged) becomes an
    Identity of it: onnxruntime 1.32 gives zeros for such a state (probed)."""
    inputs = {id(value) for value in body.inputs}
    for index, value in enumerate(body.outputs):
        if id(value) in inputs:
            node = ir.Node("", "Identity", [value], name=ctx.rewriter.names.fresh("passed"))
            node.outputs[0].name = ctx.rewriter.names.fresh(f"{value.name}_passed")
            node.outputs[0].type, node.outputs[0].shape = value.type, value.shape
            if len(body):
                body.insert_before(body[0], node)
            else:
                body.append(node)
            body.outputs[index] = node.outputs[0]


# -- unrolling past the default ----------------------------------------------------------------


def _check_unroll(node: ir.Node, ctx: Context) -> int | Refusal:
    refused = _only_for_tract(ctx)
    if refused:
        return refused
    body = node.attributes["body"].as_graph()
    if uses_sequences(node, body):
        # past loop-unroll's default limits, within the budget
        budget = ctx.options.unroll_budget
        count = _check_sequence_unroll(node, ctx, max_iterations=None, max_nodes=budget)
        if isinstance(count, Refusal) and count.reason.endswith("too many to unroll"):
            return Refusal(
                f"{count.reason} (the unroll budget is {budget} nodes; unroll_budget= in Python)"
            )
        return count
    problem = _while_problem(node, body, ctx)
    if problem:
        return Refusal(problem)
    count = ctx.facts.static_int(node.inputs[0])
    if count is None:
        return Refusal(f"the trip count '{node.inputs[0].name}' is computed at run time")  # type: ignore[union-attr]
    condition = node.inputs[1] if len(node.inputs) > 1 else None
    count = max(count, 0) if condition is None or known_bool(condition, ctx) else 0
    n_scan = len(body.outputs) - 1 - (len(node.inputs) - 2)
    if count == 0 and n_scan > 0:
        return Refusal("no iteration runs, and the element shape of its scan outputs is unknown")
    added = count * body.num_nodes()
    if added > ctx.options.unroll_budget:
        return Refusal(
            f"unrolling {count} iterations of {body.num_nodes()} nodes adds {added} nodes, over "
            f"the unroll budget of {ctx.options.unroll_budget} (unroll_budget= in Python)"
        )
    return count


def _unroll_tensor_loop(node: ir.Node, count: int, ctx: Context) -> None:
    """Loop(M static, true, v.., body=f) -> f(0, v..); f(1, ..); ...; f(M-1, ..), within the
    unroll budget (4096 nodes unless `unroll_budget=` says otherwise; a tensor loop, or a
    sequence loop past loop-unroll's limits). --target tract only."""
    unroll(node, count, ctx)


RULES = RuleSet(
    [
        Rule("tract-if-to-where", "If", _check_if_to_where, _if_to_where),
        Rule("tract-loop-to-scan", "Loop", _check_loop_to_scan, _loop_to_scan),
        Rule("tract-loop-unroll", "Loop", _check_unroll, _unroll_tensor_loop),
        Rule("tract-loop-to-range-scan", "Loop", _check_loop_to_range_scan, _loop_to_range_scan),
    ]
)
