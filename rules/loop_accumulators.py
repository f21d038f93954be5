"""A tensor a Loop grows by concatenation becomes a scan output, concatenated once after the loop.

    Loop(.., acc0, body: acc1 = Concat(acc, Unsqueeze(x, a), axis=a))
        -> Concat(acc0, Transpose?(Loop(.., body: scan output x)), axis=a)
    Loop(.., acc0, body: acc1 = Concat(acc, p, axis=a))          (p of one size k along a)
        -> Concat(acc0, Reshape(Transpose?(Loop(.., body: scan output p))), axis=a)
    body: acc1 = Concat(p, acc, axis=a)                           (prepends)
        -> the scan output reversed once after the loop, before acc0
    body: acc1 = If(c, then: Concat(acc, p, axis=a), else: acc)  (grows only sometimes)
        -> scan outputs of p and c, then Compress(scan of p, scan of c, axis=0)
    body: acc1 = If(c, then: acc, else: Concat(acc, p, axis=a))  (grows when c is false)
        -> the same with Not(scan of c) after the loop (once, not in every iteration)
    body: acc1, b1 = If(c, then: (Concat(acc, p), ..), else: (acc, ..))  (one If grows several)
        -> the same for acc; the If keeps its other values (each grown by this rule in turn)

This is the form a scripted `res = torch.cat((res, piece.unsqueeze(0)))` loop exports to
(torchvision's Mask R-CNN and Keypoint R-CNN do it): no sequence operator, but a carried value
whose shape grows, copied in every iteration (quadratic), which OpenVINO cannot convert when it
starts as a constant of size 0. A scan output stacks the pieces in linear time and keeps the
carried values of one shape. The Transpose moves the iteration axis to `a`; the Reshape merges it
with the piece's own axis `a` (of a size k that is the same in every iteration) and, when the
piece's other dims are not static, gives the result its true shape when no iteration runs
(onnxruntime then stacks zero-size dims). The accumulator may pass through Identity and Casts
to its own type on its way in.

The piece computed in the growing branch moves before the If when computing it in every
iteration cannot fail: total operators, a Gather of an outer tensor at the iteration number
along a dim the loop walks, or a node the body already runs in every iteration on the same
inputs (`if keep[i]: boxes.append(x[i])` after `keep[i]` was read); else the If stays, giving
the piece or zeros of its shape (an If that grows one value only: for several, the stacking and
masking after the loop cost more than the copying they save in the short loops seen).

The Loop carries one value fewer. Only the Concat (or If) may read the accumulator in the body;
after the loop anything may. A piece whose size along `a` may change between iterations stays an
accumulator (a scan output needs one shape), and the refusal says so. So does a piece of another
rank than the initial value, or of another known size outside the axis: the Concat in the body
fails whenever it runs and the model runs only where it never does (no iteration, a condition
never true), where a Concat after the loop would fail too.

`loop-append-to-concat` makes the opposite rewrite, from a list, for a piece whose shape changes
between iterations: this rule refuses those, so the two never undo each other.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.carried_rows import at_least_iterations
from seqlower.analysis.loop_shapes import INVARIANT, LoopShapes, analysed
from seqlower.analysis.masked_loops import gathers_at_iteration
from seqlower.cost import COPY_ELEMENTS, DYNAMIC_COUNT
from seqlower.ops import graphs_within, subgraphs
from seqlower.options import SPEED_FIRST_TARGETS
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_appends import STRING_SCANS, _hoistable
from seqlower.rules.loop_parts import loop_body, rebuild_with_scans
from seqlower.uses import use_count


@dataclasses.dataclass(frozen=True)
class AccumulatorPlan:
    index: int  # among the loop-carried values
    update: ir.Node  # what makes the next accumulator: the Concat, or an If around one
    concat: ir.Node  # the Concat(acc, piece) (in a branch of `update` when that is an If)
    piece: ir.Value  # what the scan output stacks: x of Unsqueeze(x, a), or the piece itself
    axis: int  # normalized, among the accumulator's dims
    rank: int  # of the accumulator
    size: int | None  # of the piece along `axis` (1 when unsqueezed); None: not static
    unsqueezed: bool  # `piece` lacks the axis (rank - 1 dims)
    static_dims: tuple[int, ...] | None  # of `piece`, when all static
    dtype: ir.DataType
    init_dims: tuple[int | None, ...]  # of the initial value, None where not static
    prepend: bool = False
    keep: ir.Value | None = None  # grows only when true (an If in the body)
    negate: bool = False  # `keep` is the condition of an If that grows in its else branch
    hoist: tuple[ir.Node, ...] = ()  # nodes of the growing branch that compute the piece
    filler: bool = False  # the If stays, its other branch giving zeros of the piece's shape
    passed: tuple[ir.Node, ...] = ()  # Identity and Cast nodes the accumulator goes through
    output: int = 0  # which of the If's values is the grown accumulator


def _check(node: ir.Node, ctx: Context) -> tuple[AccumulatorPlan, ...] | Refusal:
    """A plan for every carried tensor grown by concatenation, from one analysis of the body:
    they become scan outputs in one rebuild of the Loop (one rebuild per tensor, each analysing
    the body anew and rewiring every output, was quadratic in the tensors carried)."""
    body = loop_body(node)
    reasons = []
    plans: list[AccumulatorPlan] = []
    shapes: LoopShapes | None = None
    for index, init in enumerate(node.inputs[2:]):
        body_input = body.inputs[2 + index]
        if init is None or not isinstance(body_input.type or init.type, ir.TensorType):
            continue
        if shapes is None:
            shapes = analysed(node, ctx.facts.values, ctx.facts.loops)
        plan = _plan(node, index, shapes, ctx)
        if isinstance(plan, AccumulatorPlan):
            plans.append(plan)
        elif plan and not plans:
            reasons.append(f"carried tensor '{body_input.name}': {plan}")
    if plans:
        return _independent(plans)
    return Refusal("; ".join(reasons) or "the loop grows no carried tensor by concatenation")


def _independent(plans: list[AccumulatorPlan]) -> tuple[AccumulatorPlan, ...]:
    """`plans`, unless two grow by one node (an If giving both), or one's piece or condition
    is made by a node another's rewrite removes or rebuilds: then the first plan alone, and the
    others are planned anew on the rebuilt Loop."""
    owner: dict[int, int] = {}  # id of a node a rewrite removes or rebuilds -> its plan
    for position, plan in enumerate(plans):
        for node in (plan.update, plan.concat, *plan.passed, _unsqueeze(plan)):
            if node is None:
                continue
            if owner.setdefault(id(node), position) != position:
                return (plans[0],)
    for position, plan in enumerate(plans):
        for value in (plan.piece, plan.keep):
            if value is not None and owner.get(id(value.producer()), position) != position:
                return (plans[0],)
    return tuple(plans)


def _transparent(node: ir.Node | None, dtype: ir.DataType | None) -> bool:
    """Identity, or a Cast to the type its input already has."""
    if node is None or node.domain != "":
        return False
    if node.op_type == "Identity":
        return True
    source = node.inputs[0] if node.inputs else None
    return (
        node.op_type == "Cast"
        and dtype is not None
        and source is not None
        and source.dtype == dtype
        and node.attributes.get_int("to", 0) == int(dtype)
    )


def _strip(value: ir.Value, dtype: ir.DataType | None) -> tuple[ir.Value, list[ir.Node]]:
    """`value` with the Identity and same-type Casts that produced it peeled off."""
    passed = []
    producer = value.producer()
    while _transparent(producer, dtype) and producer is not None and producer.inputs[0]:
        passed.append(producer)
        value = producer.inputs[0]  # type: ignore[assignment]
        producer = value.producer()
    return value, passed


def _only_read_by(value: ir.Value, allowed: set[int]) -> bool:
    """True when every reader of `value` (through the transparent nodes in `allowed`) is a node
    in `allowed`."""
    for use in value.uses():
        if id(use.node) not in allowed:
            return False
        if use.node.op_type in ("Identity", "Cast") and not _only_read_by(
            use.node.outputs[0], allowed
        ):
            return False
    return True


def _plan(node: ir.Node, index: int, shapes: LoopShapes, ctx: Context) -> AccumulatorPlan | str:
    """The plan for carried value `index`, or why not ("" when it is plainly no accumulator:
    no Concat or If makes its next value)."""
    body = loop_body(node)
    init = node.inputs[2 + index]
    body_input, body_output = body.inputs[2 + index], body.outputs[1 + index]
    assert init is not None
    dtype = init.dtype or body_input.dtype
    update = body_output.producer()
    if update is None or update.graph is not body or update.domain != "":
        return ""
    if update.op_type not in ("Concat", "If"):
        return ""
    if [o for o in body.outputs if o is body_output] != [body_output] or body_output.uses():
        return "its next value is also read in the body"
    keep, negate, hoist, output = None, False, (), 0
    if update.op_type == "If":
        output = list(update.outputs).index(body_output)
        found = _branch_concat(update, output, body_input, dtype)
        if isinstance(found, str):
            return found
        concat, negate, branch, passed = found
        keep = update.inputs[0]
    else:
        concat, passed = update, []
    if len(concat.inputs) != 2 or None in concat.inputs:
        return "its Concat joins more than two tensors"
    first, first_passed = _strip(concat.inputs[0], dtype)  # type: ignore[arg-type]
    second, second_passed = _strip(concat.inputs[1], dtype)  # type: ignore[arg-type]
    if first is body_input and second is not body_input:
        prepend, piece, passed = False, concat.inputs[1], [*passed, *first_passed]
    elif second is body_input and first is not body_input:
        prepend, piece, passed = True, concat.inputs[0], [*passed, *second_passed]
    else:
        return "its Concat does not join it with one other tensor"
    allowed = {id(n) for n in (*passed, concat)}
    if not _only_read_by(body_input, allowed):
        readers = sorted({use.node.op_type for use in body_input.uses()})
        return f"the body reads it ({', '.join(readers)}), not only concatenates"
    assert piece is not None
    rank = _rank(init, body_input, concat, shapes)
    if rank is None:
        return "its rank is not known"
    axis = concat.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return f"axis {axis} is out of range for rank {rank}"
    axis %= rank
    core, _ = _strip(piece, dtype)
    x = _unsqueezed_on(core, axis, rank, ctx)
    if x is not None:
        scanned, size, unsqueezed = x, 1, True
    else:
        shape = shapes.shape(piece)
        if isinstance(shape, tuple):
            dim = shape[axis] if len(shape) == rank else None
            invariant = dim is not None
        else:
            dim, invariant = None, shape is INVARIANT
        if not invariant:
            return (
                f"the size of the concatenated tensor '{piece.name}' along axis {axis} may "
                "change between iterations (a scan output needs one shape)"
            )
        scanned, unsqueezed = piece, False
        size = dim if isinstance(dim, int) else None
    filler = False
    if keep is not None:
        hoist = _hoistable(scanned, branch, ctx, _runs_anyway(node, ctx))
        if isinstance(hoist, str):
            if size is None:
                return f"If '{update.name}': {hoist}, and the piece's size is not static"
            if len(update.outputs) > 1:
                # the If would stay, giving pieces or zeros for each accumulator in turn: the
                # stacking and masking after the loop then cost more than the copying saved
                # in the short inner loops this is seen in (a tree LSTM's children: 1.10x ->
                # 0.96x measured)
                return f"If '{update.name}' grows several values and {hoist}"
            hoist, filler = (), True  # the other branch gives zeros of the piece's shape
    if dtype is None or (scanned.dtype is not None and scanned.dtype != dtype):
        return "the element type is unknown or changes"
    if dtype == ir.DataType.STRING:
        return STRING_SCANS
    shape = shapes.shape(scanned)
    if isinstance(shape, tuple) and any(d == 0 for d in shape):
        return "the piece has a dim of size 0 (nothing to scan)"
    clash = _clash(init, scanned, (shape, shapes.outer_shape(init)), axis, rank, unsqueezed, ctx)
    if clash:
        return clash
    static_dims = (
        tuple(shape)
        if isinstance(shape, tuple) and all(isinstance(d, int) for d in shape)
        else None
    )
    plan = AccumulatorPlan(
        index, update, concat, scanned, axis, rank, size, unsqueezed, static_dims,  # type: ignore[arg-type]
        dtype, _static_dims(init, rank, ctx), prepend, keep, negate, hoist, filler,
        tuple(passed), output,
    )  # fmt: skip
    if ctx.rewriter.opset(node.graph) < 14 and _may_reshape_to_zero(plan):
        return (
            "a dim of the result may be 0, and before opset 14 a Reshape reads 0 as "
            '"copy the input\'s dim" (allowzero is opset 14)'
        )
    saved, count = _launches_saved(node, plan, ctx)
    if saved < 0 and ctx.options.target in SPEED_FIRST_TARGETS:
        return (
            f"over {count:g} iterations the accumulator costs fewer operator launches than a "
            'scan output and the reshaping after the loop (docs/performance.md, "Never slower")'
        )
    return plan


def _clash(
    init: ir.Value,
    piece: ir.Value,
    facts: tuple[object, object],
    axis: int,
    rank: int,
    unsqueezed: bool,
    ctx: Context,
) -> str:
    """Why the pieces cannot be joined to the initial value ("" when nothing known says so):
    another rank, or another known size outside the axis. The Concat in the body then fails
    whenever it runs, and the model runs only while it never does (a loop of no iteration, a
    condition never true); joined once after the loop it would fail even then, and the
    lowered model would not even be well typed."""
    piece_fact, init_fact = facts
    pieces = [tuple(s) for s in (piece_fact, piece.shape) if isinstance(s, tuple | ir.Shape)]
    starts = [tuple(s) for s in (init_fact, init.shape) if isinstance(s, tuple | ir.Shape)]
    array = ctx.facts.static(init)
    if array is not None:
        starts.append(tuple(int(d) for d in array.shape))
    for dims in pieces:
        joined = (*dims[:axis], None, *dims[axis:]) if unsqueezed else dims
        for start in [*starts, (None,) * rank]:
            if len(joined) != len(start):
                return (
                    f"its initial value has rank {len(start)} and the pieces joined to it "
                    f"rank {len(joined)}: the Concat fails whenever it runs"
                )
            for at, (a, b) in enumerate(zip(start, joined)):
                if at != axis and isinstance(a, int) and isinstance(b, int) and a != b:
                    return (
                        f"its initial value has size {a} along axis {at} and the pieces "
                        f"joined to it size {b}: the Concat fails whenever it runs"
                    )
    return ""


def _may_reshape_to_zero(plan: AccumulatorPlan) -> bool:
    """Whether the Reshape after the loop (`_after_loop`) may be given a dim of 0 other than
    the iteration count: the piece's size along the axis, or a dim of the initial value."""
    if plan.unsqueezed and plan.static_dims is not None:
        return False  # no Reshape
    others = [d for axis, d in enumerate(plan.init_dims) if axis != plan.axis]
    return not (plan.size or 0) > 0 or any(not isinstance(d, int) or d == 0 for d in others)


def _static_dims(value: ir.Value, rank: int, ctx: Context) -> tuple[int | None, ...]:
    array = ctx.facts.static(value)
    if array is not None and array.ndim == rank:
        return tuple(int(d) for d in array.shape)
    if value.shape is not None and len(value.shape) == rank:
        return tuple(d if isinstance(d, int) else None for d in value.shape)
    return (None,) * rank


def _rank(init: ir.Value, body_input: ir.Value, concat: ir.Node, shapes: LoopShapes) -> int | None:
    for value in (init, concat.outputs[0], body_input):
        if value.shape is not None:
            return len(value.shape)
    shape = shapes.outer_shape(init)
    return len(shape) if isinstance(shape, tuple) else None


def _unsqueezed_on(value: ir.Value, axis: int, rank: int, ctx: Context) -> ir.Value | None:
    """x when `value` is Unsqueeze(x, [axis]) (axis among the `rank` dims of the result)."""
    node = value.producer()
    if node is None or node.op_type != "Unsqueeze" or node.domain != "" or not node.inputs[0]:
        return None
    if len(node.inputs) > 1:
        axes = ctx.facts.static(node.inputs[1])
        found = None if axes is None else [int(a) for a in axes.reshape(-1)]
    else:
        attr = node.attributes.get("axes")
        found = None if attr is None else list(attr.as_ints())
    if found is None or len(found) != 1 or found[0] % rank != axis:
        return None
    return node.inputs[0]


def _branch_concat(
    if_node: ir.Node, output: int, body_input: ir.Value, dtype: ir.DataType | None
) -> tuple[ir.Node, bool, ir.Graph, list[ir.Node]] | str:
    """(the Concat, True when it is in the else branch, that branch, the transparent nodes
    passed) for an If whose one branch grows the accumulator (its value `output`) and whose
    other passes it through; else why not."""
    grows = []
    passed: list[ir.Node] = []
    branches = {id(g) for b in subgraphs(if_node) for g in graphs_within(b)}
    for negate, attr in ((False, "then_branch"), (True, "else_branch")):
        branch = if_node.attributes[attr].as_graph()
        value, stripped = _strip(branch.outputs[output], dtype)
        passed += stripped
        if value is body_input:
            continue
        concat = value.producer()
        if concat is None or concat.graph is not branch or concat.op_type != "Concat":
            return f"a branch of If '{if_node.name}' gives neither it nor a Concat with it"
        grows.append((concat, negate, branch))
    if len(grows) != 1:
        return f"both branches of If '{if_node.name}' change it" if grows else ""
    concat, negate, branch = grows[0]
    if any(id(use.node.graph) not in branches for use in body_input.uses()):
        return "the body reads it outside the If that grows it"
    return concat, negate, branch, passed


def _runs_anyway(loop: ir.Node, ctx: Context) -> Callable[[ir.Node], bool]:
    """Whether a node of a branch in `loop`'s body would succeed in every iteration: a Gather
    of an outer tensor at the iteration number along a dim the loop walks, or along a dim
    proved to hold at least the trip count's entries (`seqlower.analysis.carried_rows`: the
    states an enclosing loop made so far, read by a loop over their positions), or a node
    the body runs in every iteration (at its top level) with the same operator, attributes
    and inputs."""
    body = loop_body(loop)
    walked = {id(g) for g in gathers_at_iteration(loop, ctx.facts.values)}
    walked.update(id(g) for g in _gathers_within_rows(loop, ctx))
    twins: dict[tuple, ir.Node] = {}
    for node in body:
        key = _node_key(node)
        if key is not None:
            twins.setdefault(key, node)

    def safe(node: ir.Node) -> bool:
        if id(node) in walked:
            return True
        key = _node_key(node)
        return key is not None and key in twins

    return safe


def _gathers_within_rows(loop: ir.Node, ctx: Context) -> list[ir.Node]:
    """The Gathers in `loop`'s body (at any depth of its branches) of an outer tensor at the
    iteration number j, along an axis proved to hold at least the trip count M of entries:
    0 <= j < M, so each succeeds in every iteration."""
    body = loop_body(loop)
    trip = loop.inputs[0] if loop.inputs else None
    owner = ctx.facts.list_lengths().owner
    found = []
    for use in body.inputs[0].uses():
        gather, data = use.node, use.node.inputs[0]
        if gather.op_type != "Gather" or gather.domain != "" or use.idx != 1 or data is None:
            continue
        if data.shape is None or not len(data.shape) or _within(data, body):
            continue
        rank = len(data.shape)
        axis = gather.attributes.get_int("axis", 0)
        if -rank <= axis < rank and at_least_iterations(trip, data, axis % rank, owner):
            found.append(gather)
    return found


def _within(value: ir.Value, body: ir.Graph) -> bool:
    """Whether `value` is made in `body` or a graph nested in it."""
    return value.graph is not None and any(value.graph is g for g in graphs_within(body))


def _node_key(node: ir.Node) -> tuple | None:
    """What makes two nodes compute the same thing (None for nodes with subgraphs or tensor
    attributes, never compared)."""
    attributes = []
    for name, attr in sorted(node.attributes.data.items()):
        if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS, ir.AttributeType.TENSOR):
            return None
        value = attr.value
        attributes.append((name, tuple(value) if isinstance(value, list | tuple) else value))
    inputs = tuple(id(v) if v is not None else None for v in node.inputs)
    return (node.domain, node.op_type, node.overload, inputs, tuple(attributes))


def _launches_saved(node: ir.Node, plan: AccumulatorPlan, ctx: Context) -> tuple[float, float]:
    """(operator launches the rewrite saves per run, estimated as `seqlower.cost` does, with
    the copying of the growing accumulator counted as it counts a SequenceInsert's; the
    iterations assumed)."""
    trip = ctx.facts.static_int(node.inputs[0]) if node.inputs and node.inputs[0] else None
    count = float(trip) if trip is not None and 0 <= trip <= 2**31 - 1 else DYNAMIC_COUNT
    body = loop_body(node)
    per_iteration = (count / 2) / COPY_ELEMENTS  # the copying
    per_iteration += 0 if plan.filler else 1  # the Concat
    per_iteration += sum(1 for passed in plan.passed if passed.graph is body)
    producer = plan.piece.producer()
    inside = producer is not None and (producer.graph is body or producer in plan.hoist)
    if not (inside or plan.filler):
        per_iteration -= 1  # an Identity gives it as a scan output
    unsqueeze = _unsqueeze(plan)
    if unsqueeze is not None and use_count(unsqueeze.outputs[0]) == 1:
        per_iteration += 1  # the Unsqueeze goes
    if plan.keep is not None:  # the condition as a scalar scan output
        scalar = plan.keep.shape is not None and len(plan.keep.shape) == 0
        keep = plan.keep.producer()
        inside = keep is not None and keep.graph is body
        per_iteration -= (not scalar) + (not inside)
    after = 1 + (plan.keep is not None) + plan.negate + plan.prepend + (plan.axis != 0)
    if not plan.unsqueezed or plan.static_dims is None:
        after += 5  # Reshape to the shape made of the pieces' count and the initial dims
    if plan.filler:
        after += 3  # ConstantOfShape and its shape, before the loop
    return count * per_iteration - after, count


def _to_scan_output(node: ir.Node, plans: tuple[AccumulatorPlan, ...], ctx: Context) -> None:
    """Loop(.., acc0, body: acc1 = Concat(acc, Unsqueeze(x, a), axis=a))
        -> Concat(acc0, Transpose?(Loop(.., body: scan output x)), axis=a)
    body: acc1 = Concat(acc, p, axis=a)   (p of one size k along a in every iteration)
        -> Concat(acc0, Reshape(Transpose?(scan of p), merging the iterations into a), axis=a)
    body: acc1 = Concat(p, acc, axis=a)   (a prepend)
        -> Concat(reversed scan of p, acc0, axis=a)
    body: acc1 = If(c, then: Concat(acc, p, axis=a), else: acc)   (grows only sometimes)
        -> Concat(acc0, Compress(scan of p, scan of c, axis=0) .., axis=a)
    body: acc1 = If(c, then: acc, else: Concat(acc, p, axis=a))
        -> the same with Not(scan of c), once after the loop
    (p computed in the branch by ops that cannot fail is computed in every iteration)
    """
    # every planned tensor of the Loop at once, in one rebuild of the Loop
    body = loop_body(node)
    builder = ctx.rewriter.before(node)
    # one If growing several values: its condition is scanned once (by an earlier rewrite of
    # this Loop, whose scan output it is already, or by the first plan here)
    outputs_now, carried = list(body.outputs), len(node.inputs) - 2
    scanned_before = {
        id(plan.keep): outputs_now.index(plan.keep) - 1 - len(plans)
        for plan in plans
        if plan.keep is not None and plan.keep in outputs_now[1 + carried :]
    }
    scans, conditions = [], set(scanned_before)
    for done, plan in enumerate(plans):
        shared = plan.keep is not None and id(plan.keep) in conditions
        scans.append(_scans_in_body(node, body, builder, plan, plan.index - done, ctx, shared))
        if plan.keep is not None:
            conditions.add(id(plan.keep))
    indices = [plan.index for plan in plans]
    dropped, outputs = rebuild_with_scans(node, indices, sum(map(len, scans)), ctx)
    first = len(node.outputs) - len(plans)
    by_gather = ctx.options.target == "tract"
    # not tract, whose shape analysis cannot read a count from values
    counted = ctx.options.target not in (*SPEED_FIRST_TARGETS, "tract")
    stacked_conditions = {key: outputs[index] for key, index in scanned_before.items()}
    # on the onnxruntime target, a mask's negation and the count of what it keeps are made
    # once for every tensor it compresses (`_reader`, `_after_loop`)
    speed_first = ctx.options.target in SPEED_FIRST_TARGETS
    for plan, grown, made in zip(plans, dropped, scans):
        scanned = outputs[first : first + len(made)]
        first += len(made)
        stacked = scanned[0]
        stacked.type = ir.TensorType(plan.dtype)
        keep = scanned[-1]
        if plan.keep is not None:  # the first plan of a condition scans it
            keep = stacked_conditions.setdefault(id(plan.keep), keep)
        if not grown.uses() and not grown.is_graph_output():
            continue
        init = node.inputs[2 + plan.index]
        assert init is not None
        if plan.negate:  # the condition of an If that grows in its else branch, negated once
            flags = keep
            keep = _reader(flags, "Not") if speed_first else None
            if keep is not None:
                _move_up(builder, keep)
            else:
                keep = builder.op("Not", [flags], name="kept")
                keep.type, keep.shape = flags.type, flags.shape
        result = _after_loop(builder, plan, stacked, keep, init, by_gather, counted, speed_first)
        result.type = ir.TensorType(plan.dtype)
        ctx.rewriter.replace(grown, result)
    ctx.rewriter.fired_more("loop-concat-to-scan", len(plans) - 1)


def _scans_in_body(
    node: ir.Node,
    body: ir.Graph,
    builder: Builder,
    plan: AccumulatorPlan,
    k: int,
    ctx: Context,
    shared: bool = False,
) -> list[ir.Value]:
    """The body edits for one tensor, carried at position `k` now: the piece (and the
    condition of a conditional growth, unless `shared`: an earlier plan scans it) become scan
    outputs at the end of the body's outputs, the growth and the carried input and output go.
    Returns the scan outputs."""
    init = node.inputs[2 + plan.index]
    assert init is not None
    for hoisted in plan.hoist:  # from the growing branch to just before the If
        hoisted.graph.remove(hoisted)  # type: ignore[union-attr]
        body.insert_before(plan.update, hoisted)
    inner = ctx.rewriter.before(plan.update)
    if plan.filler:
        scanned = _branch_pieces(plan, _filler(builder, plan, init), ctx)
    else:
        scanned = _body_output(plan.piece, body, inner, "scan_out")
    scanned.type = ir.TensorType(plan.dtype)
    if plan.static_dims is not None:
        scanned.shape = ir.Shape(plan.static_dims)
    scans = [scanned]
    if plan.keep is not None and not shared:
        keep = plan.keep
        if keep.shape is None or len(keep.shape) != 0:
            keep = inner.op("Reshape", [keep, inner.ints([], "scalar")])
        keep = _body_output(keep, body, inner, "scan_keep")
        keep.type = ir.TensorType(ir.DataType.BOOL)
        scans.append(keep)
    body.outputs.pop(1 + k)
    body.outputs.extend(scans)
    unsqueeze = _unsqueeze(plan)
    if not plan.filler:
        _remove_update(plan, ctx)
    _remove_unread([plan.concat, *plan.passed, unsqueeze])
    body.inputs.pop(2 + k)
    return scans


def _body_output(value: ir.Value, body: ir.Graph, inner: Builder, name: str) -> ir.Value:
    """`value` as a new output of `body`: itself when the body computes it and does not give it
    already, else an Identity of it."""
    producer = value.producer()
    if producer is None or producer.graph is not body or value in body.outputs:
        return inner.op("Identity", [value], name=name)
    return value


def _filler(builder: Builder, plan: AccumulatorPlan, init: ir.Value) -> ir.Value:
    """Zeros of the piece's shape, made before the loop: the initial value's dims, with the
    piece's size at the axis (or without the axis for an unsqueezed piece)."""
    parts = []
    if plan.axis > 0:
        parts.append(_init_dims(builder, plan, init, 0, plan.axis))
    if not plan.unsqueezed:
        parts.append(builder.ints([plan.size or 0]))
    if plan.axis + 1 < plan.rank:
        parts.append(_init_dims(builder, plan, init, plan.axis + 1, plan.rank))
    shape = parts[0] if len(parts) == 1 else builder.op("Concat", parts, {"axis": 0})
    if not parts:
        shape = builder.ints([])
    zero = ir.Tensor(np.zeros(1, plan.dtype.numpy()))
    filler = builder.op("ConstantOfShape", [shape], {"value": zero}, name="filler")
    filler.type = ir.TensorType(plan.dtype)
    return filler


def _branch_pieces(plan: AccumulatorPlan, filler: ir.Value, ctx: Context) -> ir.Value:
    """The If gives the piece where it grew the accumulator and `filler` where it passed it
    through; its output is then what the scan output stacks."""
    for attr in ("then_branch", "else_branch"):
        branch = plan.update.attributes[attr].as_graph()
        grows = plan.concat.graph is branch
        anchor = plan.concat if grows else None
        if anchor is None:
            out = ir.Node("", "Identity", [filler], name=ctx.rewriter.names.fresh("filler"))
            out.outputs[0].name = ctx.rewriter.names.fresh("filler")
            branch.append(out)
            value = out.outputs[0]
        else:
            value = ctx.rewriter.before(anchor).op("Identity", [plan.piece], name="piece")
        value.type = ir.TensorType(plan.dtype)
        branch.outputs[plan.output] = value
    result = plan.update.outputs[plan.output]
    result.type = ir.TensorType(plan.dtype)
    result.shape = None
    return result


def _unsqueeze(plan: AccumulatorPlan) -> ir.Node | None:
    if not plan.unsqueezed:
        return None
    piece = plan.concat.inputs[0 if plan.prepend else 1]
    assert piece is not None
    return _strip(piece, plan.dtype)[0].producer()


def _remove_update(plan: AccumulatorPlan, ctx: Context) -> None:
    """Remove the Concat, or the If around it (whose branches then read nothing); an If that
    gives other values too is rebuilt without the grown one."""
    update = plan.update
    if len(update.outputs) > 1:
        _drop_if_output(update, plan.output, ctx)
        return
    for branch in subgraphs(update):
        for inner in branch.all_nodes():
            for i in range(len(inner.inputs)):
                inner.replace_input_with(i, None)
    update.graph.remove(update, safe=True)  # type: ignore[union-attr]


def _drop_if_output(update: ir.Node, output: int, ctx: Context) -> None:
    """Replace If `update` by one over the same branches without its value `output` (which
    nothing reads any more)."""
    branches = {}
    for attr in ("then_branch", "else_branch"):
        branch = update.attributes[attr].as_graph()
        branch.outputs.pop(output)
        branches[attr] = branch
    condition = update.inputs[0]
    assert condition is not None
    rebuilt = ctx.rewriter.before(update).ops(
        "If", [condition], branches, num_outputs=len(update.outputs) - 1, name="if"
    )
    kept = [v for k, v in enumerate(update.outputs) if k != output]
    for old, new in zip(kept, rebuilt, strict=True):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)
    # the branches moved to the new If: detach the old one without touching them
    update.graph.remove(update, safe=True)  # type: ignore[union-attr]


def _remove_unread(nodes: list[ir.Node | None]) -> None:
    """Remove those of `nodes` (in order: each may feed the ones before it) that are still in a
    graph and whose outputs nothing reads any more."""
    for node in nodes:
        graph = node.graph if node is not None else None
        if graph is None or any(o.uses() or o.is_graph_output() for o in node.outputs):  # type: ignore[union-attr]
            continue
        graph.remove(node, safe=True)  # type: ignore[arg-type]


def _after_loop(
    builder: Builder,
    plan: AccumulatorPlan,
    stacked: ir.Value,
    keep: ir.Value,
    init: ir.Value,
    by_gather: bool = False,
    counted: bool = False,
    shared_count: bool = False,
) -> ir.Value:
    """The grown tensor from the stacked pieces (iterations first) and the initial value; a
    prepend is reversed by a Gather when `by_gather` (for tract), else by a Slice
    (`Builder.reverse`). When `counted`, the pieces kept by a mask are counted from the mask
    (`_grown_shape`). With `shared_count` (the onnxruntime target), the count is read
    from the first Compress by the same mask of a scan output of the same Loop
    (`Shape(.., 0, 1)`, which the merge of duplicates then makes one node with the others):
    each scan output of a Loop has a row per iteration, so a mask keeps as many of each."""
    kept = None
    if plan.keep is not None:
        counts = shared_count and not counted and _reshaped(plan)
        first = _reader(keep, "Compress") if counts else None
        if first is not None:
            _move_up(builder, first)
        stacked = builder.op("Compress", [stacked, keep], {"axis": 0})
        if counts:
            kept = _dims(builder, stacked if first is None else first, 0, 1)
    if plan.prepend:
        stacked = builder.reverse(stacked, by_gather=by_gather)
    stacked_rank = plan.rank if plan.unsqueezed else plan.rank + 1
    if plan.axis != 0:  # the iterations next to the piece's own axis
        perm = [*range(1, plan.axis + 1), 0, *range(plan.axis + 1, stacked_rank)]
        stacked = builder.op("Transpose", [stacked], {"perm": perm})
    if _reshaped(plan):
        # allowzero (opset 14): a dim of 0 (an empty table row, a piece of size 0) is a size,
        # not "copy the input's dim"
        allowzero = {"allowzero": 1} if builder.opset >= 14 else {}
        if counted and plan.keep is not None:
            kept = _count_kept(builder, keep)
        shape = _grown_shape(builder, plan, stacked, init, kept)
        stacked = builder.op("Reshape", [stacked, shape], allowzero)
    stacked.type = ir.TensorType(plan.dtype)
    if _starts_empty(plan):  # nothing to join the pieces to
        return stacked
    parts = [stacked, init] if plan.prepend else [init, stacked]
    return builder.op("Concat", parts, {"axis": plan.axis}, name="grown")


def _reader(value: ir.Value, op_type: str) -> ir.Value | None:
    """The output of a node of `op_type` in `value`'s graph that reads `value` as its first
    input: a Not of it, or a Compress along axis 0 by it (`value` its second input) of a scan
    output of the Loop that makes `value` (or the mask `value` negates); None where there is
    none."""
    source = value.producer()
    if source is not None and source.op_type == "Not" and source.inputs[0] is not None:
        source = source.inputs[0].producer()
    for user, index in value.uses():
        if user.graph is not value.graph or user.domain != "" or user.op_type != op_type:
            continue
        if op_type == "Not" and index == 0:
            return user.outputs[0]
        if op_type != "Compress" or index != 1 or len(user.inputs) != 2:
            continue
        axis = user.attributes.get("axis")
        data = user.inputs[0]
        if axis is None or axis.as_int() != 0 or data is None or source is None:
            continue
        if data.producer() is source and source.op_type == "Loop":
            return user.outputs[0]
    return None


def _move_up(builder: Builder, value: ir.Value) -> None:
    """Move the node that makes `value` (found by `_reader`: made by an earlier rewrite of this
    Loop, after where this one emits) to where `builder` emits: the Loop that makes its inputs
    (or the Not it reads, moved first) is there already."""
    node = value.producer()
    if node is not None and builder.anchor is not None and node is not builder.anchor:
        builder.graph.remove(node)
        builder.graph.insert_before(builder.anchor, node)


def _reshaped(plan: AccumulatorPlan) -> bool:
    """Whether the stacked pieces are reshaped to the grown shape after the loop: pieces of an
    own axis, or whose dims are not all static."""
    return not plan.unsqueezed or plan.static_dims is None


def _starts_empty(plan: AccumulatorPlan) -> bool:
    """Whether the initial value is empty along the axis (a list that starts empty), with the
    other dims the stacked pieces have: reshaped from the initial value's dims, or, unsqueezed
    pieces of static dims, the same numbers."""
    if plan.init_dims[plan.axis] != 0:
        return False
    if not plan.unsqueezed or plan.static_dims is None:
        return True
    others = tuple(d for axis, d in enumerate(plan.init_dims) if axis != plan.axis)
    return others == tuple(plan.static_dims)


def _count_kept(builder: Builder, keep: ir.Value) -> ir.Value:
    """How many pieces the mask `keep` (one bool per iteration) keeps: [ReduceSum(Cast(keep))]."""
    ones = builder.op("Cast", [keep], {"to": int(ir.DataType.INT64)})
    return builder.op("ReduceSum", [ones], {"keepdims": 1}, name="kept")  # over every axis


def _grown_shape(
    builder: Builder,
    plan: AccumulatorPlan,
    stacked: ir.Value,
    init: ir.Value,
    kept: ir.Value | None = None,
) -> ir.Value:
    """The shape of the stacked pieces merged along the axis: the initial value's dims, with
    the iteration count times the piece's size at the axis: a constant, -1 at the axis, where
    the other dims are static and none is 0.

    The count is the stacked pieces' dim, or `kept` when given: the portable targets but tract
    count the pieces a mask keeps from the mask. OpenVINO (2026.4.1) gives the scan output of a Loop
    that ran zero times the dims 0 where the piece's are symbolic ((0, 0, 4), not (0, 3, 4)),
    and reads Reshape(stacked, Concat(Shape(stacked)[:1], dims of the initial value)) as a
    Reshape to the shape it already has (the same symbols), which it drops; a count read from
    the mask is another symbol, so the Reshape stays and gives (0, 3, 4)."""
    others = [d for axis, d in enumerate(plan.init_dims) if axis != plan.axis]
    if all(isinstance(d, int) and d > 0 for d in others):
        return builder.ints([*others[: plan.axis], -1, *others[plan.axis :]], "grown_shape")  # type: ignore[list-item]
    count = kept if kept is not None else _dims(builder, stacked, plan.axis, plan.axis + 1)
    if plan.size is None:  # the same in every iteration: read it from the stacked pieces
        size = _dims(builder, stacked, plan.axis + 1, plan.axis + 2)
        count = builder.op("Mul", [count, size])
    elif plan.size != 1:
        count = builder.op("Mul", [count, builder.ints([plan.size])])
    parts = []
    if plan.axis > 0:
        parts.append(_init_dims(builder, plan, init, 0, plan.axis))
    parts.append(count)
    if plan.axis + 1 < plan.rank:
        parts.append(_init_dims(builder, plan, init, plan.axis + 1, plan.rank))
    if len(parts) == 1:
        return parts[0]
    return builder.op("Concat", parts, {"axis": 0}, name="grown_shape")


def _init_dims(
    builder: Builder, plan: AccumulatorPlan, init: ir.Value, start: int, end: int
) -> ir.Value:
    """Shape(init)[start:end], a constant where those dims are static (OpenVINO 2026.4.1 reads
    an empty shape from a Shape with start and end of a constant of size 0: probed)."""
    dims = plan.init_dims[start:end]
    if all(isinstance(d, int) for d in dims):
        return builder.ints(dims)  # type: ignore[arg-type]
    return _dims(builder, init, start, end)


def _dims(builder: Builder, value: ir.Value, start: int, end: int) -> ir.Value:
    """Shape(value)[start:end]."""
    if builder.opset >= 15:
        return builder.op("Shape", [value], {"start": start, "end": end})
    shape = builder.op("Shape", [value])
    return builder.op("Slice", [shape, builder.ints([start]), builder.ints([end])])


RULES = RuleSet([Rule("loop-concat-to-scan", "Loop", _check, _to_scan_output)])
