"""Nodes of one graph in the graph's order, found near where they are.

`[n for n in graph if n in nodes]` walks the whole graph: asked once per candidate of a rule,
that is quadratic (a third of the run time of a 4,500-node model went there). The nodes a rule
gathers sit just before the node it looks at, so `in_graph_order` walks back from that node
instead, and stops once it has met them all.
"""

from __future__ import annotations

__all__ = ["in_graph_order"]

from collections.abc import Collection, Iterator

import onnx_ir as ir

from seqlower.ops import graph_nodes


def in_graph_order(graph: ir.Graph, nodes: Collection[ir.Node], last: ir.Node) -> list[ir.Node]:
    """`nodes` (nodes of `graph`) in the order of `graph`. The walk goes back from `last` and
    ends at the earliest of `nodes` (the whole graph is walked if some come after `last`)."""
    wanted = {node for node in nodes if node.graph is graph}
    found: list[ir.Node] = []
    for node in _backwards_from(graph, last):
        if node in wanted:
            found.append(node)
            if len(found) == len(wanted):
                break
    if len(found) < len(wanted):  # some come after `last`: the whole graph, then
        return [node for node in graph_nodes(graph) if node in wanted]
    found.reverse()
    return found


def _backwards_from(graph: ir.Graph, last: ir.Node) -> Iterator[ir.Node]:
    """The nodes of `graph` from `last` back to the first. onnx_ir keeps its nodes in a
    doubly linked list but offers no walk from a given node: its boxes are read directly, and
    the whole list is walked backwards (from the end) when they are not where expected."""
    boxes = getattr(getattr(graph, "_nodes", None), "_value_ids_to_boxes", None)
    box = boxes.get(id(last)) if isinstance(boxes, dict) else None
    if box is None or getattr(box, "value", None) is not last:
        yield from reversed(graph)
        return
    root = graph._nodes._root
    while box is not root:
        if not box.erased:
            yield box.value
        box = box.prev
