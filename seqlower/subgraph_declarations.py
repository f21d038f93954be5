"""Drop what a model declares about the shapes of its subgraphs' outputs, where inference
contradicts only that.

The input check tolerates a declared shape that ONNX inference contradicts (onnxruntime ignores
those), and it checks with the dims of subgraph outputs dropped (`input_check`). A model kept as
given (its lowering costs more), or lowered around such a branch, still declares them, and the
full check of the output then fails on the input's own declaration:

    If(c, then: SplitToSequence(x, keepdims=0) -> seq(float) t,      # declared: elements of
          else: SplitToSequence(x, 1)          -> seq(float) t2)     #   rank 0 (shape {})

(an If whose branches give lists of elements of different ranks, each declared with the other's
rank, or a branch's list rewired to another of another rank). When the output fails the full
check with only such tolerated errors (`input_check.errors_held` holds none), the dims of every
subgraph output are dropped, as the input check drops them, and the output is checked again.
"""

from __future__ import annotations

__all__ = ["forget_subgraph_output_shapes"]

import onnx_ir as ir

from seqlower.ops import iter_all_graphs


def forget_subgraph_output_shapes(model: ir.Model) -> int:
    """Make the shape of every output of every subgraph of `model` unknown (for a list, its
    elements' shape); how many had one."""
    dropped = 0
    for graph in iter_all_graphs(model):
        if graph is model.graph:
            continue
        for value in graph.outputs:
            if value.shape is not None:
                value.shape = None
                dropped += 1
    return dropped
