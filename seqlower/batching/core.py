"""The vocabulary of batching: operands, the view an op rule gets, and the emitter it writes with.

A batched value holds the values of one body value for every element, stacked on a new leading
axis: the body value of element shape S becomes a tensor of shape [N, *S]. An unbatched value is
the same for every element (an extra tensor input, a constant, an outer-scope value, or anything
computed from those only) and keeps its own shape.

An op rule looks at an `OpView` (which inputs are batched, their element shapes, static contents)
and returns either a `Refusal` or a `Batched`: the flags of which outputs are batched and an `emit`
function that, given the (batched or unbatched) input values, emits the batched computation
through an `Emitter` and returns the outputs. Rules never mutate while checking: only `emit` does.
"""

from __future__ import annotations

__all__ = [
    "Batched",
    "Emit",
    "Emitter",
    "OpRule",
    "OpView",
    "Operand",
    "normalize_axis",
]

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.batching.means import ClampedMean
from seqlower.ops import peel_identity
from seqlower.rewriter import Builder
from seqlower.rule import Refusal

if TYPE_CHECKING:
    from seqlower.batching.rows import Rows
    from seqlower.batching.segments import Segments

INT64_MAX = np.iinfo(np.int64).max


@dataclasses.dataclass(frozen=True)
class Operand:
    """One input of a body op: batched or not, and its element shape (its own shape when
    unbatched). `shape` is None when not even the rank is known.

    `ragged_axis`: the element is a slice along that axis whose bounds differ per element (a
    ragged value). It is held padded, as the unsliced tensor of shape `shape`, and the Emitter
    keeps the mask of the positions inside each element's bounds (`Emitter.masks`); only the ops
    that can read it so (reductions over that axis, elementwise ops that keep its shape) accept
    it."""

    batched: bool
    shape: ir.Shape | None
    ragged_axis: int | None = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def static_shape(self) -> list[int] | None:
        if self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        return [int(d) for d in self.shape]


@dataclasses.dataclass(frozen=True)
class OpView:
    """What an op rule may look at: the body node, its operands and output element shapes."""

    node: ir.Node
    operands: tuple[Operand | None, ...]  # None for an absent optional input
    output_shapes: tuple[ir.Shape | None, ...]  # element shapes of the outputs
    opset: int
    values: StaticValues

    @property
    def op_type(self) -> str:
        return self.node.op_type

    def present(self, index: int) -> bool:
        return index < len(self.operands) and self.operands[index] is not None

    def batched(self, index: int) -> bool:
        operand = self.operands[index] if index < len(self.operands) else None
        return operand is not None and operand.batched

    def rank(self, index: int) -> int | None:
        operand = self.operands[index] if index < len(self.operands) else None
        return None if operand is None else operand.rank

    def operand(self, index: int) -> Operand:
        operand = self.operands[index]
        assert operand is not None
        return operand

    def static(self, index: int) -> np.ndarray | None:
        """The content of an unbatched input known before run time, else None."""
        if not self.present(index) or self.batched(index):
            return None
        return self.values.get(self.node.inputs[index])

    def static_ints(self, index: int) -> list[int] | None:
        array = self.static(index)
        if array is None or array.dtype.kind not in "iu":
            return None
        return [int(x) for x in array.reshape(-1)]

    def attr_int(self, name: str, default: int) -> int:
        return self.node.attributes.get_int(name, default)

    def attr_ints(self, name: str) -> list[int] | None:
        found = self.node.attributes.get_ints(name)
        return None if found is None else list(found)

    def output_rank(self, index: int) -> int | None:
        shape = self.output_shapes[index]
        return None if shape is None else len(shape)


Emit = Callable[["Emitter", list[ir.Value | None]], list[ir.Value]]


@dataclasses.dataclass(frozen=True)
class Batched:
    """An accepted op: `emit` writes its batched form; `outputs_batched` says which outputs
    carry the batch axis (None: all of them)."""

    emit: Emit
    outputs_batched: tuple[bool, ...] | None = None
    # the first output is ragged along this element axis, padded to the shape of the first input
    ragged_axis: int | None = None
    # its padded element shape, when not the first input's (a NonZero, a Transpose)
    ragged_shape: ir.Shape | None = None
    # the first output is windows of one unbatched x along `ragged_axis` whose length no
    # constant bounds (a Slice by bounds per element): they may be held flat, as x's rows
    # (`seqlower.batching.windows`), where the caller decides so for the whole body
    windows: bool = False
    # values of enclosing graphs that the op's subgraphs read (an If's branches): `emit` gets
    # them after the op's own inputs
    captured: tuple[ir.Value, ...] = ()
    # (output, ragged axis, padded element shape) of the other ragged outputs (an If's)
    ragged_outputs: tuple[tuple[int, int, ir.Shape], ...] = ()


OpRule = Callable[[OpView], "Batched | Refusal"]


def normalize_axis(axis: int, rank: int) -> int | None:
    """`axis` in [0, rank), or None when it is out of [-rank, rank)."""
    return axis % rank if rank > 0 and -rank <= axis < rank else None


class Emitter:
    """Emits the batched computation before the SequenceMap node, through the rewriter."""

    def __init__(self, builder: Builder, count_source: ir.Value, static_count: int | None) -> None:
        self.builder = builder
        self.opset = builder.opset
        self._count_source = count_source
        self.static_count = static_count
        self._count: ir.Value | None = None
        # per ragged body value: the bool mask [N, 1.., d, 1..] of the positions each element
        # holds (d along its ragged axis, 1 along every other element axis)
        self.masks: dict[ir.Value, ir.Value] = {}
        # per ragged body value read only by sums and means along its ragged axis: its chunks
        # as segments (`seqlower.batching.segments`), reduced without the padded value
        self.segments: dict[ir.Value, Segments] = {}
        # per mask of `masks` whose counts of held positions are known: those counts ([N] int64;
        # the sizes of the chunks of a split), which a mean divides by without counting the mask
        self.held: dict[ir.Value, ir.Value] = {}
        # the means dividing by those counts clamped to at least 1, for the caller to unclamp
        # where nothing reads an empty chunk's mean (`seqlower.batching.means`)
        self.clamps: list[ClampedMean] = []
        # per ragged value that one branch's rows were scattered into (a stack of every row,
        # rows that do not take the branch holding nothing): (its mask of `masks`, the rows'
        # own values [K, ..] in increasing row order, their mask, or None where they hold every
        # position). Joining the stack by its mask joins those rows by theirs: the same values.
        self.scattered: dict[ir.Value, tuple[ir.Value, ir.Value, ir.Value | None]] = {}
        # Range(0, N) (int64), when the caller has emitted it: the row numbers of the batch (a
        # batched loop's iteration numbers). A Gather of it at rows of the batch gives back those
        # rows, and cannot fail where the batch has N rows (`at_rows`).
        self.positions: ir.Value | None = None
        # the ragged body values also held as the split tensor's own rows and the chunk of each
        # row (`seqlower.batching.rows`), when the caller decided so for the whole body
        self.rows: Rows | None = None

    # -- plain emission ------------------------------------------------------------------

    def op(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, Any] | None = None,
    ) -> ir.Value:
        return self.builder.op(op_type, inputs, attributes)

    def copy(
        self,
        node: ir.Node,
        inputs: Sequence[ir.Value | None],
        overrides: Mapping[str, Any] | None = None,
    ) -> list[ir.Value]:
        """Emit `node`'s operator with its attributes (some overridden) on new inputs."""
        attributes: dict[str, Any] = {
            name: ir.Attr(name, attr.type, attr.value) for name, attr in node.attributes.items()
        }
        attributes.update(overrides or {})
        return self.builder.ops(
            node.op_type, inputs, attributes, num_outputs=len(node.outputs), name=node.op_type
        )

    def ints(self, values: Sequence[int]) -> ir.Value:
        return self.builder.ints(list(values))

    def scalar(self, array: np.ndarray) -> ir.Value:
        return self.builder.constant(array)

    def unsqueeze(self, value: ir.Value, axes: Sequence[int]) -> ir.Value:
        return self.builder.unsqueeze(value, list(axes)) if axes else value

    def squeeze(self, value: ir.Value, axes: Sequence[int]) -> ir.Value:
        return self.builder.squeeze(value, list(axes)) if axes else value

    def reshape(self, data: ir.Value, shape: ir.Value) -> ir.Value:
        """Reshape to a fully resolved shape: allowzero=1, so that a dim of size 0 in `shape` is
        a 0, not "copy the input's dim" (the batch axis shifts the input's dims by one)."""
        return self.op("Reshape", [data, shape], {"allowzero": 1} if self.opset >= 14 else {})

    def transpose(self, value: ir.Value, perm: Sequence[int]) -> ir.Value:
        if list(perm) == sorted(perm):
            return value
        return self.op("Transpose", [value], {"perm": list(perm)})

    # -- batch helpers -------------------------------------------------------------------

    def at_rows(self, value: ir.Value, rows: ir.Value) -> ir.Value:
        """Gather(value, rows) along the batch axis, `rows` positions in [0, N) (a Compress of
        the row numbers).

            Gather(positions, rows) -> rows          (positions, or Identity of it)

        positions is Range(0, N) (int64, as rows are), so its entry at row r is r; a row of
        [0, N) is within its N entries, so the Gather dropped could not have failed."""
        if self.positions is not None and peel_identity(value) is self.positions:
            return rows
        return self.op("Gather", [value, rows], {"axis": 0})

    def count(self) -> ir.Value:
        """N as a 1-D int64 tensor of one element."""
        if self._count is None:
            if self.static_count is not None:
                self._count = self.ints([self.static_count])
            else:
                self._count = self.dims(self._count_source, 0, 1)
        return self._count

    def dims(self, value: ir.Value, start: int, end: int | None = None) -> ir.Value:
        """Shape(value)[start:end] as a 1-D int64 tensor."""
        if self.opset >= 15:
            attributes = {"start": start} if end is None else {"start": start, "end": end}
            return self.op("Shape", [value], attributes)
        shape = self.op("Shape", [value])
        stop = INT64_MAX if end is None else end
        return self.op("Slice", [shape, self.ints([start]), self.ints([stop]), self.ints([0])])

    def lift(self, value: ir.Value, rank: int, target: int) -> ir.Value:
        """Batched [N, *S] (|S| = rank) -> [N, 1, ..., 1, *S] with |element| = target, so that
        numpy-style broadcasting lines up its element axes with other operands."""
        return self.unsqueeze(value, range(1, 1 + target - rank)) if target > rank else value

    def broadcast(self, value: ir.Value, rank: int) -> ir.Value:
        """Unbatched value of rank `rank` -> [N, *value] (the same value for every element)."""
        shape = self.op("Concat", [self.count(), self.ints([1] * rank)], {"axis": 0})
        return self.op("Expand", [value, shape])

    def element_shape(self, value: ir.Value) -> ir.Value:
        """The element shape of a batched value, as a 1-D int64 tensor."""
        return self.dims(value, 1)
