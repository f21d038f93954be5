"""Rows written to the places a mask selects and compressed back by that mask are the rows, and
a mask reshaped to the shape it has is the mask:

    r = Reshape(m, Shape(x))                    ->   r = m    (m = Equal(x, s), s of rank 0)

    places = Compress(Range(0, L, 1), m, axis=0)
    whole = ScatterND(base, Unsqueeze(places, [1]), v)        (base: L rows)
    y = Compress(whole, m, axis=0)              ->   y = v    (m: L entries)

A loop whose body appends under a condition is batched into both (the appended values
computed on the rows where the condition holds, scattered into a stack of every row, the stack
compressed by the condition): five launches and a stack of every row that give back v, whose
fixed cost a batch of one element pays in full.

Each fold holds only where it is proved, by a few steps up the producers (no graph walk):

- a value has the shape of x when it is x, or an elementwise op of it and of operands of rank
  0 (broadcasting keeps x's shape): the Reshape's target, all of Shape(x), is then its shape;
- lengths along axis 0 are equal when they come from the same dim by steps that keep it (a
  Range from 0 by 1 to it, an elementwise op with operands of rank 0, Expand of a rank-0 value
  to Shape(q, 0, 1), Gather along axis 0 of a vector at indices: the indices' length): m, the
  Range and base have L entries, so every place is one of base's rows and the second Compress
  picks exactly the places, in order; v has as many rows as there are places, and base's
  other dims as numbers equal to v's, so the ScatterND is sure to succeed: nothing that could
  fail goes.

A Compress without an axis (which flattens), a ScatterND that adds or multiplies (reduction),
or a result that is an output of its graph is left alone.
"""

from __future__ import annotations

__all__ = ["fold_scattered_rows"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.passes.forwarding import forward_unchanged

# ops whose output has the broadcast shape of their inputs
_ELEMENTWISE = frozenset(
    (
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "And",
        "Or",
        "Xor",
        "Not",
        "Neg",
        "Abs",
        "Cast",
        "Identity",
        "Where",
        "Max",
        "Min",
    )
)
_DEPTH = 8  # steps up the producers a proof may take

Key = tuple[str, int]


def fold_scattered_rows(model: ir.Model) -> int:
    """Remove every such Reshape and Compress (module docstring); returns how many."""
    return forward_unchanged(model, _unchanged)


def _unchanged(node: ir.Node, values: StaticValues) -> ir.Value | None:
    if node.domain != "" or node.outputs[0].is_graph_output():
        return None
    if node.op_type == "Reshape":
        return _own_shape(node)
    if node.op_type == "Compress":
        return _compressed_back(node, values)
    return None


def _own_shape(node: ir.Node) -> ir.Value | None:
    """m, when `node` is Reshape(m, Shape(x)) of an m that has x's shape."""
    if len(node.inputs) != 2 or node.inputs[0] is None or node.inputs[1] is None:
        return None
    shape = node.inputs[1].producer()
    if shape is None or shape.op_type != "Shape" or shape.domain != "" or not shape.inputs:
        return None
    source = shape.inputs[0]
    if source is None or source.shape is None:
        return None
    rank = len(source.shape)
    start = shape.attributes.get_int("start", 0)
    end = shape.attributes.get_int("end", rank)
    start, end = start + rank if start < 0 else start, end + rank if end < 0 else end
    if start > 0 or end < rank:  # not all of x's shape
        return None
    return node.inputs[0] if _shaped_like(node.inputs[0], source, _DEPTH) else None


def _shaped_like(value: ir.Value, like: ir.Value, depth: int) -> bool:
    """Whether `value` has the shape of `like`: it is `like`, or an elementwise op of
    operands each shaped like it or of rank 0, one of them shaped like it."""
    if value is like:
        return True
    node = value.producer()
    if depth == 0 or node is None or node.domain != "" or node.op_type not in _ELEMENTWISE:
        return False
    found = False
    for operand in node.inputs:
        if operand is None:
            return False
        if _rank_zero(operand):
            continue
        if not _shaped_like(operand, like, depth - 1):
            return False
        found = True
    return found


def _rank_zero(value: ir.Value) -> bool:
    return value.shape is not None and len(value.shape) == 0


def _compressed_back(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """v, when `node` compresses back the rows a ScatterND wrote at the places its mask gives."""
    if len(node.inputs) != 2 or not _axis_zero(node):
        return None
    whole, mask = node.inputs
    scatter = whole.producer() if whole is not None else None
    if scatter is None or scatter.op_type != "ScatterND" or scatter.domain != "":
        return None
    if scatter.attributes.get_string("reduction", "none") != "none" or len(scatter.inputs) != 3:
        return None
    base, index, rows = scatter.inputs
    unsqueeze = index.producer() if index is not None else None
    if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or unsqueeze.domain != "":
        return None
    places = unsqueeze.inputs[0]
    if places is None or places.shape is None or len(places.shape) != 1:
        return None
    axes = unsqueeze.attributes.get_ints("axes", None)
    if len(unsqueeze.inputs) > 1:
        found = values.get(unsqueeze.inputs[1])
        axes = None if found is None else [int(a) for a in found.reshape(-1)]
    if axes not in ([1], [-1]):
        return None
    picked = places.producer()
    if picked is None or picked.op_type != "Compress" or picked.domain != "":
        return None
    if len(picked.inputs) != 2 or picked.inputs[1] is not mask or not _axis_zero(picked):
        return None
    positions = picked.inputs[0]
    if positions is None or not _counts_from_zero(positions, values):
        return None
    if mask is None or base is None or rows is None:
        return None
    length = _length(positions, values, _DEPTH)
    if _length(mask, values, _DEPTH) != length or _length(base, values, _DEPTH) != length:
        return None
    if _length(rows, values, _DEPTH) != _length(places, values, _DEPTH):
        return None
    if base.shape is None or rows.shape is None or len(base.shape) != len(rows.shape):
        return None
    for ours, theirs in zip(list(base.shape)[1:], list(rows.shape)[1:], strict=True):
        if not isinstance(ours, int) or ours != theirs:
            return None
    return rows


def _axis_zero(node: ir.Node) -> bool:
    """Whether a Compress has an axis, and it is 0 (without one it flattens its input)."""
    if "axis" not in node.attributes:
        return False
    axis = node.attributes.get_int("axis", 0)
    data = node.inputs[0]
    rank = len(data.shape) if data is not None and data.shape is not None else None
    return axis == 0 or (rank is not None and axis == -rank)


def _counts_from_zero(value: ir.Value, values: StaticValues) -> bool:
    """Whether `value` is Range(0, L, 1)."""
    node = value.producer()
    if node is None or node.op_type != "Range" or node.domain != "" or len(node.inputs) != 3:
        return False
    start, delta = values.get(node.inputs[0]), values.get(node.inputs[2])
    return (
        start is not None
        and delta is not None
        and start.size == delta.size == 1
        and (int(start.reshape(-1)[0]) == 0 and int(delta.reshape(-1)[0]) == 1)
    )


def _length(value: ir.Value, values: StaticValues, depth: int) -> Key:
    """A key equal for two values with the same length along axis 0 (module docstring): the
    value whose length it is, at the end of the steps that keep it."""
    node = value.producer()
    if depth == 0 or node is None or node.domain != "":
        return ("value", id(value))
    if node.op_type == "Range" and _counts_from_zero(value, values):
        limit = node.inputs[1]
        dim = _dim_zero_of(limit) if limit is not None else None
        if dim is not None:  # L = len(q) >= 0: the Range has L entries
            return _length(dim, values, depth - 1)
        return ("range", id(limit))  # max(L, 0) entries: equal to another Range to L only
    if node.op_type in _ELEMENTWISE:
        shaped = [v for v in node.inputs if v is not None and not _rank_zero(v)]
        if len(shaped) == 1 and all(v is not None for v in node.inputs):
            return _length(shaped[0], values, depth - 1)
    if node.op_type == "Expand" and len(node.inputs) == 2 and node.inputs[0] is not None:
        target = node.inputs[1]
        shape = target.producer() if target is not None else None
        if _rank_zero(node.inputs[0]) and shape is not None and shape.op_type == "Shape":
            source = shape.inputs[0] if shape.inputs else None
            if source is not None and _first_dim_only(shape, source):
                return _length(source, values, depth - 1)
    if (
        node.op_type == "Gather"
        and len(node.inputs) == 2
        and not node.attributes.get_int("axis", 0)
    ):
        data, indices = node.inputs  # a vector read at indices: as many entries as they have
        if _is_vector(data) and _is_vector(indices):
            return _length(indices, values, depth - 1)  # type: ignore[arg-type]
    return ("value", id(value))


def _is_vector(value: ir.Value | None) -> bool:
    return value is not None and value.shape is not None and len(value.shape) == 1


def _first_dim_only(shape: ir.Node, source: ir.Value) -> bool:
    """Whether `shape` is Shape(source, start=0, end=1) or Shape of a vector: [len(source)]."""
    if shape.domain != "" or source.shape is None or len(source.shape) == 0:
        return False
    rank = len(source.shape)
    start = shape.attributes.get_int("start", 0)
    end = shape.attributes.get_int("end", rank)
    start, end = start + rank if start < 0 else start, end + rank if end < 0 else end
    return start == 0 and min(end, rank) == 1


def _dim_zero_of(value: ir.Value) -> ir.Value | None:
    """q, when the scalar `value` is len(q): Squeeze or Reshape to a scalar of
    Shape(q, 0, 1), or Gather(Shape(q), 0)."""
    if value.shape is None or len(value.shape) != 0:
        return None
    node = value.producer()
    if node is None or node.domain != "" or not node.inputs or node.inputs[0] is None:
        return None
    first = node.inputs[0]
    if node.op_type in ("Squeeze", "Reshape"):
        shape = first.producer()
        if shape is not None and shape.op_type == "Shape" and shape.inputs:
            source = shape.inputs[0]
            if source is not None and _first_dim_only(shape, source):
                return source
    return None
