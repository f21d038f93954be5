"""Read the keepdims corner of SplitToSequence the onnxruntime way, in a protobuf copy.

A SplitToSequence with a constant scalar split of 1 and keepdims=0 squeezes the split axis in
onnxruntime and PyTorch (`unbind` is exported so); the ONNX specification ignores keepdims when
a split is given, and ONNX shape inference follows it. So the input check, which runs ONNX
inference on a copy of the model, would call a model invalid that runs as its exporter meant
(`torch.cat([t, h], 1)` with `t` from `unbind`: ranks 3 and 2 by the specification). Read as
onnxruntime reads it, the node is the form every reading agrees on:

    SplitToSequence(x, 1 scalar, keepdims=0)  ->  SplitToSequence(x, keepdims=0)   # squeeze

which is what the pipeline's own normalization (`resolve_split_keepdims`) makes of it with the
default reading. The split must be fixed in the file: a Constant node of the graph or of an
enclosing one, or an initializer that is not a graph input (those can be overridden).
"""

from __future__ import annotations

__all__ = ["may_be_corner", "squeeze_keepdims_corners"]

import onnx
from onnx import numpy_helper


def squeeze_keepdims_corners(proto: onnx.ModelProto) -> int:
    """Drop the split input of every SplitToSequence of `proto` (every graph, subgraph and
    model-local function) in the corner above, in place; return how many were changed."""
    changed = _in_graph(proto.graph, {})
    for function in proto.functions:
        changed += _in_nodes(function.node, {})
    return changed


def _in_graph(graph: onnx.GraphProto, outer: dict[str, onnx.TensorProto]) -> int:
    inputs = {value.name for value in graph.input}
    fixed = {name: tensor for name, tensor in outer.items() if name not in inputs}
    fixed.update({t.name: t for t in graph.initializer if t.name not in inputs})
    return _in_nodes(graph.node, fixed)


def _in_nodes(nodes: list[onnx.NodeProto], fixed: dict[str, onnx.TensorProto]) -> int:
    fixed = dict(fixed)
    changed = 0
    for node in nodes:
        for output in node.output:  # a name made here hides an outer constant of that name
            fixed.pop(output, None)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = [a for a in node.attribute if a.name == "value" and a.HasField("t")]
            if value and len(node.attribute) == 1:
                fixed[node.output[0]] = value[0].t
        elif node.op_type == "SplitToSequence" and _is_corner(node, fixed):
            del node.input[1:]
            changed += 1
        for attribute in node.attribute:
            graphs = [attribute.g] if attribute.HasField("g") else []
            for subgraph in [*graphs, *attribute.graphs]:
                changed += _in_graph(subgraph, fixed)
    return changed


def may_be_corner(node: onnx.NodeProto) -> bool:
    """Whether the SplitToSequence `node` is the corner above when its split is fixed: of
    the default domain, keepdims=0 and a split given. Every corner is one, so a model without
    such a node has nothing to squeeze (a caller walking the model anyway can skip the
    corners' walk)."""
    if node.domain not in ("", "ai.onnx"):
        return False
    keepdims = [a.i for a in node.attribute if a.name == "keepdims"]
    return keepdims == [0] and len(node.input) >= 2 and bool(node.input[1])


def _is_corner(node: onnx.NodeProto, fixed: dict[str, onnx.TensorProto]) -> bool:
    if not may_be_corner(node):
        return False
    tensor = fixed.get(node.input[1])
    if tensor is None or tensor.dims or tensor.data_location == onnx.TensorProto.EXTERNAL:
        return False
    try:
        return int(numpy_helper.to_array(tensor)) == 1
    except (TypeError, ValueError):
        return False
