"""The Shape of an elementwise operator with an operand of unit dims is the Shape of its other
operand.

    e = Equal(x, c)              (c: a scalar, or declared [1, .., 1] of x's rank or less)
    d = Shape(e, start, end) ->  d = Shape(x, start, end)

A row's length read from a mask of it (`Shape(Equal(tokens, eos), 1, 2)`) beside the same
length read from the tensor itself: the same dim, read through two values, which the merge of
duplicates cannot join. Broadcasting x with c, whose every dim is 1 and whose rank is not above
x's, gives x's shape exactly, and the operators taken cannot fail on operands that broadcast
(comparisons, And, Or, Xor, Add, Sub, Mul, Max and Min of two; not Div, Mod or Pow, which may
fail or differ by element type, nor operators of more than two inputs). The Shape keeps its
start and end; only its input changes, and the operator goes where nothing else reads it.
x's rank must be declared (c's rank is compared with it); a Shape whose output is a graph
output is folded too (its value is unchanged). A chain of such operators is followed to its
first operand that is not one (else a second lowering would fold what the first left).
"""

from __future__ import annotations

__all__ = ["fold_elementwise_shapes"]

import onnx_ir as ir

from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream

# elementwise, broadcasting, and never failing on operands of one element type that broadcast
_NEVER_FAILING = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Max",
        "Min",
        "Equal",
        "Less",
        "Greater",
        "LessOrEqual",
        "GreaterOrEqual",
        "And",
        "Or",
        "Xor",
    }
)


def fold_elementwise_shapes(model: ir.Model) -> int:
    """Make every Shape of an elementwise operator with an operand of unit dims read the other
    operand (module docstring); returns how many."""
    bypassed: list[ir.Node] = []
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            # a chain of them (`Shape(Min(Sub(d, x), m))`) read from its first operand at once
            while (source := _shaped_operand(node)) is not None:
                bypassed.append(node.inputs[0].producer())
                node.replace_input_with(0, source)
    if bypassed:
        remove_dead_upstream(bypassed)
    return len(bypassed)


def _shaped_operand(node: ir.Node) -> ir.Value | None:
    """x, when `node` is Shape(Op(x, c)) or Shape(Op(c, x)) with c of unit dims."""
    if node.op_type != "Shape" or node.domain != "" or len(node.inputs) != 1:
        return None
    operand = node.inputs[0]
    producer = operand.producer() if operand is not None else None
    if producer is None or producer.domain != "" or producer.op_type not in _NEVER_FAILING:
        return None
    if len(producer.inputs) != 2 or len(producer.outputs) != 1:
        return None
    left, right = producer.inputs
    if left is None or right is None:
        return None
    for x, c in ((left, right), (right, left)):
        if x.shape is None or c.shape is None or c.shape.rank() > x.shape.rank():
            continue
        if all(isinstance(dim, int) and dim == 1 for dim in c.shape):
            return x
    return None
