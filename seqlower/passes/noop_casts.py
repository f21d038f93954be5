"""Casts to the type their input already has are removed: the value is read as it is.

    Cast(x, to=T)  ->  x                         (x of element type T)

TorchScript writes them around `len()` (Cast to int64 of an int64) and conditions (Cast to bool
of a comparison); onnxruntime runs each as a kernel (about 0.2 us a run, per iteration in a loop
body). A Cast whose result is an output of its graph stays unless its input can take the
output's name (a value the graph computes, not one of its own inputs or outputs).
"""

from __future__ import annotations

__all__ = ["remove_noop_casts"]

import onnx_ir as ir

from seqlower.ops import iter_all_graphs
from seqlower.rewriter import can_take_name


def remove_noop_casts(model: ir.Model) -> int:
    """Remove every Cast whose input has its target type already; returns how many."""
    removed = 0
    for graph in list(iter_all_graphs(model)):
        for node in list(graph):
            if node.op_type != "Cast" or node.domain not in ("", "ai.onnx") or node.graph is None:
                continue
            source, result = node.inputs[0], node.outputs[0]
            to = node.attributes.get_int("to")
            if source is None or source.dtype is None or to is None or source.dtype.value != to:
                continue
            if result.is_graph_output():
                if not can_take_name(source, graph):
                    continue
                name = result.name
                result.name = None
                source.name = name
                result.replace_all_uses_with(source, replace_graph_outputs=True)
            else:
                result.replace_all_uses_with(source)
            graph.remove(node, safe=True)
            removed += 1
    return removed
