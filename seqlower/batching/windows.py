"""Windows of one tensor read per element, held padded to their bound, not to the whole axis.

A ragged Slice (`seqlower.batching.ops`) of an unbatched x along axis a, bounds s_i and e_i per
element, is held as x broadcast to [N, ..., d, ...] with the mask of [s_i, e_i): N x d values
where the elements hold N x w at most. Where the window's length is bounded by a constant w
(e_i = s_i + w, or Min(s_i + w, m) with m a size or a constant >= 0, w >= 0), it is held at
width w instead:

    Slice(x, s, s + w, [a]), x the same for every element
        -> Gather(x', Where(inside, p, d), axis=a) moved to [N, ..., w, ...]
           p = max(s', 0) + Range(0, w)        ([N, w]: the positions of each window)
           mask = (p < e') And (p < d)         (inside: p < d)
           s', e' = the bound, plus d where negative (as Slice counts them from the end)
           x' = x with one row of zeros appended along a (only when d may be 0: Gather
           of an empty axis fails for any index; without it, x itself and 0 for d)

Every position Slice takes is in [max(s', 0), min(e', d)), which has at most w positions as
e' - s' <= e - s = w whenever w >= 0 (a negative s with an end >= 0 only shortens the window;
an end of s + w is negative only when s is). With w < 0 it does not hold (s = 0, e = -1 takes
d - 1 positions), and neither with m < 0; those keep the whole-axis form.

Windows with no such bound (`x[offsets[i]:offsets[i + 1]]`, `x[s:s + count[i]]`) are padded to
the whole axis: n x d values. Where the body reads them elementwise and reduces them along a or
concatenates them back along a (`seqlower.batching.rows.windows_as_rows`), they are held flat
instead, as x's own rows and the window of each row, as a split's chunks are:

    Slice(x, s, e, [a]), x the same for every element, no constant bounds e - s
        -> rows = Gather(x, p, axis=a)             ([.., T, ..]: every window's rows in order)
           lo, hi = s', e' clamped to [0, d]       (s', e' as above: Slice's clamping)
           sizes = Max(hi - lo, 0)                 ([n]: empty where s' >= e')
           first = CumSum(sizes) - sizes, T = Sum(sizes)
           shift = lo - first, jumps = shift - Concat([1], shift[:-1])
           p = CumSum(ScatterElements(ones [T + 1], first, jumps, "add"))[:T]
    the window of each row (for segment reductions and values per window, when read):
           `seqlower.batching.segments.ids_of_sizes`

Which form is held is a size argument: the padded form holds n x (the largest window) values
(an Expand, a copy, and a mask), the flat form T = sum(sizes) <= that, each row gathered (a
Gather costs more per value than the Expand's copy: about 1.5x at rows of 3 floats) plus a
scatter of n values and a CumSum of T + 1. Where a constant w bounds the windows the padded
form above holds n x w: it stays. Where none does, the largest window is the whole axis, n x d:
    - both bounds differ per element (`x[off[i]:off[i + 1]]`, `x[s_i:s_i + count[i]]`): windows
      that tile or sample x, T about d, and the flat form wins (n x d against d);
    - one bound is the same for every element (`x[:i + 1]`, `x[s_i:]`): nested windows, T up to
      n x d / 2, within 2x of the padded form, which stays (torch_loops/pyramid, d = n = 1000:
      9.3 ms padded, 13.6 ms flat, docs/performance.md).
"""

from __future__ import annotations

__all__ = ["emit_window", "flat_windows", "read_in_place", "window_width"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.batching.core import Emitter
from seqlower.batching.rows import ChunkRows

# ops that pass the one value of a one-element integer tensor through unchanged
_SAME_VALUE = frozenset({"Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten"})
# ops that pass a ragged value on with its padding (`seqlower.batching.body`, `.ragged`)
_PASS_ON = frozenset(
    """Abs Ceil Cos Erf Exp Floor Identity IsInf IsNaN Log Neg Not Reciprocal Relu Round Sigmoid
    Sign Sin Softplus Sqrt Tanh Cast Add Sub Mul Div Pow Max Min Transpose Squeeze
    Unsqueeze""".split()  # noqa: SIM905
)
# ops whose integer result is a size, never negative
_SIZES = frozenset({"Shape", "Size"})


def _source(value: ir.Value) -> ir.Value:
    """`value` with the reshapes of its one element and copies stripped."""
    while True:
        node = value.producer()
        if node is None or node.op_type not in _SAME_VALUE or node.domain not in ("", "ai.onnx"):
            return value
        if not node.inputs or node.inputs[0] is None:
            return value
        value = node.inputs[0]


def _constant(value: ir.Value, values: StaticValues) -> int | None:
    found = values.get(value)
    if found is None or found.dtype.kind not in "iu" or found.size != 1:
        return None
    return int(found.reshape(-1)[0])


def _never_negative(value: ir.Value, values: StaticValues) -> bool:
    """Whether `value` is a constant >= 0 or taken from a shape (Gather/Slice of Shape(x))."""
    known = _constant(value, values)
    if known is not None:
        return known >= 0
    value = _source(value)
    node = value.producer()
    while node is not None and node.op_type in ("Gather", "Slice") and node.inputs:
        value = _source(node.inputs[0])  # type: ignore[arg-type]
        node = value.producer()
    return node is not None and node.op_type in _SIZES and node.domain in ("", "ai.onnx")


def _offset(end: ir.Value, start: ir.Value, values: StaticValues) -> int | None:
    """w when `end` is start + w (w a constant), else None."""
    node = _source(end).producer()
    if node is None or node.op_type != "Add" or node.domain not in ("", "ai.onnx"):
        return None
    if len(node.inputs) != 2 or None in node.inputs:
        return None
    base = _source(start)
    left, right = node.inputs
    for one, other in ((left, right), (right, left)):
        if _source(one) is base:  # type: ignore[arg-type]
            return _constant(other, values)  # type: ignore[arg-type]
    return None


def read_in_place(value: ir.Value) -> bool:
    """Whether `value`, and what elementwise ops make of it, are read only in its own graph and
    are not its outputs: an If's branch that returns one (or reads one and returns it) meets
    the other branch's padding, which must be as wide (`seqlower.batching.branches`): there
    the whole-axis form stays, as wide as any other slice of x's axis."""
    graph, seen, todo = value.graph, set(), [value]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.is_graph_output():
            return False
        for use in current.uses():
            node = use.node
            if node.graph is not graph or any(
                a.type == ir.AttributeType.GRAPH for a in node.attributes.values()
            ):
                return False
            if node.op_type in _PASS_ON:
                todo.extend(node.outputs)
    return True


def window_width(start: ir.Value, end: ir.Value, values: StaticValues) -> int | None:
    """The constant w >= 0 that bounds end - start of every element's Slice, when proved:
    end = start + w, or Min(start + w, m) with m never negative; else None."""
    width = _offset(end, start, values)
    if width is None:
        node = _source(end).producer()
        if node is not None and node.op_type == "Min" and node.domain in ("", "ai.onnx"):
            operands = [v for v in node.inputs if v is not None]
            if len(operands) == 2:
                for one, other in (operands, operands[::-1]):
                    found = _offset(one, start, values)
                    if found is not None and _never_negative(other, values):
                        width = found
                        break
    return width if width is not None and width >= 0 else None


def _resolved(em: Emitter, bound: ir.Value, dim: ir.Value) -> ir.Value:
    """A bound ([N, 1]) as a position: negative ones count from the end (d added)."""
    if bound.dtype != ir.DataType.INT64:
        bound = em.op("Cast", [bound], {"to": int(ir.DataType.INT64)})
    negative = em.op("Less", [bound, em.scalar(np.array(0, np.int64))])
    return em.op("Where", [negative, em.op("Add", [bound, dim]), bound])


def emit_window(
    em: Emitter,
    data: ir.Value,
    starts: ir.Value,
    ends: ir.Value,
    axis: int,
    rank: int,
    width: int,
    may_be_empty: bool,
) -> tuple[ir.Value, ir.Value]:
    """The windows of the unbatched `data` (rank `rank`) along `axis`, [N, ..., width, ...],
    and their mask [N, 1.., width, 1..]."""
    dim = em.dims(data, axis, axis + 1)  # [1]
    zero = em.scalar(np.array(0, np.int64))
    lower = _resolved(em, starts, dim)  # [N, 1]
    lower = em.op("Where", [em.op("Less", [lower, zero]), zero, lower])
    offsets = em.scalar(np.arange(width, dtype=np.int64))  # [w]
    positions = em.op("Add", [lower, offsets])  # [N, w]
    upper = _resolved(em, ends, dim)
    inside = em.op("Less", [positions, dim])
    mask = em.op("And", [em.op("Less", [positions, upper]), inside])
    source = data
    if may_be_empty:  # one row of zeros at d: Gather of an empty axis fails at any index
        before = [em.dims(data, 0, axis)] if axis else []
        after = [em.dims(data, axis + 1)] if axis + 1 < rank else []
        row = em.op("Concat", [*before, em.ints([1]), *after], {"axis": 0})
        dtype = data.dtype
        assert dtype is not None
        filler = ir.tensor(np.zeros([1], dtype.numpy()))
        padding = em.op("ConstantOfShape", [row], {"value": filler})
        source = em.op("Concat", [data, padding], {"axis": axis})
        fallback = dim
    else:
        fallback = zero
    indices = em.op("Where", [inside, positions, fallback])
    gathered = em.op("Gather", [source, indices], {"axis": axis})  # [..a, N, w, a+1..]
    perm = [axis, *range(axis), *range(axis + 1, rank + 1)]
    windows = em.transpose(gathered, perm)
    mask = em.unsqueeze(mask, [*range(1, axis + 1), *range(axis + 2, rank + 1)])
    return windows, mask


def flat_windows(
    em: Emitter, data: ir.Value, starts: ir.Value, ends: ir.Value, axis: int
) -> ChunkRows:
    """The windows [s_i, e_i) of the unbatched `data` along `axis` (bounds [N, 1], clamped as
    Slice clamps them) laid end to end: x's rows they take, in order, and the window of each
    (opset 16 or newer: the ids scatter-add)."""
    dim = em.dims(data, axis, axis + 1)  # [1]
    zero = em.scalar(np.array(0, np.int64))
    flat = em.ints([-1])

    def clamped(bound: ir.Value) -> ir.Value:  # [N]
        position = _resolved(em, bound, dim)
        position = em.op("Min", [em.op("Max", [position, zero]), dim])
        return em.op("Reshape", [position, flat])

    lower, upper = clamped(starts), clamped(ends)
    sizes = em.op("Max", [em.op("Sub", [upper, lower]), zero])  # [N]
    running = em.op("CumSum", [sizes, zero])
    total = em.op("ReduceSum", [sizes], {"keepdims": 1})  # [1] (0 for no window)
    first = em.op("Sub", [running, sizes])  # [N]: the first slot of each window
    # each slot's row is one past the previous slot's, but at the first slot of a window: its
    # lower bound. The running sum of ones with the jumps (lower - first, less the previous
    # window's; -1 for the first) added at the first slots, a scatter of N values: a slot
    # after the first slots of windows 0..k, k its own window (empty ones start where the next
    # does), sums the jumps of 0..k to lower_k - first_k, plus its own count of ones
    shift = em.op("Sub", [lower, first])
    before = em.op("Slice", [shift, em.ints([0]), em.ints([-1])])
    jumps = em.op("Sub", [shift, em.op("Concat", [em.ints([1]), before], {"axis": 0})])
    slots = em.op("Add", [total, em.ints([1])])
    ones = em.op("ConstantOfShape", [slots], {"value": ir.tensor(np.ones(1, np.int64))})
    marked = em.op("ScatterElements", [ones, first, jumps], {"axis": 0, "reduction": "add"})
    positions = em.op("Slice", [em.op("CumSum", [marked, zero]), em.ints([0]), total])
    rows = em.op("Gather", [data, positions], {"axis": axis})
    rows.type = data.type
    if data.shape is not None:
        rows.shape = ir.Shape([None if k == axis else d for k, d in enumerate(data.shape)])
    count = em.squeeze(em.dims(sizes, 0, 1), [0])
    return ChunkRows(rows, axis, sizes, running, em.squeeze(total, [0]), count, None)
