"""Declare the ranks ONNX shape inference could not give (`seqlower.analysis.ranks`).

    y = Conv(SequenceAt(l, i), w)       # in a Loop body; ONNX inference: y has no shape
    -> y: float[?, ?, ?, ?]             # the rank, each dim unknown

A value with no shape after inference gets a shape of unknown dims, one per proved rank (for a
sequence value, the shape of its elements). The rules and the tensor form of lists read ranks
from the shapes of values, so they see these as they see inference's. The model inputs are
left as declared (the interface).
"""

from __future__ import annotations

__all__ = ["declare_ranks"]

import onnx_ir as ir

from seqlower.analysis.ranks import Ranks
from seqlower.ops import graph_nodes, iter_all_graphs


def declare_ranks(model: ir.Model) -> int:
    """Give each value with no shape and a proved rank a shape of that many unknown dims;
    returns how many values were given one."""
    ranks: Ranks | None = None
    declared = 0
    main_inputs = set(model.graph.inputs)
    for graph in list(iter_all_graphs(model)):
        values = [*graph.inputs, *(o for node in graph_nodes(graph) for o in node.outputs)]
        for value in values:
            if value.shape is not None or value in main_inputs or not _tensor_like(value):
                continue
            if ranks is None:  # only where inference left a value without a shape
                ranks = Ranks(model)
            rank = ranks.rank(value)
            if rank is not None:
                value.shape = ir.Shape([None] * rank)
                declared += 1
    return declared


def _tensor_like(value: ir.Value) -> bool:
    """A tensor, or a sequence of tensors, or a value of no type yet."""
    type_ = value.type
    if isinstance(type_, ir.SequenceType):
        type_ = type_.elem_type
    return type_ is None or isinstance(type_, ir.TensorType)
