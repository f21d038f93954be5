"""The chunks of a split by run-time sizes, read one per iteration, batched as the chunks gathered
into as many slots as the largest has, and a mask of the slots each chunk holds (for
`loop-batch`).

    Loop(SequenceLength(xs), true, ..., body(i): f(SequenceAt(xs, i)))
    xs = SplitToSequence(x, sizes (1-D, run-time), axis=a)
        -> f'(X, mask)
           ends = CumSum(sizes), m = ReduceMax(Concat([0], sizes))   the largest chunk
           X    = Gather(x, ends[k] - m + j, axis=a) for slot j < m    [n, .., m, ..]
           mask = j >= m - sizes[k]                                  [n, 1.., m, 1..]

Chunk k fills the last sizes[k] slots of X[k]; the slots before it read rows of x before the
chunk (from the end of x where ends[k] - m < 0: m <= d, so every index is within [-d, d)), which
the mask leaves out. X is [n, m, ..]: about x's size when the chunks are alike, never more than
x once per chunk (the earlier form, Expand(x, [n, 1, ..]), was [n, d, ..]: quadratic in the
number of chunks).

Chunks of differing sizes share no shape, so they cannot be stacked; but each is a slice of x
along a with bounds that differ per chunk, which the batching rules already hold as a padded
tensor and a mask (`seqlower.batching`: reductions over a read the masked values, elementwise ops
keep the mask, a list of such chunks concatenated along a is one Compress). The loop over
`x.split(sizes)` (torch_geometric's `unbatch`, deformable attention's levels) then runs no
iteration: one masked reduction per reduction of the body.

The split fails, as SplitToSequence does, when a size is negative or the sizes do not add up to
dim a of x: n is the checked length of `length-of-split`, and the check (a 0 that fails
otherwise) starts the Range of slots, so every batched value depends on it. Sizes proved never
negative (counts) are checked by the gather's source instead, where every value the loop gives
reads the gathered chunks (the slots then start at 0, and the length's six-node check goes):

           X    = Gather(Split(x, [ReduceSum(sizes)], axis=a), ..)   fails unless they add up
           ends = CumSum(Unsqueeze(sizes, [1]))                      [n, 1]: one Unsqueeze
As there, empty sizes on a dim that is not empty (onnxruntime's chunks of one) fail: every
iteration reads a chunk, and the lowered read of chunk 0 from empty tables fails too.

Where every read of a chunk in the body is a sum or mean along a (opset 16 or newer; a maximum or
minimum too from opset 18, where a position holds at most 6 values; float32/64 or int32/64) and a
position along a holds at most 8 values (statically), x is not padded: the chunk of each position
is counted from the ends, and each reduction is a ScatterElements with reduction="add" ("max",
"min") into [.., n, ..] (`seqlower.batching.segments`):

    ReduceMean(chunk, [a]) -> ScatterElements(zeros, ids, x, axis=a, reduction="add") / Max(sizes,1)
    ReduceMax(chunk, [a])  -> ScatterElements(lowest, ids, x, axis=a, reduction="max")
                              + the scatter-add of Where(IsNaN(x), x, 0)   (NaN where one is held)
           ids = CumSum(ScatterElements(zeros [d + 1], ends, 1, "add"))[:d]   the chunk of each
                 position p (how many chunks end at or before it; linear in d + n)
"""

from __future__ import annotations

__all__ = [
    "RaggedChunks",
    "SplitCheck",
    "drop_spent_checks",
    "ragged_chunks",
    "reduced_by_segments",
]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.batching.rows import ChunkRows
from seqlower.batching.segments import (
    SEGMENT_DTYPES,
    SEGMENT_EXTREMA_OPSET,
    SEGMENT_EXTREMA_WIDTH,
    SEGMENT_OPSET,
    SEGMENT_WIDTH,
    Segments,
    ids_of_sizes,
)
from seqlower.lists.signs import never_negative
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal
from seqlower.rules.access import _length_of_sizes, _producer


@dataclasses.dataclass(frozen=True)
class RaggedChunks:
    """The chunks of `data` along `axis` by the 1-D run-time `sizes`."""

    data: ir.Value
    sizes: ir.Value
    axis: int
    nonnegative: bool  # the sizes are proved never negative: a cheaper check

    @property
    def rank(self) -> int:
        return len(self.data.shape)  # type: ignore[arg-type]

    def emit(
        self, builder: Builder, checks: list[SplitCheck] | None = None
    ) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """(X [n, *x'], mask [n, 1.., m, 1..], n, sizes): the chunks padded to the largest (m
        slots along the split axis), the slots each holds, the checked count of chunks, and the
        sizes as int64 (how many slots of each the mask holds). Where X reads x through a Split
        that checks the sizes, its `SplitCheck` is appended to `checks`."""
        stack, mask, count, segments = self._emit(builder, segments=False, checks=checks)
        return stack, mask, count, segments.sizes

    def emit_with_rows(
        self, builder: Builder
    ) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value, ChunkRows]:
        """`emit`'s values and the chunks as x's own rows (`seqlower.batching.rows`), for the
        values of the body computed from a chunk elementwise (what neither form reads is
        removed as dead; the ids are emitted only where read)."""
        rows: list[ChunkRows] = []
        stack, mask, count, segments = self._emit(builder, segments=False, rows=rows)
        return stack, mask, count, segments.sizes, rows[0]

    def emit_segments(self, builder: Builder) -> tuple[ir.Value, ir.Value, ir.Value, Segments]:
        """`emit`'s values and the chunks as segments: the chunk of each position along the
        axis (the values `emit` gives are then read by nothing but an unused padded value)."""
        return self._emit(builder, segments=True)

    @property
    def padded_shape(self) -> ir.Shape:
        """The shape of one padded chunk: x's, with the split axis of a size known only at run
        time (the largest chunk's, or x's dim where the chunks are segments)."""
        dims = list(self.data.shape)  # type: ignore[arg-type]
        dims[self.axis] = None
        return ir.Shape(dims)

    def _emit(
        self,
        builder: Builder,
        segments: bool,
        rows: list[ChunkRows] | None = None,
        checks: list[SplitCheck] | None = None,
    ) -> tuple[ir.Value, ir.Value, ir.Value, Segments]:
        axis, rank = self.axis, self.rank
        sizes = self.sizes
        if sizes.dtype != ir.DataType.INT64:
            sizes = builder.op("Cast", [sizes], {"to": int(ir.DataType.INT64)})
        zero = builder.constant(np.array(0, np.int64), "zero")
        one = builder.constant(np.array(1, np.int64), "one")
        dim = builder.op(
            "Gather", [builder.op("Shape", [self.data]), builder.constant(np.array(axis))]
        )
        count = _length_of_sizes(builder, dim, sizes, nonnegative=self.nonnegative, empty_read=True)
        if not segments and rows is None:
            stack, mask = self._gathered_checked(builder, sizes, _check(count), checks)
            return stack, mask, count, Segments(self.data, axis, None, sizes, count)
        if not segments:
            ends = builder.op("CumSum", [sizes, zero], name="chunk_ends")
            stack, mask = self._gathered(builder, sizes, ends, _check(count), one)
            rows.append(ChunkRows(self.data, axis, sizes, ends, dim, count, _check(count)))
            return stack, mask, count, Segments(self.data, axis, None, sizes, count)
        shape = builder.op(
            "Concat", [builder.unsqueeze(count, [0]), builder.ints([1] * rank)], {"axis": 0}
        )
        stack = builder.op("Expand", [self.data, shape], name="chunks_padded")
        stack.type = self.data.type
        ends = builder.op("CumSum", [sizes, zero], name="chunk_ends")
        starts = builder.op("Sub", [ends, sizes], name="chunk_starts")
        positions = builder.op("Range", [zero, dim, one], name="positions")  # [d]
        after = builder.op("GreaterOrEqual", [positions, builder.unsqueeze(starts, [1])])
        before = builder.op("Less", [positions, builder.unsqueeze(ends, [1])])
        mask = builder.op("And", [after, before], name="chunk_mask")  # [n, d]
        mask = self._spread(builder, mask)
        # the chunk of each position: how many chunks end at or before it (a scatter of the
        # ends and a CumSum, linear in d + n)
        rows = builder.unsqueeze(dim, [0])
        ids = ids_of_sizes(builder, sizes, ends, rows, rows)
        return stack, mask, count, Segments(self.data, axis, ids, sizes, count)

    def _gathered_checked(
        self,
        builder: Builder,
        sizes: ir.Value,
        check: ir.Value,
        checks: list[SplitCheck] | None,
    ) -> tuple[ir.Value, ir.Value]:
        """`_gathered` where the chunks are not also x's rows: the sizes taken as a column [n, 1]
        once (the ends its CumSum, the first rows and the slots skipped one Sub each, neither
        unsqueezed), and, where the sizes are proved never negative (opset 13 or newer, and
        `checks` given), x read through Split(x, [Sum(sizes)]), which fails exactly where such
        sizes do not add up to x's dim, as the SplitToSequence does."""
        zero = builder.constant(np.array(0, np.int64), "zero")
        one = builder.constant(np.array(1, np.int64), "one")
        column = builder.unsqueeze(sizes, [1])  # [n, 1]
        ends = builder.op("CumSum", [column, zero], name="chunk_ends")  # [n, 1]
        largest = self._largest(builder, sizes)
        slots = builder.op("Range", [check, largest, one], name="slots")  # [m]
        rows = builder.op("Add", [builder.op("Sub", [ends, largest]), slots], name="chunk_rows")
        data = self.data
        checked = checks is not None and self.nonnegative and builder.opset >= _SPLIT_INPUT_OPSET
        if checked:
            total = builder.op("ReduceSum", [sizes], {"keepdims": 1})  # [1]
            data = builder.op("Split", [self.data, total], {"axis": self.axis}, name="checked")
            data.type, data.shape = self.data.type, self.data.shape
        stack = self._padded(builder, data, rows)
        skipped = builder.op("Sub", [largest, column])  # [n, 1]
        mask = builder.op("GreaterOrEqual", [slots, skipped], name="chunk_mask")
        if checked:
            assert checks is not None and slots.producer() is not None
            checks.append(SplitCheck(stack, slots.producer(), zero))  # type: ignore[arg-type]
        return stack, self._spread(builder, mask)

    @staticmethod
    def _largest(builder: Builder, sizes: ir.Value) -> ir.Value:
        """The largest size (0 for no chunk: ReduceMax of nothing fails in onnxruntime 1.20)."""
        return builder.op(
            "ReduceMax",
            [builder.op("Concat", [builder.ints([0]), sizes], {"axis": 0})],
            {"keepdims": 0},
        )

    def _padded(self, builder: Builder, data: ir.Value, rows: ir.Value) -> ir.Value:
        """Gather(data, rows [n, m]) along the split axis, the chunks moved to the front."""
        stack = builder.op("Gather", [data, rows], {"axis": self.axis}, name="chunks_padded")
        if self.axis:  # [.., n, m, ..] -> [n, .., m, ..]
            perm = [self.axis, *range(self.axis), *range(self.axis + 1, self.rank + 1)]
            stack = builder.op("Transpose", [stack], {"perm": perm})
        stack.type = self.data.type
        return stack

    def _gathered(
        self, builder: Builder, sizes: ir.Value, ends: ir.Value, check: ir.Value, one: ir.Value
    ) -> tuple[ir.Value, ir.Value]:
        """(X [n, .., m, ..], mask [n, 1.., m, 1..]): m the largest size, chunk k in the last
        size k slots of X[k] (rows ends[k] - m + j for slot j); the slots before it hold
        rows of x before the chunk, counted from the end of x where that is negative (m <= d, so
        every row index is within [-d, d)), and the mask leaves them out. `check` (0, or it
        fails where the sizes are wrong) starts the slots: every value read depends on it."""
        largest = self._largest(builder, sizes)  # m
        slots = builder.op("Range", [check, largest, one], name="slots")  # [m]
        first = builder.unsqueeze(builder.op("Sub", [ends, largest]), [1])  # [n, 1]
        rows = builder.op("Add", [first, slots], name="chunk_rows")  # [n, m]
        stack = self._padded(builder, self.data, rows)
        skipped = builder.unsqueeze(builder.op("Sub", [largest, sizes]), [1])  # [n, 1]
        mask = builder.op("GreaterOrEqual", [slots, skipped], name="chunk_mask")
        return stack, self._spread(builder, mask)

    def _spread(self, builder: Builder, mask: ir.Value) -> ir.Value:
        """A [n, slots] mask as [n, 1.., slots, 1..] (the slots at the split axis)."""
        others = [*range(1, self.axis + 1), *range(self.axis + 2, self.rank + 1)]
        if others:
            mask = builder.unsqueeze(mask, others)
        mask.type = ir.TensorType(ir.DataType.BOOL)
        return mask


_SPLIT_INPUT_OPSET = 13  # Split takes its sizes as an input


@dataclasses.dataclass(frozen=True)
class SplitCheck:
    """Chunks `stack` gathered from x through Split(x, [Sum(sizes)]), which fails where sizes
    never negative do not add up: the Range of slots (`slots`) still starts at the count's
    check, so that a value made of the mask alone (a chunk's Shape) fails there too; where
    every value the loop gives reads `stack`, the Split already checks them all and the slots
    start at `zero` instead (`drop_spent_checks`), leaving the count's check unread."""

    stack: ir.Value
    slots: ir.Node
    zero: ir.Value


def drop_spent_checks(checks: list[SplitCheck], results: list[ir.Value]) -> None:
    """Start the slots of each of `checks` at 0 where every one of `results` (what the
    batched loop gives) is computed from its checked chunks."""
    for check in checks:
        reached = _computed_from(check.stack)
        if results and all(result in reached for result in results):
            check.slots.replace_input_with(0, check.zero)


def _computed_from(value: ir.Value) -> set[ir.Value]:
    """`value` and every value computed from it (through the uses, once each)."""
    seen, pending = {value}, [value]
    while pending:
        for use in pending.pop().uses():
            for output in use.node.outputs:
                if output not in seen:
                    seen.add(output)
                    pending.append(output)
    return seen


def _check(length: ir.Value) -> ir.Value:
    """The check within `_length_of_sizes(..., empty_read=True)`: its result is
    Add(Size(sizes), check), check a Gather from a table of one 0 that fails where the sizes are
    wrong."""
    producer = length.producer()
    assert producer is not None and producer.op_type == "Add", producer
    check = producer.inputs[1]
    assert check is not None
    return check


def ragged_chunks(sequence: ir.Value, ctx: Context) -> RaggedChunks | Refusal | None:
    """The chunks `sequence` holds when it is a split by 1-D sizes known only at run time (or
    known and unequal); None when it is not such a split (other forms are stacked as they are)."""
    split = _producer(sequence, "SplitToSequence")
    if split is None or len(split.inputs) < 2 or split.inputs[1] is None:
        return None
    data, sizes = split.inputs[0], split.inputs[1]
    if sizes.shape is None or len(sizes.shape) != 1:
        return None
    known = ctx.facts.values.get_ints(sizes)
    if known is not None and len(set(known)) <= 1:
        return None  # equal chunks: stacked
    if data is None or data.shape is None or len(data.shape) == 0:
        return Refusal("the rank of the split tensor is unknown")
    if sizes.dtype not in (ir.DataType.INT64, ir.DataType.INT32):
        return Refusal("the split sizes are not int64 or int32")
    rank = len(data.shape)
    axis = split.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return Refusal(f"SplitToSequence axis {axis} is out of range for rank {rank}")
    nonnegative = never_negative(sizes, ctx.facts.values)
    return RaggedChunks(data, sizes, axis % rank, nonnegative)


_SEGMENT_REDUCTIONS = ("ReduceSum", "ReduceMean")
_SEGMENT_EXTREMA = ("ReduceMax", "ReduceMin")


def reduced_by_segments(
    chunk: ir.Value, chunks: RaggedChunks, opset: int, values: StaticValues
) -> bool:
    """Whether every use of `chunk` (the body's read of a chunk) is a sum or mean (from opset 18
    also a maximum or minimum) along the split axis alone, which segment reductions compute
    without padding the chunks, and a position along it holds at most `SEGMENT_WIDTH` values
    (`SEGMENT_EXTREMA_WIDTH` for a maximum or minimum; statically): onnxruntime scatters one
    value at a time, so wider rows, gathered and masked, reduce faster."""
    dtype = chunks.data.dtype
    if opset < SEGMENT_OPSET or dtype not in SEGMENT_DTYPES or chunk.is_graph_output():
        return False
    dims = [d for k, d in enumerate(chunks.data.shape or ()) if k != chunks.axis]
    if not all(isinstance(d, int) for d in dims) or int(np.prod(dims)) > SEGMENT_WIDTH:
        return False
    reductions = _SEGMENT_REDUCTIONS
    if opset >= SEGMENT_EXTREMA_OPSET and int(np.prod(dims)) <= SEGMENT_EXTREMA_WIDTH:
        reductions += _SEGMENT_EXTREMA  # ScatterElements' reduction "max" and "min"
    uses = list(chunk.uses())
    for use in uses:
        node, index = use[0], use[1]
        if node.op_type not in reductions or index != 0 or node.graph is not chunk.graph:
            return False
        if node.op_type == "ReduceMean" and dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
            return False
        axes = values.get_ints(node.inputs[1]) if len(node.inputs) > 1 else None
        if axes is None:
            axes = node.attributes.get_ints("axes", None)
        if axes is None or [
            a % chunks.rank if -chunks.rank <= a < chunks.rank else None for a in axes
        ] != [chunks.axis]:
            return False
    return bool(uses)
