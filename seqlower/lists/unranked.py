"""The unranked layout: a list whose elements' rank is known only at run time, as (data, dims,
table).

`data` holds the elements flattened and concatenated (1-D), `dims` their shapes concatenated
(1-D int64: element i's shape is as long as its rank), and `table` is `[n, 2]`, row i the
(size, rank) of element i. `ends = CumSum(sizes)`, `starts = ends - sizes` locate element i in
`data`; `dim_ends = CumSum(ranks)`, `dim_starts = dim_ends - ranks` its shape in `dims`. The
elements may differ in rank. Only a runtime that takes a Reshape to a shape of run-time length
runs it (onnxruntime does; `seqlower.runtime_ranks` says which targets refuse it, and why).

    SequenceEmpty()              -> data = [] ; dims = [] ; table = [0, 2]
    SequenceConstruct(x0..xk)    -> Concat(Reshape(xi, [-1])..) ; Concat(Shape(xi)..) ;
                                    Concat([Size(xi), rank of xi] as a row..) (the rank a
                                    constant where known, else Shape(Shape(xi)))
    SequenceInsert(s, x, p?)     -> the three spliced (`seqlower.lists.paired`): data at
                                    starts[p], dims at dim_starts[p], table at row p
    SequenceErase(s, p?)         -> the three without element p (`seqlower.lists.paired`)
    SequenceAt(s, p)             -> Reshape(Slice(data, starts[p], ends[p]),
                                            Slice(dims, dim_starts[p], dim_ends[p]), allowzero=1)
    SequenceAt(s, -1)            -> the same from the totals back, no CumSum
    Shape(SequenceAt(s, p))      -> Slice(dims, dim_starts[p], dim_ends[p])
    SequenceLength(s)            -> Shape(table)[0]
    ConcatFromSequence(s, axis=0)             -> Reshape(data, [Sum(dims[dim_starts]),
                                                               dims[1:ranks[0]]])
    ConcatFromSequence(s, new_axis=1, axis=0) -> Reshape(data, [n, dims[0:ranks[0]]])
    ConcatFromSequence(s, other axes)         -> a Loop over the elements (ListForms.concat_loop;
                                                 Concat and Unsqueeze count a negative axis
                                                 from the end at run time)
    every element flattened, concatenated     -> data  (`seqlower.lists.flattened`)
    SplitToSequence(x of a known rank r, ..)  -> the flat layout's (data, shapes) ;
                                                 dims = Reshape(shapes, [-1]) ;
                                                 table = Concat(ReduceProd(shapes, 1), r)
    SplitToSequence(x of unknown rank, axis=0, sizes?, keepdims?)
                                              -> data = Reshape(x, [-1]) ; shapes =
                                                 Concat(sizes (or ones; none squeezed),
                                                        Shape(x)[1:] per chunk) ; as above
    SplitToSequence(x of unknown rank, other axes) -> refused (`seqlower.lists.components`)
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

from seqlower.lists import flat, paired
from seqlower.lists.tensors import (
    INT64_MAX,
    Layout,
    Table,
    TensorList,
    chunks,
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
    dims = empty_tensor(b, [0], ir.DataType.INT64, "list_dims")
    rows = empty_tensor(b, [0, 2], ir.DataType.INT64, "list_table")
    return TensorList((data, dims, rows), layout)


def construct(b: Builder, elements: Sequence[ir.Value], layout: Layout) -> TensorList:
    data = concat_parts(b, [_flatten(b, x) for x in elements], 0, "list_data")
    dims = concat_parts(b, [b.op("Shape", [x]) for x in elements], 0, "list_dims")
    rows = concat_parts(b, [_row(b, x) for x in elements], 0, "list_table")
    return TensorList((data, dims, rows), layout)


def insert(
    forms: ListForms, b: Builder, s: TensorList, x: ir.Value, p: ir.Value | None
) -> TensorList:
    pieces = [_flatten(b, x), b.op("Shape", [x], name="dims")]
    return paired.insert(forms, b, s, pieces, _row(b, x), p)


def erase(forms: ListForms, b: Builder, s: TensorList, p: ir.Value | None) -> TensorList:
    return paired.erase(forms, b, s, p)


def split(forms: ListForms, b: Builder, node: ir.Node, layout: Layout) -> TensorList:
    """A SplitToSequence into a list whose elements' rank is known only at run time: of an
    input of known rank, the flat layout's split, its table of shapes made the (size, rank)
    table; of an input of unknown rank (along axis 0 only), the input flattened, each chunk's
    shape its size (or nothing, squeezed) and the input's other dims."""
    x = node.inputs[0]
    assert x is not None
    if x.shape is not None:
        return _split_ranked(forms, b, node, layout, len(x.shape) - int(_squeezes(node)))
    cut = chunks(b, node, forms.values)
    rest = b.op("Slice", [cut.shape, b.ints([1], "one"), b.ints([INT64_MAX], "end")])
    width = b.op("Shape", [rest], name="width")
    target = b.op("Concat", [cut.count1, width], {"axis": 0})
    rests = b.op("Expand", [b.unsqueeze(rest, [0]), target], name="rests")  # [n, r - 1]
    if cut.squeeze:
        shapes = rests
    else:
        if cut.sizes is None:
            ones = b.op("Concat", [cut.count1, b.ints([1], "one")], {"axis": 0})
            one = ir.Tensor(np.ones((1,), np.int64))
            firsts = b.op("ConstantOfShape", [ones], {"value": one}, name="unit_sizes")
        else:
            firsts = b.unsqueeze(cut.sizes, [1])
        shapes = b.op("Concat", [firsts, rests], {"axis": 1}, name="shapes")  # [n, r]
    data = b.op("Reshape", [x, b.ints([-1], "flat")], name="list_data")
    return _from_shapes(b, data, shapes, b.op("Shape", [shapes]), layout)


def _split_ranked(
    forms: ListForms, b: Builder, node: ir.Node, layout: Layout, rank: int
) -> TensorList:
    made = flat.split(forms, b, node, dataclasses.replace(layout, kind="flat", rank=rank))
    data, shapes = made.parts
    return _from_shapes(b, data, shapes, None, layout, rank)


def _from_shapes(
    b: Builder,
    data: ir.Value,
    shapes: ir.Value,
    table_shape: ir.Value | None,
    layout: Layout,
    rank: int | None = None,
) -> TensorList:
    """The unranked list of `data` and an `[n, r]` table of the elements' shapes (r static
    when `rank` is given, else the second entry of `table_shape`)."""
    dims = b.op("Reshape", [shapes, b.ints([-1], "flat")], name="list_dims")
    if b.opset < 18:
        sizes = b.op("ReduceProd", [shapes], {"axes": [1], "keepdims": 1}, name="sizes")
    else:
        sizes = b.op("ReduceProd", [shapes, b.ints([1], "one")], {"keepdims": 1}, name="sizes")
    if rank is not None:
        width = b.ints([rank], "rank")
    else:
        assert table_shape is not None
        width = b.op("Slice", [table_shape, b.ints([1], "one"), b.ints([2], "two")], name="rank")
    ranks = b.op("Expand", [width, b.op("Shape", [sizes])], name="ranks")
    rows = b.op("Concat", [sizes, ranks], {"axis": 1}, name="list_table")
    return TensorList((data, dims, rows), layout)


def _squeezes(node: ir.Node) -> bool:
    split = node.inputs[1] if len(node.inputs) > 1 else None
    return split is None and node.attributes.get_int("keepdims", 1) == 0


def table(b: Builder, s: TensorList) -> Table:
    data, dims, rows = s.parts
    shape = b.op("Shape", [rows], name="table_shape")
    n1 = b.op("Slice", [shape, b.ints([0], "zero1"), b.ints([1], "one")], name="n1")
    n = b.op("Reshape", [n1, b.ints([], "scalar")], name="n")
    spans = []
    for column, buffer in enumerate((data, dims)):
        sizes = b.op("Gather", [rows, scalar_int(b, column, "column")], {"axis": 1}, name="sizes")
        ends = b.op("CumSum", [sizes, scalar_int(b, 0, "zero")], name="ends")
        starts = b.op("Sub", [ends, sizes], name="starts")
        total = b.op("Shape", [buffer], name="total")
        spans.append((starts, ends, b.op("Concat", [starts, total], {"axis": 0}, name="bounds")))
    (starts, ends, bounds), (dim_starts, dim_ends, dim_bounds) = spans
    return Table(
        n,
        n1,
        starts,
        ends,
        bounds,
        dim_starts=dim_starts,
        dim_ends=dim_ends,
        dim_bounds=dim_bounds,
    )


def shape_at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value:
    """Shape(SequenceAt(s, p)): element p's span of the shapes."""
    start, end = forms.bounds(b, s, p, 1)  # fails outside [-n, n-1]
    return b.op("Slice", [s.parts[1], start, end], name="shape")


def at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value:
    data, dims, _ = s.parts
    if forms.values.get_int(p) == -1:  # the last element: from the totals back, no CumSum
        (start, dim_start), _ = forms.last_start(b, s)
        end = b.ints([INT64_MAX], "end")
        piece = b.op("Slice", [data, start, end])
        shape = b.op("Slice", [dims, dim_start, end], name="shape")
        return b.op("Reshape", [piece, shape], {"allowzero": 1}, name="element")
    start, end = forms.bounds(b, s, p)  # fails outside [-n, n-1]
    dim_start, dim_end = forms.bounds(b, s, p, 1)
    piece = b.op("Slice", [data, start, end])
    shape = b.op("Slice", [dims, dim_start, dim_end], name="shape")
    return b.op("Reshape", [piece, shape], {"allowzero": 1}, name="element")


def concat(
    forms: ListForms, b: Builder, s: TensorList, axis: int, new_axis: bool
) -> ir.Value | None:
    """Axis 0 by one Reshape of the data; any other axis (or a negative one, which counts from
    an end known only at run time) by the Loop of `ListForms.concat_loop`."""
    if axis != 0:
        return None
    data, dims, rows = s.parts
    zero1, one = b.ints([0], "zero1"), b.ints([1], "one")
    corner = [b.ints([0, 1], "rank_start"), b.ints([1, 2], "rank_stop")]
    rank0 = b.op("Slice", [rows, *corner])  # [[the rank of element 0]]
    rank0 = b.op("Reshape", [rank0, b.ints([1], "one_d")], name="first_rank")  # fails if empty
    if new_axis:
        first = b.op("Slice", [dims, zero1, rank0], name="first")
        shape = b.op("Concat", [forms.table(s).n1, first], {"axis": 0})
        return b.op("Reshape", [data, shape], {"allowzero": 1}, name="stacked")
    dim_starts, _, _ = forms.table(s).spans(1)
    leads = b.op("Gather", [dims, dim_starts], name="leads")  # each element's first dim
    total = b.op("ReduceSum", [leads, zero1], {"keepdims": 1}, name="total_lead")
    rest = b.op("Slice", [dims, one, rank0], name="rest")
    shape = b.op("Concat", [total, rest], {"axis": 0})
    return b.op("Reshape", [data, shape], {"allowzero": 1}, name="concat")


def flattened(b: Builder, s: TensorList) -> ir.Value:
    """Every element flattened and concatenated, in order: the data itself."""
    return s.data


def _flatten(b: Builder, x: ir.Value) -> ir.Value:
    return b.op("Reshape", [x, b.ints([-1], "flat")], name="flat")


def _row(b: Builder, x: ir.Value) -> ir.Value:
    """(Size(x), rank of x) as a [1, 2] row; the rank a constant where it is known."""
    size = b.op("Reshape", [b.op("Size", [x]), b.ints([1], "one_d")], name="size")
    if x.shape is not None:
        rank = b.ints([len(x.shape)], "rank")
    else:
        rank = b.op("Shape", [b.op("Shape", [x])], name="rank")
    row = b.op("Concat", [size, rank], {"axis": 0})
    return b.op("Reshape", [row, b.ints([1, 2], "row")], name="row")
