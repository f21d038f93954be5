"""TorchScript's floor division of a dividend never negative by a positive constant is Div.

    d = Div(a, k)                                   (integers; k a positive constant scalar)
    s = Sub(d, 1)
    wrong = And(Xor(Less(a, 0), Less(k, 0)), Not(Equal(Mod(a, k), 0)))
    q = Where(wrong, s, d)                ->   q = d          (a never negative)

TorchScript exports `torch.div(a, k, rounding_mode="floor")` and `a // k` of integer tensors as
ONNX's truncating Div plus a correction where the signs differ and the division is not exact:
nine operators where one does, run in every iteration of a loop that turns an index into a row
(torchvision's `topk_idxs // num_classes`). Where the dividend is never negative
(`seqlower.lists.signs`: an index from NonZero or TopK, a Shape, a count) and the divisor a
positive constant, Less(a, 0) is false everywhere, so is the condition, and the Where gives d.
Any mix of the condition's operands that is false wherever Less(a, 0) is (the Xor with a
constant false, the And with anything) is matched; every operand of the condition is a or a
constant scalar, so the condition has d's shape and the Where gives d unbroadcast. The Where's
output, when an output of its graph, stays computed.
"""

from __future__ import annotations

__all__ = ["fold_floor_divisions"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.lists.signs import never_negative
from seqlower.passes.forwarding import forward_unchanged

DEPTH = 6  # the condition's operators: And, Xor, Less, Not, Equal, Mod
_ELEMENTWISE = frozenset({"And", "Or", "Xor", "Not", "Equal", "Less", "Greater", "Mod"})


def fold_floor_divisions(model: ir.Model) -> int:
    """Replace every floor division that is a Div (module docstring) by the Div; returns how
    many."""
    return forward_unchanged(model, _floor_division)


def _floor_division(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """The Div that `node` gives unchanged, when it is the Where of such a floor division."""
    if node.op_type != "Where" or node.domain != "" or len(node.inputs) != 3:
        return None
    if node.outputs[0].is_graph_output():
        return None
    condition, corrected, quotient = node.inputs
    div = quotient.producer() if quotient is not None else None
    if div is None or div.op_type != "Div" or div.domain != "" or len(div.inputs) != 2:
        return None
    dividend, divisor = div.inputs
    if dividend is None or dividend.dtype is None or not dividend.dtype.is_integer():
        return None
    k = _scalar(divisor, values)
    if k is None or not k > 0:
        return None
    sub = corrected.producer() if corrected is not None else None
    if sub is None or sub.op_type != "Sub" or sub.domain != "" or sub.inputs[0] is not quotient:
        return None
    if _scalar(sub.inputs[1], values) != 1:
        return None
    if not never_negative(dividend, values):
        return None
    if not _false_where_nonnegative(condition, dividend, values, DEPTH):
        return None
    return quotient


def _scalar(value: ir.Value | None, values: StaticValues) -> float | None:
    """The one entry of a constant of rank 0, else None (a constant of more dims could
    broadcast the result to another shape)."""
    array = values.get(value) if value is not None else None
    if array is None or array.ndim != 0 or array.dtype.kind not in "iufb":
        return None
    return float(array)


def _false_where_nonnegative(
    value: ir.Value | None, a: ir.Value, values: StaticValues, depth: int
) -> bool:
    """Whether `value`, made from `a` and constant scalars only, is false everywhere when `a`
    holds no negative entry."""
    if value is None or depth < 0:
        return False
    static = values.get(value)
    if static is not None:
        return static.ndim == 0 and static.dtype == np.bool_ and not bool(static)
    node = value.producer()
    if node is None or node.domain != "":
        return False
    inputs = list(node.inputs)
    if node.op_type == "Less" and len(inputs) == 2 and inputs[0] is a:
        bound = _scalar(inputs[1], values)
        return bound is not None and bound <= 0  # a >= 0 is never below a bound <= 0
    if node.op_type == "Xor" and len(inputs) == 2:
        return all(_false_where_nonnegative(x, a, values, depth - 1) for x in inputs)
    if node.op_type == "And" and len(inputs) == 2:
        first, second = inputs
        return (
            _false_where_nonnegative(first, a, values, depth - 1)
            and _made_of(second, a, values, depth - 1)
        ) or (
            _false_where_nonnegative(second, a, values, depth - 1)
            and _made_of(first, a, values, depth - 1)
        )
    return False


def _made_of(value: ir.Value | None, a: ir.Value, values: StaticValues, depth: int) -> bool:
    """Whether `value` is computed elementwise from `a` and constant scalars only (so that it
    has a's shape, or is a scalar)."""
    if value is None or depth < 0:
        return False
    if value is a or _scalar(value, values) is not None:
        return True
    node = value.producer()
    if node is None or node.domain != "" or node.op_type not in _ELEMENTWISE:
        return False
    return all(_made_of(x, a, values, depth - 1) for x in node.inputs)
