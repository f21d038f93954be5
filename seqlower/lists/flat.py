"""The flat layout: any list of rank-r elements, as (data, shapes).

`data` holds the elements flattened and concatenated (1-D); `shapes` is an `[n, r]` table, row
i the shape of element i. `sizes = ReduceProd(shapes, axis 1)`, `ends = CumSum(sizes)`,
`starts = ends - sizes`; element i is `data[starts[i]:ends[i]]` reshaped to `shapes[i]`.

    SequenceEmpty()              -> data = [] ; shapes = [0, r] table
    SequenceConstruct(x0..xk)    -> Concat(Reshape(xi, [-1])..) ; Concat(Shape(xi) as a row..)
    SequenceInsert(s, x)         -> Concat(data, Reshape(x, [-1])) ; Concat(shapes, Shape(x) row)
    SequenceInsert(s, x, p)      -> the same, spliced in at starts[p] and row p (p < 0: from n)
    SequenceErase(s, p)          -> data without [starts[p], ends[p]) ; shapes without row p
    SequenceAt(s, p)             -> Reshape(Slice(data, starts[p], ends[p]), shapes[p], allowzero=1)
    SequenceAt(s, -1)            -> Reshape(data[total - prod(shapes[-1]):], shapes[-1])
    Shape(SequenceAt(s, p))      -> shapes[p]
    SequenceLength(s)            -> Shape(shapes)[0]
    ConcatFromSequence(s, axis=0)             -> Reshape(data, [sum(shapes[:, 0]), shapes[0, 1:]])
    ConcatFromSequence(s, new_axis=1, axis=a) -> Transpose(Reshape(data, [n, shapes[0]]), 0 -> a)
    ConcatFromSequence(s, axis=a != 0)        -> a Loop over the elements (ListForms.concat_loop)
    ConcatFromSequence(s, axis=a != 0), the list read no other way
                                              -> each element stored with a moved first; the
                                                 axis-0 join, Transpose back (`axis_first`)
    every element flattened, concatenated     -> data  (`seqlower.lists.flattened`)
    SplitToSequence(x, axis=a), chunks of one -> Reshape(x with axis a moved first, [-1])
    SplitToSequence(x, sizes, axis=a != 0)    -> a Loop over the chunks, each flattened
"""

from __future__ import annotations

__all__ = [
    "at",
    "concat",
    "construct",
    "empty",
    "erase",
    "flattened",
    "insert",
    "shape_at",
    "split",
    "table",
]

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from seqlower.lists import paired
from seqlower.lists.tensors import (
    INT64_MAX,
    Layout,
    Table,
    TensorList,
    body_inputs,
    body_outputs,
    chunks,
    int64,
    moved_first,
    scalar_int,
)
from seqlower.lists.tensors import (
    concat as concat_parts,
)
from seqlower.lists.tensors import (
    empty as empty_tensor,
)
from seqlower.rewriter import Builder

if TYPE_CHECKING:
    from seqlower.lists.forms import ListForms


def empty(b: Builder, layout: Layout) -> TensorList:
    data = empty_tensor(b, [0], layout.dtype, "list_data")
    shapes = empty_tensor(b, [0, layout.rank], ir.DataType.INT64, "list_shapes")
    return TensorList((data, shapes), layout)


def construct(b: Builder, elements: Sequence[ir.Value], layout: Layout) -> TensorList:
    elements = [_stored(b, x, layout) for x in elements]
    data = concat_parts(b, [_flatten(b, x) for x in elements], 0, "list_data")
    shapes = concat_parts(b, [_row(b, x) for x in elements], 0, "list_shapes")
    return TensorList((data, shapes), layout)


def insert(
    forms: ListForms, b: Builder, s: TensorList, x: ir.Value, p: ir.Value | None
) -> TensorList:
    x = _stored(b, x, s.layout)
    return paired.insert(forms, b, s, [_flatten(b, x)], _row(b, x), p)


def _stored(b: Builder, x: ir.Value, layout: Layout) -> ir.Value:
    """x as the list stores it: with the axis `layout.moved` moved first, if any."""
    if layout.moved is None:
        return x
    assert layout.rank is not None
    return moved_first(b, x, layout.moved, layout.rank)


def erase(forms: ListForms, b: Builder, s: TensorList, p: ir.Value | None) -> TensorList:
    return paired.erase(forms, b, s, p)


def split(forms: ListForms, b: Builder, node: ir.Node, layout: Layout) -> TensorList:
    assert layout.moved is None, "a split's list stores its chunks as they are"
    x = node.inputs[0]
    assert x is not None
    cut = chunks(b, node, forms.values)
    before = _tiled(b, cut.shape, 0, cut.axis, cut.count1)
    after = _tiled(b, cut.shape, cut.axis + 1, cut.rank, cut.count1)
    if cut.squeeze:
        middle = []
    elif cut.sizes is None:
        ones = b.op("Concat", [cut.count1, b.ints([1], "one")], {"axis": 0})
        one = ir.Tensor(np.ones((1,), np.int64))
        middle = [b.op("ConstantOfShape", [ones], {"value": one}, name="unit_sizes")]
    else:
        middle = [b.unsqueeze(cut.sizes, [1])]
    columns = [*before, *middle, *after]
    if columns:
        shapes = concat_parts(b, columns, 1, "list_shapes")
    else:  # scalar elements: a [count, 0] table
        empty_row = b.op("Concat", [cut.count1, b.ints([0], "zero1")], {"axis": 0})
        zero = ir.Tensor(np.zeros((1,), np.int64))
        shapes = b.op("ConstantOfShape", [empty_row], {"value": zero}, name="list_shapes")
    if cut.sizes is None or cut.axis == 0:  # each chunk is contiguous with its axis first
        moved = moved_first(b, x, cut.axis, cut.rank)
        data = b.op("Reshape", [moved, b.ints([-1], "flat")], name="list_data")
    else:
        data = _chunks_loop(b, x, cut.sizes, cut.axis, layout.dtype)
    return TensorList((data, shapes), layout)


def table(b: Builder, s: TensorList) -> Table:
    shapes = s.parts[1]
    shape = b.op("Shape", [shapes], name="table_shape")
    n1 = b.op("Slice", [shape, b.ints([0], "zero1"), b.ints([1], "one")], name="n1")
    n = b.op("Reshape", [n1, b.ints([], "scalar")], name="n")
    if b.opset < 18:
        sizes = b.op("ReduceProd", [shapes], {"axes": [1], "keepdims": 0}, name="sizes")
    else:
        sizes = b.op("ReduceProd", [shapes, b.ints([1], "one")], {"keepdims": 0}, name="sizes")
    ends = b.op("CumSum", [sizes, scalar_int(b, 0, "zero")], name="ends")
    starts = b.op("Sub", [ends, sizes], name="starts")
    total = b.op("Shape", [s.data], name="total")
    bounds = b.op("Concat", [starts, total], {"axis": 0}, name="bounds")
    return Table(n, n1, starts, ends, bounds)


def shape_at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value:
    """Shape(SequenceAt(s, p)): row p of the table of shapes."""
    assert s.layout.moved is None, "a list read so stores its elements as they are"
    return b.op("Gather", [s.parts[1], int64(b, p)], name="shape")  # fails outside [-n, n-1]


def at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value:
    assert s.layout.moved is None, "a list read so stores its elements as they are"
    if forms.values.get_int(p) == -1:  # the last element: from the total back, no CumSum
        (start,), shape = forms.last_start(b, s)
        piece = b.op("Slice", [s.data, start, b.ints([INT64_MAX], "end")])
        return b.op("Reshape", [piece, shape], {"allowzero": 1}, name="element")
    start, end = forms.bounds(b, s, p)  # fails outside [-n, n-1]
    shape = b.op("Gather", [s.parts[1], int64(b, p)], name="shape")
    piece = b.op("Slice", [s.data, start, end])
    return b.op("Reshape", [piece, shape], {"allowzero": 1}, name="element")


def concat(
    forms: ListForms, b: Builder, s: TensorList, axis: int, new_axis: bool
) -> ir.Value | None:
    table = forms.table(s)
    shapes = s.parts[1]
    rank = s.layout.rank
    moved = s.layout.moved
    if moved is not None:  # stored with `moved` first: joined on axis 0, then moved back
        assert rank is not None and axis == moved and not new_axis, "only joined on its axis"
        joined = concat(forms, b, dataclasses.replace(s, layout=_unmoved(s.layout)), 0, False)
        assert joined is not None
        back = [*range(1, moved + 1), 0, *range(moved + 1, rank)]
        return b.op("Transpose", [joined], {"perm": back}, name="axis_back")
    if not new_axis and axis != 0:
        return None
    first = b.op("Gather", [shapes, scalar_int(b, 0, "zero")], name="first")
    if new_axis:
        shape = b.op("Concat", [table.n1, first], {"axis": 0})
        result = b.op("Reshape", [s.data, shape], {"allowzero": 1}, name="stacked")
        if axis != 0:
            perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
            result = b.op("Transpose", [result], {"perm": perm})
        return result
    lead = b.op("Slice", [shapes, b.ints([0], "zero1"), b.ints([1], "one"), b.ints([1], "one")])
    total = b.op("ReduceSum", [lead, b.ints([0], "zero1")], {"keepdims": 0})
    rest = b.op("Slice", [first, b.ints([1], "one"), b.ints([INT64_MAX], "end")])
    shape = b.op("Concat", [total, rest], {"axis": 0})
    return b.op("Reshape", [s.data, shape], {"allowzero": 1}, name="concat")


def flattened(b: Builder, s: TensorList) -> ir.Value:
    """Every element flattened and concatenated, in order: the data itself."""
    assert s.layout.moved is None, "a list read so stores its elements as they are"
    return s.data


def _unmoved(layout: Layout) -> Layout:
    return dataclasses.replace(layout, moved=None)


def _flatten(b: Builder, x: ir.Value) -> ir.Value:
    return b.op("Reshape", [x, b.ints([-1], "flat")], name="flat")


def _row(b: Builder, x: ir.Value) -> ir.Value:
    """Shape(x) as a [1, rank] row. A Reshape, not an Unsqueeze: onnx's data propagation reads
    an unsqueezed shape as 1-D, and then infers wrong ranks for the elements read back."""
    return b.op("Reshape", [b.op("Shape", [x]), b.ints([1, -1], "row")], name="row")


def _tiled(b: Builder, shape: ir.Value, start: int, stop: int, count1: ir.Value) -> list[ir.Value]:
    """Dims start..stop of `shape`, as a [count, stop - start] table (none when empty)."""
    if stop <= start:
        return []
    dims = b.op("Slice", [shape, b.ints([start], "start"), b.ints([stop], "stop")])
    target = b.op("Concat", [count1, b.ints([stop - start], "width")], {"axis": 0})
    return [b.op("Expand", [b.unsqueeze(dims, [0]), target])]


def _chunks_loop(
    b: Builder, x: ir.Value, sizes: ir.Value, axis: int, dtype: ir.DataType
) -> ir.Value:
    """The chunks of x along `axis` (not 0), each flattened, one after the other: a Loop over
    the chunks that concatenates each to what it carries."""
    ends = b.op("CumSum", [sizes, scalar_int(b, 0, "zero")], name="ends")
    starts = b.op("Sub", [ends, sizes], name="starts")
    trips = b.op("Reshape", [b.op("Shape", [sizes]), b.ints([], "scalar")])
    initial = empty_tensor(b, [0], dtype, "list_data")
    body = b.rewriter.new_graph(f"{b.hint}_chunks_body", b.opset)
    i, cond, acc = body_inputs(body, dtype, "acc")
    i1 = body.op("Reshape", [i, body.ints([1], "one_d")])
    start = body.op("Gather", [starts, i1])
    end = body.op("Gather", [ends, i1])
    chunk = body.op("Slice", [x, start, end, body.ints([axis], "axis")])
    flat = body.op("Reshape", [chunk, body.ints([-1], "flat")])
    grown = body.op("Concat", [acc, flat], {"axis": 0}, name="grown")
    body_outputs(body, cond, grown, dtype)
    return b.op("Loop", [trips, None, initial], {"body": body.graph}, name="chunks_loop")
