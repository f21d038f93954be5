"""A list as tensors: the four layouts, and the tensor-op helpers every layout uses.

A list of n tensors of rank r and element type T takes the cheapest layout its elements allow:

- `stacked`: every element has one shape S (proved from the tensors put in). One tensor
  `[n, *S]`, element i is `data[i]`: what `torch.stack` gives. Where S has a dim of one
  (`[1, H]` states, `x[i:i+1]` rows), the list axis may take that dim's place instead
  (`Layout.unit`): `[n, H]`, element i is `data[i:i+1]` (`seqlower.lists.unit_rows`).
- `ragged`: the elements differ in their first dim only. The elements concatenated on axis 0,
  `[sum of firsts, *rest]`, and a 1-D tensor of their first dims: TensorFlow's RaggedTensor
  (flat values + row lengths), and what SplitToSequence with run-time sizes already is.
- `flat`: anything else. The elements flattened and concatenated into one 1-D tensor, and an
  `[n, r]` table of their shapes (offsets are a CumSum of the rows' products).
- `unranked`: elements whose rank is known only at run time (or differs between them), where
  the target takes such tensors. The elements flattened into one 1-D tensor, their shapes
  concatenated into another, and an `[n, 2]` table of (size, rank) per element.

`TensorList.parts` are the tensors that stand for the list (one for stacked, three for
unranked, two otherwise; the table is always last): a Loop carries them, an If returns them.
"""

from __future__ import annotations

__all__ = [
    "INT64_MAX",
    "Layout",
    "Table",
    "TensorList",
    "axes",
    "body_inputs",
    "body_outputs",
    "dim0",
    "empty",
    "int64",
    "splice",
]

import dataclasses
from collections.abc import Sequence
from typing import Literal

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.rewriter import Builder

INT64_MAX = 2**63 - 1
LayoutKind = Literal["stacked", "ragged", "flat", "unranked"]


@dataclasses.dataclass(frozen=True)
class Layout:
    """How one list is laid out. `dims` are the element dims the layout relies on (all of them
    for stacked, all but the first for ragged; none for flat and unranked), ints where static.
    `rank` is None for unranked: the elements' rank is known only at run time. `unit`
    (stacked only): the axis of S, a dim of one in every element, that the list's axis takes
    the place of in the data (S with that dim n); None: the list axis is a new axis 0.
    `shaped_by_first` (stacked only): see the field."""

    kind: LayoutKind
    rank: int | None
    dtype: ir.DataType
    dims: tuple[int | str | None, ...] = ()
    unit: int | None = None
    # stacked with dims known at run time only, made empty by SequenceEmpty: the empty list is
    # [0, 1, .., 1], and an insert into a list that may be empty first broadcasts the data to
    # the shape of the tensor put in (the same data where n > 0, all elements having that
    # shape; where n = 0 the empty data with the element dims Concat needs)
    shaped_by_first: bool = False
    # flat only: the axis each element is stored with moved first (its data and its row of
    # shapes), for a list read only by ConcatFromSequence on that axis (`seqlower.lists.
    # axis_first`); None: the elements as they are
    moved: int | None = None
    # stacked only: its elements' shape was proved through a Loop in a loop body or a Conv
    # (`LoopShapes.nonempty_joins`), where the flat layout kept before kept the failure of a
    # ConcatFromSequence of no element: the join of a list that may be empty checks that it
    # is not (`stacked.concat`)
    nonempty_join: bool = False

    @property
    def list_axis(self) -> int:
        """The axis of the data along which the elements follow one another."""
        return 0 if self.unit is None else self.unit

    @property
    def part_names(self) -> tuple[str, ...]:
        """What each tensor of the list in this layout holds (`TensorList.parts`, in order)."""
        return _PART_NAMES[self.kind]


_PART_NAMES: dict[str, tuple[str, ...]] = {
    "stacked": ("data",),
    "ragged": ("data", "table"),
    "flat": ("data", "table"),
    "unranked": ("data", "dims", "table"),
}


@dataclasses.dataclass(frozen=True)
class TensorList:
    """The tensors that stand for a list, in its layout. `min_length` is a length the list is
    known to have at least (what SequenceConstruct and SequenceInsert prove; 0 otherwise): a
    constant position within it needs no run-time check."""

    parts: tuple[ir.Value, ...]
    layout: Layout
    min_length: int = 0
    # (the list before, p) when this list is that list with its element p erased, p a
    # constant >= 0 or a run-time position proved >= 0: an insert at the same p that follows
    # is an assignment (stacked: one ScatterND)
    erased: tuple[TensorList, int | ir.Value] | None = None
    # (the list before, p) when this stacked list is that list with its element p erased, p
    # static or run-time of either sign, where `erased` does not apply: an insert at the same
    # p that follows is, for p >= 0, a replacement and, for p < 0, a replacement of element
    # p - 1 whose old value moves to p (`stacked._assign_signed`)
    erased_signed: tuple[TensorList, int | ir.Value] | None = None
    # (p, x) when this list was made by putting x at p (-1: appended; else as `erased`): a
    # read at the same p is x
    put: tuple[int | ir.Value, ir.Value] | None = None
    # (the list before, p) when this list is that list with one element put at p (as `put`),
    # at a position it surely had (no check of its own): an erase at the same p gives that
    # list back (`xs.insert(-1, v); v = xs.pop(-2)`)
    inserted: tuple[TensorList, int | ir.Value] | None = None

    @property
    def data(self) -> ir.Value:
        return self.parts[0]

    @property
    def key(self) -> tuple:
        """What tells this list from another, for what is built once per list: its parts and
        their layout. Not its data alone: x split into scalars is x stacked, and x split into
        chunks is x with a table of their sizes, two lists of different lengths."""
        layout = self.layout
        return (layout.kind, layout.unit, layout.moved, *map(id, self.parts))

    @property
    def table(self) -> ir.Value | None:
        """The shapes table (flat), the first dims (ragged), the (size, rank) table (unranked);
        None when stacked."""
        return self.parts[-1] if len(self.parts) > 1 else None

    @property
    def buffers(self) -> tuple[ir.Value, ...]:
        """The tensors whose element i is a span along axis 0 (all parts but the table): the
        data, and for unranked the concatenated shapes."""
        return self.parts[:-1]


@dataclasses.dataclass
class Table:
    """What the readers of one list need, built once where the list is defined."""

    n: ir.Value  # scalar
    n1: ir.Value  # [1]
    starts: ir.Value | None = None  # [n]: where each element starts (flat, ragged)
    ends: ir.Value | None = None  # [n]
    bounds: ir.Value | None = None  # [n + 1]: starts, then the total
    positions: ir.Value | None = None  # Range(0, n): a position in [-n, n-1], made >= 0
    # unranked: where each element's shape starts and ends in the concatenated shapes
    dim_starts: ir.Value | None = None  # [n]
    dim_ends: ir.Value | None = None  # [n]
    dim_bounds: ir.Value | None = None  # [n + 1]

    def spans(self, buffer: int) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(starts, ends, bounds) of the elements in buffer 0 (the data) or 1 (the shapes of an
        unranked list)."""
        found = (
            (self.starts, self.ends, self.bounds)
            if buffer == 0
            else (self.dim_starts, self.dim_ends, self.dim_bounds)
        )
        assert None not in found, "a table of spans"
        return found  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True)
class Chunks:
    """How a SplitToSequence cuts its input along `axis`: `sizes` (1-D int64) or None for
    chunks of one, `count1` ([1]: how many), `shape` (Shape of the input). `rank` is None for
    an input whose rank is known only at run time (cut along axis 0)."""

    axis: int
    rank: int | None
    squeeze: bool
    shape: ir.Value
    dim: ir.Value  # [1]
    sizes: ir.Value | None
    count1: ir.Value


def chunks(b: Builder, node: ir.Node, values: StaticValues) -> Chunks:
    """The chunks of a SplitToSequence whose count is known at run time only (an input of
    unknown rank is cut along axis 0 only)."""
    x = node.inputs[0]
    assert x is not None
    rank = len(x.shape) if x.shape is not None else None
    axis = node.attributes.get_int("axis", 0)
    if axis < 0:
        assert rank is not None, "a negative axis of an input of known rank"
        axis += rank
    assert rank is not None or axis == 0, "axis 0 of an input of unknown rank"
    split = node.inputs[1] if len(node.inputs) > 1 else None
    squeeze = split is None and node.attributes.get_int("keepdims", 1) == 0
    shape = b.op("Shape", [x])
    dim = b.op("Gather", [shape, b.ints([axis], "axis")], name="dim")
    sizes: ir.Value | None = None
    if split is not None and split.shape is not None and len(split.shape) == 1:
        sizes = int64(b, split)
    elif split is not None:  # a scalar chunk size: ceil(dim / s) chunks, the last one smaller
        static = values.get_int(split)
        if static is not None and static > 0:
            size = b.ints([static], "chunk")
            count = b.op("Div", [b.op("Add", [dim, b.ints([static - 1], "rounding")]), size])
        else:
            size = b.op("Reshape", [int64(b, split), b.ints([1], "one_d")])
            size = b.op("Max", [size, b.ints([1], "one")])  # a size < 1 fails in the original
            rounding = b.op("Sub", [size, b.ints([1], "one")])
            count = b.op("Div", [b.op("Add", [dim, rounding]), size])
        index = b.op(
            "Range",
            [
                scalar_int(b, 0, "zero"),
                b.op("Reshape", [count, b.ints([], "scalar")]),
                scalar_int(b, 1, "one"),
            ],
        )
        rest = b.op("Sub", [dim, b.op("Mul", [index, size])])
        sizes = b.op("Min", [size, rest], name="sizes")
    count1 = dim if sizes is None else b.op("Shape", [sizes], name="count")
    return Chunks(axis, rank, squeeze, shape, dim, sizes, count1)


def moved_first(b: Builder, x: ir.Value, axis: int, rank: int) -> ir.Value:
    """x with `axis` moved first (the others in order)."""
    if axis == 0:
        return x
    perm = [axis, *(i for i in range(rank) if i != axis)]
    return b.op("Transpose", [x], {"perm": perm})


def int64(b: Builder, value: ir.Value) -> ir.Value:
    if value.dtype == ir.DataType.INT64:
        return value
    return b.op("Cast", [value], {"to": int(ir.DataType.INT64)})


def scalar_int(b: Builder, value: int, name: str) -> ir.Value:
    return b.constant(np.array(value, np.int64), name)


def from_end(b: Builder, p: ir.Value, n: ir.Value) -> ir.Value:
    """p, counted from the end when negative: Where(p < 0, p + n, p)."""
    negative = b.op("Less", [p, scalar_int(b, 0, "zero")])
    return b.op("Where", [negative, b.op("Add", [p, n]), p])


def insert_index(b: Builder, p: ir.Value, n: ir.Value) -> ir.Value:
    """An insert position in `[-n, n]` as a 1-D index in `[0, n]`; below -n it becomes an index
    that every Gather refuses (above n, the callers' tables of n + 1 entries refuse it)."""
    index = from_end(b, int64(b, p), n)
    negative = b.op("Less", [index, scalar_int(b, 0, "zero")])
    index = b.op("Where", [negative, scalar_int(b, 2**62, "out_of_range"), index])
    return b.op("Reshape", [index, b.ints([1], "one_d")])


def splice(
    b: Builder,
    x: ir.Value,
    start: ir.Value,
    end: ir.Value,
    middle: ir.Value | None,
    axis: int = 0,
) -> ir.Value:
    """x[:start] + middle + x[end:] along `axis` (start, end: 1-D of one entry)."""
    head = b.op("Slice", [x, b.ints([0], "zero1"), start, *axes(b, axis)])
    tail = b.op("Slice", [x, end, b.ints([INT64_MAX], "end"), *axes(b, axis)])
    parts = [head, tail] if middle is None else [head, middle, tail]
    return b.op("Concat", parts, {"axis": axis})


def axes(b: Builder, axis: int) -> list[ir.Value]:
    """The `axes` input of a Slice along `axis`: none for axis 0 (the default)."""
    return [] if axis == 0 else [b.ints([axis], "axes")]


def concat(b: Builder, parts: Sequence[ir.Value], axis: int, name: str = "concat") -> ir.Value:
    if len(parts) == 1:
        return parts[0]
    return b.op("Concat", list(parts), {"axis": axis}, name=name)


def dim0(b: Builder, x: ir.Value, axis: int = 0) -> ir.Value:
    """Shape(x)[axis:axis + 1] (by default the first dim)."""
    if axis != 0:
        if b.opset >= 15:
            return b.op("Shape", [x], {"start": axis, "end": axis + 1}, name="list_dim")
        end = b.ints([axis + 1], "after")
        return b.op("Slice", [b.op("Shape", [x]), b.ints([axis], "axis"), end])
    if b.opset >= 15:
        return b.op("Shape", [x], {"end": 1}, name="first_dim")
    return b.op("Slice", [b.op("Shape", [x]), b.ints([0], "zero1"), b.ints([1], "one")])


def empty(b: Builder, shape: Sequence[int], dtype: ir.DataType, name: str) -> ir.Value:
    """An empty tensor of `shape`. ConstantOfShape, not a Constant: OpenVINO 2026.4 cannot
    convert a Loop whose carried value starts as an empty Constant ("Accessing out-of-range
    dimension"), and accepts the same value made by ConstantOfShape. Strings, which
    ConstantOfShape does not make, take a Constant."""
    if dtype == ir.DataType.STRING:
        value = ir.StringTensor(np.zeros(shape, dtype=np.bytes_), shape=ir.Shape(list(shape)))
        return b.op("Constant", [], {"value": value}, name=name)
    zero = ir.Tensor(np.zeros((1,), dtype=dtype.numpy()))
    return b.op("ConstantOfShape", [b.ints(list(shape), "empty_shape")], {"value": zero}, name=name)


def body_inputs(body: Builder, dtype: ir.DataType, name: str) -> tuple[ir.Value, ...]:
    """The inputs of a new Loop body that carries one tensor: (i, cond, carried)."""
    names = body.rewriter.names
    int64_type, bool_type = ir.TensorType(ir.DataType.INT64), ir.TensorType(ir.DataType.BOOL)
    values = (
        ir.Value(name=names.fresh("i"), type=int64_type, shape=ir.Shape([])),
        ir.Value(name=names.fresh("cond"), type=bool_type, shape=ir.Shape([])),
        ir.Value(name=names.fresh(name), type=ir.TensorType(dtype)),
    )
    body.graph.inputs.extend(values)
    return values


def body_outputs(body: Builder, cond: ir.Value, carried: ir.Value, dtype: ir.DataType) -> None:
    cond_out = body.op("Identity", [cond], name="cond_out")
    cond_out.type = ir.TensorType(ir.DataType.BOOL)
    carried.type = ir.TensorType(dtype)
    body.graph.outputs.extend([cond_out, carried])
