"""The tensor form of a list, and of every sequence operator on it.

A list of n tensors of rank r and element type T is a pair:

- `data`: the elements flattened (row-major) and concatenated, a 1-D tensor of T;
- `shapes`: an `[n, r]` int64 table, row i the shape of element i.

From the table: `sizes = ReduceProd(shapes, axis 1)`, `ends = CumSum(sizes)`,
`starts = ends - sizes`; element i is `data[starts[i]:ends[i]]` reshaped to `shapes[i]`. This is
TensorFlow's RaggedTensor (flat values + row splits) generalised to any rank, with one shape per
row. Each operator becomes a handful of tensor ops:

    SequenceEmpty()              -> data = [] ; shapes = [0, r] table
    SequenceConstruct(x0..xk)    -> Concat(Reshape(xi, [-1])..) ; Concat(Shape(xi)[None]..)
    SequenceInsert(s, x)         -> Concat(data, Reshape(x, [-1])) ; Concat(shapes, Shape(x)[None])
    SequenceInsert(s, x, p)      -> the same, spliced in at starts[p] and row p (p < 0: from n)
    SequenceErase(s, p)          -> data without [starts[p], ends[p]) ; shapes without row p
    SequenceAt(s, p)             -> Reshape(Slice(data, starts[p], ends[p]), shapes[p], allowzero=1)
    SequenceLength(s)            -> Shape(shapes)[0]
    ConcatFromSequence(s, axis=0)            -> Reshape(data, [sum(shapes[:, 0]), shapes[0, 1:]..])
    ConcatFromSequence(s, new_axis=1, axis=a) -> Transpose(Reshape(data, [n, shapes[0]..]), 0 -> a)
    ConcatFromSequence(s, axis=a != 0)        -> Loop over 1..n-1: acc = Concat(acc, s[i], axis=a)
    SplitToSequence(x, axis=0 or keepdims=0 without split)
                                 -> Reshape(x moved to put the axis first, [-1]) ; rows of sizes
    SplitToSequence(x, axis=a != 0)           -> Loop over the chunks: data = Concat(data, chunk)

Positions are read with Gather, which accepts exactly `[-n, n-1]` and fails outside it, as
SequenceAt and SequenceErase do; an insert position is checked against `[-n, n]` the same way.
Where the original fails at run time, the tensor form fails too (a read from an empty list, an
out-of-range position), with one exception documented in the README: ConcatFromSequence of
elements whose shapes do not fit together may give a result where the original fails.
"""

from __future__ import annotations

__all__ = ["FlatList", "ListForms"]

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from seqlower.rewriter import Builder, Rewriter

INT64_MAX = 2**63 - 1
OUT_OF_RANGE = 2**62  # an index every Gather refuses


@dataclasses.dataclass(frozen=True)
class FlatList:
    """A list as tensors: `data` (1-D, the elements flattened) and `shapes` ([n, rank])."""

    data: ir.Value
    shapes: ir.Value
    rank: int
    dtype: ir.DataType


@dataclasses.dataclass
class _Table:
    """What every reader of one list needs, built once where the list is defined."""

    n: ir.Value  # scalar
    n1: ir.Value  # [1]
    starts: ir.Value  # [n]
    ends: ir.Value  # [n]
    bounds: ir.Value  # [n + 1]: starts, then the total


# Where to emit the table of a list: a builder in the graph that defines it, placed before the
# node (of that graph) that holds the current reader.
Placement = Callable[[FlatList], Builder]


class ListForms:
    """Emits the tensor form of each sequence operator. `table_builder(flat)` gives a builder
    in the graph where `flat` is defined, before the current reader (or the node holding it)."""

    def __init__(self, rewriter: Rewriter, table_builder: Placement) -> None:
        self.rewriter = rewriter
        self._table_builder = table_builder
        self._tables: dict[int, _Table] = {}

    # -- makers --------------------------------------------------------------------------

    def empty(self, b: Builder, rank: int, dtype: ir.DataType) -> FlatList:
        data = _empty(b, [0], dtype, "list_data")
        shapes = _empty(b, [0, rank], ir.DataType.INT64, "list_shapes")
        return self.typed(FlatList(data, shapes, rank, dtype))

    def construct(
        self, b: Builder, elements: Sequence[ir.Value], rank: int, dtype: ir.DataType
    ) -> FlatList:
        data = [self._flatten(b, x) for x in elements]
        rows = [self._row(b, x) for x in elements]
        return self.typed(FlatList(self._concat(b, data, 0), self._concat(b, rows, 0), rank, dtype))

    def insert(self, b: Builder, s: FlatList, x: ir.Value, p: ir.Value | None) -> FlatList:
        flat, row = self._flatten(b, x), self._row(b, x)
        static = _static_int(p)
        if p is None or static == 0:  # an append, or a prepend (position 0 is always valid)
            first = (flat, s.data) if static == 0 else (s.data, flat)
            rows = (row, s.shapes) if static == 0 else (s.shapes, row)
            data = b.op("Concat", list(first), {"axis": 0}, name="list_data")
            shapes = b.op("Concat", list(rows), {"axis": 0}, name="list_shapes")
            return self.typed(dataclasses.replace(s, data=data, shapes=shapes))
        table = self._table(s)
        if static is not None and static > 0:  # refused by bounds (n + 1 entries) when > n
            index1 = b.ints([static], "position")
        else:
            p = self._int64(b, p)
            index = self._from_end(b, p, table.n)
            # p < -n: an index Gather refuses (p > n is refused by bounds)
            negative = b.op("Less", [index, b.constant(np.array(0, np.int64), "zero")])
            index = b.op("Where", [negative, self._oor(b), index])
            index1 = b.op("Reshape", [index, b.ints([1], "one_d")])
        offset = b.op("Gather", [table.bounds, index1], name="offset")
        data = self._splice(b, s.data, offset, offset, flat)
        shapes = self._splice(b, s.shapes, index1, index1, row)
        return self.typed(dataclasses.replace(s, data=data, shapes=shapes))

    def erase(self, b: Builder, s: FlatList, p: ir.Value | None) -> FlatList:
        table = self._table(s)
        static = -1 if p is None else _static_int(p)
        if static is not None:
            p1 = b.ints([static], "position")
        else:
            p1 = b.op("Reshape", [self._int64(b, p), b.ints([1], "one_d")])  # type: ignore[arg-type]
        start = b.op("Gather", [table.starts, p1], name="start")  # fails outside [-n, n-1]
        end = b.op("Gather", [table.ends, p1], name="end")
        if static == -1:  # the last element: the table without its last row
            data = b.op("Slice", [s.data, b.ints([0], "zero1"), start], name="list_data")
            shapes = b.op("Slice", [s.shapes, b.ints([0], "zero1"), p1], name="list_shapes")
            return self.typed(dataclasses.replace(s, data=data, shapes=shapes))
        if static is not None and static >= 0:
            index1 = p1
        else:
            index = self._from_end(b, b.op("Reshape", [p1, b.ints([], "scalar")]), table.n)
            index1 = b.op("Reshape", [index, b.ints([1], "one_d")])
        after = b.op("Add", [index1, b.ints([1], "one")])
        data = self._splice(b, s.data, start, end, None)
        shapes = self._splice(b, s.shapes, index1, after, None)
        return self.typed(dataclasses.replace(s, data=data, shapes=shapes))

    def split(
        self,
        b: Builder,
        x: ir.Value,
        split: ir.Value | None,
        axis: int,
        keepdims: bool,
        dtype: ir.DataType,
    ) -> FlatList:
        """SplitToSequence whose chunk count is known at run time only."""
        assert x.shape is not None
        rank = len(x.shape)
        squeeze = split is None and not keepdims
        shape = b.op("Shape", [x])
        dim = b.op("Gather", [shape, b.ints([axis], "axis")], name="dim")
        sizes: ir.Value | None = None  # None: chunks of one, `dim` of them
        if split is None:
            pass
        elif split.shape is not None and len(split.shape) == 1:
            sizes = self._int64(b, split)
        else:  # a scalar chunk size: ceil(dim / s) chunks, the last one smaller
            size = b.op("Reshape", [self._int64(b, split), b.ints([1], "one_d")])
            size = b.op("Max", [size, b.ints([1], "one")])  # a size < 1 fails in the original
            count = b.op("Div", [b.op("Add", [dim, b.op("Sub", [size, b.ints([1], "one")])]), size])
            scalar = b.ints([], "scalar")
            index = b.op(
                "Range",
                [
                    b.constant(np.array(0, np.int64), "zero"),
                    b.op("Reshape", [count, scalar]),
                    b.constant(np.array(1, np.int64), "one"),
                ],
            )
            rest = b.op("Sub", [dim, b.op("Mul", [index, size])])
            sizes = b.op("Min", [size, rest], name="sizes")
        count1 = dim if sizes is None else b.op("Shape", [sizes], name="count")
        before = self._tiled(b, shape, 0, axis, count1)
        after = self._tiled(b, shape, axis + 1, rank, count1)
        if squeeze:
            middle = []
        elif sizes is None:
            ones = b.op("Concat", [count1, b.ints([1], "one")], {"axis": 0})
            one = ir.Tensor(np.ones((1,), np.int64))
            middle = [b.op("ConstantOfShape", [ones], {"value": one}, name="unit_sizes")]
        else:
            middle = [b.unsqueeze(sizes, [1])]
        columns = [*before, *middle, *after]
        if columns:
            shapes = self._concat(b, columns, 1)
        else:  # scalar elements: a [count, 0] table
            empty_row = b.op("Concat", [count1, b.ints([0], "zero1")], {"axis": 0})
            zero = ir.Tensor(np.zeros((1,), np.int64))
            shapes = b.op("ConstantOfShape", [empty_row], {"value": zero}, name="list_shapes")
        if sizes is None or axis == 0:  # chunks of one row: each is contiguous once the
            moved = x  # axis is moved first
            if axis != 0:
                perm = [axis, *(i for i in range(rank) if i != axis)]
                moved = b.op("Transpose", [x], {"perm": perm})
            data = b.op("Reshape", [moved, b.ints([-1], "flat")], name="list_data")
        else:
            data = self._chunks_loop(b, x, sizes, axis, dtype)
        return self.typed(FlatList(data, shapes, rank - 1 if squeeze else rank, dtype))

    # -- readers -------------------------------------------------------------------------

    def length(self, b: Builder, s: FlatList) -> ir.Value:
        return self._table(s).n

    def at(self, b: Builder, s: FlatList, p: ir.Value, table: _Table | None = None) -> ir.Value:
        table = table or self._table(s)
        p = self._int64(b, p)
        p1 = b.op("Reshape", [p, b.ints([1], "one_d")])
        start = b.op("Gather", [table.starts, p1], name="start")  # fails outside [-n, n-1]
        end = b.op("Gather", [table.ends, p1], name="end")
        shape = b.op("Gather", [s.shapes, p], name="shape")
        piece = b.op("Slice", [s.data, start, end])
        element = b.op("Reshape", [piece, shape], {"allowzero": 1}, name="element")
        element.type = ir.TensorType(s.dtype)
        return element

    def concat(self, b: Builder, s: FlatList, axis: int, new_axis: bool) -> ir.Value:
        table = self._table(s)
        first = b.op("Gather", [s.shapes, b.constant(np.array(0, np.int64), "zero")], name="first")
        if new_axis:
            axis = axis + s.rank + 1 if axis < 0 else axis
            shape = b.op("Concat", [table.n1, first], {"axis": 0})
            result = b.op("Reshape", [s.data, shape], {"allowzero": 1}, name="stacked")
            if axis != 0:
                perm = [*range(1, axis + 1), 0, *range(axis + 1, s.rank + 1)]
                result = b.op("Transpose", [result], {"perm": perm})
        else:
            axis = axis + s.rank if axis < 0 else axis
            if axis == 0:
                lead = b.op(
                    "Slice",
                    [s.shapes, b.ints([0], "zero1"), b.ints([1], "one"), b.ints([1], "one")],
                )
                total = b.op("ReduceSum", [lead, b.ints([0], "zero1")], {"keepdims": 0})
                rest = b.op("Slice", [first, b.ints([1], "one"), b.ints([INT64_MAX], "end")])
                shape = b.op("Concat", [total, rest], {"axis": 0})
                result = b.op("Reshape", [s.data, shape], {"allowzero": 1}, name="concat")
            else:
                result = self._concat_loop(b, s, table, axis)
        result.type = ir.TensorType(s.dtype)
        return result

    # -- pieces --------------------------------------------------------------------------

    def _table(self, s: FlatList) -> _Table:
        table = self._tables.get(id(s.data))
        if table is None:
            b = self._table_builder(s)
            shape = b.op("Shape", [s.shapes], name="table_shape")
            n1 = b.op("Slice", [shape, b.ints([0], "zero1"), b.ints([1], "one")], name="n1")
            n = b.op("Reshape", [n1, b.ints([], "scalar")], name="n")
            sizes = self._reduce_prod(b, s.shapes)
            ends = b.op("CumSum", [sizes, b.constant(np.array(0, np.int64), "zero")], name="ends")
            starts = b.op("Sub", [ends, sizes], name="starts")
            total = b.op("ReduceSum", [sizes, b.ints([0], "zero1")], {"keepdims": 1}, name="total")
            bounds = b.op("Concat", [starts, total], {"axis": 0}, name="bounds")
            table = self._tables[id(s.data)] = _Table(n, n1, starts, ends, bounds)
        return table

    def _reduce_prod(self, b: Builder, shapes: ir.Value) -> ir.Value:
        if b.opset < 18:
            return b.op("ReduceProd", [shapes], {"axes": [1], "keepdims": 0}, name="sizes")
        return b.op("ReduceProd", [shapes, b.ints([1], "one")], {"keepdims": 0}, name="sizes")

    def _oor(self, b: Builder) -> ir.Value:
        return b.constant(np.array(OUT_OF_RANGE, np.int64), "out_of_range")

    @staticmethod
    def _int64(b: Builder, value: ir.Value) -> ir.Value:
        if value.dtype == ir.DataType.INT64:
            return value
        return b.op("Cast", [value], {"to": int(ir.DataType.INT64)})

    @staticmethod
    def _from_end(b: Builder, p: ir.Value, n: ir.Value) -> ir.Value:
        """p, counted from the end when negative: Where(p < 0, p + n, p)."""
        negative = b.op("Less", [p, b.constant(np.array(0, np.int64), "zero")])
        return b.op("Where", [negative, b.op("Add", [p, n]), p])

    @staticmethod
    def _flatten(b: Builder, x: ir.Value) -> ir.Value:
        return b.op("Reshape", [x, b.ints([-1], "flat")], name="flat")

    @staticmethod
    def _row(b: Builder, x: ir.Value) -> ir.Value:
        """Shape(x) as a [1, rank] row. A Reshape, not an Unsqueeze: onnx's data propagation
        reads an unsqueezed shape as 1-D, and then infers wrong ranks for the elements read
        back from the table."""
        return b.op("Reshape", [b.op("Shape", [x]), b.ints([1, -1], "row")], name="row")

    @staticmethod
    def _concat(b: Builder, parts: Sequence[ir.Value], axis: int) -> ir.Value:
        if len(parts) == 1:
            return parts[0]
        return b.op("Concat", list(parts), {"axis": axis})

    @staticmethod
    def _splice(
        b: Builder, x: ir.Value, start: ir.Value, end: ir.Value, middle: ir.Value | None
    ) -> ir.Value:
        """x[:start] + middle + x[end:] along axis 0 (start, end: 1-D of one entry)."""
        head = b.op("Slice", [x, b.ints([0], "zero1"), start])
        tail = b.op("Slice", [x, end, b.ints([INT64_MAX], "end")])
        parts = [head, tail] if middle is None else [head, middle, tail]
        return b.op("Concat", parts, {"axis": 0})

    @staticmethod
    def _tiled(
        b: Builder, shape: ir.Value, start: int, stop: int, count1: ir.Value
    ) -> list[ir.Value]:
        """Dims start..stop of `shape`, as a [count, stop - start] table (none when empty)."""
        if stop <= start:
            return []
        dims = b.op("Slice", [shape, b.ints([start], "start"), b.ints([stop], "stop")])
        target = b.op("Concat", [count1, b.ints([stop - start], "width")], {"axis": 0})
        return [b.op("Expand", [b.unsqueeze(dims, [0]), target])]

    def typed(self, flat: FlatList) -> FlatList:
        flat.data.type = ir.TensorType(flat.dtype)
        flat.data.shape = ir.Shape([None])
        flat.shapes.type = ir.TensorType(ir.DataType.INT64)
        flat.shapes.shape = ir.Shape([None, flat.rank])
        return flat

    # -- loops ---------------------------------------------------------------------------

    def _concat_loop(self, b: Builder, s: FlatList, table: _Table, axis: int) -> ir.Value:
        """ConcatFromSequence on an axis other than 0: element 0, then a Loop over 1..n-1
        that concatenates element i to what it carries."""
        first = self.at(b, s, b.constant(np.array(0, np.int64), "zero"), table)
        trips = b.op("Sub", [table.n, b.constant(np.array(1, np.int64), "one")])
        body = self.rewriter.new_graph(f"{b.hint}_concat_body", b.opset)
        i, cond, acc = _body_inputs(body, s.dtype, "acc")
        index = body.op("Add", [i, body.constant(np.array(1, np.int64), "one")])
        element = self.at(body, s, index, table)
        grown = body.op("Concat", [acc, element], {"axis": axis}, name="grown")
        _body_outputs(body, cond, grown, s.dtype)
        return b.op("Loop", [trips, None, first], {"body": body.graph}, name="concat_loop")

    def _chunks_loop(
        self, b: Builder, x: ir.Value, sizes: ir.Value, axis: int, dtype: ir.DataType
    ) -> ir.Value:
        """The chunks of x along `axis` (not 0), each flattened, one after the other: a Loop
        over the chunks that concatenates each to what it carries."""
        ends = b.op("CumSum", [sizes, b.constant(np.array(0, np.int64), "zero")], name="ends")
        starts = b.op("Sub", [ends, sizes], name="starts")
        trips = b.op("Reshape", [b.op("Shape", [sizes]), b.ints([], "scalar")])
        initial = _empty(b, [0], dtype, "list_data")
        body = self.rewriter.new_graph(f"{b.hint}_chunks_body", b.opset)
        i, cond, acc = _body_inputs(body, dtype, "acc")
        i1 = body.op("Reshape", [i, body.ints([1], "one_d")])
        start = body.op("Gather", [starts, i1])
        end = body.op("Gather", [ends, i1])
        chunk = body.op("Slice", [x, start, end, body.ints([axis], "axis")])
        flat = body.op("Reshape", [chunk, body.ints([-1], "flat")])
        grown = body.op("Concat", [acc, flat], {"axis": 0}, name="grown")
        _body_outputs(body, cond, grown, dtype)
        return b.op("Loop", [trips, None, initial], {"body": body.graph}, name="chunks_loop")


def _body_inputs(body: Builder, dtype: ir.DataType, name: str) -> tuple[ir.Value, ...]:
    names = body.rewriter.names
    values = (
        ir.Value(name=names.fresh("i"), type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([])),
        ir.Value(
            name=names.fresh("cond"), type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([])
        ),
        ir.Value(name=names.fresh(name), type=ir.TensorType(dtype)),
    )
    body.graph.inputs.extend(values)
    return values


def _body_outputs(body: Builder, cond: ir.Value, carried: ir.Value, dtype: ir.DataType) -> None:
    cond_out = body.op("Identity", [cond], name="cond_out")
    cond_out.type = ir.TensorType(ir.DataType.BOOL)
    carried.type = ir.TensorType(dtype)
    body.graph.outputs.extend([cond_out, carried])


def _static_int(value: ir.Value | None) -> int | None:
    """The value of a scalar (or one-element) integer constant, else None."""
    if value is None:
        return None
    tensor = value.const_value
    producer = value.producer()
    if tensor is None and producer is not None and producer.op_type == "Constant":
        attr = producer.attributes.get("value")
        tensor = attr.as_tensor() if attr is not None else None
    if tensor is None:
        return None
    array = tensor.numpy()
    if array.size != 1 or array.dtype.kind not in "iu":
        return None
    return int(array.reshape(-1)[0])


def _empty(b: Builder, shape: list[int], dtype: ir.DataType, name: str) -> ir.Value:
    """An empty tensor of `shape`. ConstantOfShape, not a Constant: OpenVINO 2026.4 cannot
    convert a Loop whose carried value starts as an empty Constant ("Accessing out-of-range
    dimension"), and accepts the same value made by ConstantOfShape. Strings, which
    ConstantOfShape does not make, take a Constant."""
    if dtype == ir.DataType.STRING:
        value = ir.StringTensor(np.zeros(shape, dtype=np.bytes_), shape=ir.Shape(shape))
        return b.op("Constant", [], {"value": value}, name=name)
    zero = ir.Tensor(np.zeros((1,), dtype=dtype.numpy()))
    return b.op("ConstantOfShape", [b.ints(shape, "empty_shape")], {"value": zero}, name=name)
