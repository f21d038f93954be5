"""A list a Loop builds by appending becomes scan outputs of the Loop.

    Loop(M, c, v.., s0=SequenceEmpty(), body: s1 = SequenceInsert(s, t))
        -> SplitToSequence(Loop(M, c, v.., body: scan output Identity(t)), axis=0, keepdims=0)
    Loop(M, c, v.., s0=SequenceConstruct(e0..em), body: s1 = SequenceInsert(s, t))
        -> SplitToSequence(Concat(Stack(e0..em), Loop(..., scan output t)), axis=0, keepdims=0)
    body: s1 = SequenceInsert(s, t, 0)                          (prepends)
        -> the scan output reversed once after the loop, before the initial elements
    body: n = SequenceLength(s) or SequenceLength(s1), one append in every iteration
        -> Add(i, m) or Add(i, m + 1): m initial elements, i the iteration number (a
           `while len(out) < n: out.append(t)` loop, whose list is then only written)
    body: s1 = If(c, then: SequenceInsert(s, t), else: s)      (conditional appends)
        -> scan outputs of t and c, then Compress(scan of t, scan of c, axis=0)
    body: s1 = If(c, then: s, else: SequenceInsert(s, t))
        -> the same with Not(scan of c), once after the loop
    If(c, then: SequenceInsert(s, a), else: SequenceInsert(s, b))
        -> SequenceInsert(s, If(c, then: a, else: b))           (both branches append)
    If(c, then: (u, SequenceInsert(s, a)), else: (v, SequenceInsert(s, b)))
        -> SequenceInsert(s, If(c, then: (u, a), else: (v, b)).1)   (other values kept in place:
           `newids.append(idx); i += 2` or `newids.append(ids[i]); i += 1`, minbpe's `merge`)
    the initial elements proved of t's shape, symbolic; a portable target but tract
        -> Reshape(scan of t, Concat(ReduceSum(Cast(scan of c, or of true)), Shape(e0)))
           before the Concat with them (`_counted_rows`: OpenVINO's zero-trip scan outputs)

The scan output stacks the appended tensors of the iterations actually run, so a loop that exits
early through its condition is fine (a `while` loop); the appended tensor must keep one shape in
every iteration (see `seqlower.analysis.loop_shapes`), or the list must be stacked after the loop
(`stacked_later`: a stack fails unless its elements have one shape, and the Loop then fails
where the stack would), for an append in every iteration: a conditional append's stack proves
nothing of the iterations that append nothing. The SplitToSequence left behind is what
the consumers of the carried sequence read; the other rules then read the stacked tensor S:

    ConcatFromSequence(SplitToSequence(S, axis=0, keepdims=0), axis=0, new_axis=1) -> S
    SequenceLength(SplitToSequence(S, axis=0))           -> Gather(Shape(S), 0)   (iterations run)
    SequenceAt(SplitToSequence(S, axis=0, keepdims=0), p) -> Gather(S, p)

A sequence-typed model output keeps its interface: there the SplitToSequence stays. A loop with
a static trip count that `loop-unroll` may still unroll (once the reads in its body are lowered)
is left to it: unrolling keeps the length static.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.analysis.loop_shapes import LoopShapes, analysed
from seqlower.ops import graphs_within, is_sequence_op, is_sequence_value, subgraphs
from seqlower.options import SPEED_FIRST_TARGETS
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.access import _producer
from seqlower.rules.loop_append_lockstep import lockstep_shapes
from seqlower.rules.loop_parts import (
    body_always_continues,
    concatenation_axes,
    known_bool,
    loop_body,
    outer_sequences,
    rebuild_with_scans,
)
from seqlower.rules.loops import MAX_UNROLL, MAX_UNROLLED_NODES, unrolled_size
from seqlower.runtime_quirks import SPLIT_TO_SEQUENCE_TYPES


@dataclasses.dataclass(frozen=True)
class AppendPlan:
    index: int  # among the loop-carried values
    update: ir.Node  # what makes the next sequence: a SequenceInsert, or an If around one
    tensor: ir.Value  # what is appended (or prepended) each iteration
    initial: tuple[ir.Value, ...]  # the elements the sequence starts with
    dtype: ir.DataType
    prepend: bool = False  # inserted at position 0: the stack is reversed once after the loop
    keep: ir.Value | None = None  # appended only when true (an If in the body)
    negate: bool = False  # `keep` is the condition of an If that appends in its else branch
    hoist: tuple[ir.Node, ...] = ()  # nodes of the appending branch that compute `tensor`
    # the appended tensor's shape as the loop analysis proves it (None: a dim it names only
    # symbolically), for the stacked scan output: shape inference cannot see through a body
    element_shape: tuple[int | None, ...] | None = None
    # the axis of the concatenations that alone read a list whose initial elements differ in
    # shape from the appended tensors: they are concatenated apart, not stacked with them
    apart_axis: int | None = None
    # SequenceLength nodes in the body reading the list before (0) or after (1) the append:
    # each becomes the iteration number plus the initial length (plus 1)
    lengths: tuple[tuple[ir.Node, int], ...] = ()
    # the initial elements are proved to have the appended tensor's shape, some dim of which is
    # symbolic: a portable target gives the stacked rows that shape when no iteration runs
    # (`_counted_rows`)
    like_initial: bool = False
    # the loop analysis proved a shape through a Loop inside the body or a Conv
    # (`LoopShapes.nonempty_joins`): a list it proves of one shape that way was flat before,
    # and kept the failure of a ConcatFromSequence of no element (`_concatenate_nonempty`)
    nonempty_join: bool = False


def _unroll_pending(node: ir.Node, ctx: Context) -> bool:
    """True when the loop could be unrolled (static trip count, never ends early) once the
    sequence reads left in its body are lowered: unrolling then gives static lengths, which a
    scan output would lose."""
    body = loop_body(node)
    count = ctx.facts.static_int(node.inputs[0]) if node.inputs and node.inputs[0] else None
    cond = node.inputs[1] if len(node.inputs) > 1 else None
    if (
        count is None
        or not 0 < count <= MAX_UNROLL
        or count * unrolled_size(body, ctx) > MAX_UNROLLED_NODES
    ):
        return False
    if (cond is not None and known_bool(cond, ctx) is not True) or not body_always_continues(
        body, ctx
    ):
        return False
    pending = any(
        is_sequence_op(n) and n.op_type not in ("SequenceInsert", "SequenceEmpty")
        for n in body.all_nodes()
    )
    # reads of a split or of a sequence of static length are what the access rules lower
    lowerable = all(
        _producer(v, "SplitToSequence") is not None or ctx.facts.length(v) is not None
        for v in outer_sequences(body)
    )
    return pending and lowerable


def _check_append(node: ir.Node, ctx: Context) -> tuple[AppendPlan, ...] | Refusal:
    """A plan for every carried list that can become scan outputs, from one analysis of the
    body: they are lowered in one rebuild of the Loop (one rebuild per list, each analysing
    the body anew and rewiring every output, was quadratic in the lists carried)."""
    body = loop_body(node)
    if _unroll_pending(node, ctx):
        return Refusal(
            "the trip count is static and the body still reads sequences: loop-unroll may "
            "apply once they are lowered"
        )
    reasons = []
    plans: list[AppendPlan] = []
    shapes: LoopShapes | None = None
    for index, init in enumerate(node.inputs[2:]):
        body_input = body.inputs[2 + index]
        if isinstance(body_input.type, ir.OptionalType):
            reasons.append(f"'{body_input.name}' is an optional value, not a sequence")
            continue
        if not (is_sequence_value(init) or is_sequence_value(body_input)):
            continue
        if shapes is None:
            shapes = analysed(node, ctx.facts.values, ctx.facts.loops)
        plan = _append_plan(node, index, shapes, ctx)
        if isinstance(plan, AppendPlan):
            plans.append(plan)
        elif not plans:
            reasons.append(f"carried sequence '{body_input.name}': {plan}")
    if plans:
        return _independent(plans)
    lockstep = lockstep_shapes(node, ctx) if reasons else None
    for index in range(len(node.inputs) - 2) if lockstep is not None else ():
        if is_sequence_value(node.inputs[2 + index]) or is_sequence_value(body.inputs[2 + index]):
            plan = _append_plan(node, index, lockstep, ctx)  # type: ignore[arg-type]
            if isinstance(plan, AppendPlan):
                return (plan,)  # one at a time: the hypothesis is proved anew on the rebuilt Loop
    return Refusal("; ".join(reasons) or "the loop carries no sequence")


def _independent(plans: list[AppendPlan]) -> tuple[AppendPlan, ...]:
    """`plans`, unless one plan's appended tensor or condition is made by a node another plan's
    rewrite removes (a SequenceLength of that list, which becomes the iteration count): then
    the first plan alone, and the others are planned anew on the rebuilt Loop."""
    removes: dict[int, int] = {}  # id of a node a rewrite removes -> that plan's position
    for position, plan in enumerate(plans):
        for removed in (plan.update, *(reader for reader, _ in plan.lengths)):
            removes[id(removed)] = position
    for position, plan in enumerate(plans):
        for value in (plan.tensor, plan.keep):
            if value is not None and removes.get(id(value.producer()), position) != position:
                return (plans[0],)
    return tuple(plans)


def _insert_of(value: ir.Value, sequence: ir.Value) -> ir.Node | str:
    """The SequenceInsert(sequence, t, position?) that produces `value`, or why not."""
    insert = value.producer()
    if insert is None or insert.op_type != "SequenceInsert" or insert.domain != "":
        return f"it becomes the output of {insert.op_type if insert else 'no node'}, not an insert"
    if insert.inputs[0] is not sequence or sequence in insert.inputs[1:]:
        return "it is inserted into another sequence"
    return insert


# ops that cannot fail on any input value: they may run in iterations whose branch would not
_TOTAL_UNARY = frozenset(
    {
        "Identity", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Sin", "Cos",
        "Erf", "Floor", "Ceil", "Round", "Sign", "Reciprocal", "Softplus", "Softsign", "Elu",
        "Selu", "LeakyRelu", "HardSigmoid", "Not", "Constant",
    }
)  # fmt: skip
_TOTAL_WITH_A_SCALAR = frozenset({"Add", "Sub", "Mul"})  # and Div on floats


def _hoistable(
    tensor: ir.Value,
    branch: ir.Graph,
    ctx: Context,
    runs_anyway: Callable[[ir.Node], bool] | None = None,
) -> tuple[ir.Node, ...] | str:
    """The nodes of `branch` that compute `tensor`, in order, when running them in every
    iteration cannot fail: unary elementwise ops, arithmetic with a one-element constant
    (a broadcast against it always works), and nodes `runs_anyway` vouches for (the caller
    knows they succeed in every iteration). Else why not."""
    needed: set[int] = set()
    pending = [tensor]
    while pending:
        value = pending.pop()
        node = value.producer()
        if node is None or node.graph is not branch or id(node) in needed:
            continue
        op = node.op_type if node.domain == "" else f"{node.domain}::{node.op_type}"
        present = [v for v in node.inputs if v is not None]
        scalar = any((a := ctx.facts.static(v)) is not None and a.size == 1 for v in present)
        total = op in _TOTAL_UNARY or (
            scalar
            and (
                op in _TOTAL_WITH_A_SCALAR
                or (op == "Div" and value.dtype is not None and value.dtype.is_floating_point())
            )
        )
        if op == "Cast":
            total = present[0].dtype not in (None, ir.DataType.STRING)
        if op == "Unsqueeze":
            total = _valid_unsqueeze(node, ctx)
        if not total and runs_anyway is not None:
            total = runs_anyway(node)
        if not total or node.attributes.get("value_string") is not None:
            return (
                f"a branch computes the appended tensor with {op}, which could fail in "
                "iterations where the branch does not run"
            )
        needed.add(id(node))
        pending.extend(present)
    return tuple(node for node in branch if id(node) in needed)


def _valid_unsqueeze(node: ir.Node, ctx: Context) -> bool:
    """An Unsqueeze whose axes are constants within range for its input's known rank."""
    data = node.inputs[0]
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = ctx.facts.values.get_ints(node.inputs[1])
    else:
        axes = node.attributes.get_ints("axes")
    if data is None or data.shape is None or axes is None:
        return False
    rank = len(data.shape) + len(axes)
    normal = [a % rank for a in axes if -rank <= a < rank]
    return len(normal) == len(axes) == len(set(normal))


def _branch_update(
    if_node: ir.Node, sequence: ir.Value, ctx: Context
) -> tuple[ir.Value, bool, tuple[ir.Node, ...]] | str:
    """(appended tensor, True when appended in the else branch, branch nodes to run in every
    iteration) for an If whose one branch appends to `sequence` and whose other branch passes
    it through; else why not."""
    appends = []
    for negate, attr in ((False, "then_branch"), (True, "else_branch")):
        branch = if_node.attributes[attr].as_graph()
        (out,) = branch.outputs
        producer = out.producer()
        while producer is not None and producer.op_type == "Identity" and producer.domain == "":
            out = producer.inputs[0]  # type: ignore[assignment]
            producer = out.producer() if out.graph is branch else None
        if out is sequence:
            continue
        insert = _insert_of(out, sequence)
        if isinstance(insert, str):
            return f"a branch of If '{if_node.name}': {insert}"
        if len(insert.inputs) > 2 and insert.inputs[2] is not None:
            return f"a branch of If '{if_node.name}' inserts at a given position"
        tensor = insert.inputs[1]
        assert tensor is not None
        hoist = _hoistable(tensor, branch, ctx)
        if isinstance(hoist, str):
            return f"If '{if_node.name}': {hoist}"
        appends.append((tensor, negate, hoist))
    if len(appends) != 1:
        return (
            f"both branches of If '{if_node.name}' append (if-append-both-branches)"
            if appends
            else f"neither branch of If '{if_node.name}' appends"
        )
    return appends[0]


def _append_plan(node: ir.Node, index: int, shapes: LoopShapes, ctx: Context) -> AppendPlan | str:
    body = loop_body(node)
    init = node.inputs[2 + index]
    body_input = body.inputs[2 + index]
    body_output = body.outputs[1 + index]
    assert init is not None
    initial = ctx.facts.elements(init)
    if initial is None:
        fact = ctx.facts.sequence(init)
        return f"its initial elements are not known ({getattr(fact, 'reason', 'no fact')})"
    update = body_output.producer()
    if body_input.is_graph_output() or update is None or update.graph is not body:
        return "the body does not update it with one node"
    counted = update.op_type != "If"  # one append in every iteration: lengths are counts
    lengths_before = [u.node for u in body_input.uses() if counted and _is_length(u.node, body)]
    lengths_after = [u.node for u in body_output.uses() if counted and _is_length(u.node, body)]
    uses = [u for u in body_input.uses() if u.node not in lengths_before]
    if [o for o in body.outputs if o is body_output] != [body_output] or any(
        u.node not in lengths_after for u in body_output.uses()
    ):
        return "the sequence after the update is also read in the body"
    prepend, keep, negate, hoist = False, None, False, ()
    if update.op_type == "If" and update.domain == "" and len(update.outputs) == 1:
        branches = {id(g) for b in subgraphs(update) for g in graphs_within(b)}
        if any(id(use.node.graph) not in branches for use in uses):
            return "the body reads it outside the If that appends to it"
        found = _branch_update(update, body_input, ctx)
        if isinstance(found, str):
            return found
        tensor, negate, hoist = found
        keep = update.inputs[0]
    else:
        if len(uses) != 1 or uses[0].node is not update:
            readers = sorted({use.node.op_type for use in uses})
            return f"the body reads it ({', '.join(readers) or 'passed through'}), not only appends"
        insert = _insert_of(body_output, body_input)
        if isinstance(insert, str):
            return insert
        position = insert.inputs[2] if len(insert.inputs) > 2 else None
        if position is not None:
            if ctx.facts.static_int(position) != 0:
                return "the body inserts at a position other than the end or the front"
            prepend = True
        tensor = insert.inputs[1]  # type: ignore[assignment]
    assert tensor is not None
    stacked_after = stacked_later(node.outputs[index])
    if not shapes.is_invariant(tensor):
        if not stacked_after:
            return (
                f"the appended tensor '{tensor.name}' may change shape between iterations "
                f"({shapes.reason(tensor)}), and the list is not stacked after the loop; a scan "
                "output needs one shape"
            )
        if keep is not None:  # the stack proves one shape for the tensors appended only
            return (
                f"the appended tensor '{tensor.name}' may change shape between iterations "
                f"({shapes.reason(tensor)}), and is appended in some of them only: the stack "
                "after the loop proves one shape for those alone, a scan output needs it in all"
            )
    apart_axis = None
    if initial and not stacked_after:
        shape = shapes.shape(tensor)
        if not isinstance(shape, tuple) or any(shapes.outer_shape(e) != shape for e in initial):
            apart_axis = _concatenated_apart(node, index, shape, initial, shapes, ctx)
            if apart_axis is None:
                return (
                    "its initial elements may differ in shape from the appended tensor, and "
                    "the list is not only concatenated (ConcatFromSequence, new_axis=0)"
                )
    dtype = tensor.dtype or element_dtype(init) or element_dtype(body_input)
    if dtype == ir.DataType.STRING:
        return STRING_SCANS
    if dtype is None:
        return "the element type is unknown"
    if not splittable(dtype) and not _split_folds(node.outputs[index], tensor):
        return unsplittable("scanned", dtype)
    shape = shapes.shape(tensor)
    element_shape = (
        tuple(d if isinstance(d, int) else None for d in shape)
        if isinstance(shape, tuple)
        else None
    )
    like_initial = (
        element_shape is not None
        and None in element_shape
        and bool(initial)
        and all(shapes.outer_shape(e) == shape for e in initial)
    )
    return AppendPlan(
        index,
        update,
        tensor,
        initial,
        dtype,
        prepend,
        keep,
        negate,
        hoist,
        element_shape,
        apart_axis,
        tuple((n, 0) for n in lengths_before) + tuple((n, 1) for n in lengths_after),
        like_initial,
        shapes.nonempty_joins,
    )


def stacked_later(output: ir.Value) -> bool:
    """Whether the list `output` is surely stacked after it is made: a ConcatFromSequence with
    new_axis=1 in the same graph reads it, and its result is needed (it reaches an output of
    that graph). A stack fails unless every element has one shape, so wherever the model runs
    to the end, the elements had one shape: a scan output may collect them even where the loop
    analysis cannot prove that shape the same in every iteration (where they differ, the Loop
    fails where the original's stack would)."""
    graph = output.graph
    for use in output.uses():
        reader = use.node
        if (
            reader.op_type == "ConcatFromSequence"
            and reader.domain == ""
            and reader.graph is graph
            and reader.attributes.get_int("new_axis", 0) == 1
            and _needed(reader, graph)
        ):
            return True
    return False


def _needed(node: ir.Node, graph: ir.Graph) -> bool:
    """Whether an output of `node` reaches an output of `graph` through the nodes of `graph`
    (a use inside a subgraph counts as a use by the node of `graph` that holds it)."""
    holders: dict[int, ir.Node] | None = None
    pending, seen = [node], {id(node)}
    while pending:
        current = pending.pop()
        for value in current.outputs:
            if value.is_graph_output() and value.graph is graph:
                return True
            for use in value.uses():
                reader = use.node
                if reader.graph is not graph:
                    if holders is None:
                        holders = {
                            id(inner): holder
                            for holder in graph
                            for sub in subgraphs(holder)
                            for inner in graphs_within(sub)
                        }
                    reader = holders.get(id(reader.graph))  # type: ignore[assignment]
                    if reader is None:
                        continue
                if id(reader) not in seen:
                    seen.add(id(reader))
                    pending.append(reader)
    return False


def _is_length(node: ir.Node, body: ir.Graph) -> bool:
    """A SequenceLength of the body itself (not of a branch inside it)."""
    return node.op_type == "SequenceLength" and node.domain == "" and node.graph is body


def _concatenated_apart(
    node: ir.Node,
    index: int,
    shape: object,
    initial: tuple[ir.Value, ...],
    shapes: LoopShapes,
    ctx: Context,
) -> int | None:
    """The axis a when the loop's list is read only by ConcatFromSequence(axis=a, new_axis=0)
    and its initial elements can be concatenated on their own before the appended tensors:
    of their rank, with the same dims except along a (`out = [torch.zeros(0)]` before
    `out.append(c.unsqueeze(0))` and `torch.cat(out)`). Else None."""
    output = node.outputs[index]
    if not isinstance(shape, tuple) or not shape or output.is_graph_output():
        return None
    if ctx.rewriter.opset(node.graph) < 14:  # the scanned part is merged by a Reshape with 0s
        return None
    rank = len(shape)
    written = concatenation_axes(output)
    if written is None or any(not -rank <= axis < rank for axis in written):
        return None
    axes = {axis % rank for axis in written}
    if len(axes) != 1:
        return None
    (axis,) = axes
    for element in initial:
        dims = shapes.outer_shape(element)
        if not isinstance(dims, tuple) or len(dims) != rank:
            return None
        if any(d != e for i, (d, e) in enumerate(zip(dims, shape)) if i != axis):
            return None
    return axis


# onnxruntime 1.32.0 keeps only the first iteration's strings in a Loop's scan output (the later
# rows come out empty): a list of strings is never scanned (the tensor form of lists takes it)
STRING_SCANS = "onnxruntime's Loop loses strings in scan outputs, so strings are not scanned"


# readers of SplitToSequence(S, axis=0, keepdims=0) that read S instead (rules/concat.py,
# rules/access.py) or, failing that, take the tensor form of the list: no SplitToSequence runs
_FOLDING_READERS = frozenset({"ConcatFromSequence", "SequenceAt", "SequenceLength"})


def _split_folds(output: ir.Value, appended: ir.Value) -> bool:
    """Whether the SplitToSequence left for the loop's list `output` goes away: every reader
    reads the stacked tensor instead (those folds need its rank: the appended tensor's, plus
    one), and the model does not return the list."""
    return (
        appended.shape is not None
        and not output.is_graph_output()
        and all(
            use.node.domain == "" and use.node.op_type in _FOLDING_READERS for use in output.uses()
        )
    )


def unsplittable(kind: str, dtype: ir.DataType | None) -> str:
    """Why a `kind` ("scanned", "batched") list of `dtype` elements is not given back as a list."""
    name = dtype.name.lower() if dtype is not None else "unknown"
    return (
        f"the {kind} list is read back through SplitToSequence, which onnxruntime 1.20 to 1.32 "
        f"cannot run for {name} elements"
    )


def splittable(dtype: ir.DataType | None) -> bool:
    """Whether every supported onnxruntime runs SplitToSequence for elements of `dtype`."""
    return dtype is not None and dtype.name.lower() in SPLIT_TO_SEQUENCE_TYPES


def _for_tract(ctx: Context) -> bool:
    return ctx.options.target == "tract"


def _to_scan(node: ir.Node, plans: tuple[AppendPlan, ...], ctx: Context) -> None:
    """Loop(.., s0=SequenceConstruct(e..), body: s1 = SequenceInsert(s, t))
        -> SplitToSequence(Concat(Stack(e..), Loop(.., body: scan output t)), keepdims=0)
    body: s1 = SequenceInsert(s, t, 0)   (a prepend)
        -> SplitToSequence(Concat(Reverse(scan of t), Stack(e..)), keepdims=0)
    body: s1 = If(c, then: SequenceInsert(s, t), else: s)   (a conditional append)
        -> SplitToSequence(Concat(Stack(e..), Compress(scan of t, scan of c, axis=0)), keepdims=0)
    (t computed in the branch by ops that cannot fail, such as t = x * 2, is computed in every
    iteration)
    """
    # every planned list of the Loop at once, in one rebuild of the Loop
    body = loop_body(node)
    builder = ctx.rewriter.before(node)
    # each list's body edits, in order: its carried input and output go, its scans come last
    counts = [_counts_rows(node.graph, plan, ctx) for plan in plans]  # type: ignore[arg-type]
    scans = [
        _scans_in_body(body, plan, plan.index - done, counted, ctx)
        for done, (plan, counted) in enumerate(zip(plans, counts))
    ]
    indices = [plan.index for plan in plans]
    dropped, new_outputs = rebuild_with_scans(node, indices, sum(map(len, scans)), ctx)
    first = len(node.outputs) - len(plans)
    runs = _runs_at_least_once(node, ctx)
    for plan, sequence, made, counted in zip(plans, dropped, scans, counts):
        scanned = new_outputs[first : first + len(made)]
        _after_loop(builder, plan, sequence, scanned, counted, ctx, runs)
        first += len(made)
    ctx.rewriter.fired_more("loop-append-to-scan", len(plans) - 1)


def _scans_in_body(
    body: ir.Graph, plan: AppendPlan, k: int, counted: bool, ctx: Context
) -> list[ir.Value]:
    """The body edits for one list, carried at position `k` now: the appended tensor (and the
    condition of a conditional append) become scan outputs at the end of the body's outputs,
    the update and the carried input and output go. Returns the scan outputs."""
    for hoisted in plan.hoist:  # from the appending branch to just before the If
        hoisted.graph.remove(hoisted)  # type: ignore[union-attr]
        body.insert_before(plan.update, hoisted)
    inner = ctx.rewriter.before(plan.update)
    # the appended tensor is the scan output itself where the body computes it, one launch less
    # per iteration; an Identity of a body input or an outer value. A tensor also carried stays
    # an Identity for tract, whose Scan then gives the carried value the stacked shape
    producer = plan.tensor.producer()
    carried = plan.tensor in body.outputs
    if producer is not None and producer.graph is body and not (carried and _for_tract(ctx)):
        scans = [plan.tensor]
    else:
        scans = [inner.op("Identity", [plan.tensor], name="scan_out")]
        scans[0].type = ir.TensorType(plan.dtype)
    if plan.keep is not None:  # negated after the loop, once (`_after_loop`)
        keep = plan.keep
        if keep.shape is None or len(keep.shape) != 0:
            keep = inner.op("Reshape", [keep, inner.ints([], "scalar")])
        made = keep.producer()
        if made is None or made.graph is not body or keep in body.outputs or keep in scans:
            keep = inner.op("Identity", [keep], name="scan_keep")
        keep.type = ir.TensorType(ir.DataType.BOOL)
        scans.append(keep)
    if counted and plan.keep is None:  # one true per iteration, summed after the loop
        true = inner.constant(np.array(True), "ran")
        scans.append(inner.op("Identity", [true], name="scan_ran"))
        scans[-1].type = ir.TensorType(ir.DataType.BOOL)
    for reader, after in plan.lengths:  # the length is a count of the iterations
        at = ctx.rewriter.before(reader)
        offset = at.constant(np.array(len(plan.initial) + after, np.int64), "initial_length")
        count = at.op("Add", [body.inputs[0], offset], name="length")
        count.type, count.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
        ctx.rewriter.replace(reader.outputs[0], count)
        body.remove(reader, safe=True)
    body.outputs.pop(1 + k)
    body.outputs.extend(scans)
    body.remove(plan.update, safe=True)
    for branch in subgraphs(plan.update):  # a removed If: its branches no longer read anything
        for inner_node in branch.all_nodes():
            for i in range(len(inner_node.inputs)):
                inner_node.replace_input_with(i, None)
    body.inputs.pop(2 + k)
    return scans


def _after_loop(
    builder: Builder,
    plan: AppendPlan,
    sequence: ir.Value,
    scanned: list[ir.Value],
    counted: bool,
    ctx: Context,
    runs: bool = False,
) -> None:
    """The list `sequence` the Loop no longer carries, made after it from its `scanned`
    outputs (the stacked tensors, then the conditions of a conditional append, or one true per
    iteration when `counted` and no condition); `counted`: the rows are reshaped to their
    count and the first initial element's shape (`_counted_rows`); `runs`: the Loop surely
    runs at least once (else a list that enters empty, proved of one shape through a Loop in
    the body or a Conv, keeps the failure of a ConcatFromSequence of it when empty,
    `_concatenate_nonempty`)."""
    stacked = scanned[0]
    stacked.type = ir.TensorType(plan.dtype)
    if not sequence.uses() and not sequence.is_graph_output():
        return
    mask = scanned[-1]  # the conditions, or one true per iteration
    if plan.negate:  # the condition of an If that appends in its else branch
        mask = builder.op("Not", [mask], name="kept")
        mask.type, mask.shape = scanned[-1].type, scanned[-1].shape
    if plan.keep is not None:
        stacked = builder.op("Compress", [stacked, mask], {"axis": 0})
    if plan.prepend:  # by a Gather for tract, which slices no run-time dim with step -1
        stacked = builder.reverse(stacked, by_gather=ctx.options.target == "tract")
    if counted:
        stacked = _counted_rows(builder, stacked, mask, plan.initial[0])
    stacked.type = ir.TensorType(plan.dtype)
    if plan.apart_axis is not None:  # the concatenations read the initial elements apart
        _concatenate_apart(sequence, stacked, plan, ctx)
        return
    may_be_empty = not plan.initial and (plan.keep is not None or not runs)
    if plan.nonempty_join and may_be_empty:
        _concatenate_nonempty(sequence, stacked, plan, ctx)
    if plan.initial:
        initial = [builder.unsqueeze(element, [0]) for element in plan.initial]
        parts = [stacked, *initial] if plan.prepend else [*initial, stacked]
        stacked = builder.op("Concat", parts, {"axis": 0})
        stacked.type = ir.TensorType(plan.dtype)
    if stacked.shape is None and plan.element_shape is not None:
        stacked.shape = ir.Shape([None, *plan.element_shape])
    elements = builder.op("SplitToSequence", [stacked], {"axis": 0, "keepdims": 0}, name="elements")
    elements.type = sequence.type or ir.SequenceType(ir.TensorType(plan.dtype))
    ctx.rewriter.replace(sequence, elements)


def _runs_at_least_once(node: ir.Node, ctx: Context) -> bool:
    """Whether Loop `node` surely runs its body once: a static trip count of at least one and
    a condition input always true."""
    count = ctx.facts.static_int(node.inputs[0]) if node.inputs and node.inputs[0] else None
    condition = node.inputs[1] if len(node.inputs) > 1 else None
    started = condition is None or known_bool(condition, ctx) is True
    return count is not None and count >= 1 and started


def _concatenate_nonempty(
    sequence: ir.Value, stacked: ir.Value, plan: AppendPlan, ctx: Context
) -> None:
    """ConcatFromSequence(<the loop's list>, ..) of a list that may be empty, read directly
    -> Reshape(J, Add(Shape(J), Gather(Range(0, n, 1), [0])))
       J = ConcatFromSequence(SplitToSequence(stacked, keepdims=0), ..), n = the rows stacked
    The specification and onnxruntime fail on the ConcatFromSequence of an empty list; the
    join of no stacked rows (`concat-of-unbind`, `stack-of-unbind`) would give an empty
    tensor. The Reshape to J's own shape (plus 0) keeps the data, and its Gather from a Range
    of n values fails for n = 0: the lowered model fails where the original does. The check
    is the last Reshape, so onnxruntime's fusion of consecutive Reshapes keeps it."""
    for use in list(sequence.uses()):
        reader = use.node
        if reader.op_type != "ConcatFromSequence" or reader.domain != "":
            continue
        builder = ctx.rewriter.before(reader)
        rows = builder.op("SplitToSequence", [stacked], {"axis": 0, "keepdims": 0}, name="rows")
        rows.type = sequence.type or ir.SequenceType(ir.TensorType(plan.dtype))
        attributes = {
            "axis": reader.attributes.get_int("axis", 0),
            "new_axis": reader.attributes.get_int("new_axis", 0),
        }
        joined = builder.op("ConcatFromSequence", [rows], attributes, name="appended")
        joined.type = ir.TensorType(plan.dtype)
        zero = builder.constant(np.array(0, np.int64), "zero")
        count = builder.op("Gather", [builder.op("Shape", [stacked]), zero], name="rows")
        one = builder.constant(np.array(1, np.int64), "one")
        numbers = builder.op("Range", [zero, count, one], name="row_numbers")
        nonempty = builder.op("Gather", [numbers, builder.ints([0], "first")], name="nonempty")
        target = builder.op("Add", [builder.op("Shape", [joined]), nonempty], name="same_shape")
        result = builder.op("Reshape", [joined, target], name="joined")
        result.type = reader.outputs[0].type or ir.TensorType(plan.dtype)
        if reader.outputs[0].shape is not None:
            result.shape = ir.Shape(list(reader.outputs[0].shape))
        ctx.rewriter.replace(reader.outputs[0], result)


def _counts_rows(graph: ir.Graph, plan: AppendPlan, ctx: Context) -> bool:
    """Whether the stacked rows are reshaped to their count and the initial elements' shape
    (`_counted_rows`): for a portable target but tract, where that shape is proved and
    symbolic, and the Reshape can take a dim of 0 (allowzero, opset 14)."""
    return (
        plan.like_initial
        and plan.apart_axis is None
        # not tract, whose shape analysis cannot read a count from values
        and ctx.options.target not in (*SPEED_FIRST_TARGETS, "tract")
        and ctx.rewriter.opset(graph) >= 14
    )


def _counted_rows(
    builder: Builder, stacked: ir.Value, marks: ir.Value, element: ir.Value
) -> ir.Value:
    """Reshape(stacked, Concat(ReduceSum(Cast(marks)), Shape(element)), allowzero=1): the rows
    the loop stacked (one per true of `marks`, a mask or one true per iteration), given the
    shape of the initial `element`, which the loop analysis proved theirs.

    OpenVINO (2026.4.1) gives the scan output of a Loop that runs zero times the dims 0 where
    the element's are symbolic ((0, 0, 3), not (0, 2, 3)), so a Concat with the initial
    elements fails; it drops a Reshape whose target reads the count from the rows' own shape
    (the same symbols, so a Reshape to the shape they have), but not this one."""
    ints = builder.op("Cast", [marks], {"to": int(ir.DataType.INT64)})
    count = builder.op("ReduceSum", [ints], {"keepdims": 1}, name="rows")  # over every axis
    dims = builder.op("Shape", [element])
    shape = builder.op("Concat", [count, dims], {"axis": 0}, name="rows_shape")
    return builder.op("Reshape", [stacked, shape], {"allowzero": 1}, name="counted")


def _concatenate_apart(
    sequence: ir.Value, stacked: ir.Value, plan: AppendPlan, ctx: Context
) -> None:
    """ConcatFromSequence(<the loop's list>, axis=a)
    -> Concat(e0..em, ConcatFromSequence(SplitToSequence(stacked, keepdims=0), axis=a), axis=a)
    (the appended tensors after the initial elements; before them for prepends). The inner
    concatenation of the stacked rows is a Reshape (`concat-of-unbind`)."""
    axis = plan.apart_axis
    assert axis is not None
    if stacked.shape is None and plan.element_shape is not None:
        stacked.shape = ir.Shape([None, *plan.element_shape])
    for use in list(sequence.uses()):
        reader = use.node
        builder = ctx.rewriter.before(reader)
        rows = builder.op("SplitToSequence", [stacked], {"axis": 0, "keepdims": 0}, name="rows")
        rows.type = sequence.type or ir.SequenceType(ir.TensorType(plan.dtype))
        joined = builder.op("ConcatFromSequence", [rows], {"axis": axis}, name="appended")
        joined.type = ir.TensorType(plan.dtype)
        parts = [joined, *plan.initial] if plan.prepend else [*plan.initial, joined]
        result = builder.op("Concat", parts, {"axis": axis}, name="with_initial")
        result.type = reader.outputs[0].type or ir.TensorType(plan.dtype)
        ctx.rewriter.replace(reader.outputs[0], result)


# -- an If whose branches both append ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BothAppend:
    index: int  # the If's output that both branches grow by one append
    inserts: tuple[ir.Node, ir.Node]  # the then and else branches' SequenceInsert


def _check_both_append(node: ir.Node, ctx: Context) -> BothAppend | Refusal:
    """The first sequence output of the If that both branches make by appending one tensor to
    the same outer sequence; the If may give other values too (`newids.append(t); i += 2` in
    one branch, `newids.append(u); i += 1` in the other: minbpe's `merge`)."""
    outputs = [k for k, out in enumerate(node.outputs) if is_sequence_value(out)]
    if not outputs:
        return Refusal("the If gives no sequence")
    reasons = []
    for k in outputs:
        found = _appends_at(node, k)
        if not isinstance(found, Refusal):
            return BothAppend(k, found)
        reasons.append(found.reason if len(outputs) == 1 else f"output {k}: {found.reason}")
    return Refusal("; ".join(reasons))


def _appends_at(node: ir.Node, k: int) -> tuple[ir.Node, ir.Node] | Refusal:
    inserts = []
    for attr in ("then_branch", "else_branch"):
        branch = node.attributes[attr].as_graph()
        out = branch.outputs[k]
        insert = out.producer()
        if insert is None or insert.graph is not branch or insert.op_type != "SequenceInsert":
            return Refusal(f"the {attr} does not end with a SequenceInsert")
        if len(insert.inputs) > 2 and insert.inputs[2] is not None:
            return Refusal(f"the {attr} inserts at a given position")
        if (
            insert.inputs[0] is None
            or insert.inputs[0].graph is branch
            or out.uses()
            or sum(o is out for o in branch.outputs) > 1
        ):
            return Refusal(f"the {attr} builds or reads the sequence it appends to")
        inserts.append(insert)
    if inserts[0].inputs[0] is not inserts[1].inputs[0]:
        return Refusal("the branches append to different sequences")
    return inserts[0], inserts[1]


def _both_append(node: ir.Node, plan: BothAppend, ctx: Context) -> None:
    """If(c, then: SequenceInsert(s, a), else: SequenceInsert(s, b))
    -> SequenceInsert(s, If(c, then: a, else: b))
    If(c, then: (u.., SequenceInsert(s, a), v..), else: (w.., SequenceInsert(s, b), z..))
    -> the If giving a | b in that place, its other values as before, and
       SequenceInsert(s, that value) after it"""
    k = plan.index
    sequence = plan.inserts[0].inputs[0]
    assert sequence is not None
    dtype = element_dtype(sequence) or plan.inserts[0].inputs[1].dtype  # type: ignore[union-attr]
    for insert in plan.inserts:
        branch = insert.graph
        assert isinstance(branch, ir.Graph)
        tensor = ctx.rewriter.before(insert).op("Identity", [insert.inputs[1]], name="appended")
        tensor.type = ir.TensorType(dtype or ir.DataType.FLOAT)
        branch.outputs[k] = tensor
        branch.remove(insert, safe=True)
    builder = ctx.rewriter.before(node)
    branches = {a: node.attributes[a].as_graph() for a in ("then_branch", "else_branch")}
    outputs = builder.ops(
        "If", [node.inputs[0]], branches, num_outputs=len(node.outputs), name="appended"
    )
    for old, new in zip(node.outputs, outputs, strict=True):
        new.type, new.shape = old.type, old.shape
    outputs[k].type = ir.TensorType(dtype or ir.DataType.FLOAT)
    outputs[k].shape = None
    appended = builder.op("SequenceInsert", [sequence, outputs[k]])
    appended.type = node.outputs[k].type
    for j, (old, new) in enumerate(zip(node.outputs, outputs, strict=True)):
        ctx.rewriter.replace(old, appended if j == k else new)


RULES = RuleSet(
    [
        Rule("loop-append-to-scan", "Loop", _check_append, _to_scan),
        Rule("if-append-both-branches", "If", _check_both_append, _both_append),
    ]
)
