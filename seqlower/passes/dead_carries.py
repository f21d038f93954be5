"""A Loop's carried value that nothing reads after the loop, and that the body reads only to
compute its own next value, is dropped.

    v_final, y = Loop(M, c, v0, y0, body: v1 = f(v, ...), y1 = g(y, ...))   (v_final unread,
                                                                           v read only by f)
        -> y = Loop(M, c, y0, body: y1 = g(y, ...))

Lowering leaves such values where a list built in a loop is read after it only in a way its
tensor form does not need all of: a ragged list that is only concatenated keeps a table of its
element sizes, grown by a Shape and a Concat in every iteration, which nothing reads. The nodes
that compute only the dropped value (what its reads reach in the body, and what computes its
next value) go with it: dead-code removal takes them once the body no longer returns it.

Only values whose reads in the body stay among the nodes computing the value itself are
dropped: one that also feeds the condition, a scan output, another carried value or anything
else the loop gives stays. Dropping the nodes that computed it may remove a failure they would
have raised (a Concat of mismatched shapes), as any dead-code removal does.
"""

from __future__ import annotations

__all__ = ["drop_dead_carries"]

import onnx_ir as ir

from seqlower.ops import graphs_within, iter_all_graphs, subgraphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.rewriter import Rewriter


def drop_dead_carries(model: ir.Model) -> int:
    """Drop every dead carried value of every Loop (module docstring); returns how many."""
    rewriter: Rewriter | None = None
    dropped = 0
    for graph in list(iter_all_graphs(model)):
        for node in list(graph):
            if node.op_type != "Loop" or node.domain != "" or "body" not in node.attributes:
                continue
            dead = _dead_carries(node)
            if not dead:
                continue
            rewriter = rewriter or Rewriter(model)
            _drop(node, dead, rewriter)
            dropped += len(dead)
    return dropped


def _dead_carries(loop: ir.Node) -> list[tuple[int, list[ir.Node]]]:
    """(k, the body nodes reached from its body input) for each dead carried value k."""
    body = loop.attributes["body"].as_graph()
    carried = len(loop.inputs) - 2
    if carried <= 0 or len(body.inputs) != 2 + carried or len(body.outputs) < 1 + carried:
        return []
    found = []
    holders: dict[int, ir.Node] | None = None
    for k in range(carried):
        if k >= len(loop.outputs):
            break
        final = loop.outputs[k]
        if final.uses() or final.is_graph_output():
            continue
        if holders is None:
            holders = {
                id(inner): holder
                for holder in body
                for sub in subgraphs(holder)
                for inner in graphs_within(sub)
            }
        reached = _reached_only_itself(body, k, holders)
        if reached is not None:
            found.append((k, reached))
    return found


def _reached_only_itself(
    body: ir.Graph, k: int, holders: dict[int, ir.Node]
) -> list[ir.Node] | None:
    """The body nodes reached from body input 2 + k (in body order) when what they compute
    goes nowhere but into each other and body output 1 + k; else None."""
    start = body.inputs[2 + k]
    own = 1 + k
    reached: dict[int, ir.Node] = {}
    pending = [start]
    while pending:
        value = pending.pop()
        if value.is_graph_output():
            positions = [i for i, out in enumerate(body.outputs) if out is value]
            if positions != [own]:
                return None
        for use in value.uses():
            reader = use.node
            if reader.graph is not body:
                reader = holders.get(id(reader.graph))  # type: ignore[assignment]
                if reader is None:
                    return None
            if id(reader) in reached:
                continue
            reached[id(reader)] = reader
            pending.extend(reader.outputs)
    return [node for node in body if id(node) in reached]


def _drop(loop: ir.Node, dead: list[tuple[int, list[ir.Node]]], rewriter: Rewriter) -> None:
    """Take the dead carried values out of the body and rebuild the Loop without them."""
    body = loop.attributes["body"].as_graph()
    gone = {k for k, _ in dead}
    for k, reached in sorted(dead, key=lambda entry: -entry[0]):
        body.outputs.pop(1 + k)
        remove_dead_upstream(reached)
        start = body.inputs.pop(2 + k)
        assert not start.uses(), "a dead carried value is read only by what it computes"
    inputs = [v for i, v in enumerate(loop.inputs) if i - 2 not in gone]
    kept = [v for i, v in enumerate(loop.outputs) if i not in gone]
    attributes = {name: attr.value for name, attr in loop.attributes.items()}
    new_outputs = rewriter.before(loop).ops(
        "Loop", inputs, attributes, num_outputs=len(kept), name="carried"
    )
    for old, new in zip(kept, new_outputs):
        new.type, new.shape = old.type, old.shape
        rewriter.replace(old, new)
    graph = loop.graph
    assert graph is not None
    graph.remove(loop, safe=True)
