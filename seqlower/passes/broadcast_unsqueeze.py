"""A leading axis of one that broadcasting adds anyway is not made first.

    u = Unsqueeze(x, [0])       (x of rank r)
    y = Add(u, m)               ->   y = Add(x, m)      (m of rank r + 1 or more)

Broadcasting aligns dims from the end and gives a missing leading dim the size 1, so an operand
with leading axes of one added reads as the operand without them whenever another operand has at
least the rank of the result: `x.unsqueeze(0) + scores` (a Viterbi step adds the previous
scores to every row of the transition matrix). Each reader of the Unsqueeze must be a
multidirectionally broadcasting element-wise operator (Add, Sub, Mul, Div, Pow, comparisons,
logical operators, Where, Max, Min, Sum, ...) another of whose inputs has a known rank at least
that of the Unsqueeze's output; the axes must be the leading ones; the Unsqueeze's output must
not be an output of its graph. Then the readers read x and the Unsqueeze goes.
"""

from __future__ import annotations

__all__ = ["drop_broadcast_unsqueezes"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.passes.forwarding import forward_unchanged

_BROADCASTING = frozenset(
    {
        "Add", "And", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal", "Greater",
        "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul", "Or", "Pow", "Sub",
        "Sum", "Where", "Xor",
    }
)  # fmt: skip


def drop_broadcast_unsqueezes(model: ir.Model) -> int:
    """Remove every Unsqueeze that broadcasting makes anyway (module docstring); returns how
    many."""
    return forward_unchanged(model, _redundant)


def _redundant(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """x, when `node` is an Unsqueeze of x on leading axes that its every reader broadcasts."""
    if node.op_type != "Unsqueeze" or node.domain != "" or not node.inputs:
        return None
    source, result = node.inputs[0], node.outputs[0]
    if source is None or source.shape is None or result.is_graph_output() or not result.uses():
        return None
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = values.get_ints(node.inputs[1])
    else:
        axes = node.attributes.get_ints("axes", None)
    if axes is None:
        return None
    rank = len(source.shape) + len(axes)
    if sorted(a if a >= 0 else a + rank for a in axes) != list(range(len(axes))):
        return None
    for reader, index in result.uses():
        if reader.op_type not in _BROADCASTING or reader.domain != "":
            return None
        others = [v for i, v in enumerate(reader.inputs) if i != index and v is not result]
        if not any(v is not None and v.shape is not None and len(v.shape) >= rank for v in others):
            return None
    return source
