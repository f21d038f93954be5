"""The size a value must have along one axis for the program to run at all: an op reading it
fails on any other size, so every run that succeeds had exactly that size there.

    y = Conv(chunk, W)            (W: [M, 4, kh, kw], group 1)   -> chunk has 4 along axis 1
    y = MatMul(Relu(chunk), B)    (B: [.., 8, K])                -> chunk has 8 along its last

This is what proves the chunks of `SplitToSequence(x, 4, axis=1)` equal where x's dim is not
known: the last chunk of a dim that is not a multiple of 4 is smaller, and the Conv every
iteration runs on it fails, in the original (the ONNX specification and onnxruntime both
require the input channels to be W's dim 1 times `group`) as in a batched form whose Reshape
into chunks of 4 fails. Only readers that run whenever the value is computed count: ops of the
same graph, reached through ops that keep the shape (Relu, Cast, ...); a reader inside an If
branch may never run.
"""

from __future__ import annotations

__all__ = ["required_size"]

import onnx_ir as ir

# ops whose output has their first input's shape, whatever it is
_SHAPE_KEEPING = frozenset(
    """Abs Cast Ceil Elu Erf Exp Floor Gelu HardSigmoid HardSwish Identity LeakyRelu Log Mish
    Neg Reciprocal Relu Round Selu Sigmoid Sign Softplus Softsign Sqrt Tanh""".split()  # noqa: SIM905
)


def required_size(value: ir.Value, axis: int) -> int | None:
    """The size every successful run gives `value` along `axis` (normalized, of `value`'s
    known rank), as an op of its own graph that reads it demands; None when none demands one."""
    if value.shape is None:
        return None
    rank = len(value.shape)
    seen: set[ir.Value] = set()
    pending = [value]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for node, index in current.uses():
            if node.graph is not value.graph or node.domain != "":
                continue
            if node.op_type in _SHAPE_KEEPING and index == 0:
                pending.extend(node.outputs[:1])
                continue
            size = _demanded(node, index, axis, rank)
            if size is not None:
                return size
    return None


def _demanded(node: ir.Node, index: int, axis: int, rank: int) -> int | None:
    if node.op_type == "Conv" and index == 0 and axis == 1 and rank >= 3:
        weight = node.inputs[1] if len(node.inputs) > 1 else None
        channels = _static_dim(weight, 1, rank)
        group = node.attributes.get_int("group", 1)
        return None if channels is None or group < 1 else channels * group
    if node.op_type == "MatMul" and index == 0 and axis == rank - 1 and rank >= 2:
        other = node.inputs[1] if len(node.inputs) > 1 else None
        if other is None or other.shape is None or len(other.shape) == 0:
            return None
        inner = len(other.shape) - 2 if len(other.shape) >= 2 else 0
        return _static_dim(other, inner, len(other.shape))
    return None


def _static_dim(value: ir.Value | None, axis: int, rank: int) -> int | None:
    if value is None or value.shape is None or len(value.shape) != rank:
        return None
    dim = value.shape[axis]
    return dim if isinstance(dim, int) and dim > 0 else None
