"""Sums, means, maxima and minima over the chunks of a split by run-time sizes as segment
reductions, where every read of a chunk is such a reduction along the split axis (opset 16 or
newer for sums and means, 18 for maxima and minima).

    ReduceSum(chunk, [a])   -> ScatterElements(zeros [.., n, ..], ids, x, axis=a, reduction="add")
                               (n along a, moved to the front; ids: the chunk of each position)
    ReduceMean(chunk, [a])  -> that / Max(sizes, 1)   (the masked form's mean of no position: 0)
    ReduceMax(chunk, [a])   -> ScatterElements(ScatterElements(lowest [.., n, ..], ids, x,
                               axis=a, reduction="max"), ids, Where(IsNaN(x), x, 0), "add")
    ReduceMin(chunk, [a])   -> the same from the highest value, reduction="min"

A maximum of no position is the fill, -inf (the lowest integer), as ReduceMax of an empty axis
is from opset 18 on (and the masked form's); the scatter-add of the NaNs (0 or NaN per chunk)
makes a chunk holding a NaN come out NaN wherever the NaN is (the specification's maximum,
numpy's): onnxruntime 1.20 and 1.32 keep a max's first operand against a NaN. ScatterElements'
`max` and `min` need opset 18: below it a maximum stays masked.

The masked form (`seqlower.batching.ops`) pads the chunks to the largest and reduces [n, .., m, ..];
this form reads x once. Rows of more than `SEGMENT_WIDTH` values are gathered: onnxruntime
scatters one value at a time.
"""

from __future__ import annotations

__all__ = [
    "SEGMENT_DTYPES",
    "SEGMENT_EXTREMA_OPSET",
    "SEGMENT_EXTREMA_WIDTH",
    "SEGMENT_OPSET",
    "SEGMENT_WIDTH",
    "Segments",
    "ids_of_sizes",
    "segment_reduce",
    "segment_reducible",
]

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

if TYPE_CHECKING:
    from seqlower.batching.core import Emitter
    from seqlower.rewriter import Builder

SEGMENT_OPSET = 16  # ScatterElements with reduction="add"
SEGMENT_EXTREMA_OPSET = 18  # ScatterElements with reduction="max" and "min"
_SCATTERED = {"ReduceSum": "add", "ReduceMean": "add", "ReduceMax": "max", "ReduceMin": "min"}
# the types onnxruntime 1.20 to 1.32 scatter-adds on CPU (probed; float16 is not among them)
SEGMENT_DTYPES = frozenset(
    {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.INT32, ir.DataType.INT64}
)
# the most values per position along the split axis that segment sums take (onnxruntime 1.32,
# one thread, a mean of each chunk: rows of 3 values, segment sums 1.03x the loop over 3 chunks
# where the gathered chunks give 0.94x; rows of 64, 0.74x against 0.99x, and 0.43x against 1.52x
# over 16 chunks; docs/performance.md, "Chunks held as rows and chunk ids")
SEGMENT_WIDTH = 8
# the same for a maximum or minimum (two scatters for floats: the extremum and the NaNs), opset
# 18, onnxruntime 1.32, one thread, against the gathered chunks: rows of 6 values 0.90x against
# 0.85x over 3 chunks, 1.54x against 1.37x over 16; rows of 8, 1.28x against 1.37x over 16,
# 1.99x against 2.08x over 64 (docs/performance.md, "Segment maxima and minima, and chunk ids
# in linear time")
SEGMENT_EXTREMA_WIDTH = 6


def segment_reducible(
    op_type: str, dtype: ir.DataType | None, shape: ir.Shape | None, axis: int, opset: int
) -> bool:
    """Whether `op_type` along `axis` alone of chunks of this type and element `shape` has a
    segment form worth taking: sums and means from opset 16 (means of floats), maxima and minima
    from 18; float32/64 or int32/64; a position along the axis holding at most `SEGMENT_WIDTH`
    values (`SEGMENT_EXTREMA_WIDTH` for a maximum or minimum), statically."""
    if opset < SEGMENT_OPSET or dtype not in SEGMENT_DTYPES or shape is None:
        return False
    dims = [d for k, d in enumerate(shape) if k != axis]
    if not all(isinstance(d, int) for d in dims):
        return False
    width = int(np.prod(dims))
    if op_type in ("ReduceSum", "ReduceMean"):
        floats = dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE)
        return width <= SEGMENT_WIDTH and (op_type == "ReduceSum" or floats)
    if op_type in ("ReduceMax", "ReduceMin"):
        return opset >= SEGMENT_EXTREMA_OPSET and width <= SEGMENT_EXTREMA_WIDTH
    return False


@dataclasses.dataclass(frozen=True)
class Segments:
    """The chunks of `data` along `axis`: the chunk of each position (`ids`, [d] int64; None
    where no reduction reads them), the sizes ([n] int64) and the checked count of chunks n."""

    data: ir.Value
    axis: int
    ids: ir.Value | None
    sizes: ir.Value
    count: ir.Value


def segment_reduce(
    em: Emitter, segments: Segments, op_type: str, keepdims: bool, fill: np.ndarray
) -> ir.Value:
    """The reduction `op_type` (ReduceSum, ReduceMean, ReduceMax, ReduceMin) of each chunk along
    the split axis: [n, *rest], with a 1 kept at the split axis when `keepdims`; `fill` (a
    scalar of the data's type) is the reduction's identity, what a chunk of no position gives
    (0, or the lowest value for a maximum, the highest for a minimum)."""
    data, axis = segments.data, segments.axis
    rank = len(data.shape)  # type: ignore[arg-type]
    shape = em.op("Shape", [data])
    parts = []
    if axis > 0:
        parts.append(em.op("Slice", [shape, em.ints([0]), em.ints([axis])]))
    parts.append(em.unsqueeze(segments.count, [0]))
    if axis < rank - 1:
        parts.append(em.op("Slice", [shape, em.ints([axis + 1]), em.ints([rank])]))
    dtype = data.dtype
    assert dtype is not None
    start = ir.tensor(np.asarray(fill, dtype.numpy()).reshape([1]))
    initial = em.op("ConstantOfShape", [em.op("Concat", parts, {"axis": 0})], {"value": start})
    along = [1] * rank
    along[axis] = -1
    assert segments.ids is not None
    ids = em.op("Expand", [em.op("Reshape", [segments.ids, em.ints(along)]), shape])
    reduction = _SCATTERED[op_type]
    total = em.op("ScatterElements", [initial, ids, data], {"axis": axis, "reduction": reduction})
    if reduction != "add" and dtype in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
        # + the sum of each chunk's NaNs (0 where it holds none): NaN wherever it holds one
        zero = em.scalar(np.zeros((), dtype.numpy()))
        nans = em.op("Where", [em.op("IsNaN", [data]), data, zero])
        total = em.op("ScatterElements", [total, ids, nans], {"axis": axis, "reduction": "add"})
    if op_type == "ReduceMean":
        count = em.op("Max", [segments.sizes, em.scalar(np.array(1, np.int64))])
        count = em.op("Cast", [em.op("Reshape", [count, em.ints(along)])], {"to": int(dtype)})
        total = em.op("Div", [total, count])
    if axis > 0:
        perm = [axis, *range(axis), *range(axis + 1, rank)]
        total = em.op("Transpose", [total], {"perm": perm})
    if keepdims:
        total = em.unsqueeze(total, [axis + 1])
    return total


def ids_of_sizes(
    builder: Builder,
    sizes: ir.Value,
    ends: ir.Value,
    total: ir.Value,
    length: ir.Value,
    start: ir.Value | None = None,
) -> ir.Value:
    """The segment of each of the first `length` rows ([1] int64, at most T) of chunks of
    `sizes` ([n] int64, none negative) laid end to end: how many chunks end at or before the
    row, one ScatterElements of a 1 at each end (added where chunks are empty) and a CumSum,
    linear in T + n (opset 16 or newer); `ends` = CumSum(sizes), `total` = [T] = [Sum(sizes)]:
        marks = ScatterElements(zeros [T + 1], ends, ones, "add"); ids = CumSum(marks)[:length]
    `start` ([1] int64, 0 where given) starts the Slice instead of 0: a check that fails."""
    zero = builder.constant(np.array(0, np.int64), "zero")
    slots = builder.op("Add", [total, builder.ints([1])])
    zeros = builder.op("ConstantOfShape", [slots], {"value": ir.tensor(np.zeros(1, np.int64))})
    ones = builder.op(
        "ConstantOfShape",
        [builder.op("Shape", [sizes])],
        {"value": ir.tensor(np.ones(1, np.int64))},
    )
    marks = builder.op("ScatterElements", [zeros, ends, ones], {"axis": 0, "reduction": "add"})
    running = builder.op("CumSum", [marks, zero])
    first = builder.ints([0]) if start is None else start
    ids = builder.op("Slice", [running, first, length], name="segment_ids")
    ids.type = ir.TensorType(ir.DataType.INT64)
    ids.shape = ir.Shape([None])
    return ids
