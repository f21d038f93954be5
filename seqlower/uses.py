"""The uses of values, asked and rewired in time independent of how many there are.

onnx_ir's public ways cost time in proportion to a node's inputs or a value's uses on every
call: `Node.replace_input_with` rebuilds the input tuple element by element, `Value.uses()`
copies every use into a tuple, `Node.resize_inputs` does both once per input. A node of
thousands of inputs (a SequenceConstruct or Concat of every element of a long list) or a value
read thousands of times (a list read at every position) then makes each local rewrite cost as
much as the model: a SequenceConstruct of 20,000 SequenceAts, each lowered by a rewrite of its
own, spent 27 s of CPU in these calls alone. The same holds for a graph's outputs:
`Graph.remove` builds a set of every output for each call, and `replace_all_uses_with` of an
output walks them all; a graph of 10,000 outputs each rewritten took 16 s (`remove_node`,
`OutputPositions`).

The functions here keep onnx_ir's bookkeeping of uses through its private fields, where they
are as this module knows them (checked on every call), and otherwise take the public way. A
node with sharding annotations always takes the public way (they must be updated; older
onnx-ir releases have none).
"""

from __future__ import annotations

__all__ = [
    "WIDE", "OutputPositions", "detach_inputs", "is_used", "remove_node", "replace_all_uses",
    "replace_input", "use_count",
]  # fmt: skip

import onnx_ir as ir

WIDE = 64  # inputs: below this the public method's cost does not matter


def is_used(value: ir.Value) -> bool:
    """Whether some node reads `value` (graph outputs aside)."""
    uses = getattr(value, "_uses", None)
    return bool(uses) if isinstance(uses, dict) else bool(value.uses())


def use_count(value: ir.Value) -> int:
    """How many inputs of nodes read `value` (graph outputs aside)."""
    uses = getattr(value, "_uses", None)
    return len(uses) if isinstance(uses, dict) else len(value.uses())


def replace_input(node: ir.Node, index: int, value: ir.Value | None) -> None:
    """`node.replace_input_with(index, value)`, the same result at any width."""
    inputs = getattr(node, "_inputs", None)
    if (
        not isinstance(inputs, tuple)
        or len(inputs) < WIDE
        or not 0 <= index < len(inputs)
        or not _plain(node)
        or not all(_tracks_uses(v) for v in (inputs[index], value) if v is not None)
    ):
        node.replace_input_with(index, value)
        return
    old = inputs[index]
    # one copy into a list and one back: the tuple rebuilt from two slices copied each input
    # twice more (a SequenceConstruct of 20,000 inputs, each replaced in turn: a third slower)
    rebuilt = list(inputs)
    rebuilt[index] = value
    node._inputs = tuple(rebuilt)
    if old is not None:
        old._remove_usage(node, index)
    if value is not None:
        value._add_usage(node, index)


def replace_all_uses(old: ir.Value, new: ir.Value, *, replace_graph_outputs: bool = False) -> None:
    """`old.replace_all_uses_with(new, replace_graph_outputs=...)`, with the inputs of wide
    readers rewired by `replace_input`."""
    for use in tuple(old.uses()):
        if len(use.node.inputs) >= WIDE:
            replace_input(use.node, use.idx, new)
    old.replace_all_uses_with(new, replace_graph_outputs=replace_graph_outputs)


def detach_inputs(node: ir.Node) -> None:
    """Detach `node` from every value it reads, in time linear in its inputs (the public
    `resize_inputs(0)` rebuilds the input tuple once per input: a dead SequenceConstruct of
    3,000 elements took seconds, a chain of them minutes)."""
    inputs = getattr(node, "_inputs", None)
    if not isinstance(inputs, tuple) or not _plain(node):
        node.resize_inputs(0)
        return
    if not all(_tracks_uses(v) for v in inputs if v is not None):
        node.resize_inputs(0)
        return
    for index, value in enumerate(inputs):
        if value is not None:
            value._remove_usage(node, index)
    node._inputs = ()


def _plain(node: ir.Node) -> bool:
    """No sharding annotations to update as inputs change."""
    return not getattr(node, "device_configurations", None)


def _tracks_uses(value: ir.Value) -> bool:
    return hasattr(value, "_add_usage") and hasattr(value, "_remove_usage")


def remove_node(graph: ir.Graph, node: ir.Node) -> None:
    """`graph.remove(node)` (not the safe removal: the caller has detached it), without the set
    of the graph's outputs onnx_ir builds on every call."""
    nodes = getattr(graph, "_nodes", None)
    if node.graph is not graph or not hasattr(nodes, "remove"):
        graph.remove(node)  # raises as onnx_ir does for a node of another graph
        return
    node.graph = None
    nodes.remove(node)  # type: ignore[union-attr]


class OutputPositions:
    """Where a value sits among its graph's outputs, found in a table instead of a walk of the
    outputs. The table of a graph is checked at every lookup and rebuilt when its outputs
    changed in some other way."""

    def __init__(self) -> None:
        self._tables: dict[int, tuple[ir.Graph, dict[ir.Value, int]]] = {}

    def replace(self, graph: ir.Graph, old: ir.Value, new: ir.Value) -> None:
        """Put `new` in place of `old` among `graph`'s outputs, everywhere it is one."""
        while old.is_graph_output() and (index := self._index(graph, old)) is not None:
            # a one-element slice: onnx_ir's list takes an int index through a runtime protocol
            # check (`SupportsIndex`, some 15 us a call), a slice without it; same bookkeeping
            graph.outputs[index : index + 1] = [new]
            table = self._tables[id(graph)][1]
            del table[old]
            table.setdefault(new, index)

    def _index(self, graph: ir.Graph, value: ir.Value) -> int | None:
        entry = self._tables.get(id(graph))
        if entry is not None and entry[0] is graph:
            index = entry[1].get(value)
            outputs = graph.outputs
            if index is not None and index < len(outputs) and outputs[index] is value:
                return index
        table: dict[ir.Value, int] = {}
        for index, output in enumerate(graph.outputs.copy()):
            table.setdefault(output, index)
        self._tables[id(graph)] = (graph, table)
        return table.get(value)
