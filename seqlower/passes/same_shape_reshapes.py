"""Reshapes to the shape their input has are removed: the value is read as it is.

    Reshape(x, Constant([-1]))        ->  x          (x of rank 1)
    Reshape(x, Constant([-1, 4]))     ->  x          (x: [?, 4])
    Reshape(x, Constant([0, 3, -1]))  ->  x          (x: [?, 3, 5], allowzero 0: 0 copies the dim)

TorchScript writes `t.reshape(-1)` of a vector (`torch.meshgrid` does, per grid) and `view(-1, 4)`
of what has four columns already; onnxruntime runs each as a kernel, per iteration in a loop
body. The target is a constant of x's rank, and each of its entries gives x's dim: the dim
itself where inference gives it as a number, 0 where allowzero is 0 (which copies the dim), or
-1 once, where the entries beside it are numbers above 0 (-1 is then the dim left; beside a dim
of 0 it is not determined, and the Reshape stays). A Reshape whose result is an output of its
graph stays unless its input can take the output's name.
"""

from __future__ import annotations

__all__ = ["remove_same_shape_reshapes"]

import numpy as np
import onnx_ir as ir

from seqlower.ops import constant_tensor, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream
from seqlower.rewriter import can_take_name


def remove_same_shape_reshapes(model: ir.Model) -> int:
    """Remove every Reshape whose target is provably its input's shape; returns how many."""
    removed = 0
    for graph in list(iter_all_graphs(model)):
        for node in list(graph):
            if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx"):
                continue
            if node.graph is None or len(node.inputs) != 2 or not _keeps_shape(node):
                continue
            source, result = node.inputs[0], node.outputs[0]
            assert source is not None
            if result.is_graph_output():
                if not can_take_name(source, graph):
                    continue
                name = result.name
                result.name = None
                source.name = name
                source.type = source.type or result.type
                result.replace_all_uses_with(source, replace_graph_outputs=True)
            else:
                result.replace_all_uses_with(source)
            target = node.inputs[1]
            graph.remove(node, safe=True)
            producer = target.producer() if target is not None else None
            if producer is not None:
                remove_dead_upstream([producer])
            removed += 1
    return removed


def _keeps_shape(node: ir.Node) -> bool:
    source, target = node.inputs
    if source is None or target is None or source.shape is None:
        return False
    wanted = _constant_ints(target)
    dims = list(source.shape)
    if wanted is None or len(wanted) != len(dims):
        return False
    copies = node.attributes.get_int("allowzero", 0) == 0
    inferred = [k for k, w in enumerate(wanted) if w == -1]
    if len(inferred) > 1:
        return False
    for w, dim in zip(wanted, dims, strict=True):
        if w == -1:
            continue
        if not (w == 0 and copies) and not (isinstance(dim, int) and w == dim):
            return False
        # beside a -1, each dim must be a number above 0 (a 0 leaves the -1 undetermined)
        if inferred and not (isinstance(dim, int) and dim > 0):
            return False
    return True


def _constant_ints(value: ir.Value) -> list[int] | None:
    """The content of a 1-D int64 Constant or of an initializer no caller can override."""
    tensor = constant_tensor(value)
    if tensor is None:
        return None
    array = np.asarray(tensor.numpy())
    if array.ndim != 1 or array.dtype != np.int64:
        return None
    return [int(x) for x in array]
