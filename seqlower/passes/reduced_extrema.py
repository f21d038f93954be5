"""A maximum (minimum) of no value or of -inf (+inf) alone given as the specification's.

    y = ReduceMax(x, axes)  ->  r = ReduceMax(x, axes)
                                h = ReduceSum(Cast(Equal(x, lowest), float), axes)
                                y = Where(And(Equal(r, lowest), Less(h, 0.5)), -inf, r)
    y = ReduceMin(x, axes)  ->  the same with the highest float and +inf

OpenVINO (2026.4.1, CPU plugin) starts a float maximum at the lowest finite float, not -inf:
ReduceMax of an empty axis, or of a row holding -inf alone, gives -3.4028235e38 where
onnxruntime, onnx.reference and the specification give -inf (a minimum: 3.4028235e38 for
+inf). The lists' masked form reduces chunks padded with -inf, so the maximum of an empty chunk
comes out finite (`torch_wild/pyg_unbatch`). The result is exact: it is the lowest float where
an element is that float (h counts them), -inf where OpenVINO gave the lowest for nothing (h is
0). Only float32 reductions whose input is a Where with an
infinite branch (the masked form) or whose reduced axes may be empty are rewritten: the
correction reads the input once more (an Equal, a Cast and a reduction of it).
"""

from __future__ import annotations

__all__ = ["correct_empty_extrema"]

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.ops import constant_tensor, graph_nodes

_EXTREMA = {"ReduceMax": (float(np.finfo(np.float32).min), -np.inf),
            "ReduceMin": (float(np.finfo(np.float32).max), np.inf)}  # fmt: skip


def correct_empty_extrema(graph: ir.Graph, opset: int, unique: Callable[[str], str]) -> int:
    """Correct each float32 ReduceMax and ReduceMin of `graph` that may reduce nothing or
    infinities alone (see the module); returns how many. `unique(base)` gives a value name not
    yet taken."""
    found = [node for node in graph_nodes(graph) if _may_reduce_only_infinities(node)]
    for node in found:
        _correct(graph, node, opset, unique)
    return len(found)


def _reduced_axes(node: ir.Node, rank: int) -> list[int] | None:
    """The axes `node` reduces (every axis where none are given), or None if not known."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        tensor = constant_tensor(node.inputs[1])
        if tensor is None:
            return None
        axes = [int(a) for a in tensor.numpy().reshape(-1)]
        if not axes and node.attributes.get_int("noop_with_empty_axes", 0):
            return []
    else:
        axes = list(node.attributes.get_ints("axes", []) or [])
    if not axes:
        return list(range(rank))
    return [a + rank if a < 0 else a for a in axes]


def _may_reduce_only_infinities(node: ir.Node) -> bool:
    if node.op_type not in _EXTREMA or node.domain != "" or not node.inputs:
        return False
    data = node.inputs[0]
    if data is None or data.dtype != ir.DataType.FLOAT or data.shape is None:
        return False
    if _part_of_a_correction(node, data):
        return False
    if _made_with_an_infinity(data):
        return True
    axes = _reduced_axes(node, len(data.shape))
    if axes is None:
        return True
    return any(not (isinstance(data.shape[a], int) and data.shape[a] > 0) for a in axes)


def _part_of_a_correction(node: ir.Node, data: ir.Value) -> bool:
    """`node` is the reduction `_correct` made, read by the Where that corrects it (so that a
    second pass adds nothing)."""
    for consumer in node.outputs[0].consumers():
        if (
            consumer.op_type == "Where"
            and len(consumer.inputs) == 3
            and consumer.inputs[2] is node.outputs[0]
            and _is_infinity(consumer.inputs[1])
        ):
            return True
    return False


def _number(value: ir.Value | None) -> float | None:
    tensor = constant_tensor(value) if value is not None else None
    if tensor is None or tensor.size != 1:
        return None
    return float(tensor.numpy().reshape(()))


def _is_infinity(value: ir.Value | None) -> bool:
    number = _number(value)
    return number is not None and np.isinf(number)


def _made_with_an_infinity(data: ir.Value) -> bool:
    """`data` is a Where one of whose branches is a constant holding an infinity."""
    producer = data.producer()
    if producer is None or producer.op_type != "Where" or producer.domain != "":
        return False
    for branch in producer.inputs[1:]:
        tensor = constant_tensor(branch) if branch is not None else None
        if tensor is not None and np.isinf(tensor.numpy()).any():
            return True
    return False


def _sum_like(node: ir.Node, data: ir.Value, opset: int, add: Callable[..., ir.Value]) -> ir.Node:
    """A ReduceSum of `data` over the axes `node` reduces, keeping dims as it does: the axes an
    input from opset 13 on (ReduceMax's only from 18 on)."""
    attributes = [a for a in node.attributes.values() if a.name != "axes"]
    axes = node.attributes.get_ints("axes", None)
    if opset < 13:  # both take the axes as an attribute
        return ir.Node("", "ReduceSum", [data], list(node.attributes.values()))
    if axes is None:  # the axes an input of both (opset 18), or none given (every axis)
        return ir.Node("", "ReduceSum", [data, *node.inputs[1:]], attributes)
    vector = ir.tensor(np.array(list(axes), np.int64))
    axes_value = add(ir.node("Constant", [], {"value": vector}), "axes", ir.DataType.INT64,
                     ir.Shape([len(axes)]))  # fmt: skip
    return ir.Node("", "ReduceSum", [data, axes_value], attributes)


def _correct(graph: ir.Graph, node: ir.Node, opset: int, unique: Callable[[str], str]) -> None:
    data = node.inputs[0]
    assert data is not None
    result = node.outputs[0]
    base = result.name or node.op_type.lower()
    finite, infinite = _EXTREMA[node.op_type]
    made: list[ir.Node] = []

    def add(new: ir.Node, suffix: str, dtype: ir.DataType, shape: ir.Shape | None) -> ir.Value:
        new.outputs[0].name = new.name = unique(f"{base}_{suffix}")
        new.outputs[0].type = ir.TensorType(dtype)
        new.outputs[0].shape = None if shape is None else ir.Shape(list(shape))
        made.append(new)
        return new.outputs[0]

    def constant(number: float, suffix: str) -> ir.Value:
        tensor = ir.tensor(np.array(number, np.float32))
        return add(
            ir.node("Constant", [], {"value": tensor}), suffix, ir.DataType.FLOAT, ir.Shape([])
        )

    float_type = ir.DataType.FLOAT
    bound = constant(finite, "bound")
    at_bound = add(ir.node("Equal", [data, bound]), "at_bound", ir.DataType.BOOL, data.shape)
    count = add(
        ir.node("Cast", [at_bound], {"to": float_type}), "at_bound_float", float_type, data.shape
    )
    held = add(_sum_like(node, count, opset, add), "bound_held", float_type, result.shape)
    half = constant(0.5, "half")
    missed = add(ir.node("Less", [held, half]), "bound_missed", ir.DataType.BOOL, result.shape)
    corrected = ir.Node("", node.op_type, list(node.inputs), list(node.attributes.values()))
    raw = add(corrected, "as_computed", float_type, result.shape)
    at_result = add(ir.node("Equal", [raw, bound]), "is_bound", ir.DataType.BOOL, result.shape)
    wrong = add(ir.node("And", [at_result, missed]), "infinite", ir.DataType.BOOL, result.shape)
    infinity = constant(infinite, "infinity")
    where = ir.node("Where", [wrong, infinity, raw])
    where.name = unique(f"{base}_corrected")
    where.outputs[0].type, where.outputs[0].shape = result.type, result.shape
    made.append(where)
    graph.insert_before(node, made)
    name = result.name
    result.name = None
    result.replace_all_uses_with(where.outputs[0], replace_graph_outputs=True)
    graph.remove(node, safe=True)
    where.outputs[0].name = name
