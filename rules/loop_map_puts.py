"""The plan of `loop-map-assign` for lists the body appends to or assigns in, at i, by branch.

    Loop(M, true, v.., s0.., body(i, c, v.., s..):
         u.. = If(SequenceLength(s) <= i,
                  then: SequenceInsert(s, x)..,
                  else: SequenceInsert(SequenceErase(s, i), f(SequenceAt(s, i)), i)..)
         y = g(SequenceAt(u, i)))
        -> Loop(M, true, v.., SequenceEmpty().., body(i, c, v.., s..):
                e.. = If(b, then: x.., else: f(SequenceAt(s0, i))..)
                u = SequenceInsert(s, e); y = g(e))
           b = SequenceLength(s0) <= 0 before the loop where the initial length L0 is 0 or at
           least M in every run, else Max(L0, i) <= i in the body

transformers' `DynamicCache.update` in a loop over layers (`if len(keys) <= i: keys.append(k)`
else `keys[i] = cat([keys[i], k])`, and the same for the values) puts element i at position i
in iteration i, on every path: `ListLengths.sets_at_iteration` proves it (the length entering
iteration i is max(L0, i), so the append runs where the length is i, the assignment where i is
below it), for the values too where the condition reads the keys' length (one length, proved).
So in iteration i element i is still the initial one, and when the loop runs all its M
iterations and `ListLengths.at_most` proves L0 <= M, the list after it is the M elements put,
in order: each iteration appends to a list that starts empty. The body reads the initial list
at i, and its length as max(L0, i); each If on the way gives the element put, appended once
after it, and the reads at i of what was put read that element. Where L0 is 0 or at least M in
every run (`ListLengths.possible_lengths`: a decoder's caches, empty on the first step and one
per layer after it), `len <= i` is L0 == 0 in every iteration, computed once before the loop:
the same branch runs in all iterations, so the element put keeps one shape through the loop and
the appends become scan outputs (one stacked tensor per cache).

Needs: a static trip count M, a loop that never ends early, and a body that touches each such
list only so: reads at i, its length, the appends or the erase and insert at i of the proof,
and reads at i of what they put.
"""

from __future__ import annotations

__all__ = ["PutsPlan", "plan_puts", "rewrite_puts"]

import dataclasses

import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.ops import is_sequence_value
from seqlower.rewriter import Builder
from seqlower.rule import Context
from seqlower.rules.loop_parts import loop_body


@dataclasses.dataclass(frozen=True)
class _Slot:
    index: int  # among the loop-carried values
    reads: tuple[ir.Node, ...]  # SequenceAt(s, i): read the initial list instead
    lengths: tuple[ir.Node, ...]  # SequenceLength(s): max(L0, i)
    path: tuple[ir.Value, ...]  # the lists from the puts to the update, puts first
    put_reads: tuple[ir.Node, ...]  # SequenceAt(p, i) of a list p of the path: the element put
    dtype: ir.DataType


@dataclasses.dataclass(frozen=True)
class PutsPlan:
    slots: tuple[_Slot, ...]
    # the Ifs whose condition compares a length with i, the same in every iteration since
    # L0 is 0 or at least the trip count: id -> (whether the then branch is where the length
    # is i, the slot whose initial length tells)
    fixed_conditions: dict[int, tuple[bool, int]] = dataclasses.field(default_factory=dict)


def plan_puts(node: ir.Node, ctx: Context) -> PutsPlan | str:
    """Every carried list of `node` (a Loop that runs all its iterations) that can be mapped
    so, planned at once (an edit of one list may be told by the length of another, which the
    rewrite replaces); else why none can."""
    body = loop_body(node)
    trips = ctx.facts.static_int(node.inputs[0])
    if trips is None:
        return "the trip count is not static"
    lengths = ctx.facts.list_lengths()
    slots, reasons = [], []
    for index in range(len(node.inputs) - 2):
        init = node.inputs[2 + index]
        if not (is_sequence_value(init) or is_sequence_value(body.inputs[2 + index])):
            continue
        assert init is not None
        why = lengths.sets_at_iteration(node, index)
        if why is None and not lengths.at_most(init, trips):
            why = f"its initial length is not proved at most the trip count ({trips})"
        slot = _slot(node, index, ctx) if why is None else why
        if isinstance(slot, str):
            reasons.append(f"carried sequence '{body.inputs[2 + index].name}': {slot}")
        else:
            slots.append(slot)
    if not slots:
        return "; ".join(reasons) or "the loop carries no sequence"
    return PutsPlan(tuple(slots), _fixed_conditions(node, slots, trips, ctx))


def _fixed_conditions(
    node: ir.Node, slots: list[_Slot], trips: int, ctx: Context
) -> dict[int, tuple[bool, int]]:
    """The Ifs on the paths whose condition is `len <= i` (or a form of it) for a list of
    initial length L0 in {0} or at least the trip count, in every run
    (`ListLengths.possible_lengths`): the length entering iteration i is max(L0, i), so the
    condition is L0 == 0 in every iteration, and the same branch runs in all of them."""
    body = loop_body(node)
    lengths = ctx.facts.list_lengths()
    found: dict[int, tuple[bool, int]] = {}
    for slot in slots:
        init = node.inputs[2 + slot.index]
        assert init is not None
        possible = lengths.possible_lengths(init)
        if possible is None or any(0 < n < trips for n in possible):
            continue
        state, counter = body.inputs[2 + slot.index], body.inputs[0]
        for value in slot.path:
            producer = value.producer()
            if producer is None or producer.op_type != "If" or id(producer) in found:
                continue
            cond = producer.inputs[0]
            compared = lengths.compares_length(cond, state, counter) if cond else None
            if compared is not None:
                found[id(producer)] = (compared[0] == "eq", slot.index)
    return found


def _slot(node: ir.Node, index: int, ctx: Context) -> _Slot | str:
    body = loop_body(node)
    state, counter = body.inputs[2 + index], body.inputs[0]
    update = body.outputs[1 + index]
    if sum(output is update for output in body.outputs) != 1:
        return "the body returns its update elsewhere too"
    path = _path(update)
    if path is None:
        return "a branch returns a list it does not make"
    on_path = {id(value) for value in path}
    reads, lengths = [], []
    for use in state.uses():
        user = use.node
        if user.domain != "" or use.idx != 0:
            return f"the body passes it to {user.op_type}"
        if user.op_type == "SequenceAt" and user.inputs[1] is counter:
            reads.append(user)
        elif user.op_type == "SequenceLength":
            lengths.append(user)
        elif user.op_type == "SequenceInsert" and id(user.outputs[0]) in on_path:
            pass
        elif user.op_type == "SequenceErase" and all(
            id(u.node.outputs[0]) in on_path for u in user.outputs[0].uses()
        ):
            if user.outputs[0].is_graph_output():
                return "the list without element i leaves the body"
        else:
            return f"the body reads it with {user.op_type}, not only at i or its length"
    put_reads = []
    for value in path:  # what the path makes is passed on along it, or read at i
        for use in value.uses():
            user = use.node
            if user.domain != "" or use.idx != 0:
                return f"the body passes what it put to {user.op_type}"
            if user.op_type == "SequenceAt" and user.inputs[1] is counter:
                put_reads.append(user)
            elif user.op_type != "Identity" or id(user.outputs[0]) not in on_path:
                return f"the body reads what it put with {user.op_type}, not only at i"
        if value.is_graph_output() and value is not update and value.graph is body:
            return f"'{value.name}' leaves the body other than as the list's update"
    dtype = element_dtype(state) or element_dtype(node.inputs[2 + index])  # type: ignore[arg-type]
    if dtype is None:
        return "the element type is unknown"
    return _Slot(index, tuple(reads), tuple(lengths), tuple(path), tuple(put_reads), dtype)


def _path(update: ir.Value) -> list[ir.Value] | None:
    """The lists from the inserts that `sets_at_iteration` proved to the update: through
    Identities and If outputs, each branch's list first (the order the rewrite needs); None
    when a branch returns a list made outside it."""
    found: list[ir.Value] = []
    seen: set[int] = set()
    pending: list[tuple[ir.Value, bool]] = [(update, False)]
    while pending:  # an explicit stack: (value, its inputs already visited)
        value, done = pending.pop()
        if done:
            found.append(value)
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        pending.append((value, True))
        producer = value.producer()
        assert producer is not None  # the proof walked the same way
        if producer.op_type == "Identity":
            pending.append((producer.inputs[0], False))  # type: ignore[arg-type]
        elif producer.op_type == "If":
            position = list(producer.outputs).index(value)
            for name in ("else_branch", "then_branch"):
                branch = producer.attributes[name].as_graph()
                output = branch.outputs[position]
                made = output.producer()
                if made is None or made.graph is not branch:
                    return None
                pending.append((output, False))
    return found


def rewrite_puts(node: ir.Node, plan: PutsPlan, ctx: Context) -> None:
    """The Loop reads the initial lists at i and their lengths as max(L0, i); the Ifs on the
    way to each update give the element put, which one append adds to a list that starts
    empty (see the module docstring)."""
    body = loop_body(node)
    counter = body.inputs[0]
    builder = ctx.rewriter.before(node)
    inputs = list(node.inputs)
    elements: dict[int, ir.Value] = {}  # id of a list of a path -> the element it put at i
    for slot in plan.slots:
        init = node.inputs[2 + slot.index]
        assert init is not None
        for read in slot.reads:
            read.replace_input_with(0, init)  # the initial list, an outer value of the body
        if slot.lengths:
            start = builder.op("SequenceLength", [init], name="start_length")
            peak = ctx.rewriter.before(next(iter(body))).op("Max", [start, counter], name="length")
            for length in slot.lengths:
                ctx.rewriter.replace(length.outputs[0], peak)
        empty = builder.op("SequenceEmpty", [], {"dtype": int(slot.dtype)}, name="mapped")
        empty.type = ir.SequenceType(ir.TensorType(slot.dtype))
        inputs[2 + slot.index] = empty
    conditions = _conditions(node, plan, builder)
    _put_elements(plan, elements, conditions, ctx)
    for slot in plan.slots:
        for read in slot.put_reads:
            ctx.rewriter.replace(read.outputs[0], elements[id(read.inputs[0])])
        update = body.outputs[1 + slot.index]
        element = elements[id(update)]
        anchor = _after(body, element)
        state = body.inputs[2 + slot.index]
        at = (
            ctx.rewriter.before(anchor)
            if anchor is not None
            else Builder(ctx.rewriter, body, None, "put", ctx.rewriter.opset(body))
        )
        appended = at.op("SequenceInsert", [state, element], name="put")
        appended.type = ir.SequenceType(ir.TensorType(slot.dtype))
        ctx.rewriter.replace(update, appended)
    outputs = builder.ops("Loop", inputs, {"body": body}, num_outputs=len(node.outputs))
    for old, new in zip(node.outputs, outputs):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)


def _conditions(node: ir.Node, plan: PutsPlan, builder: Builder) -> dict[int, ir.Value]:
    """For each If of `plan.fixed_conditions`, its condition computed once before the loop:
    L0 == 0 where its then branch is where the length is i, else L0 > 0."""
    made: dict[int, ir.Value] = {}
    zero = builder.constant(0, name="zero") if plan.fixed_conditions else None
    for key, (then_at_i, slot) in plan.fixed_conditions.items():
        start = builder.op("SequenceLength", [node.inputs[2 + slot]], name="start_length")
        op = "LessOrEqual" if then_at_i else "Greater"
        made[key] = builder.op(op, [start, zero], name="fresh")
        made[key].type = ir.TensorType(ir.DataType.BOOL)
    return made


def _put_elements(
    plan: PutsPlan, elements: dict[int, ir.Value], conditions: dict[int, ir.Value], ctx: Context
) -> None:
    """For each list of each path, the element it put at i: an insert's tensor, the same
    through an Identity, and a new tensor output of each If on a path (its branches return
    the elements their lists put). Each If is rebuilt once, after the Ifs in its branches."""
    ifs: dict[int, tuple[ir.Node, dict[int, ir.DataType]]] = {}
    order: list[ir.Node] = []
    for slot in plan.slots:
        for value in slot.path:  # puts first, each branch's list before its If's
            producer = value.producer()
            assert producer is not None
            if producer.op_type == "SequenceInsert":
                elements[id(value)] = producer.inputs[1]  # type: ignore[assignment]
            elif producer.op_type == "If":
                if id(producer) not in ifs:
                    ifs[id(producer)] = (producer, {})
                    order.append(producer)
                ifs[id(producer)][1][list(producer.outputs).index(value)] = slot.dtype
    for slot in plan.slots:  # Identities after their inputs' elements are known
        for value in slot.path:
            producer = value.producer()
            if producer is not None and producer.op_type == "Identity":
                elements[id(value)] = producer.inputs[0]  # type: ignore[assignment]
    for node in order:  # innermost first: a path visits branches before their If
        _, positions = ifs[id(node)]
        branches = {a: node.attributes[a].as_graph() for a in ("then_branch", "else_branch")}
        for branch in branches.values():
            for position in positions:
                branch.outputs[position] = _in_branch(branch, elements, ctx, position)
        cond = conditions.get(id(node), node.inputs[0])
        rebuilt = ctx.rewriter.before(node).ops(
            "If", [cond], branches, num_outputs=len(node.outputs), name="put"
        )
        for position, (old, new) in enumerate(zip(node.outputs, rebuilt)):
            if position in positions:
                new.type = ir.TensorType(positions[position])
                elements[id(old)] = new
            else:
                new.type, new.shape = old.type, old.shape
                ctx.rewriter.replace(old, new)


def _in_branch(
    branch: ir.Graph, elements: dict[int, ir.Value], ctx: Context, position: int
) -> ir.Value:
    """The element the list returned at `position` of `branch` put, as a value of `branch`
    (an Identity of it where it is made outside)."""
    made = branch.outputs[position]
    element = elements[id(made)]
    if element.graph is branch and element.producer() is not None:
        return element
    producer = made.producer()
    assert producer is not None and producer.graph is branch  # `_path` checked it
    return ctx.rewriter.before(producer).op("Identity", [element], name="put")


def _after(body: ir.Graph, element: ir.Value) -> ir.Node | None:
    """The node of `body` just after the one that makes `element` (the first node when
    another graph makes it); None at the end of the body."""
    producer = element.producer()
    nodes = list(body)
    if producer is None or producer.graph is not body:
        anchor: ir.Node | None = nodes[0] if nodes else None
    else:
        position = nodes.index(producer)
        anchor = nodes[position + 1] if position + 1 < len(nodes) else None
    return anchor
