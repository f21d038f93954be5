"""The stacked layout: elements of one shape S, as one tensor `[n, *S]` (element i: data[i]).
S may be known only at run time and change between iterations where every value of the list
holds elements of one shape (`components._in_lockstep`, and `_lockstep_together` for lists
grown by inserts): the tensor's shape changes as a whole.

SequenceEmpty()              -> ConstantOfShape([0, *S])            (S static)
SequenceEmpty()              -> ConstantOfShape([0, 1, .., 1])      (S known at run time only,
                                every element of each list value proved one shape; an insert
                                into a list that may be empty broadcasts the data first:
                                Expand(data, Shape(x)), the same data for n > 0, [0, *S] for
                                n = 0, so Concat never joins a [0, 1] to a [1, d])
SequenceConstruct(x0..xk)    -> Concat(Unsqueeze(x0, 0)..)
SequenceInsert(s, x)         -> Concat(data, Unsqueeze(x, 0))  (p = 0: Concat(row, data))
SequenceInsert(s, x, p)      -> Concat(Gather(data, [0 .. p-1]), Unsqueeze(x, 0), data[p:])
                                (p a constant in [1, 64]; p in [-64, -1]: data[:p], the row,
                                Gather(data, [p .. -1]); the Gather fails where the insert
                                does)
SequenceInsert(s, x, p)      -> a, b = Split(data, [p, n - p]); Concat(a, Unsqueeze(x, 0), b)
                                (p < 0: [n + p, -p]; a position outside [-n, n] makes a size
                                negative, and Split fails as SequenceInsert does; p static and
                                within the length an earlier checked edit proved: data[:p],
                                the row, data[p:], Slices with no check)
SequenceErase(s, p)          -> the first of Split(data, [n - 1, 1])  (p = -1 or none; p = 0:
                                the second of Split(data, [1, n - 1]); outside [-n, n-1] a size
                                is negative and Split fails; a position the list is known to
                                hold, after an insert, a checked edit or a read there whose
                                Gather stays in the model (`xs.pop()`): Slices, no check)
SequenceErase(s, p)          -> Compress(data, ScatterElements(n trues, [p], [false]))
                                (p inside the list, static, or known at run time only:
                                ScatterElements reads p < 0 from the end and fails outside
                                [-n, n-1]; for a static p this measured faster than cutting with
                                Split at sizes made from n: a Split by run-time sizes and the
                                Concat of its pieces cost more than the mask and one Compress)
SequenceInsert(SequenceErase(s, p), x, p), p a constant >= 0 or a position proved >= 0 (a
                             Loop's iteration number: what `xs[i] = x` exports)
                             -> ScatterND(data, [p], x)  (fails for p >= n, as the erase does)
SequenceInsert(SequenceErase(s, p), x, p), p = len(s) - 1 (`xs[len(xs) - 1] = x`)
                             -> ScatterND(data, [-1], x)  (an empty list fails, as the erase
                                does; p's arithmetic is left to dead code removal)
SequenceInsert(SequenceErase(s, k), x, k), k of either sign (`xs[k] = x` as exported)
                             -> ScatterND(ScatterND(data, [k], GatherND(data, [a])), [a], x)
                                (a = k + Clip(k, -1, 0): for k < 0 the insert lands one
                                before the erased element, which moves up; the indices' checks
                                are the erase's and the insert's)
SequenceAt(s, p)             -> Gather(data, p)
SequenceLength(s)            -> Shape(data)[0]
ConcatFromSequence(s, new_axis=1, axis=a) -> data, or Transpose(data, 0 -> a)
ConcatFromSequence(s, axis=a)             -> Reshape(data with axis 0 moved before a, merging
                                             the two; to a constant target with -1 there
                                             where S's other dims are static and not 0)
ConcatFromSequence of a list that may be empty, its elements' shape proved through a Loop in
a loop body or a Conv (`Layout.nonempty_join`; the flat layout kept before fails there, as the
original does)
                                          -> Reshape(J, Add(Shape(J), Gather(Range(0, n, 1),
                                             [0]))), J the join above: J, or a failure for n = 0
every element flattened, concatenated     -> Reshape(data, [-1]) (the list axis moved first
                                             when it is a unit axis u; the data when 1-D;
                                             `seqlower.lists.flattened`)
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

from seqlower.lists import unit_rows
from seqlower.lists.tensors import (
    INT64_MAX,
    Layout,
    Table,
    TensorList,
    axes,
    dim0,
    from_end,
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
    if layout.shaped_by_first:  # dims from the first element put in (see `_shaped`)
        assert layout.rank is not None
        if layout.unit is None:  # a new list axis 0
            shape = [0] + [1] * layout.rank
        else:  # the list axis at the unit dim
            shape = [0 if k == layout.unit else 1 for k in range(layout.rank)]
        data = empty_tensor(b, shape, layout.dtype, "list_data")
        return TensorList((data,), layout)
    assert all(isinstance(d, int) for d in layout.dims), "an empty stacked list needs static dims"
    shape = [0, *layout.dims] if layout.unit is None else unit_rows.empty_shape(layout)
    data = empty_tensor(b, shape, layout.dtype, "list_data")  # type: ignore[arg-type]
    return TensorList((data,), layout)


def construct(b: Builder, elements: Sequence[ir.Value], layout: Layout) -> TensorList:
    if layout.unit is not None:  # each element is a row already
        return TensorList((concat_parts(b, elements, layout.unit, "list_data"),), layout)
    rows = [b.unsqueeze(x, [0]) for x in elements]
    return TensorList((concat_parts(b, rows, 0, "list_data"),), layout)


def insert(
    forms: ListForms, b: Builder, s: TensorList, x: ir.Value, p: ir.Value | None
) -> TensorList:
    static = forms.values.get_int(p)
    axis, unit = s.layout.list_axis, s.layout.unit
    if (
        s.erased is not None
        and forms.same_position(s.erased[1], p)
        and _splits(b, s)
        and unit in (None, 0)  # ScatterND addresses leading axes only
    ):
        base = s.erased[0]  # `xs[p] = x`: element p of the list before the erase, replaced
        # one index of one coordinate ([p], not [[p]]): the update is x itself, not a row;
        # unit rows: [[p]], the update x is the row
        shape = [1] if unit is None else [1, 1]
        if static is not None:
            index = b.constant(np.array([static], np.int64).reshape(shape), "position")
        elif forms.is_last(base, p):  # `xs[len(xs) - 1] = x`: the last row (empty: fails)
            index = b.constant(np.array([-1], np.int64).reshape(shape), "position")
        else:
            index = b.op("Reshape", [int64(b, p), b.ints(shape, "index_shape")])  # type: ignore[arg-type]
        return TensorList((b.op("ScatterND", [base.data, index, x], name="list_data"),), s.layout)
    if (
        s.erased_signed is not None
        and forms.same_position(s.erased_signed[1], p)
        and _splits(b, s)
        and unit in (None, 0)
    ):
        return _assign_signed(forms, b, s.erased_signed[0], x, p)  # type: ignore[arg-type]
    if s.layout.shaped_by_first and s.min_length == 0:  # it may be empty, of zeros' dims
        s = _shaped(b, s, x)
    row = forms.row(b, x) if unit is None else x  # an element with a dim of one is a row
    if p is None or static == 0:  # an append, or a prepend (position 0 is always valid)
        parts = [row, s.data] if static == 0 else [s.data, row]
        return TensorList((b.op("Concat", parts, {"axis": axis}, name="list_data"),), s.layout)
    length = max(s.min_length, forms.checked(s, b.graph))
    if static is not None and -length <= static <= length:
        # a position the list surely has (an earlier edit or read checked it): Slices, no check
        position = b.ints([static], "position")
        return TensorList((splice(b, s.data, position, position, row, axis),), s.layout)
    if not _splits(b, s):
        return _insert_sliced(forms, b, s, row, p, static)
    if static is not None and abs(static) <= GATHERED:
        return _insert_gathered(b, s, row, static)
    n1 = forms.table(s).n1
    if static is not None and static > 0:
        sizes = [b.ints([static], "position"), b.op("Sub", [n1, b.ints([static], "position")])]
    elif static is not None:  # -n <= p < 0: n + p before, -p after
        sizes = [b.op("Add", [n1, b.ints([static], "position")]), b.ints([-static], "after")]
    else:
        index1 = _position(forms, b, p, n1)  # type: ignore[arg-type]
        sizes = [index1, b.op("Sub", [n1, index1])]
    head, tail = _cut(b, s.data, sizes, axis)
    joined = b.op("Concat", [head, row, tail], {"axis": axis}, name="list_data")
    return TensorList((joined,), s.layout)


# the largest |p| of an insert at a constant p made by `_insert_gathered` (its Gather takes |p|
# constant indices)
GATHERED = 64


def _insert_gathered(b: Builder, s: TensorList, row: ir.Value, p: int) -> TensorList:
    """Insert at a constant p != 0 whose range is not known: the |p| rows on p's side of the
    cut are read by one Gather of constant indices, which fails where SequenceInsert does
    (`xs.insert(1, x)`: n < 1); the other side is one Slice. Two launches where cutting with
    Split took four (the length, the second size, the sizes, the Split):

        p > 0:  Concat(Gather(data, [0 .. p-1]), row, Slice(data, p, end))
        p < 0:  Concat(Slice(data, 0, p), row, Gather(data, [p .. -1]))   (fails for n < -p)
    """
    axis = s.layout.list_axis
    rows = b.ints(list(range(p)) if p > 0 else list(range(p, 0)), "rows")
    gathered = b.op("Gather", [s.data, rows], {"axis": axis}, name="checked")
    if p > 0:
        rest = b.op(
            "Slice", [s.data, b.ints([p], "position"), b.ints([INT64_MAX], "end"), *axes(b, axis)]
        )
        parts = [gathered, row, rest]
    else:
        rest = b.op(
            "Slice", [s.data, b.ints([0], "zero1"), b.ints([p], "position"), *axes(b, axis)]
        )
        parts = [rest, row, gathered]
    return TensorList((b.op("Concat", parts, {"axis": axis}, name="list_data"),), s.layout)


def _assign_signed(
    forms: ListForms, b: Builder, base: TensorList, x: ir.Value, p: ir.Value | int
) -> TensorList:
    """`xs[k] = x` as exported, SequenceInsert(SequenceErase(s, k), x, k), for k of either
    sign. The erase takes element k (n + k when k < 0) of n; the insert counts k in the n - 1
    left, so for k >= 0 it puts x back at k, and for k < 0 at n - 1 + k, one before: element
    k - 1 becomes x and the old element k - 1 moves up to k. With a = k + Clip(k, -1, 0)
    (k - 1 when k < 0, else k):

        -> ScatterND(ScatterND(data, [k], GatherND(data, [a])), [a], x)

    For k >= 0 the first ScatterND writes element k over itself. ScatterND and GatherND read
    a negative index from the end and fail outside [-n, n-1]: at k that is the erase's check,
    at a the insert's (k = -n leaves n - 1 elements, where the insert's -n is out of range).
    Six launches where the erase and the insert took fifteen."""
    shape = [1] if base.layout.unit is None else [1, 1]  # unit rows: x is the row [[k]] takes
    if isinstance(p, int):
        index = b.constant(np.array([p], np.int64).reshape(shape), "position")
        before = b.constant(np.array([p - 1 if p < 0 else p], np.int64).reshape(shape), "moved")
    else:
        index = b.op("Reshape", [int64(b, p), b.ints(shape, "index_shape")], name="position")
        low, high = scalar_int(b, -1, "minus_one"), scalar_int(b, 0, "zero")
        step = b.op("Clip", [index, low, high], name="step")  # -1 where k < 0, else 0
        before = b.op("Add", [index, step], name="moved")
    moved = b.op("GatherND", [base.data, before], name="moved_element")
    data = b.op("ScatterND", [base.data, index, moved], name="moved_up")
    return TensorList((b.op("ScatterND", [data, before, x], name="list_data"),), base.layout)


def _shaped(b: Builder, s: TensorList, x: ir.Value) -> TensorList:
    """The data broadcast to `[n, *shape of x]` (or x's shape with n at the unit axis, where
    x has a dim of one): the same tensor where n > 0 (every element has x's shape, which is
    what the layout was proved on), the empty data `[0, 1, ..]` (`[1, 0, 1]`) with x's dims
    where n = 0 (a dim of one broadcasts to any size, 0 included)."""
    data = b.op("Expand", [s.data, b.op("Shape", [x])], name="list_data")
    return dataclasses.replace(s, parts=(data,))


def _insert_sliced(
    forms: ListForms, b: Builder, s: TensorList, row: ir.Value, p: ir.Value, static: int | None
) -> TensorList:
    """The insert of a string list: Gather(Range(n + 1), p) checks p, Slices cut."""
    assert s.layout.unit is None, "strings keep the list axis first"
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
    known = forms.within(s, p, b.graph)
    if known is not None:  # in range for sure: Slice reads a negative position as Gather does
        return _erase_at(b, s, known)
    static = -1 if p is None else forms.values.get_int(p)
    if not _splits(b, s):
        return _erase_sliced(forms, b, s, p, static)
    n1 = forms.table(s).n1
    one = b.ints([1], "one")
    axis = s.layout.list_axis
    if static == -1:  # the last element (a pop): everything before it
        return _kept(b, _cut(b, s.data, [b.op("Sub", [n1, one]), one], axis)[:1], s)
    if static == 0:  # the first element: everything after it
        return _kept(b, _cut(b, s.data, [one, b.op("Sub", [n1, one])], axis)[1:], s)
    if static is not None:  # inside: the mask at a constant index, checked as at run time
        return _erase_masked(forms, b, s, b.ints([static], "position"))
    return _erase_masked(forms, b, s, p)  # type: ignore[arg-type]


def _erase_masked(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> TensorList:
    """Erase at a run-time position: the rows but row p, kept by a mask of n trues with a false
    scattered at p (ScatterElements reads a negative p from the end and fails outside [-n, n-1]
    as SequenceErase does). Four launches past the table's Shape, where cutting with Split at
    a position made >= 0 (Less, Add, Where) took eight and measured about 2 us more per erase
    in a loop (onnxruntime 1.32, CPU)."""
    n1 = forms.table(s).n1
    trues = b.op("ConstantOfShape", [n1], {"value": ir.Tensor(np.ones(1, np.bool_))}, name="all")
    false = b.constant(np.zeros(1, np.bool_), "erased")
    keep = b.op("ScatterElements", [trues, _one_d(b, p), false], {"axis": 0}, name="keep")
    axis = s.layout.list_axis
    kept = b.op("Compress", [s.data, keep], {"axis": axis}, name="list_data")
    return TensorList((kept,), s.layout)


def _erase_sliced(
    forms: ListForms, b: Builder, s: TensorList, p: ir.Value | None, static: int | None
) -> TensorList:
    """The erase of a string list: Gather(Range(n), p) checks p, Slices cut."""
    assert s.layout.unit is None, "strings keep the list axis first"
    p1 = b.ints([static], "position") if static is not None else _one_d(b, p)  # type: ignore[arg-type]
    index1 = b.op("Gather", [forms.positions(s), p1])  # p >= 0; fails outside [-n, n-1]
    if static == -1:  # the last element (a pop): everything before it
        head = b.op("Slice", [s.data, b.ints([0], "zero1"), index1], name="list_data")
        return TensorList((head,), s.layout)
    after = b.op("Add", [index1, b.ints([1], "one")])
    if static == 0:  # the first element: everything after it
        tail = b.op("Slice", [s.data, after, b.ints([INT64_MAX], "end")], name="list_data")
        return TensorList((tail,), s.layout)
    return TensorList((splice(b, s.data, index1, after, None),), s.layout)


def _splits(b: Builder, s: TensorList) -> bool:
    """Whether the Split and ScatterND forms apply: not to strings, which keep the Slice forms
    (the tensor form of a list needs opset 14, where Split takes run-time sizes)."""
    return s.layout.dtype != ir.DataType.STRING


def _position(forms: ListForms, b: Builder, p: ir.Value, n1: ir.Value) -> ir.Value:
    """A run-time position as a 1-D index, counted from the end when negative (not needed
    when it is proved never negative)."""
    p1 = _one_d(b, p)
    return p1 if forms.never_negative(p) else from_end(b, p1, n1)


def _one_d(b: Builder, p: ir.Value) -> ir.Value:
    return b.op("Reshape", [int64(b, p), b.ints([1], "one_d")])


def _cut(b: Builder, data: ir.Value, sizes: list[ir.Value], axis: int = 0) -> list[ir.Value]:
    """Split on the list axis into pieces of `sizes` (1-D of one entry each); a negative size,
    or sizes that do not add up to n, make Split fail at run time."""
    split = b.op("Concat", sizes, {"axis": 0}, name="sizes")
    return b.ops("Split", [data, split], {"axis": axis}, num_outputs=len(sizes), name="cut")


def _kept(b: Builder, pieces: list[ir.Value], s: TensorList) -> TensorList:
    if len(pieces) == 1:
        return TensorList((pieces[0],), s.layout)
    axis = s.layout.list_axis
    return TensorList((b.op("Concat", pieces, {"axis": axis}, name="list_data"),), s.layout)


def _erase_at(b: Builder, s: TensorList, p: int) -> TensorList:
    """Erase element p, known to exist: data[:p] + data[p+1:] (one Slice at either end)."""
    axis = s.layout.list_axis
    if p == -1:
        bounds = [b.ints([0], "zero1"), b.ints([-1], "last"), *axes(b, axis)]
        kept = b.op("Slice", [s.data, *bounds], name="list_data")
    elif p == 0:
        end = b.ints([INT64_MAX], "end")
        kept = b.op("Slice", [s.data, b.ints([1], "one"), end, *axes(b, axis)], name="list_data")
    else:
        start, end = b.ints([p], "position"), b.ints([p + 1], "after")
        kept = splice(b, s.data, start, end, None, axis)
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
    if layout.unit is not None:  # chunks of one kept on the axis: they are x's rows already
        assert layout.unit == axis and not squeeze, "unit rows of a split are its chunks"
        return TensorList((x,), layout)
    data = moved if squeeze else b.unsqueeze(moved, [axis + 1])
    return TensorList((data,), layout)


def table(b: Builder, s: TensorList) -> Table:
    n1 = dim0(b, s.data, s.layout.list_axis)
    n = b.op("Reshape", [n1, b.ints([], "scalar")], name="n")
    return Table(n, n1)


def shape_at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value | None:
    """None: the element is one Gather; the Shape read from it stays as it is."""
    return None


def at(forms: ListForms, b: Builder, s: TensorList, p: ir.Value) -> ir.Value:
    if s.layout.unit is not None:  # the row at p: Gather at [p] keeps the dim of one
        index = forms.index1(b, p)  # fails outside [-n, n-1]
        return b.op("Gather", [s.data, index], {"axis": s.layout.unit}, name="element")
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
    joined = _concat(b, s, axis, new_axis)
    if joined is None or not (s.layout.nonempty_join and s.min_length == 0):
        return joined
    # Reshape(J, Add(Shape(J), Gather(Range(0, n, 1), [0]))): J's own shape, and a Gather that
    # fails for n = 0, as the ConcatFromSequence of an empty list does (the last Reshape, so
    # onnxruntime's fusion of consecutive Reshapes keeps it)
    zero = b.constant(np.array(0, np.int64), "zero")
    length = b.op("Gather", [b.op("Shape", [s.data]), scalar_int(b, s.layout.list_axis, "axis")])
    numbers = b.op("Range", [zero, length, b.constant(np.array(1, np.int64), "one")])
    nonempty = b.op("Gather", [numbers, b.ints([0], "first")], name="nonempty")
    target = b.op("Add", [b.op("Shape", [joined]), nonempty], name="same_shape")
    return b.op("Reshape", [joined, target], name="concat")


def _concat(b: Builder, s: TensorList, axis: int, new_axis: bool) -> ir.Value | None:
    if s.layout.unit is not None:
        return unit_rows.concat(b, s, axis, new_axis)
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
    others = [*s.layout.dims[:axis], *s.layout.dims[axis + 1 :]]
    if len(s.layout.dims) == rank and all(isinstance(d, int) and d > 0 for d in others):
        # the other dims are static and not 0: a constant target, the merged axis -1
        target = b.ints([*s.layout.dims[:axis], -1, *s.layout.dims[axis + 1 :]], "target")
        return b.op("Reshape", [moved, target], name="concat")
    shape = b.op("Shape", [moved])
    head = b.op("Slice", [shape, b.ints([0], "zero1"), b.ints([axis], "axis")])
    pair = b.op("Slice", [shape, b.ints([axis], "axis"), b.ints([axis + 2], "after")])
    merged = b.op("ReduceProd", [pair], {"keepdims": 1}, name="merged")
    tail = b.op("Slice", [shape, b.ints([axis + 2], "after"), b.ints([INT64_MAX], "end")])
    target = b.op("Concat", [head, merged, tail], {"axis": 0})
    return b.op("Reshape", [moved, target], {"allowzero": 1}, name="concat")


def flattened(b: Builder, s: TensorList) -> ir.Value:
    """Every element flattened and concatenated, in order: the data with the list axis first,
    flattened (the data itself when 1-D)."""
    rank = s.layout.rank
    assert rank is not None
    if s.layout.unit is None:
        data, data_rank = s.data, rank + 1
    else:  # the list axis is the element's unit axis u: element i is data[.., i:i+1, ..]
        data, data_rank = moved_first(b, s.data, s.layout.unit, rank), rank
    if data_rank == 1:
        return data
    return b.op("Reshape", [data, b.ints([-1], "flat")], name="flattened")
