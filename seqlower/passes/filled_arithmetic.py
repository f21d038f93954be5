"""Arithmetic on a filled tensor and a scalar, written as the scalar's result expanded.

    Add(ConstantOfShape(s, value=c), f), f a scalar  ->  Expand(Add(c, f), s)
    Mul(f, ConstantOfShape(s, value=c))              ->  Expand(Mul(f, c), s)
    Add(ConstantOfShape(s), f)  (c = 0)              ->  Expand(f, s)

OpenVINO (2026.4.1, CPU plugin) gives `ConstantOfShape(s) + f` the shape (1, 1) where s is
(0, 1) and f a scalar (onnxruntime, onnx.reference and the specification: (0, 1)); Sub, Mul and
Div alike, whichever side the filled tensor is on. ConstantOfShape alone, `x + f` and `Expand(f,
s)` are right. PyTorch exports `t.new_full((n, 1), i)` and `torch.full_like(b[:, :1], i)` so
(mmdetection's `bbox2roi` and torchvision's `_convert_to_roi_format` give each box its image
index): an image without boxes gets a row too many, and the Concat beside its boxes fails.

The rewrite is exact wherever f's shape is all ones and of a rank at most s's length (a scalar
above all): the broadcast of the filled tensor with f then has the shape s, and each element is
`c op f`. Elsewhere (f of another shape, s of unknown length, an operator other than the four)
the node is left as it is. The filled tensor stays where something else reads it.
"""

from __future__ import annotations

__all__ = ["expand_filled_arithmetic"]

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.ops import graph_nodes

_ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div"})


def expand_filled_arithmetic(graph: ir.Graph, unique: Callable[[str], str]) -> int:
    """Rewrite each arithmetic node of `graph` on a ConstantOfShape and a tensor of ones' shape
    (a scalar) as that scalar's result expanded to the filled shape; returns how many.
    `unique(base)` gives a value name not yet taken."""
    rewritten = 0
    for node in [node for node in graph_nodes(graph) if _candidate(node) is not None]:
        found = _candidate(node)
        assert found is not None
        side, fill, shape = found
        _rewrite(graph, node, side, fill, shape, unique)
        rewritten += 1
    return rewritten


def _candidate(node: ir.Node) -> tuple[int, ir.TensorProtocol, ir.Value] | None:
    """(the input index of the filled tensor, its fill value, its shape vector) where `node` is
    rewritten, else None."""
    if node.op_type not in _ARITHMETIC or node.domain != "" or len(node.inputs) != 2:
        return None
    result = node.outputs[0]
    for side in (0, 1):
        filled, other = node.inputs[side], node.inputs[1 - side]
        producer = filled.producer() if filled is not None else None
        if (
            other is None
            or producer is None
            or producer.op_type != "ConstantOfShape"
            or producer.domain != ""
            or not producer.inputs
            or producer.inputs[0] is None
        ):
            continue
        shape = producer.inputs[0]
        length = shape.shape[0] if shape.shape is not None and len(shape.shape) == 1 else None
        if not isinstance(length, int) or other.shape is None or len(other.shape) > length:
            continue
        if any(dim != 1 for dim in other.shape):  # a symbolic dim may not be 1
            continue
        attribute = producer.attributes.get("value")
        if attribute is not None and attribute.is_ref():
            continue
        fill = attribute.value if attribute is not None else ir.tensor(np.zeros(1, np.float32))
        if other.dtype is None or fill.dtype != other.dtype or result.dtype != other.dtype:
            continue
        return side, fill, shape
    return None


def _rewrite(
    graph: ir.Graph,
    node: ir.Node,
    side: int,
    fill: ir.TensorProtocol,
    shape: ir.Value,
    unique: Callable[[str], str],
) -> None:
    """Replace `node` by Expand(node's operator on the fill and the other input, shape)."""
    other = node.inputs[1 - side]
    assert other is not None
    result = node.outputs[0]
    base = result.name or "filled"
    number = fill.numpy().reshape(-1)[0]
    made: list[ir.Node] = []
    neutral = number == 0 if node.op_type == "Add" else (number == 1 and node.op_type == "Mul")
    if neutral:  # f itself
        scalar = other
    else:
        element = ir.tensor(np.array(number, fill.dtype.numpy()))
        constant = ir.node("Constant", [], {"value": element})
        constant.outputs[0].name = constant.name = unique(f"{base}_fill")
        constant.outputs[0].type = ir.TensorType(fill.dtype)
        constant.outputs[0].shape = ir.Shape([])
        operands = [constant.outputs[0], other] if side == 0 else [other, constant.outputs[0]]
        arithmetic = ir.node(node.op_type, operands)
        arithmetic.outputs[0].name = arithmetic.name = unique(f"{base}_element")
        arithmetic.outputs[0].type = other.type
        arithmetic.outputs[0].shape = ir.Shape(list(other.shape or []))
        made += [constant, arithmetic]
        scalar = arithmetic.outputs[0]
    expand = ir.node("Expand", [scalar, shape])
    expand.name = unique(f"{base}_expand")
    expand.outputs[0].type = result.type
    expand.outputs[0].shape = result.shape
    made.append(expand)
    graph.insert_before(node, made)
    filled = node.inputs[side]
    assert filled is not None
    name = result.name
    result.name = None
    result.replace_all_uses_with(expand.outputs[0], replace_graph_outputs=True)
    graph.remove(node, safe=True)
    expand.outputs[0].name = name
    producer = filled.producer()
    if producer is not None and not filled.uses() and not filled.is_graph_output():
        producer.graph.remove(producer, safe=True)  # type: ignore[union-attr]
