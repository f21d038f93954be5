"""Fold a Transpose of a constant weight into the weight, where that is cheap and safe.

    w = initializer [K, N]            w_t = initializer [N, K] (w transposed once, here)
    t = Transpose<perm>(w)      ->    (the Transpose is gone; its readers read w_t)

Only in the main graph, only when the Transpose is the weight's one reader (the model never
grows), the weight is an initializer that no caller can override (not a graph input) or a
Constant node's value, it is held in memory (not external data, which is streamed), it is at
most `MAX_FOLD_BYTES`, and it is not a string. Exporters leave such Transposes in front of
MatMuls (a `Linear` layer's weight); onnxruntime folds them when a session starts, other
runtimes and graph viewers do not.
"""

from __future__ import annotations

__all__ = ["MAX_FOLD_BYTES", "fold_constant_transposes"]

import numpy as np
import onnx_ir as ir

from seqlower.ops import graph_nodes
from seqlower.uses import use_count

MAX_FOLD_BYTES = 16 * 1024 * 1024


def fold_constant_transposes(model: ir.Model) -> int:
    """Fold every foldable Transpose of the main graph (see the module docstring); returns how
    many were folded."""
    graph = model.graph
    interface = {*graph.inputs, *graph.outputs}
    folded = 0
    for node in list(graph_nodes(graph)):
        if node.op_type != "Transpose" or node.domain != "" or not node.inputs:
            continue
        source, output = node.inputs[0], node.outputs[0]
        tensor = _foldable(source, interface)
        if tensor is None or output in interface:
            continue
        array = tensor.numpy()
        perm = node.attributes.get_ints("perm", None)
        transposed = np.ascontiguousarray(np.transpose(array, perm))
        value = ir.Value(name=output.name, shape=ir.Shape(transposed.shape), type=output.type)
        value.const_value = ir.Tensor(transposed, name=output.name)
        output.replace_all_uses_with(value)
        graph.remove(node, safe=True)
        graph.register_initializer(value)
        _drop(source, graph)
        folded += 1
    return folded


def _foldable(source: ir.Value | None, interface: set[ir.Value]) -> ir.TensorProtocol | None:
    """The constant `source` holds, when folding a Transpose of it is cheap and safe."""
    if source is None or source in interface or use_count(source) != 1:
        return None
    producer = source.producer()
    if producer is not None:
        if producer.op_type != "Constant" or producer.domain != "":
            return None
        attribute = producer.attributes.get("value")
        tensor = attribute.as_tensor() if attribute is not None else None
    elif source.is_initializer():
        tensor = source.const_value
    else:
        return None
    if tensor is None or isinstance(tensor, ir.ExternalTensor):
        return None
    if tensor.dtype == ir.DataType.STRING or tensor.nbytes > MAX_FOLD_BYTES:
        return None
    return tensor


def _drop(source: ir.Value, graph: ir.Graph) -> None:
    """Remove the weight the Transpose read, now unused."""
    producer = source.producer()
    if producer is not None:
        graph.remove(producer, safe=True)
    elif source.name in graph.initializers:
        del graph.initializers[source.name]
