"""Insert and erase for the layouts that hold a list as spans and a table (ragged, flat,
unranked): one or two *buffers* (the data; for unranked also the elements' shapes, one after
the other), in each of which element i spans `[starts[i], ends[i])` along axis 0, and a table
with one entry per element (the first dims, the shapes, or the (size, rank) rows). All are
spliced at once:

    SequenceInsert(s, x)      -> Concat(buffer, piece(x)) each ; Concat(table, entry(x))
    SequenceInsert(s, x, 0)   -> Concat(piece(x), buffer) each ; Concat(entry(x), table)
    SequenceInsert(s, x, p)   -> each buffer spliced at its bounds[p] ; table spliced at p
                                 (p < 0: from n)
    SequenceErase(s)          -> buffer[:total - size(entry[-1])] each ; table[:-1]
                                 (no CumSum: a pop)
    SequenceErase(s, p)       -> each buffer without [starts[p], ends[p]) ; table without entry p
    SequenceInsert(SequenceErase(s, p), x, p), p >= 0 (an assignment, `xs[p] = x`)
                              -> each buffer with [starts[p], ends[p]) replaced by piece(x) ;
                                 ScatterND(table, [[p]], entry(x))  (starts[p] fails for p >= n,
                                 as the erase does); a 1-D table (ragged):
                                 ScatterElements(table, [p], entry(x)), [p] shared with the
                                 bounds
"""

from __future__ import annotations

__all__ = ["erase", "insert", "last_start"]

from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx_ir as ir

from seqlower.lists.tensors import TensorList, dim0, insert_index, int64, scalar_int, splice
from seqlower.rewriter import Builder

if TYPE_CHECKING:
    from seqlower.lists.forms import ListForms

# the name of each buffer's new value, by its index in the parts
_NAMES = ("list_data", "list_dims")


def insert(
    forms: ListForms,
    b: Builder,
    s: TensorList,
    pieces: Sequence[ir.Value],
    entry: ir.Value,
    p: ir.Value | None,
) -> TensorList:
    """`s` with an element inserted at `p`: `pieces` are its spans (one per buffer), `entry`
    its table entry."""
    if s.erased is not None and forms.same_position(s.erased[1], p):
        return _assign(forms, b, s.erased[0], pieces, entry, p)  # type: ignore[arg-type]
    buffers, table_part = s.buffers, s.parts[-1]
    static = forms.values.get_int(p)
    if p is None or static == 0:  # an append, or a prepend (position 0 is always valid)
        parts = []
        for k, (piece, buffer) in enumerate(zip(pieces, buffers)):
            joined = [piece, buffer] if static == 0 else [buffer, piece]
            parts.append(b.op("Concat", joined, {"axis": 0}, name=_NAMES[k]))
        joined = [entry, table_part] if static == 0 else [table_part, entry]
        parts.append(b.op("Concat", joined, {"axis": 0}, name="list_table"))
        return TensorList(tuple(parts), s.layout)
    table = forms.table(s)
    if static is not None and static > 0:  # refused by bounds (n + 1 entries) when > n
        index1 = b.ints([static], "position")
    else:
        index1 = insert_index(b, p, table.n)
    parts = []
    for k, (piece, buffer) in enumerate(zip(pieces, buffers)):
        _, _, bounds = table.spans(k)
        offset = b.op("Gather", [bounds, index1], name="offset")
        parts.append(splice(b, buffer, offset, offset, piece))
    parts.append(splice(b, table_part, index1, index1, entry))
    return TensorList(tuple(parts), s.layout)


def _assign(
    forms: ListForms,
    b: Builder,
    s: TensorList,
    pieces: Sequence[ir.Value],
    entry: ir.Value,
    p: ir.Value,
) -> TensorList:
    """`s` with its element at `p` (>= 0) replaced: each buffer spliced once, the table entry
    scattered."""
    parts = []
    for k, (piece, buffer) in enumerate(zip(pieces, s.buffers)):
        start, end = forms.bounds(b, s, p, k)  # fails for p >= n
        parts.append(splice(b, buffer, start, end, piece))
    table = s.parts[-1]
    if s.layout.kind == "ragged":
        # a ragged table ([n] first dims, entry [1]): the [p] the bounds were read at is the
        # index, no Reshape of p to [[p]] for a ScatterND
        index = forms.index1(b, p)
        parts.append(b.op("ScatterElements", [table, index, entry], name="list_table"))
        return TensorList(tuple(parts), s.layout)
    index = b.op("Reshape", [int64(b, p), b.ints([1, 1], "index_shape")])
    parts.append(b.op("ScatterND", [table, index, entry], name="list_table"))
    return TensorList(tuple(parts), s.layout)


def last_start(b: Builder, s: TensorList) -> tuple[tuple[ir.Value, ...], ir.Value]:
    """Where the last element starts in each buffer ([1] each: the total less its size), and
    its table entry (fails on an empty list, as a read or erase at -1 does): no CumSum of every
    size, which a stack's pop does not need."""
    table_part = s.parts[-1]
    entry = b.op("Gather", [table_part, scalar_int(b, -1, "last")], name="last_entry")
    kind = s.layout.kind
    if kind == "flat":  # the entry is a shape: its product is the size
        if b.opset < 18:  # the axis named: OpenVINO reads no axes as no reduction
            size = b.op("ReduceProd", [entry], {"axes": [0], "keepdims": 1}, name="last_size")
        else:
            axes = b.ints([0], "zero1")
            size = b.op("ReduceProd", [entry, axes], {"keepdims": 1}, name="last_size")
        sizes = [size]
    elif kind == "unranked":  # the entry is (size, rank)
        sizes = [
            b.op("Slice", [entry, b.ints([k], "start"), b.ints([k + 1], "stop")], name=name)
            for k, name in enumerate(("last_size", "last_rank"))
        ]
    else:  # ragged: the entry is the row count
        sizes = [b.op("Reshape", [entry, b.ints([1], "one_d")], name="last_size")]
    starts = []
    for buffer, size in zip(s.buffers, sizes):
        total = dim0(b, buffer) if kind == "ragged" else b.op("Shape", [buffer], name="total")
        starts.append(b.op("Sub", [total, size], name="last_start"))
    return tuple(starts), entry


def erase(forms: ListForms, b: Builder, s: TensorList, p: ir.Value | None) -> TensorList:
    """`s` without its element at `p` (the last one when `p` is None)."""
    buffers, table_part = s.buffers, s.parts[-1]
    static = -1 if p is None else forms.values.get_int(p)
    if static == -1:  # the last element (a pop): everything before it
        starts, _ = forms.last_start(b, s)
        parts = [
            b.op("Slice", [buffer, b.ints([0], "zero1"), start], name=_NAMES[k])
            for k, (buffer, start) in enumerate(zip(buffers, starts))
        ]
        end = b.ints([-1], "last1")
        parts.append(b.op("Slice", [table_part, b.ints([0], "zero1"), end], name="list_table"))
        return TensorList(tuple(parts), s.layout)
    table = forms.table(s)
    if static is not None:
        p1 = b.ints([static], "position")
    else:
        p1 = b.op("Reshape", [int64(b, p), b.ints([1], "one_d")])  # type: ignore[arg-type]
    spans = []
    for k in range(len(buffers)):  # fails outside [-n, n-1]
        starts, ends, _ = table.spans(k)
        start = b.op("Gather", [starts, p1], name="start")
        spans.append((start, b.op("Gather", [ends, p1], name="end")))
    index1 = p1 if static is not None else b.op("Gather", [forms.positions(s), p1])
    after = b.op("Add", [index1, b.ints([1], "one")])
    parts = [splice(b, buffer, start, end, None) for buffer, (start, end) in zip(buffers, spans)]
    parts.append(splice(b, table_part, index1, after, None))
    return TensorList(tuple(parts), s.layout)
