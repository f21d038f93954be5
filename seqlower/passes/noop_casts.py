"""Casts to the type their input already has are removed: the value is read as it is.

    Cast(x, to=T)  ->  x                         (x of element type T)

TorchScript writes them around `len()` (Cast to int64 of an int64) and conditions (Cast to bool
of a comparison); onnxruntime runs each as a kernel (about 0.2 us a run, per iteration in a loop
body). A Cast whose result is an output of its graph stays unless its input can take the
output's name (a value the graph computes, not one of its own inputs or outputs).
"""

from __future__ import annotations

__all__ = ["remove_noop_casts"]

from collections.abc import Mapping

import onnx
import onnx_ir as ir

from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.inferred_types import graph_types
from seqlower.rewriter import can_take_name


def remove_noop_casts(model: ir.Model, types: Mapping[str, int] | None = None) -> int:
    """Remove every Cast whose input has its target type already; returns how many. `types`
    gives element types by value name where the model declares none (a model not inferred)."""
    types = types or {}
    removed = 0
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            if node.op_type != "Cast" or node.domain not in ("", "ai.onnx") or node.graph is None:
                continue
            source, result = node.inputs[0], node.outputs[0]
            to = node.attributes.get_int("to")
            if source is None or to is None:
                continue
            dtype = source.dtype.value if source.dtype is not None else types.get(source.name or "")
            if dtype != to:
                continue
            if result.is_graph_output():
                if not can_take_name(source, graph):
                    continue
                name = result.name
                result.name = None
                source.name = name
                source.type = source.type or result.type  # an output keeps its declaration
                source.shape = source.shape or result.shape
                result.replace_all_uses_with(source, replace_graph_outputs=True)
            else:
                result.replace_all_uses_with(source)
            graph.remove(node, safe=True)
            removed += 1
    return removed


def inferred_types(model: ir.Model) -> dict[str, int]:
    """The element types ONNX inference gives the values of `model`'s main graph (a copy is
    inferred; the model keeps its declarations), by name."""
    try:
        proto = onnx.shape_inference.infer_shapes(ir.to_proto(model))
    except Exception:  # an original inference cannot type: its Casts stay
        return {}
    found = graph_types(proto.graph)
    return {name: t.tensor_type.elem_type for name, t in found.items() if t.tensor_type.elem_type}
