"""A Loop that reads, in its iteration i, element i of a list another Loop built by appending
once per iteration is fused into that Loop: the element read is the tensor appended then.

    s = Loop(M, c, v.., SequenceEmpty(), body_A: ..; s1 = SequenceInsert(s, t))
    n = SequenceLength(s)              (or TorchScript's `enumerate` count of it)
    w.. = Loop(n, true, u.., body_B: e = SequenceAt(s, j); ..)        (j: its iteration number)
        -> v.., w.. = Loop(M, c, v.., u.., body: body_A without the append; body_B with e = t)

`chunks = [x[i:i + w] for i in range(...)]` then `[f(c) for c in chunks]`, written as two
scripted loops, is this pattern. The list stays unbuilt: no append in one loop and no read in the
other, whatever shape its elements have (elements that differ in shape would otherwise need a
ragged list, grown by a Concat and a table of sizes in every iteration of the first loop and
read by two Gathers and a Slice in every iteration of the second).

Both loops run as many iterations as the first (the second's trip count is the list's length,
and its body never stops early), and the second reads the list only at its own iteration
number, so iteration i of the fused body runs iteration i of each body on the same values: the
fused Loop computes what the two compute, and fails where either fails. Nothing the second Loop
reads may be computed from what the first gives (other than the list's length, its trip
count): those nodes move in front of the fused Loop. The list must start empty and be read
nowhere else.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.ops import graph_nodes, graphs_within, subgraphs
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import body_always_continues, known_bool, loop_body, single_append
from seqlower.uses import use_count


@dataclasses.dataclass(frozen=True)
class FusionPlan:
    first: ir.Node  # the Loop that builds the list
    index: int  # the list among the first Loop's carried values
    append: ir.Node  # SequenceInsert(s, t) in the first body
    length: ir.Node  # SequenceLength(list): the second Loop's trip count
    reads: tuple[ir.Node, ...]  # SequenceAt(list, j) in the second body
    moved: tuple[ir.Node, ...]  # nodes between the Loops the second needs, in graph order


def _check(node: ir.Node, ctx: Context) -> FusionPlan | Refusal:
    trip = node.inputs[0] if node.inputs else None
    length = _length_counted(trip, node, ctx) if trip is not None else None
    if length is None:
        return Refusal("the trip count is not the length of a list")
    sequence = length.inputs[0]
    first = sequence.producer() if sequence is not None else None
    if first is None or first.op_type != "Loop" or first.domain != "" or first is node:
        return Refusal("the list whose length is the trip count is not built by a Loop")
    if first.graph is not node.graph or "body" not in first.attributes:
        return Refusal("the Loop that builds the list is in another graph")
    assert sequence is not None
    index = sequence.index()
    if index >= len(first.inputs) - 2:
        return Refusal("the list is a scan output of the Loop that builds it")
    cond = node.inputs[1] if len(node.inputs) > 1 else None
    if (cond is not None and known_bool(cond, ctx) is not True) or not (
        body_always_continues(loop_body(node), ctx)
    ):
        return Refusal("the Loop may stop before the end of the list")
    why = _built_by_appends(first, index, ctx)
    if isinstance(why, str):
        return Refusal(why)
    reads = _reads_at_iteration(node, sequence, length)
    if isinstance(reads, str):
        return Refusal(reads)
    moved = _movable_needs(node, first, length, sequence)
    if isinstance(moved, str):
        return Refusal(moved)
    return FusionPlan(first, index, why, length, reads, moved)


def _length_counted(trip: ir.Value, node: ir.Node, ctx: Context) -> ir.Node | None:
    """The SequenceLength whose value is the trip count `trip` of Loop `node` and is read by
    nothing else: `trip` itself, or TorchScript's count of `enumerate`,
    ReduceMin(Concat(INT64_MAX, Unsqueeze(n))), which is n (a length is never negative)."""
    chain = []
    value = trip
    while True:
        producer = value.producer()
        if producer is None or producer.domain != "" or value.is_graph_output():
            return None
        if use_count(value) != 1 or (chain and value.uses()[0].node is not chain[-1]):
            return None
        if not chain and (value.uses()[0].node is not node or value.uses()[0].idx != 0):
            return None
        op = producer.op_type
        if op == "SequenceLength":
            return producer if len(chain) in (0, 3) else None
        expected = ("ReduceMin", "Concat", "Unsqueeze")[len(chain)] if len(chain) < 3 else None
        if op != expected:
            return None
        axes = producer.attributes.get_ints("axes", None) if op == "ReduceMin" else None
        if op == "ReduceMin" and (
            len(producer.inputs) != 1 or (axes is not None and list(axes) not in ([0], [-1]))
        ):
            return None
        chain.append(producer)
        if op == "Concat":
            if len(producer.inputs) != 2 or producer.inputs[1] is None:
                return None
            big = ctx.facts.values.get_ints(producer.inputs[0])
            if big != [np.iinfo(np.int64).max]:
                return None
            value = producer.inputs[1]
        else:
            value = producer.inputs[0]  # type: ignore[assignment]
        if value is None:
            return None


def _built_by_appends(first: ir.Node, index: int, ctx: Context) -> ir.Node | str:
    """The SequenceInsert that appends one tensor to the list in every iteration, from an
    empty start, or why not."""
    initial = first.inputs[2 + index]
    elements = ctx.facts.elements(initial) if initial is not None else None
    if elements is None or len(elements) != 0:
        return "the list does not start empty"
    body = loop_body(first)
    insert = single_append(body.outputs[1 + index], body.inputs[2 + index], body)
    if insert is None:
        return "the Loop that builds the list does not append one tensor in every iteration"
    out = body.outputs[1 + index]
    if [i for i, v in enumerate(body.outputs) if v is out] != [1 + index] or out.uses():
        return "the Loop that builds the list reads it after the append"
    return insert


def _reads_at_iteration(
    node: ir.Node, sequence: ir.Value, length: ir.Node
) -> tuple[ir.Node, ...] | str:
    """The SequenceAt(list, j) nodes of the second body (j its iteration number), when they and
    the length are all that read the list; else why not."""
    body = loop_body(node)
    counter = body.inputs[0]
    if sequence.is_graph_output() or length.outputs[0].is_graph_output():
        return "the model returns the list or its length"
    if use_count(length.outputs[0]) != 1:
        return "the list's length is read elsewhere too"
    reads = []
    for use in sequence.uses():
        reader = use.node
        if reader is length:
            continue
        if (
            reader.op_type != "SequenceAt"
            or reader.domain != ""
            or reader.graph is not body
            or reader.inputs[1] is not counter
        ):
            return "the list is read elsewhere than at the iteration number of the Loop"
        reads.append(reader)
    if not reads:
        return "the Loop does not read the list"
    return tuple(reads)


def _movable_needs(
    node: ir.Node, first: ir.Node, length: ir.Node, sequence: ir.Value
) -> tuple[ir.Node, ...] | str:
    """The nodes between the two Loops that the second one needs (its inputs and the outer
    values its body reads, transitively), to run before the first; why not when any of them
    needs what the first Loop gives."""
    graph = node.graph
    assert graph is not None
    order = {id(n): i for i, n in enumerate(graph)}
    start = order[id(first)]
    inside = {id(g) for sub in subgraphs(node) for g in graphs_within(sub)}
    pending = [v for v in node.inputs[1:] if v is not None]
    for sub in subgraphs(node):
        for inner in sub.all_nodes():
            pending.extend(v for v in inner.inputs if v is not None and id(v.graph) not in inside)
    needed: dict[int, ir.Node] = {}
    while pending:
        value = pending.pop()
        if value is sequence:  # read at the iteration number: what the fused body appends
            continue
        producer = value.producer()
        if producer is None or producer.graph is not graph or order[id(producer)] < start:
            continue
        if producer is first or producer is length:
            return "the Loop reads what the Loop that builds the list gives"
        if id(producer) in needed:
            continue
        needed[id(producer)] = producer
        pending.extend(v for v in producer.inputs if v is not None)
        for sub in subgraphs(producer):
            for inner in sub.all_nodes():
                pending.extend(v for v in inner.inputs if v is not None)
    return tuple(n for n in graph_nodes(graph) if id(n) in needed)


def _fuse(node: ir.Node, plan: FusionPlan, ctx: Context) -> None:
    """s = Loop(M, c, v.., SequenceEmpty(), body_A: ..; s1 = SequenceInsert(s, t))
    w.. = Loop(SequenceLength(s), true, u.., body_B: e = SequenceAt(s, j); ..)
        -> v.., w.. = Loop(M, c, v.., u.., body: body_A without the append; body_B, e = t)"""
    first, k = plan.first, plan.index
    graph = node.graph
    assert graph is not None
    for moved in plan.moved:  # what the second Loop needs, in front of the first
        graph.remove(moved)
        graph.insert_before(first, moved)
    fused_body, second_body = loop_body(first), loop_body(node)
    appended = plan.append.inputs[1]
    assert appended is not None
    for read in plan.reads:
        ctx.rewriter.replace(read.outputs[0], appended)
        second_body.remove(read, safe=True)
    ctx.rewriter.replace(second_body.inputs[0], fused_body.inputs[0])
    ctx.rewriter.replace(second_body.inputs[1], fused_body.inputs[1])
    _take_names(second_body, fused_body, ctx)
    # the list out of the first body
    fused_body.outputs.pop(1 + k)
    fused_body.remove(plan.append, safe=True)
    fused_body.inputs.pop(2 + k)
    carried_a = len(first.inputs) - 3  # without the list
    carried_b = len(node.inputs) - 2
    outputs_a = fused_body.outputs[1:]
    states_a, scans_a = list(outputs_a[:carried_a]), list(outputs_a[carried_a:])
    outputs_b = list(second_body.outputs[1:])
    states_b, scans_b = outputs_b[:carried_b], outputs_b[carried_b:]
    inputs_b = list(second_body.inputs[2:])
    for nested in list(second_body):
        second_body.remove(nested)
        fused_body.append(nested)
    second_body.outputs.clear()
    for _ in range(len(second_body.inputs)):
        second_body.inputs.pop()
    fused_body.inputs.extend(inputs_b)
    cond_out = fused_body.outputs[0]
    fused_body.outputs.clear()
    fused_body.outputs.extend([cond_out, *states_a, *states_b, *scans_a, *scans_b])

    inputs = [*first.inputs[:2], *(v for i, v in enumerate(first.inputs[2:]) if i != k)]
    inputs += list(node.inputs[2:])
    old_a = [v for i, v in enumerate(first.outputs) if i != k]
    old_b = list(node.outputs)
    order = [
        *old_a[:carried_a],
        *old_b[:carried_b],
        *old_a[carried_a:],
        *old_b[carried_b:],
    ]
    new_outputs = ctx.rewriter.before(first).ops(
        "Loop", inputs, {"body": fused_body}, num_outputs=len(order), name="fused_loop"
    )
    for old, new in zip(order, new_outputs):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)


def _take_names(source: ir.Graph, target: ir.Graph, ctx: Context) -> None:
    """Give the values `source` defines (its inputs, its nodes' outputs, nested graphs
    included) fresh names where `target` already has the name: the bodies were written apart."""
    taken = {v.name for g in graphs_within(target) for v in _defined(g)}
    for graph in graphs_within(source):
        for value in _defined(graph):
            if value.name in taken:
                value.name = ctx.rewriter.names.fresh(value.name or "fused")
            taken.add(value.name)


def _defined(graph: ir.Graph):  # type: ignore[no-untyped-def]
    yield from graph.inputs
    for node in graph_nodes(graph):
        yield from node.outputs


RULES = RuleSet([Rule("loop-fusion", "Loop", _check, _fuse)])
