"""How many times each Loop of the main graph ran in a trial, where the inputs make it visible.

A Loop's iteration count is visible from outside when its trip count and condition are fed by
graph inputs (through Identity and Cast), constants or initializers that cannot be overridden:

    Loop(M = 3, cond = true, body: cond_out = Identity(cond_in))   -> "3 iterations"
    Loop(M = 3, cond = true, body: cond_out = Less(i, k))          -> "at most 3 iterations"
    Loop(M, cond = false)                                          -> "0 iterations"

Anything else (a trip count computed from data, a while loop without a trip count) is left out.
"""

from __future__ import annotations

__all__ = ["loop_iterations"]

import numpy as np
import onnx_ir as ir

from seqlower.ops import graph_nodes
from seqlower.verification.values import Feeds

_PASS_THROUGH = {"Identity", "Cast"}
_MAX_DEPTH = 32


def loop_iterations(model: ir.Model, feeds: Feeds) -> dict[str, str]:
    """Per Loop of the main graph (`Loop 'name'`, or `Loop #k` for the k-th when unnamed), how
    many iterations ran on `feeds`, where that is visible."""
    result: dict[str, str] = {}
    loops = [
        node for node in graph_nodes(model.graph) if node.op_type == "Loop" and node.domain == ""
    ]
    for number, node in enumerate(loops):
        trip = _scalar(node.inputs[0] if node.inputs else None, model.graph, feeds)
        condition = _scalar(node.inputs[1] if len(node.inputs) > 1 else None, model.graph, feeds)
        name = f"Loop '{node.name}'" if node.name else f"Loop #{number}"
        if condition is not None and not condition:
            result[name] = "0 iterations (its condition is false)"
        elif trip is None or (condition is None and _has_condition(node)):
            continue  # not visible
        elif _passes_condition_through(node):
            result[name] = _iterations(trip)
        else:
            result[name] = f"at most {_iterations(trip)} (its body may stop it sooner)"
    return result


def _iterations(count: int) -> str:
    count = max(count, 0)
    return f"{count} iteration{'' if count == 1 else 's'}"


def _scalar(value: ir.Value | None, graph: ir.Graph, feeds: Feeds) -> int | None:
    """The single number `value` holds on `feeds`, or None when it is not visible."""
    for _ in range(_MAX_DEPTH):
        if value is None:
            return None
        array: object = None
        if value.const_value is not None and not (value.is_graph_input() and value.name in feeds):
            array = value.const_value.numpy()
        elif value.is_graph_input():
            array = feeds.get(value.name or "")
        if array is not None:
            if isinstance(array, list) or np.size(array) != 1:
                return None
            return int(np.asarray(array).reshape(-1)[0])
        node = value.producer()
        if node is None or node.domain != "" or not node.inputs:
            return None
        if node.op_type == "Constant" and "value" in node.attributes:
            tensor = node.attributes["value"].as_tensor().numpy()
            return int(tensor.reshape(-1)[0]) if tensor.size == 1 else None
        if node.op_type not in _PASS_THROUGH:
            return None
        value = node.inputs[0]
    return None


def _has_condition(node: ir.Node) -> bool:
    return len(node.inputs) > 1 and node.inputs[1] is not None


def _passes_condition_through(node: ir.Node) -> bool:
    """True when the body returns its condition unchanged (or a constant true)."""
    body_attr = node.attributes.get("body")
    if body_attr is None:
        return False
    body = body_attr.as_graph()
    if len(body.inputs) < 2 or not body.outputs:
        return False
    condition_in, condition_out = body.inputs[1], body.outputs[0]
    for _ in range(_MAX_DEPTH):
        if condition_out is condition_in:
            return True
        producer = condition_out.producer()
        if producer is None or producer.domain != "" or producer.op_type not in _PASS_THROUGH:
            constant = None
            if producer is not None and producer.op_type == "Constant":
                attr = producer.attributes.get("value")
                constant = attr.as_tensor().numpy() if attr is not None else None
            return constant is not None and constant.size == 1 and bool(constant.reshape(-1)[0])
        condition_out = producer.inputs[0]
        if condition_out is None:
            return False
    return False
