"""Chunks of a split read elementwise, held as the split tensor's own rows and the chunk of
each row (for `loop-batch`), beside the padded form of `seqlower.rules.ragged_reads`.

    Loop over xs = SplitToSequence(x, sizes, axis=a), body(i):
        g = SequenceAt(xs, i); v = f(g, p)          f elementwise, p = P(g) a value per chunk
        out' = SequenceInsert(out, v)               (with keepdims: one value along a)
    ConcatFromSequence(out, axis=a)
        -> f(x, rows of p)                          the flat rows, no padding, no Compress
           rows of p = Gather(Squeeze(P, [a + 1]), ids, axis=0)   (d moved back to a)
           ids = CumSum(ScatterElements(zeros [d + 1], CumSum(sizes), 1, "add"))[check:d]
    ReduceSum(v, [a]) (Mean; Max, Min from opset 18)
        -> ScatterElements(.., ids, f(x, rows of p), axis=a, reduction=..)  (segment reductions)

The concatenation along a of the chunks, each computed elementwise from its own rows and from
values one per chunk (broadcast along a: `g - g.mean(a, keepdim=True)`, GraphNorm's centring, a
softmax over the segment), is the flat rows x computed elementwise, each row meeting its own
chunk's values: those values gathered at the chunk of each row. The chunks concatenated back are
x's rows in order (the split checks that the sizes add up to d, and the check, 0 or a failing
Gather, starts the ids, so every row form reading them fails where the split does; one reading
no per-chunk value is cut from the check at the end).

Which values are held so is decided for the whole body before emission (`rows_of_chunk`): the
chunk, and what elementwise ops make of one of them with per-chunk or constant operands, when
one of them is a list's concatenated element. Their padded forms stay emitted for the other
readers (a maximum below opset 18 reads the padded chunk) and are removed where unread.
"""

from __future__ import annotations

__all__ = ["ChunkRows", "Rows", "joined_rows", "rows_of_chunk", "windows_as_rows"]

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.batching.segments import (
    SEGMENT_OPSET,
    Segments,
    ids_of_sizes,
    segment_reducible,
)

if TYPE_CHECKING:
    from seqlower.batching.body import BodyPlan
    from seqlower.batching.core import Emitter, Operand
    from seqlower.rewriter import Builder

# the elementwise ops that pass a ragged value on position by position (the batching rules keep
# its mask: `seqlower.batching.body`), and that a row form computes on the rows
ROW_OPS = frozenset(
    """Abs Ceil Cos Erf Exp Floor Identity IsInf IsNaN Log Neg Not Reciprocal Relu Round Sigmoid
    Sign Sin Softplus Sqrt Tanh Cast Add Sub Mul Div Pow Max Min""".split()  # noqa: SIM905
)


@dataclasses.dataclass
class ChunkRows:
    """The chunks of `data` along `axis` by `sizes` (int64, checked): `ends` their running sums,
    `dim` = d (0-D) the rows of x along the axis, `count` the checked count of chunks, `check`
    the split's check (0-D, 0 or a Gather that fails; None where nothing is checked: windows).
    The ids are emitted on first use."""

    data: ir.Value
    axis: int
    sizes: ir.Value
    ends: ir.Value
    dim: ir.Value
    count: ir.Value
    check: ir.Value | None
    _ids: ir.Value | None = None

    def ids(self, builder: Builder) -> ir.Value:
        """The chunk of each row ([d] int64), cut from the check (0 where the sizes are right)."""
        if self._ids is None:
            start = None if self.check is None else builder.unsqueeze(self.check, [0])
            rows = builder.unsqueeze(self.dim, [0])
            self._ids = ids_of_sizes(builder, self.sizes, self.ends, rows, rows, start)
        return self._ids


@dataclasses.dataclass(frozen=True)
class _Step:
    """A body node computed on the rows: its inputs as emitted (batched or not) and their
    operands; `source` the input held as rows."""

    node: ir.Node
    inputs: tuple[ir.Value | None, ...]
    operands: tuple[Operand | None, ...]
    source: ir.Value
    rank: int  # of the output's element


class Rows:
    """The body values held as rows (for one Emitter): per chunk read its rows, per value made
    from one on the rows its step; the row forms are emitted when first read. A window's rows
    (`seqlower.batching.windows`) are given when the window is emitted (`bind`)."""

    def __init__(self) -> None:
        self._chunks: dict[ir.Value, ChunkRows | None] = {}
        self._members: dict[ir.Value, ir.Value] = {}  # body value -> its chunk
        self._steps: dict[ir.Value, _Step] = {}
        self._emitted: dict[ir.Value, tuple[ir.Value, bool]] = {}  # (rows, reads the ids)
        self._spread: dict[ir.Value, ir.Value] = {}  # per-chunk value -> gathered at the rows

    def add(self, chunk: ir.Value, rows: ChunkRows | None, members: Collection[ir.Value]) -> None:
        """Hold `members` as the rows of `chunk` (None: given by `bind` when it is emitted)."""
        self._chunks[chunk] = rows
        for value in members:
            self._members[value] = chunk

    def awaits(self, chunk: ir.Value) -> bool:
        """Whether `chunk` is held as rows that its emission gives (`bind`)."""
        return chunk in self._chunks and self._chunks[chunk] is None

    def bind(self, chunk: ir.Value, rows: ChunkRows) -> None:
        assert self.awaits(chunk)
        self._chunks[chunk] = rows

    def holds(self, value: ir.Value | None) -> bool:
        return value is not None and value in self._members

    def record(
        self,
        node: ir.Node,
        inputs: Sequence[ir.Value | None],
        operands: Sequence[Operand | None],
        output: Operand,
    ) -> None:
        """Remember how `node` (whose output, of element `output`, is held as rows) computes
        on the rows; a window (a chunk itself) is given its rows by `bind`."""
        if node.outputs[0] in self._chunks:
            return
        source = next(v for v in node.inputs if v is not None and v in self._members)
        assert output.rank is not None  # a ragged value: its padded shape is known
        step = _Step(node, tuple(inputs), tuple(operands), source, output.rank)
        self._steps[node.outputs[0]] = step

    def chunk_rows(self, value: ir.Value) -> ChunkRows:
        found = self._chunks[self._members[value]]
        assert found is not None, "a window's rows are read before it is emitted"
        return found

    def of(self, em: Emitter, value: ir.Value) -> tuple[ir.Value, bool]:
        """The rows of `value` ([.., d, ..]) and whether they read the ids (so the check)."""
        if value in self._emitted:
            return self._emitted[value]
        if value in self._chunks:
            found = (self.chunk_rows(value).data, False)
        else:
            found = self._emit(em, self._steps[value])
        self._emitted[value] = found
        return found

    def segments(self, em: Emitter, value: ir.Value) -> Segments:
        """The chunks of `value`'s rows as segments, for a segment reduction."""
        rows, _ = self.of(em, value)
        chunk = self.chunk_rows(value)
        return Segments(rows, chunk.axis, chunk.ids(em.builder), chunk.sizes, chunk.count)

    def _emit(self, em: Emitter, step: _Step) -> tuple[ir.Value, bool]:
        chunk = self.chunk_rows(step.source)
        rank = step.rank
        inputs: list[ir.Value | None] = []
        reads_ids = False
        shape = None
        for original, emitted, operand in zip(step.node.inputs, step.inputs, step.operands):
            if original is not None and original in self._members:
                rows, read = self.of(em, original)
                inputs.append(rows)
                reads_ids = reads_ids or read
                shape = rows.shape
            elif operand is not None and operand.batched:
                assert emitted is not None and operand.rank is not None
                inputs.append(self._per_row(em, chunk, emitted, operand.rank, rank))
                reads_ids = True
            else:  # the same for every chunk: broadcast as in one chunk
                inputs.append(emitted)
        result = em.copy(step.node, inputs)[0]
        # the others broadcast into the rows without growing them (`_fits_within`)
        result.type, result.shape = step.node.outputs[0].type, shape
        return result, reads_ids

    def _per_row(
        self, em: Emitter, chunk: ChunkRows, value: ir.Value, own: int, rank: int
    ) -> ir.Value:
        """A batched value [n, *S] (one value along the chunk's axis, or no such dim: the rule
        that passed the mask on checked it) at each row: [.., d, ..], the chunk's values."""
        if value in self._spread:
            return self._spread[value]
        axis = chunk.axis
        lifted = em.squeeze(em.lift(value, own, rank), [axis + 1])  # [n, *S without a]
        spread = em.op("Gather", [lifted, chunk.ids(em.builder)], {"axis": 0})  # [d, ..]
        spread = em.transpose(spread, [*range(1, axis + 1), 0, *range(axis + 1, rank)])
        self._spread[value] = spread
        return spread


def rows_of_chunk(
    plan: BodyPlan,
    chunk: ir.Value,
    axis: int,
    joined: Mapping[ir.Value, int],
    values: StaticValues,
    opset: int,
    needs_join: bool = True,
) -> set[ir.Value] | str:
    """The body values to hold as rows for `chunk` (ragged along `axis`): the chunk and what
    elementwise ops make of one of them with others that are one per chunk or constant along the
    axis (what the batching rules pass a mask on for); or why not. Taken where one of them is
    the element of a list concatenated along the axis (`joined`: element -> its axis) and every
    other read of them is a reduction along the axis alone that has a segment form
    (`segment_reducible`): the chunks are then never padded. Where one is read otherwise (a
    maximum below opset 18 reads the padded chunk) the padded form serves every reader: the
    ids and a Gather per value cost more than its Compress over a few chunks (measured).
    Without `needs_join` (windows padded to the whole axis: `windows_as_rows`) segment
    reductions alone suffice."""
    held = {chunk}
    for node, batched in plan.steps:
        if batched is None or node.op_type not in ROW_OPS or node.domain not in ("", "ai.onnx"):
            continue
        if len(node.outputs) != 1 or sum(v in held for v in node.inputs if v is not None) != 1:
            continue
        operand = plan.operands.get(node.outputs[0])
        if operand is not None and operand.ragged_axis == axis:
            held.add(node.outputs[0])
    if needs_join and not any(joined.get(value) == axis for value in held):
        return "no value computed from the chunk elementwise is concatenated back"
    for value in held:
        if value.is_graph_output() and joined.get(value) != axis:
            return f"'{value.name}' is read as a padded element"
        operand = plan.operands[value]
        for use in value.uses():
            node = use.node
            if node.outputs and node.outputs[0] in held:
                continue
            if node.op_type == "SequenceInsert" and joined.get(value) == axis:
                continue
            if not (
                use.idx == 0
                and node.graph is value.graph
                and _reduces_along(node, axis, operand.rank, values)
                and segment_reducible(node.op_type, value.dtype, operand.shape, axis, opset)
            ):
                return f"{node.op_type} reads a chunk otherwise than by a segment reduction"
    return held


def _reduces_along(node: ir.Node, axis: int, rank: int | None, values: StaticValues) -> bool:
    """Whether `node` reduces its first input along `axis` alone (axes known statically)."""
    if node.op_type not in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin") or rank is None:
        return False
    axes = values.get_ints(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    if axes is None:
        axes = node.attributes.get_ints("axes", None)
    if axes is None or not all(-rank <= a < rank for a in axes):
        return False
    return [a % rank for a in axes] == [axis]


def check_rows(
    builder: Builder, whole: ir.Value, chunk: ChunkRows, axis: int, rank: int
) -> ir.Value:
    """Rows that read no per-chunk value, cut from the split's check along the axis (0, or a
    Gather that fails where the sizes are wrong): they then fail where the split does."""
    assert chunk.check is not None
    start = builder.unsqueeze(chunk.check, [0])
    end = builder.ints([np.iinfo(np.int64).max])
    axes = builder.ints([axis % rank])
    checked = builder.op("Slice", [whole, start, end, axes], name="checked_rows")
    checked.type, checked.shape = whole.type, whole.shape
    return checked


def joined_rows(rows: Rows, em: Emitter, value: ir.Value, rank: int, axis: int) -> ir.Value | None:
    """The concatenation along `axis` of the elements of `value` when it is held as rows: the
    rows themselves (checked); None otherwise."""
    if not rows.holds(value):
        return None
    whole, read = rows.of(em, value)
    chunk = rows.chunk_rows(value)
    if axis != chunk.axis:
        return None
    if read or chunk.check is None:
        return whole
    return check_rows(em.builder, whole, chunk, axis, rank)


def windows_as_rows(
    plan: BodyPlan, joined: Mapping[ir.Value, int], values: StaticValues, opset: int
) -> dict[ir.Value, set[ir.Value] | str]:
    """Per window of the body (a Slice of one unbatched x by bounds per element that no
    constant bounds: `Batched.windows`), the body values to hold as its rows, or why it stays
    padded to the whole axis: those `rows_of_chunk` takes, where every read is elementwise, a
    concatenation along the axis or a segment reduction (no concatenation needed: a window
    has no split's check to keep). The flat form needs opset 16 (the ids' scatter-add)."""
    found: dict[ir.Value, set[ir.Value] | str] = {}
    for node, batched in plan.steps:
        if batched is None or not batched.windows or batched.ragged_axis is None:
            continue
        window = node.outputs[0]
        if opset < SEGMENT_OPSET:
            found[window] = f"opset {opset} has no scatter-add for the windows' row ids (16)"
            continue
        axis = batched.ragged_axis
        found[window] = rows_of_chunk(plan, window, axis, joined, values, opset, needs_join=False)
    return found
