"""Arithmetic with a constant that changes nothing is removed: the value is read as it is.

    Add(x, 0), Add(0, x), Sub(x, 0)          ->  x      (integers)
    Sub(x, 0), Mul(x, 1), Mul(1, x), Div(x, 1) ->  x    (floating point too)

TorchScript writes `range(0, n, 2)` as `0 + i * 2` and `x.size(0) - 0` where a slice has no
start; onnxruntime runs each as a kernel (about 0.2 us a run, per iteration in a loop body).
Floating-point Add of 0 stays (-0.0 + 0 is +0.0). The constant must be a single element that
cannot make the result larger than x (a scalar, or of a rank no larger than x's known rank),
and the result must not be an output of its graph. Like the Casts to their own type
(`noop_casts`), these go before any estimate and from an original kept as given too, so that
both forms of a region are costed without them.
"""

from __future__ import annotations

__all__ = ["remove_identity_arithmetic"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues, not_one_element
from seqlower.passes.forwarding import forward_unchanged

ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div"})  # the operators looked at
_INTEGERS = frozenset(
    {
        ir.DataType.INT8, ir.DataType.INT16, ir.DataType.INT32, ir.DataType.INT64,
        ir.DataType.UINT8, ir.DataType.UINT16, ir.DataType.UINT32, ir.DataType.UINT64,
    }
)  # fmt: skip
_FLOATS = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
)
# (operator, position of the constant) -> the constant that changes nothing, and whether
# floating-point values keep their bits
_NEUTRAL = {
    ("Add", 1): (0, False),
    ("Add", 0): (0, False),
    ("Sub", 1): (0, True),
    ("Mul", 1): (1, True),
    ("Mul", 0): (1, True),
    ("Div", 1): (1, True),
}


def remove_identity_arithmetic(model: ir.Model) -> int:
    """Remove every Add, Sub, Mul and Div that changes nothing (module docstring); returns how
    many were removed."""
    return forward_unchanged(model, _kept_operand)


def _kept_operand(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """The operand `node` gives unchanged, when it changes nothing."""
    if node.domain != "" or node.op_type not in ARITHMETIC:
        return None
    if len(node.inputs) != 2 or node.outputs[0].is_graph_output():
        return None
    for position in (1, 0):
        neutral = _NEUTRAL.get((node.op_type, position))
        operand, other = node.inputs[position], node.inputs[1 - position]
        if neutral is None or operand is None or other is None or not_one_element(operand):
            continue
        constant = values.get(operand)
        if constant is None or constant.size != 1 or constant.reshape(-1)[0] != neutral[0]:
            continue
        dtype = other.dtype
        if dtype not in _INTEGERS and (dtype not in _FLOATS or not neutral[1]):
            continue
        if constant.dtype != dtype.numpy():  # type: ignore[union-attr]
            continue  # not a well-typed model: left to fail as it does
        if constant.ndim > 0 and (other.shape is None or constant.ndim > len(other.shape)):
            continue  # the constant might add dims
        return other
    return None
