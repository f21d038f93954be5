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

import onnx_ir as ir

from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.uses import use_count


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
    docstring); returns how many were joined."""
    joined = 0
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            if node.op_type != "Concat" or node.domain != "":
                continue
            inner = _only_concat_input(node)
            while inner is not None:
                index = next(i for i, v in enumerate(node.inputs) if v is inner.outputs[0])
                inputs = [*node.inputs[:index], *inner.inputs, *node.inputs[index + 1 :]]
                node.resize_inputs(len(inputs))
                for k, value in enumerate(inputs):
                    node.replace_input_with(k, value)
                graph.remove(inner, safe=True)
                joined += 1
                inner = _only_concat_input(node)
    return joined


def _axis(node: ir.Node, rank: int) -> int | None:
    axis = node.attributes.get_int("axis", 0)
    return axis + rank if -rank <= axis < 0 else axis if 0 <= axis < rank else None


def _only_concat_input(node: ir.Node) -> ir.Node | None:
    """An input of `node` made by a Concat on the same axis that nothing else reads."""
    result = node.outputs[0]
    rank = len(result.shape) if result.shape is not None else None
    for value in node.inputs:
        inner = value.producer() if value is not None else None
        if inner is None or inner.op_type != "Concat" or inner.domain != "":
            continue
        if inner.graph is not node.graph or value.is_graph_output() or use_count(value) != 1:
            continue
        if any(v is None for v in inner.inputs):
            continue
        same = inner.attributes.get_int("axis", 0) == node.attributes.get_int("axis", 0)
        if not same and rank is not None:
            same = _axis(inner, rank) is not None and _axis(inner, rank) == _axis(node, rank)
        if same:
            return inner
    return None
