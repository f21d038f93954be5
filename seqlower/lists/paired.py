"""Insert and erase for the layouts that hold a list as two tensors (ragged, flat): the data,
whose element i spans `[starts[i], ends[i])` along axis 0, and a table with one entry per
element (the first dims, or the shapes). Both are spliced at once:

    SequenceInsert(s, x)      -> Concat(data, piece(x)) ; Concat(table, entry(x))
    SequenceInsert(s, x, 0)   -> Concat(piece(x), data) ; Concat(entry(x), table)
    SequenceInsert(s, x, p)   -> data spliced at bounds[p] ; table spliced at p (p < 0: from n)
    SequenceErase(s)          -> data[:total - size(entry[-1])] ; table[:-1]  (no CumSum: a pop)
    SequenceErase(s, p)       -> data without [starts[p], ends[p]) ; table without entry p
    SequenceInsert(SequenceErase(s, p), x, p), p >= 0 (an assignment, `xs[p] = x`)
                              -> data with [starts[p], ends[p]) replaced by piece(x) ;
                                 ScatterND(table, [[p]], entry(x))  (starts[p] fails for p >= n,
                                 as the erase does)
"""

from __future__ import annotations

__all__ = ["erase", "insert", "last_start"]

from typing import TYPE_CHECKING

import onnx_ir as ir

from seqlower.lists.tensors import TensorList, dim0, insert_index, int64, scalar_int, splice
from seqlower.rewriter import Builder

if TYPE_CHECKING:
    from seqlower.lists.forms import ListForms


def insert(
    forms: ListForms,
    b: Builder,
    s: TensorList,
    piece: ir.Value,
    entry: ir.Value,
    p: ir.Value | None,
) -> TensorList:
    """`s` with an element inserted at `p`: `piece` is its data, `entry` its table entry."""
    if s.erased is not None and forms.same_position(s.erased[1], p):
        return _assign(forms, b, s.erased[0], piece, entry, p)  # type: ignore[arg-type]
    data, table_part = s.parts
    static = forms.values.get_int(p)
    if p is None or static == 0:  # an append, or a prepend (position 0 is always valid)
        pairs = (
            ((piece, data), (entry, table_part))
            if static == 0
            else (
                (data, piece),
                (table_part, entry),
            )
        )
        new_data = b.op("Concat", list(pairs[0]), {"axis": 0}, name="list_data")
        new_table = b.op("Concat", list(pairs[1]), {"axis": 0}, name="list_table")
        return TensorList((new_data, new_table), s.layout)
    table = forms.table(s)
    if static is not None and static > 0:  # refused by bounds (n + 1 entries) when > n
        index1 = b.ints([static], "position")
    else:
        index1 = insert_index(b, p, table.n)
    offset = b.op("Gather", [table.bounds, index1], name="offset")
    new_data = splice(b, data, offset, offset, piece)
    new_table = splice(b, table_part, index1, index1, entry)
    return TensorList((new_data, new_table), s.layout)


def _assign(
    forms: ListForms, b: Builder, s: TensorList, piece: ir.Value, entry: ir.Value, p: ir.Value
) -> TensorList:
    """`s` with its element at `p` (>= 0) replaced: the data spliced once, the table entry
    scattered."""
    data, table_part = s.parts
    start, end = forms.bounds(b, s, p)  # fails for p >= n
    new_data = splice(b, data, start, end, piece)
    index = b.op("Reshape", [int64(b, p), b.ints([1, 1], "index_shape")])
    new_table = b.op("ScatterND", [table_part, index, entry], name="list_table")
    return TensorList((new_data, new_table), s.layout)


def last_start(b: Builder, s: TensorList) -> tuple[ir.Value, ir.Value]:
    """Where the last element starts in the data ([1]: the total less its size), and its
    table entry (fails on an empty list, as a read or erase at -1 does): no CumSum of every
    size, which a stack's pop does not need."""
    data, table_part = s.parts
    entry = b.op("Gather", [table_part, scalar_int(b, -1, "last")], name="last_entry")
    if s.layout.kind == "flat":  # the entry is a shape: its product is the size
        if b.opset < 18:  # the axis named: OpenVINO reads no axes as no reduction
            size = b.op("ReduceProd", [entry], {"axes": [0], "keepdims": 1}, name="last_size")
        else:
            axes = b.ints([0], "zero1")
            size = b.op("ReduceProd", [entry, axes], {"keepdims": 1}, name="last_size")
        total = b.op("Shape", [data], name="total")
    else:  # ragged: the entry is the row count
        size = b.op("Reshape", [entry, b.ints([1], "one_d")], name="last_size")
        total = dim0(b, data)
    return b.op("Sub", [total, size], name="last_start"), entry


def erase(forms: ListForms, b: Builder, s: TensorList, p: ir.Value | None) -> TensorList:
    """`s` without its element at `p` (the last one when `p` is None)."""
    data, table_part = s.parts
    static = -1 if p is None else forms.values.get_int(p)
    if static == -1:  # the last element (a pop): everything before it
        start, _ = forms.last_start(b, s)
        new_data = b.op("Slice", [data, b.ints([0], "zero1"), start], name="list_data")
        end = b.ints([-1], "last1")
        new_table = b.op("Slice", [table_part, b.ints([0], "zero1"), end], name="list_table")
        return TensorList((new_data, new_table), s.layout)
    table = forms.table(s)
    if static is not None:
        p1 = b.ints([static], "position")
    else:
        p1 = b.op("Reshape", [int64(b, p), b.ints([1], "one_d")])  # type: ignore[arg-type]
    start = b.op("Gather", [table.starts, p1], name="start")  # fails outside [-n, n-1]
    end = b.op("Gather", [table.ends, p1], name="end")
    index1 = p1 if static is not None else b.op("Gather", [forms.positions(s), p1])
    after = b.op("Add", [index1, b.ints([1], "one")])
    new_data = splice(b, data, start, end, None)
    new_table = splice(b, table_part, index1, after, None)
    return TensorList((new_data, new_table), s.layout)
