"""The stacked layout: elements of one shape S, as one tensor `[n, *S]` (element i: data[i]).

SequenceEmpty()              -> ConstantOfShape([0, *S])            (S static)
SequenceConstruct(x0..xk)    -> Concat(Unsqueeze(x0, 0)..)
SequenceInsert(s, x, p?)     -> Concat(data[:p], Unsqueeze(x, 0), data[p:])
SequenceErase(s, p)          -> Concat(data[:p], data[p+1:])  (data[:n-1] for p = -1 or none,
                                data[1:] for p = 0; p checked by Gather(Range(n), p) first,
                                unless the list is known to hold element p: after an insert)
SequenceAt(s, p)             -> Gather(data, p)
SequenceLength(s)            -> Shape(data)[0]
ConcatFromSequence(s, new_axis=1, axis=a) -> data, or Transpose(data, 0 -> a)
ConcatFromSequence(s, axis=a)             -> Reshape(data with axis 0 moved before a, merging
                                             the two)
SplitToSequence(x, axis=a, keepdims=0)    -> x with axis a moved first
SplitToSequence(x, axis=a), chunks of one -> the same, unsqueezed at a + 1
"""

from __future__ import annotations

__all__ = [
    "at",
    "concat",
    "construct",
    "empty",
    "erase",
    "insert",
    "shape_at",
    "split",
    "table",
]

from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from seqlower.lists.tensors import (
    INT64_MAX,
    Layout,
    Table,
    TensorList,
    dim0,
    insert_index,
    int64,
    moved_first,
    scalar_int,
    splice,
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
    assert all(isinstance(d, int) for d in layout.dims), "an empty stacked list needs static dims"
    data = empty_tensor(b, [0, *layout.dims], layout.dtype, "list_data")  # type: ignore[list-item]
    return TensorList((data,), layout)


def construct(b: Builder, elements: Sequence[ir.Value], layout: Layout) -> TensorList:
    rows = [b.unsqueeze(x, [0]) for x in elements]
    return TensorList((concat_parts(b, rows, 0, "list_data"),), layout)


def insert(
    forms: ListForms, b: Builder, s: TensorList, x: ir.Value, p: ir.Value | None
) -> TensorList:
    row = b.unsqueeze(x, [0])
    static = forms.values.get_int(p)
    if p is None or static == 0:  # an append, or a prepend (position 0 is always valid)
        parts = [row, s.data] if static == 0 else [s.data, row]
        return TensorList((b.op("Concat", parts, {"axis": 0}, name="list_data"),), s.layout)
    table = forms.table(s)
    if static is not None and static > 0:
        index1 = b.ints([static], "position")
    else:
        index1 = insert_index(b, p, table.n)  # p < -n: an index every Gather refuses
    one = scalar_int(b, 1, "one")
    slots = b.op("Range", [scalar_int(b, 0, "zero"), b.op("Add", [table.n, one]), one])
    index1 = b.op("Gather", [slots, index1], name="position")  # refuses p > n
    return TensorList((splice(b, s.data, index1, index1, row),), s.layout)


def erase(forms: ListForms, b: Builder, s: TensorList, p: ir.Value | None) -> TensorList:
    known = forms.within(s, p)
    if known is not None:  # in range for sure: Slice reads a negative position as Gather does
        return _erase_at(b, s, known)
    static = -1 if p is None else forms.values.get_int(p)
    if static is not None:
        p1 = b.ints([static], "position")
    else:
        p1 = b.op("Reshape", [int64(b, p), b.ints([1], "one_d")])  # type: ignore[arg-type]
    index1 = b.op("Gather", [forms.positions(s), p1])  # p >= 0; fails outside [-n, n-1]
    if static == -1:  # the last element (a pop): everything before it
        head = b.op("Slice", [s.data, b.ints([0], "zero1"), index1], name="list_data")
        return TensorList((head,), s.layout)
    after = b.op("Add", [index1, b.ints([1], "one")])
    if static == 0:  # the first element: everything after it
        tail = b.op("Slice", [s.data, after, b.ints([INT64_MAX], "end")], name="list_data")
        return TensorList((tail,), s.layout)
    return TensorList((splice(b, s.data, index1, after, None),), s.layout)


def _erase_at(b: Builder, s: TensorList, p: int) -> TensorList:
    """Erase element p, known to exist: data[:p] + data[p+1:] (one Slice at either end)."""
    if p == -1:
        kept = b.op("Slice", [s.data, b.ints([0], "zero1"), b.ints([-1], "last")], name="list_data")
    elif p == 0:
        end = b.ints([INT64_MAX], "end")
        kept = b.op("Slice", [s.data, b.ints([1], "one"), end], name="list_data")
    else:
        kept = splice(b, s.data, b.ints([p], "position"), b.ints([p + 1], "after"), None)
    return TensorList((kept,), s.layout)


def split(forms: ListForms, b: Builder, node: ir.Node, layout: Layout) -> TensorList:
    x = node.inputs[0]
    assert x is not None and x.shape is not None
    rank = len(x.shape)
    axis = node.attributes.get_int("axis", 0)
    axis = axis + rank if axis < 0 else axis
    moved = moved_first(b, x, axis, rank)
    squeeze = node.attributes.get_int("keepdims", 1) == 0
    assert len(node.inputs) < 2 or node.inputs[1] is None, "a stacked split has chunks of one"
    data = moved if squeeze else b.unsqueeze(moved, [axis + 1])
    return TensorList((data,), layout)


def table(b: Builder, s: TensorList) -> Table:
    n1 = dim0(b, s.data)
    n = b.op("Reshape", [n1, b.ints([], "scalar")], name="n")
    return Table(n, n1)


def shape_at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value | None:
    """None: the element is one Gather; the Shape read from it stays as it is."""
    return None


def at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value:
    if s.layout.dtype != ir.DataType.STRING:
        return b.op("Gather", [s.data, int64(b, p)], name="element")  # fails outside [-n, n-1]
    # onnxruntime's Gather mis-copies strings (seqlower.runtime_quirks, "string-gather"): the
    # position is checked and made >= 0 on the int64 positions, the element sliced out
    p1 = b.op("Reshape", [int64(b, p), b.ints([1], "one_d")])
    index1 = b.op("Gather", [forms.positions(s), p1])
    after = b.op("Add", [index1, b.ints([1], "one")])
    return b.squeeze(b.op("Slice", [s.data, index1, after]), [0])


def concat(
    forms: ListForms, b: Builder, s: TensorList, axis: int, new_axis: bool
) -> ir.Value | None:
    data, rank = s.data, s.layout.rank
    if new_axis:
        if axis == 0:
            return data
        perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
        return b.op("Transpose", [data], {"perm": perm}, name="stacked")
    # concatenating on axis a: the list axis goes just before a, then the two merge
    moved = data
    if axis != 0:
        perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
        moved = b.op("Transpose", [data], {"perm": perm})
    shape = b.op("Shape", [moved])
    head = b.op("Slice", [shape, b.ints([0], "zero1"), b.ints([axis], "axis")])
    pair = b.op("Slice", [shape, b.ints([axis], "axis"), b.ints([axis + 2], "after")])
    merged = b.op("ReduceProd", [pair], {"keepdims": 1}, name="merged")
    tail = b.op("Slice", [shape, b.ints([axis + 2], "after"), b.ints([INT64_MAX], "end")])
    target = b.op("Concat", [head, merged, tail], {"axis": 0})
    return b.op("Reshape", [moved, target], {"allowzero": 1}, name="concat")
