"""A proved lower bound of an integer scalar: is a Loop's trip count at least one?

    Loop(M = Gather(Shape(Gather(c, Range(0, Min(Add(i, 1), 4), 1))), 0), ...)
        i the iteration number of a Loop around: i >= 0, so Add(i, 1) >= 1, the Min >= 1,
        the Range holds at least one number, the Gather as many rows: M >= 1

Each integer value walked gets an interval [low, high] its every entry lies in (high None:
not bounded): a constant, its least and greatest entries; the iteration number of a Loop, and
a dim of a tensor, [0, 2^61] (a run of 2^61 iterations would last centuries, a tensor of 2^61
entries fits no memory); Add and Sub, the interval arithmetic, where both operands are
bounded above and below and the result cannot leave int64 (no wrap-around is assumed); Min
and Max; Cast to a type holding the interval; Identity, Squeeze, Unsqueeze and Reshape (the
same entries). A dim is its declared size, or is found through Size, Shape (one entry, or
Gather of a constant position from it), Gather (the indices' dims or the data's), Range of
start 0 and step 1 (max(limit, 0) numbers) and Slice from 0 by 1 to an end never negative
(min(end, dim)); elementwise unary ops keep their input's dims.
Anything else has no bound (None).
"""

from __future__ import annotations

__all__ = ["dim_lower_bound", "lower_bound", "value_bounds"]

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues

_RANGES = {
    ir.DataType.INT8: (-(2**7), 2**7 - 1),
    ir.DataType.INT16: (-(2**15), 2**15 - 1),
    ir.DataType.INT32: (-(2**31), 2**31 - 1),
    ir.DataType.INT64: (-(2**63), 2**63 - 1),
    ir.DataType.UINT8: (0, 2**8 - 1),
    ir.DataType.UINT16: (0, 2**16 - 1),
    ir.DataType.UINT32: (0, 2**32 - 1),
    ir.DataType.UINT64: (0, 2**64 - 1),
}
_SIZE = 2**61  # no dim and no iteration number reaches it
_DEPTH = 24  # producers followed from the value asked about
_SAME_ENTRIES = ("Identity", "Squeeze", "Unsqueeze", "Reshape")
_SAME_DIMS = ("Identity", "Cast", "Neg", "Abs", "Relu", "Sigmoid", "Tanh", "Exp", "Not")

Owner = Callable[[ir.Graph | None], ir.Node | None]
Interval = tuple[int, int | None]


def lower_bound(value: ir.Value | None, values: StaticValues, owner: Owner) -> int | None:
    """An int that every entry of `value` (an integer tensor, a scalar trip count say) is
    proved at least, or None. `owner` gives the node holding a subgraph (so that a Loop's
    iteration number is known as one)."""
    found = _Bounds(values, owner).interval(value, 0)
    return None if found is None else found[0]


def value_bounds(
    value: ir.Value | None, values: StaticValues, owner: Owner
) -> tuple[int, int | None] | None:
    """[low, high] every entry of `value` is proved to lie in (high None: not bounded above),
    or None."""
    return _Bounds(values, owner).interval(value, 0)


def dim_lower_bound(data: ir.Value, axis: int, values: StaticValues, owner: Owner) -> int | None:
    """An int that dim `axis` of `data` is proved at least (0 where nothing more is known),
    or None where its rank is not known."""
    return _Bounds(values, owner).dim(data, axis, 0)


class _Bounds:
    """The walk of one question. Answers are remembered per (value, depth) and (value, axis,
    depth): the same answers as without memory (the depth cut included), but an operand shared
    by many operators (`Add(a, a)` nested 24 deep) is walked once per depth, not once per path."""

    def __init__(self, values: StaticValues, owner: Owner) -> None:
        self.values, self.owner = values, owner
        self._intervals: dict[tuple[ir.Value, int], Interval | None] = {}
        self._dims: dict[tuple[ir.Value, int, int], int | None] = {}

    def interval(self, value: ir.Value | None, depth: int) -> Interval | None:
        if value is None:
            return None
        key = (value, depth)
        if key not in self._intervals:
            self._intervals[key] = self._interval(value, depth)
        return self._intervals[key]

    def _interval(self, value: ir.Value, depth: int) -> Interval | None:
        if depth > _DEPTH or value.dtype not in _RANGES:
            return None
        array = self.values.get(value)
        if array is not None:
            if array.size == 0 or array.dtype.kind not in "iu":
                return None
            return int(np.min(array)), int(np.max(array))
        if self._iteration_number(value):
            return 0, _SIZE
        node = value.producer()
        if node is None or node.domain != "":
            return None
        ins, op, deeper = node.inputs, node.op_type, depth + 1
        found: Interval | None = None
        if (op in _SAME_ENTRIES or op == "Cast") and ins:  # Cast: if the type holds them
            found = self.interval(ins[0], deeper)
        elif op in ("Add", "Sub") and len(ins) == 2:
            found = self._arithmetic(op, ins[0], ins[1], deeper)
        elif op in ("Min", "Max") and ins:
            found = self._extremum(op, ins, deeper)
        elif op in ("Size", "Shape", "Gather") and ins:
            low = self._size_or_dim(node, deeper)
            found = None if low is None else (low, _SIZE)
        return _within(found, value.dtype)

    def _arithmetic(
        self, op: str, first: ir.Value | None, second: ir.Value | None, depth: int
    ) -> Interval | None:
        a, b = self.interval(first, depth), self.interval(second, depth)
        if a is None or b is None or a[1] is None or b[1] is None:
            return None  # unbounded above: a sum may wrap around
        if op == "Add":
            return a[0] + b[0], a[1] + b[1]
        return a[0] - b[1], a[1] - b[0]

    def _extremum(self, op: str, ins: list, depth: int) -> Interval | None:
        found = [self.interval(v, depth) for v in ins]
        lows = [f[0] for f in found if f is not None]
        highs = [f[1] for f in found if f is not None and f[1] is not None]
        complete = len(lows) == len(found)
        if op == "Min":  # at least the least low, at most any high
            return (min(lows), min(highs) if highs else None) if complete else None
        if not lows:  # Max: at least any low, at most the greatest high
            return None
        return max(lows), max(highs) if complete and len(highs) == len(found) else None

    def _size_or_dim(self, node: ir.Node, depth: int) -> int | None:
        """A lower bound of Size(x), of Shape(x) of one entry, of Gather(Shape(x), k)."""
        data = node.inputs[0]
        if node.op_type == "Size":
            rank = _rank(data)
            if rank is None:
                return None
            dims = [self.dim(data, axis, depth) for axis in range(rank)]
            return None if any(d is None for d in dims) else int(np.prod(dims, dtype=object))
        if node.op_type == "Shape":
            picked = _shape_axes(node)
            return self.dim(data, picked[0], depth) if picked and len(picked) == 1 else None
        shape = data.producer() if data is not None else None  # Gather(Shape(x), k)
        index = self.values.get_int(node.inputs[1]) if len(node.inputs) > 1 else None
        if shape is None or shape.op_type != "Shape" or shape.domain != "" or index is None:
            return None
        picked = _shape_axes(shape)
        if picked is None or node.attributes.get_int("axis", 0) != 0:
            return None
        if not -len(picked) <= index < len(picked):
            return None
        return self.dim(shape.inputs[0], picked[index], depth)

    def dim(self, data: ir.Value | None, axis: int, depth: int) -> int | None:
        """A lower bound of dim `axis` of `data`."""
        if data is None:
            return None
        key = (data, axis, depth)
        if key not in self._dims:
            self._dims[key] = self._dim(data, axis, depth)
        return self._dims[key]

    def _dim(self, data: ir.Value, axis: int, depth: int) -> int | None:
        if depth > _DEPTH or data.shape is None or axis >= len(data.shape):
            return None
        declared = data.shape[axis]
        if isinstance(declared, int):
            return declared
        node = data.producer()
        if node is None or node.domain != "":
            return 0
        ins, op, deeper = node.inputs, node.op_type, depth + 1
        if op == "Range" and len(ins) == 3 and axis == 0:
            start, delta = self.values.get_int(ins[0]), self.values.get_int(ins[2])
            limit = self.interval(ins[1], deeper) if start == 0 and delta == 1 else None
            return 0 if limit is None else max(limit[0], 0)  # max(limit, 0) numbers
        if op == "Gather" and len(ins) == 2:
            rank, indices = _rank(ins[0]), _rank(ins[1])
            if rank is None or indices is None:
                return 0
            where = node.attributes.get_int("axis", 0)
            where = where + rank if where < 0 else where
            if axis < where:
                return self.dim(ins[0], axis, deeper)
            if axis < where + indices:
                return self.dim(ins[1], axis - where, deeper)
            return self.dim(ins[0], axis - indices + 1, deeper)
        if op == "Slice" and len(ins) >= 3:
            return self._sliced(node, axis, deeper)
        if op in _SAME_DIMS and ins:
            return self.dim(ins[0], axis, deeper)
        return 0

    def _sliced(self, node: ir.Node, axis: int, depth: int) -> int | None:
        """Dim `axis` of Slice(x, 0.., ends, axes, 1..): min(end, dim) where end >= 0, the
        other axes x's own."""
        ins = node.inputs
        rank = _rank(ins[0])
        given = ins[3] if len(ins) > 3 else None
        axes = list(range(rank or 0)) if given is None else self.values.get_ints(given)
        if rank is None or axes is None:
            return 0
        sliced = [a + rank if a < 0 else a for a in axes]
        if axis not in sliced:
            return self.dim(ins[0], axis, depth)
        starts = self.values.get_ints(ins[1])
        steps = self.values.get_ints(ins[4]) if len(ins) > 4 and ins[4] is not None else None
        position = sliced.index(axis)
        if starts is None or position >= len(starts) or starts[position] != 0:
            return 0
        if steps is not None and (position >= len(steps) or steps[position] != 1):
            return 0
        ends = self.interval(ins[2], depth)  # every entry of ends at least its low
        whole = self.dim(ins[0], axis, depth)
        if ends is None or ends[0] < 0 or whole is None:
            return 0
        return min(ends[0], whole)

    def _iteration_number(self, value: ir.Value) -> bool:
        graph = value.graph
        if value.producer() is not None or graph is None or not graph.inputs:
            return False
        if graph.inputs[0] is not value:
            return False
        loop = self.owner(graph)
        if loop is None or loop.op_type != "Loop" or loop.domain != "":
            return False
        return loop.attributes["body"].as_graph() is graph


def _shape_axes(shape: ir.Node) -> list[int] | None:
    """The axes of its input that Shape `shape` gives, in order."""
    rank = _rank(shape.inputs[0])
    if rank is None:
        return None
    start = shape.attributes.get_int("start", 0)
    end = shape.attributes.get_int("end", rank)
    start, end = (max(0, min(rank, k + rank if k < 0 else k)) for k in (start, end))
    return list(range(start, end))


def _within(found: Interval | None, dtype: ir.DataType | None) -> Interval | None:
    """`found` where the type `dtype` holds it (a value that may wrap around: None)."""
    if found is None or dtype not in _RANGES:
        return None
    low, high = _RANGES[dtype]
    if found[0] < low or (found[1] is not None and found[1] > high):
        return None
    return found


def _rank(value: ir.Value | None) -> int | None:
    return None if value is None or value.shape is None else len(value.shape)
