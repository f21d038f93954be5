"""Stacks of a sequence's elements read from the tensor they were split from, without copying
the elements one by one (the split axis moved to the front, or the chunks' axis cut in two by a
Reshape), and the Reshape target that concatenates a stack again (two axes merged). Shared by
the batching rules (`batching`, `loop_batching`) and the unbind rules (`loops`).
"""

from __future__ import annotations

__all__ = ["ALLOW_ZERO", "chunks", "dims", "equal_split_size", "merged_shape", "moveaxis_to_front"]

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.rewriter import Builder

# every Reshape emitted here has a fully resolved target in which 0 means 0, not "copy the
# input's dim" (allowzero exists from opset 14; the rules using these emitters require it)
ALLOW_ZERO = {"allowzero": 1}


def moveaxis_to_front(builder: Builder, data: ir.Value, axis: int, rank: int) -> ir.Value:
    if axis == 0:
        return data
    perm = [axis, *[i for i in range(rank) if i != axis]]
    return builder.op("Transpose", [data], {"perm": perm}, name="stack")


def chunks(
    data: ir.Value, axis: int, count: int | None, size: int
) -> Callable[[Builder], ir.Value]:
    """The stack of `count` chunks of `size` along `axis`: [N, *shape with dim axis = size].
    A count of None is the dim's size divided by `size`, computed at run time: the Reshape
    fails where that dim is not a multiple of `size`."""

    def build(builder: Builder) -> ir.Value:
        rank = len(data.shape)  # type: ignore[arg-type]
        if size == 1:
            return builder.unsqueeze(moveaxis_to_front(builder, data, axis, rank), [axis + 1])
        if count is None:
            whole = dims(builder, data, axis, axis + 1)
            counted = builder.op("Div", [whole, builder.ints([size])])
            pieces = [builder.op("Concat", [counted, builder.ints([size])], {"axis": 0})]
        else:
            pieces = [builder.ints([count, size])]
        if axis > 0:
            pieces.insert(0, dims(builder, data, 0, axis))
        if axis + 1 < rank:
            pieces.append(dims(builder, data, axis + 1, rank))
        shape = builder.op("Concat", pieces, {"axis": 0}) if len(pieces) > 1 else pieces[0]
        chunked = builder.op("Reshape", [data, shape], ALLOW_ZERO)
        return moveaxis_to_front(builder, chunked, axis, rank + 1)

    return build


def dims(builder: Builder, value: ir.Value, start: int, end: int) -> ir.Value:
    """Shape(value)[start:end] as a 1-D int64 tensor; a constant when those dims are static."""
    shape = value.shape
    dims = None if shape is None else list(shape)[start:end]
    if dims is not None and all(isinstance(d, int) for d in dims):
        return builder.ints([int(d) for d in dims])  # type: ignore[arg-type]
    if builder.opset >= 15:
        return builder.op("Shape", [value], {"start": start, "end": end})
    whole = builder.op("Shape", [value])
    return builder.op(
        "Slice", [whole, builder.ints([start]), builder.ints([end]), builder.ints([0])]
    )


def equal_split_size(split: ir.Node, data: ir.Value, axis: int, values: StaticValues) -> int | None:
    """The size of every chunk of `split` when they are all equal and static, else None."""
    sizes: list[int] | None = None
    if len(split.inputs) > 1 and split.inputs[1] is not None:
        sizes = values.get_ints(split.inputs[1])
    elif split.attributes.get_ints("split") is not None:
        sizes = list(split.attributes.get_ints("split"))  # type: ignore[arg-type]
    else:
        dim = data.shape[axis] if data.shape is not None else None
        count = len(split.outputs)
        if isinstance(dim, int) and dim % count == 0:
            sizes = [dim // count] * count
    if not sizes or len(set(sizes)) != 1:
        return None
    return sizes[0]


def merged_shape(
    builder: Builder,
    value: ir.Value,
    rank: int,
    shape: list[int | ir.SymbolicDim | None] | None,
    axis: int,
) -> ir.Value:
    """The target of a Reshape (allowzero=1) of `value`, of `rank` and with the dims `shape`
    when known, that merges its axes `axis` and `axis + 1`: a constant when the dims are static;
    a constant with -1 for the merged dim when only the merged pair is not (the others multiply
    to more than 0, so -1 is exact, even for an empty tensor); else computed from Shape(value)."""
    if shape is not None and all(isinstance(d, int) for d in shape):
        merged = int(shape[axis]) * int(shape[axis + 1])  # type: ignore[arg-type]
        return builder.ints([*shape[:axis], merged, *shape[axis + 2 :]], "merged_shape")  # type: ignore[list-item]
    if shape is not None:
        others = [*shape[:axis], *shape[axis + 2 :]]
        if all(isinstance(d, int) for d in others) and int(np.prod(others, dtype=np.int64)) > 0:
            return builder.ints([*others[:axis], -1, *others[axis:]], "merged_shape")  # type: ignore[list-item]
    count = dims(builder, value, axis, axis + 1)
    pieces = [builder.op("Mul", [count, dims(builder, value, axis + 1, axis + 2)])]
    if axis > 0:
        pieces.insert(0, dims(builder, value, 0, axis))
    if axis + 2 < rank:
        pieces.append(dims(builder, value, axis + 2, rank))
    return builder.op("Concat", pieces, {"axis": 0}) if len(pieces) > 1 else pieces[0]
