"""The ragged layout: elements that differ in their first dim only, as (data, firsts).

`data` is the elements concatenated on axis 0 (`[sum of firsts, *rest]`), `firsts` a 1-D tensor
of their first dims; `ends = CumSum(firsts)`, `starts = ends - firsts`, element i is
`data[starts[i]:ends[i]]`. SplitToSequence on axis 0 already is this layout.

    SequenceEmpty()              -> data = [0, *rest] ; firsts = []
    SequenceConstruct(x0..xk)    -> Concat(x0..xk, axis=0) ; Concat(Shape(xi)[0:1]..)
    SequenceInsert(s, x)         -> Concat(data, x) ; Concat(firsts, Shape(x)[0:1])
    SequenceInsert(s, x, p)      -> the same, spliced in at starts[p] and entry p
    SequenceErase(s, p)          -> data without rows [starts[p], ends[p]) ; firsts without entry p
    SequenceAt(s, p)             -> Slice(data, starts[p], ends[p])
    SequenceAt(s, -1)            -> data[total - firsts[-1]:]
    Shape(SequenceAt(s, p))      -> Concat(firsts[p], the other dims)
    SequenceLength(s)            -> Shape(firsts)[0]
    ConcatFromSequence(s, axis=0)             -> data
    ConcatFromSequence(s, new_axis=1, axis=a) -> Transpose(Reshape(data, [n, firsts[0]..]), 0 -> a)
    ConcatFromSequence(s, axis=a != 0)        -> the same, axis a merged with the one after it
    every element flattened, concatenated     -> Reshape(data, [-1])  (the data when 1-D;
                                                 `seqlower.lists.flattened`)
    SplitToSequence(x, sizes?, axis=0)        -> x ; the chunk sizes
    SplitToSequence(x, axis=a, keepdims=0)    -> x with axis a moved first and merged with the
                                                 next ([n * d, rest]) ; [d] * n  (an unbind
                                                 whose elements then grow: a layer's cache)
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

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from seqlower.lists import paired
from seqlower.lists.tensors import (
    INT64_MAX,
    Chunks,
    Layout,
    Table,
    TensorList,
    chunks,
    dim0,
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
    rest = [d for d in layout.dims]
    assert all(isinstance(d, int) for d in rest), "an empty ragged list needs static dims"
    data = empty_tensor(b, [0, *rest], layout.dtype, "list_data")  # type: ignore[list-item]
    firsts = empty_tensor(b, [0], ir.DataType.INT64, "list_firsts")
    return TensorList((data, firsts), layout)


def construct(b: Builder, elements: Sequence[ir.Value], layout: Layout) -> TensorList:
    data = concat_parts(b, list(elements), 0, "list_data")
    firsts = concat_parts(b, [dim0(b, x) for x in elements], 0, "list_firsts")
    return TensorList((data, firsts), layout)


def insert(
    forms: ListForms, b: Builder, s: TensorList, x: ir.Value, p: ir.Value | None
) -> TensorList:
    return paired.insert(forms, b, s, [x], dim0(b, x), p)


def erase(forms: ListForms, b: Builder, s: TensorList, p: ir.Value | None) -> TensorList:
    return paired.erase(forms, b, s, p)


def split(forms: ListForms, b: Builder, node: ir.Node, layout: Layout) -> TensorList:
    x = node.inputs[0]
    assert x is not None
    cut = chunks(b, node, forms.values)
    if cut.squeeze:
        return _unbound(b, x, cut, layout)
    assert cut.axis == 0, "a ragged split is along axis 0, dims kept, or an unbind"
    if cut.sizes is None:
        one = ir.Tensor(np.ones((1,), np.int64))
        sizes = b.op("ConstantOfShape", [cut.dim], {"value": one}, name="list_firsts")
    else:
        sizes = cut.sizes
    return TensorList((x, sizes), layout)


def _unbound(b: Builder, x: ir.Value, cut: Chunks, layout: Layout) -> TensorList:
    """The elements x.select(a, i), each [d, rest], as rows of one [n * d, rest] tensor."""
    moved = moved_first(b, x, cut.axis, cut.rank)
    shape = b.op("Shape", [moved])
    count_first = b.op("Slice", [shape, b.ints([0], "zero1"), b.ints([2], "two")])
    merged = b.op("ReduceProd", [count_first], {"keepdims": 1}, name="merged")
    rest = b.op("Slice", [shape, b.ints([2], "two"), b.ints([INT64_MAX], "end")])
    target = b.op("Concat", [merged, rest], {"axis": 0})
    data = b.op("Reshape", [moved, target], {"allowzero": 1}, name="list_data")
    first = b.op("Slice", [shape, b.ints([1], "one"), b.ints([2], "two")])
    firsts = b.op("Expand", [first, cut.count1], name="list_firsts")
    return TensorList((data, firsts), layout)


def table(b: Builder, s: TensorList) -> Table:
    data, firsts = s.parts
    n1 = b.op("Shape", [firsts], name="n1")
    n = b.op("Size", [firsts], name="n")  # one launch, not Reshape(n1): firsts is 1-D
    ends = b.op("CumSum", [firsts, scalar_int(b, 0, "zero")], name="ends")
    starts = b.op("Sub", [ends, firsts], name="starts")
    bounds = b.op("Concat", [starts, dim0(b, data)], {"axis": 0}, name="bounds")
    return Table(n, n1, starts, ends, bounds)


def shape_at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value:
    """Shape(SequenceAt(s, p)) from the row counts: Concat(firsts[p], the other dims)."""
    data, firsts = s.parts
    p1 = b.op("Reshape", [int64(b, p), b.ints([1], "one_d")])
    first = b.op("Gather", [firsts, p1], name="first")  # fails outside [-n, n-1]
    rest = s.layout.dims
    if all(isinstance(d, int) for d in rest):
        return b.op("Concat", [first, b.ints(list(rest), "rest")], {"axis": 0}, name="shape")  # type: ignore[arg-type]
    dims = b.op("Slice", [b.op("Shape", [data]), b.ints([1], "one"), b.ints([INT64_MAX], "end")])
    return b.op("Concat", [first, dims], {"axis": 0}, name="shape")


def at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value:
    if forms.values.get_int(p) == -1:  # the last element: from the total back, no CumSum
        (start,), _ = forms.last_start(b, s)
        return b.op("Slice", [s.data, start, b.ints([INT64_MAX], "end")], name="element")
    start, end = forms.bounds(b, s, p)  # fails outside [-n, n-1]
    return b.op("Slice", [s.data, start, end], name="element")


def concat(
    forms: ListForms, b: Builder, s: TensorList, axis: int, new_axis: bool
) -> ir.Value | None:
    """The elements stacked on a new axis `axis`, or concatenated on `axis`. Both need every
    element of one shape (Concat on an axis other than 0 needs the first dims equal too,
    the only dims the layout lets differ): the data reshaped to `[n, firsts[0], rest]`, the
    list axis moved to `axis` and, to concatenate, merged with the element axis after it. The
    Reshape fails where the first dims do not add up to n * firsts[0], as the original does;
    first dims that differ but add up so ([2, 1, 3]) give a result where the original fails."""
    data, firsts = s.parts
    if not new_axis and axis == 0:
        return data
    table = forms.table(s)
    first = b.op("Gather", [firsts, b.ints([0], "zero1")], name="first")  # fails when empty
    rest = b.op("Slice", [b.op("Shape", [data]), b.ints([1], "one"), b.ints([INT64_MAX], "end")])
    shape = b.op("Concat", [table.n1, first, rest], {"axis": 0})
    result = b.op("Reshape", [data, shape], {"allowzero": 1}, name="stacked")
    if axis == 0:
        return result
    rank = s.layout.rank
    perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
    result = b.op("Transpose", [result], {"perm": perm})
    if new_axis:
        return result
    # [.., n, d_axis, ..] -> [.., n * d_axis, ..]: a product, not -1, which a dim of 0 defeats
    dims = b.op("Shape", [result])
    lists = b.op("Gather", [dims, b.ints([axis], "at")])
    merged = b.op("Mul", [lists, b.op("Gather", [dims, b.ints([axis + 1], "after")])])
    parts = [b.op("Slice", [dims, b.ints([0], "zero1"), b.ints([axis], "at")]), merged]
    if axis + 2 <= rank:
        parts.append(b.op("Slice", [dims, b.ints([axis + 2], "after"), b.ints([INT64_MAX], "end")]))
    shape = b.op("Concat", parts, {"axis": 0})
    return b.op("Reshape", [result, shape], {"allowzero": 1}, name="concatenated")


def flattened(b: Builder, s: TensorList) -> ir.Value:
    """Every element flattened and concatenated, in order: the elements follow one another
    along axis 0 of the data, so the data flattened (the data itself when 1-D)."""
    if s.layout.rank == 1:
        return s.data
    return b.op("Reshape", [s.data, b.ints([-1], "flat")], name="flattened")
