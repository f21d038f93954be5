"""The ceiling of a float made from an integer is that float, and the trip count of a range
that steps down by one from n - 1 to -1 is n (TorchScript's `range(n - 1, -1, -1)`, written
`ceil((end - start) / step)`):

    y = Ceil(Cast(x, to=f))                           ->  y = Cast(x, to=f)   (x an integer)
    y = Ceil(Div(Cast(Sub(a, Sub(n, b)), to=f), -1))  ->  y = Cast(n, to=f)   (a + b = 0)

f is a float type. Both are exact for every input:

- a float converted from an integer holds an integer (or an infinity, for a float16 too small
  for it), which its ceiling keeps;
- a - (n - b) = -n in the integers' wrapping arithmetic when a + b = 0; dividing by -1 negates
  exactly; and converting -n rounds to the negation of what converting n rounds to (rounding
  to nearest is symmetric), where -n is representable: n is proved never negative
  (`seqlower.lists.signs`), so n is not the type's minimum. The ceiling of that negation
  (an integer or an infinity) is itself.

a, b and the -1 are constants of one element whose rank is at most their operand's, so that
broadcasting gives the shape of n (of x). Six launches (two Subs, Cast, Div, Ceil, and the Cast
back to an integer the trip count then takes) become two in the second form; one in the first.
A Ceil whose output is an output of its graph is left alone.
"""

from __future__ import annotations

__all__ = ["fold_integer_ceils"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.lists.signs import never_negative
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream

_FLOATS = frozenset(
    {
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.FLOAT16,
        ir.DataType.BFLOAT16,
    }
)
_INTEGERS = frozenset(
    {
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
    }
)
_SIGNED = frozenset({ir.DataType.INT32, ir.DataType.INT64})


def fold_integer_ceils(model: ir.Model) -> int:
    """Rewrite every such Ceil (module docstring); returns how many."""
    values = StaticValues(model.opset_imports.get(""))
    rewritten: list[ir.Node] = []
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            if node.op_type != "Ceil" or node.domain != "" or len(node.inputs) != 1:
                continue
            if node.outputs[0].is_graph_output() or node.inputs[0] is None:
                continue
            if _float_cast(node.inputs[0]) is not None:  # first form: already an integer
                node.outputs[0].replace_all_uses_with(node.inputs[0])
                rewritten.append(node)
                continue
            found = _count_down(node.inputs[0], values)
            if found is None:
                continue
            n, to = found
            cast = ir.node("Cast", [n], {"to": int(to)})
            graph.insert_before(node, [cast])
            cast.outputs[0].dtype = to
            cast.outputs[0].shape = n.shape
            node.outputs[0].replace_all_uses_with(cast.outputs[0])
            rewritten.append(node)
    if rewritten:
        remove_dead_upstream(rewritten)
    return len(rewritten)


def _producer(value: ir.Value | None, op_type: str, inputs: int) -> ir.Node | None:
    node = value.producer() if value is not None else None
    if node is None or node.op_type != op_type or node.domain != "":
        return None
    if len(node.inputs) != inputs or any(v is None for v in node.inputs):
        return None
    return node


def _float_cast(value: ir.Value) -> tuple[ir.Value, ir.DataType] | None:
    """(x, f), when `value` is Cast(x, to=f) of an integer x to a float type f."""
    cast = _producer(value, "Cast", 1)
    if cast is None:
        return None
    to = ir.DataType(cast.attributes.get_int("to", 0))
    source = cast.inputs[0]
    if to not in _FLOATS or source is None or source.dtype not in _INTEGERS:
        return None
    return source, to


def _count_down(value: ir.Value, values: StaticValues) -> tuple[ir.Value, ir.DataType] | None:
    """(n, f), when `value` is Div(Cast(Sub(a, Sub(n, b)), to=f), -1) (second form)."""
    div = _producer(value, "Div", 2)
    if div is None:
        return None
    quotient, divisor = div.inputs
    assert quotient is not None and divisor is not None
    if not _one_element_of(divisor, quotient, values, -1):
        return None
    found = _float_cast(quotient)
    if found is None:
        return None
    difference, to = found
    outer = _producer(difference, "Sub", 2)
    if outer is None:
        return None
    a, inner_value = outer.inputs
    inner = _producer(inner_value, "Sub", 2)
    if inner is None:
        return None
    n, b = inner.inputs
    assert a is not None and n is not None and b is not None
    if n.dtype not in _SIGNED or n.shape is None:
        return None
    first, second = _scalar(a, n, values), _scalar(b, n, values)
    if first is None or second is None:
        return None
    bits = 64 if n.dtype == ir.DataType.INT64 else 32
    total = (first + second) % (1 << bits)  # the sum as the type wraps it
    if total != 0 or not never_negative(n, values):
        return None
    return n, to


def _scalar(value: ir.Value, like: ir.Value, values: StaticValues) -> int | None:
    """The integer a constant of one element holds, broadcasting to the shape of `like`."""
    array = values.get(value)
    if array is None or array.size != 1 or not _fits(array.shape, like):
        return None
    if not np.issubdtype(array.dtype, np.integer):
        return None
    return int(array.reshape(-1)[0])


def _one_element_of(value: ir.Value, like: ir.Value, values: StaticValues, want: float) -> bool:
    """Whether `value` is a constant of one element equal to `want`, broadcasting to the shape
    of `like`."""
    array = values.get(value)
    if array is None or array.size != 1 or not _fits(array.shape, like):
        return False
    return bool(array.reshape(-1)[0] == want)


def _fits(shape: tuple[int, ...], like: ir.Value) -> bool:
    """Whether a tensor of `shape` (one element) broadcasts to `like`'s shape unchanged: its
    rank is at most `like`'s."""
    return like.shape is not None and len(shape) <= len(like.shape)
