"""The length of a 1-D vector (a shape, axes, sizes) where neither its content nor its declared
dim gives it, from the ranks and lengths of what it is made of: a shape built in a loop body
from `Shape` of a value ONNX inference gives no rank has a length the rank analysis knows.

    LENGTH_RULES[op](query) -> the length of output 0 (a 1-D vector), or None

A few lines of the table, each `inputs -> output length`:

    Shape(x of rank r, start, end)               -> len(range(r)[start:end]) (clamped, the spec)
    Concat(v1, v2, ...)                          -> the sum of their lengths
    Unsqueeze(s of rank 0, axes of length 1)     -> 1
    Slice(v, starts, ends, axes?, steps?)        -> len(range(length)[start:end:step]) (static)
    Gather(v, i of length k)                     -> k
    ConstantOfShape(Shape(v of length k))        -> k  (TorchScript's `expand`)
    Constant (a vector)                          -> its length
    Cast, Identity, Neg, Abs, Relu ... (v)       -> the length of v
    Add, Sub, Mul, Div, Max, Min, Where ...      -> the longest (a scalar or a length-1 vector
                                                    broadcasts; lengths that differ otherwise:
                                                    the model fails, no length)

    e = SequenceAt(l, i)                 # in a loop body: ONNX gives no rank; here 4
    t = Concat(Slice(Shape(e), 0, 2), [-1])  # ONNX: int64[?]; here length 3
    y = Reshape(e, t)                    # ONNX: no rank; here rank 3

The lengths are facts of `seqlower.analysis.ranks.Ranks`, found in its one walk; a rule reads
its inputs' lengths from their declared dims and from these facts, never by folding a value
(a vector's content is asked of a Constant only).
"""

from __future__ import annotations

__all__ = ["LENGTH_RULES", "LengthRule"]

from collections.abc import Callable

from seqlower.analysis.rank_rules import RankQuery
from seqlower.analysis.shape_rules import BROADCAST_OPS, SAME_SHAPE_OPS

LengthRule = Callable[[RankQuery], "int | None"]


def _shape(q: RankQuery) -> int | None:
    rank = q.rank(0)
    if rank is None or rank < 0:
        return None
    start = q.int_attr("start", 0)
    end = q.int_attr("end", rank)
    return len(range(rank)[slice(start, end)])  # negative, out of range: clamped as the spec


def _concat(q: RankQuery) -> int | None:
    lengths = [q.length(i, content=False) for i in range(len(q.node.inputs)) if q.given(i)]
    return None if not lengths or None in lengths else sum(lengths)  # type: ignore[arg-type]


def _unsqueeze(q: RankQuery) -> int | None:
    if q.rank(0) != 0:
        return None
    axes = q.axes()
    count = len(axes) if axes is not None else q.length(1, content=False)
    return 1 if count == 1 else None


def _slice(q: RankQuery) -> int | None:
    length = q.length(0, content=False)
    if length is None:
        return None  # asked first: the bounds are folded only where it is known
    starts, ends = q.ints(1), q.ints(2)
    axes = q.ints(3) if q.given(3) else [0]
    steps = q.ints(4) if q.given(4) else [1] * len(starts or ())
    if starts is None or ends is None or axes is None or steps is None:
        return None
    if len({len(starts), len(ends), len(axes), len(steps)}) != 1:
        return None  # an invalid model
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if axis not in (0, -1) or step == 0:
            return None
        length = len(range(length)[slice(start, end, step)])
    return length


def _gather(q: RankQuery) -> int | None:
    if q.rank(0) != 1 or q.rank(1) != 1:
        return None
    return q.length(1, content=False)


def _constant_of_shape(q: RankQuery) -> int | None:
    """ConstantOfShape(Shape(v)) of a vector v: as long as v (TorchScript's `expand`)."""
    made_by = q.node.inputs[0].producer() if q.given(0) else None
    if made_by is None or made_by.op_type != "Shape" or made_by.domain != "":
        return None
    if "start" in made_by.attributes or "end" in made_by.attributes:
        return None  # Shape<start=1>(v) of a vector is empty: no ConstantOfShape of rank 1
    vector = made_by.inputs[0]
    if vector is None or q.length_of is None:
        return None
    shape = vector.shape
    if shape is not None and len(shape) == 1 and isinstance(shape[0], int):
        return shape[0]
    return q.length_of(vector)


def _constant(q: RankQuery) -> int | None:
    content = q.values.get(q.node.outputs[0])
    return int(content.size) if content is not None and content.ndim == 1 else None


def _same(q: RankQuery) -> int | None:
    return q.length(0, content=False)


def _broadcast(q: RankQuery) -> int | None:
    lengths: set[int] = set()
    for index in range(len(q.node.inputs)):
        if not q.given(index):
            continue
        rank = q.rank(index)
        if rank == 0:
            continue  # a scalar takes the other's length
        length = q.length(index, content=False) if rank == 1 else None
        if length is None:
            return None
        lengths.add(length)
    if len(lengths - {1}) > 1:
        return None  # lengths that differ: the model fails here
    return max(lengths, default=None)


LENGTH_RULES: dict[str, LengthRule] = {
    **dict.fromkeys(SAME_SHAPE_OPS, _same),
    **dict.fromkeys(BROADCAST_OPS, _broadcast),
    "Concat": _concat,
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Gather": _gather,
    "Shape": _shape,
    "Slice": _slice,
    "Unsqueeze": _unsqueeze,
}
