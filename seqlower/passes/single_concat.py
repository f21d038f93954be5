"""A Concat of one input is that input.

    y = Concat(x, axis=a)   ->   (y's readers read x)

PyTorch exports `torch.cat([x], 1)` (the first step of a DenseNet block, which concatenates
the features so far, one tensor at the start) as a Concat of one input, and lowering a list of
one element can leave one; onnxruntime runs it as a copy, one operator launch. Only where the
axis is within the input's known rank (the Concat would not fail), and its output is not an
output of its graph.
"""

from __future__ import annotations

__all__ = ["remove_single_concats"]

import onnx_ir as ir

from seqlower.ops import iter_all_graphs


def remove_single_concats(model: ir.Model) -> int:
    """Replace every Concat of one input by the input (module docstring); returns how many."""
    removed = 0
    for graph in list(iter_all_graphs(model)):
        for node in list(graph):
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
