"""The smallest of a value and the largest int64 is the value.

    n1 = Unsqueeze(n, [0])
    both = Concat(MAX, n1)            (MAX: a constant of 9223372036854775807s)
    m = ReduceMin(both, keepdims=0)   ->   m = n

TorchScript runs `for i, x in enumerate(xs)` and `zip(a, b)` for as many iterations as the
shortest of what it walks, and an `enumerate` counter has no end: the trip count is exported as
the minimum of the largest int64 and `len(xs)`, three operator launches that give `len(xs)`.
Only an int64 ReduceMin over all of its one axis, keepdims 0, of a Concat on axis 0 whose parts
are 1-D constants of the largest int64 but one, which is a scalar Unsqueezed on axis 0, is
folded. The ReduceMin's output, when an output of its graph, stays computed.
"""

from __future__ import annotations

__all__ = ["fold_trivial_mins", "trivial_min_operand"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.passes.forwarding import forward_unchanged

_INT64_MAX = np.iinfo(np.int64).max


def fold_trivial_mins(model: ir.Model) -> int:
    """Replace every trivial minimum (module docstring) by its one value; returns how many."""
    return forward_unchanged(model, _forwarded_min)


def _forwarded_min(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """The value `node` gives unchanged, when it is a trivial minimum that is not a graph
    output (a graph output stays computed)."""
    if node.outputs and node.outputs[0].is_graph_output():
        return None
    return trivial_min_operand(node, values)


def trivial_min_operand(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """The scalar n, when `node` is ReduceMin(Concat(MAX, Unsqueeze(n, [0]))) (module
    docstring): the value the node gives, wherever that value is read."""
    if node.op_type != "ReduceMin" or node.domain != "" or not node.inputs:
        return None
    if node.attributes.get_int("keepdims", 1) != 0:
        return None
    axes = node.attributes.get_ints("axes", None)
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        array = values.get(node.inputs[1])
        axes = None if array is None else [int(a) for a in array.reshape(-1)]
        if array is None or not axes:
            return None  # unknown axes, or empty axes (which may mean "reduce nothing")
    if axes not in (None, [0], [-1]):
        return None
    concat = node.inputs[0].producer() if node.inputs[0] is not None else None
    if concat is None or concat.op_type != "Concat" or concat.domain != "":
        return None
    if concat.attributes.get_int("axis", 0) not in (0, -1):
        return None
    found: list[ir.Value] = []
    for part in concat.inputs:
        if part is None:
            return None
        array = values.get(part)
        if array is not None:
            if array.ndim != 1 or array.dtype != np.int64 or not np.all(array == _INT64_MAX):
                return None
            continue
        scalar = _unsqueezed_scalar(part, values)
        if scalar is None:
            return None
        found.append(scalar)
    return found[0] if len(found) == 1 else None


def _unsqueezed_scalar(value: ir.Value, values: StaticValues) -> ir.Value | None:
    """x, when `value` is Unsqueeze(x, [0]) of an int64 scalar x."""
    producer = value.producer()
    if producer is None or producer.op_type != "Unsqueeze" or producer.domain != "":
        return None
    axes = producer.attributes.get_ints("axes", None)
    if len(producer.inputs) > 1 and producer.inputs[1] is not None:
        array = values.get(producer.inputs[1])
        axes = None if array is None else [int(a) for a in array.reshape(-1)]
    if axes not in ([0], [-1]):
        return None
    scalar = producer.inputs[0]
    if scalar is None or scalar.dtype != ir.DataType.INT64 or scalar.shape is None:
        return None
    return scalar if len(scalar.shape) == 0 else None
