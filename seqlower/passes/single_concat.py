"""A Concat of one input is that input; a Concat read only by a Concat on the same axis is
part of it.

    y = Concat(x, axis=a)                        ->   (y's readers read x)
    z = Concat(a, Concat(b, c, axis=k), d, axis=k) ->   z = Concat(a, b, c, d, axis=k)

PyTorch exports `torch.cat([x], 1)` (the first step of a DenseNet block, which concatenates
the features so far, one tensor at the start) as a Concat of one input, and lowering a list of
one element can leave one; onnxruntime runs it as a copy, one operator launch. Only where the
axis is within the input's known rank (the Concat would not fail), and its output is not an
output of its graph. Lowering a list's edits leaves the second (an erase's pieces joined, then
an append): one launch and one copy less; Concat is associative, and the joined Concat fails
exactly where one of the two would (inputs whose other dims differ).
"""

from __future__ import annotations

__all__ = ["flatten_nested_concats", "remove_single_concats"]

from collections.abc import Sequence

import onnx_ir as ir

from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.uses import detach_inputs, remove_node, replace_input, use_count


def remove_single_concats(model: ir.Model) -> int:
    """Replace every Concat of one input by the input (module docstring); returns how many."""
    removed = 0
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            if node.op_type != "Concat" or node.domain != "" or len(node.inputs) != 1:
                continue
            source, result = node.inputs[0], node.outputs[0]
            if source is None or source.shape is None or result.is_graph_output():
                continue
            rank = len(source.shape)
            if not -rank <= node.attributes.get_int("axis", 0) < rank:
                continue
            if source.dtype is not None and result.dtype not in (None, source.dtype):
                continue
            result.replace_all_uses_with(source)
            graph.remove(node, safe=True)
            removed += 1
    return removed


def flatten_nested_concats(model: ir.Model) -> int:
    """Join every Concat read only by one Concat on the same axis into it (module
    docstring); returns how many were joined.

    Each graph is walked once in order: a Concat's joined inputs are kept aside as a list
    (a Concat joined into a later one hands over that list) and written once at the end, with
    the same inputs, in the same order, as joining one Concat at a time and rewriting every
    input after each join gives. That way took time cubic in a chain of Concats, each
    read by the next (4,000 of them: many minutes)."""
    joined = 0
    for graph in list(iter_all_graphs(model)):
        joins = _Joins()
        for node in list(graph_nodes(graph)):
            if node.op_type != "Concat" or node.domain != "" or node in joins.absorbed:
                continue
            joined += joins.join_into(node)
        joins.write(graph)
    return joined


class _Joins:
    """The joins of one graph's walk: each Concat's inputs once joined (`inputs`, by node in
    the order they were visited) and the Concats joined into another (`absorbed`)."""

    def __init__(self) -> None:
        self.inputs: dict[ir.Node, list[ir.Value | None]] = {}
        self.absorbed: dict[ir.Node, None] = {}  # in the order they were joined
        self._settled: set[ir.Node] = set()  # visited: no input of theirs can be joined

    def current(self, node: ir.Node) -> Sequence[ir.Value | None]:
        found = self.inputs.get(node)
        return found if found is not None else node.inputs

    def join_into(self, node: ir.Node) -> int:
        """Join into `node` every Concat `_joinable` finds among its inputs, the first first,
        looking again at what each join brought in; returns how many."""
        joined = 0
        inputs = list(node.inputs)
        start = 0
        while (found := self._joinable(node, inputs, start)) is not None:
            index, inner = found
            pieces = self.inputs.pop(inner, None)
            pieces = list(inner.inputs) if pieces is None else pieces
            inputs[index : index + 1] = pieces
            self.absorbed[inner] = None
            joined += 1
            # what `inner` brought in was looked at from `inner`, under the same test when
            # both have one axis and one rank: none of it can be joined, go on after it
            start = index + len(pieces) if self._same_test(inner, node) else index
        if joined:
            self.inputs[node] = inputs
        self._settled.add(node)
        return joined

    def _same_test(self, inner: ir.Node, node: ir.Node) -> bool:
        if inner not in self._settled:
            return False
        axis = inner.attributes.get_int("axis", 0) == node.attributes.get_int("axis", 0)
        return axis and _rank(inner) == _rank(node)

    def _joinable(
        self, node: ir.Node, inputs: Sequence[ir.Value | None], start: int
    ) -> tuple[int, ir.Node] | None:
        """The first input of `node` (among `inputs`, from `start`) made by a Concat on the
        same axis that nothing else reads, and where it is."""
        rank = _rank(node)
        for index in range(start, len(inputs)):
            value = inputs[index]
            inner = value.producer() if value is not None else None
            if inner is None or inner.op_type != "Concat" or inner.domain != "":
                continue
            if inner.graph is not node.graph or value.is_graph_output() or use_count(value) != 1:  # type: ignore[union-attr]
                continue
            if any(v is None for v in self.current(inner)):
                continue
            same = inner.attributes.get_int("axis", 0) == node.attributes.get_int("axis", 0)
            if not same and rank is not None:
                same = _axis(inner, rank) is not None and _axis(inner, rank) == _axis(node, rank)
            if same:
                return index, inner
        return None

    def write(self, graph: ir.Graph) -> None:
        """Give each Concat that stays its joined inputs (its uses of each value recorded
        anew, in input order, Concat after Concat, as one join at a time records them), and
        remove the Concats joined into another."""
        for inner in self.absorbed:
            detach_inputs(inner)
        for node, inputs in self.inputs.items():
            if node in self.absorbed:
                continue
            detach_inputs(node)
            node.resize_inputs(len(inputs))
            for index, value in enumerate(inputs):
                replace_input(node, index, value)
        for inner in self.absorbed:
            remove_node(graph, inner)


def _rank(node: ir.Node) -> int | None:
    result = node.outputs[0]
    return len(result.shape) if result.shape is not None else None


def _axis(node: ir.Node, rank: int) -> int | None:
    axis = node.attributes.get_int("axis", 0)
    return axis + rank if -rank <= axis < 0 else axis if 0 <= axis < rank else None
