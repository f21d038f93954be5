"""SequenceErase and SequenceInsert at a run-time position, on the even chunks of one tensor:
index arithmetic on the position and one Slice each side, not a comparison per element.

    SequenceErase(SequenceConstruct(Split(x, s, .., s, axis=a)...), p)       (n chunks)
        -> SequenceConstruct(Split(Concat(Slice(x, 0, b), Slice(x, b + s, end)), s, .., s))
           b = Gather(B, p), B = [[0], [s], .., [(n-1)s]]
    SequenceInsert(SequenceConstruct(Split(x, s, .., s, axis=a)...), t, p)   (t: one chunk's shape)
        -> SequenceConstruct(Split(Concat(Slice(x, 0, b), t, Slice(x, b, end)), s, .., s))
           b = Gather(B, q), B = [[0], [s], .., [ns]], q = p < 0 ? p - 1 : p

The Gather over the table of bounds accepts exactly the positions the sequence operator does
([-n, n-1] for erase, [-n, n] for insert) and fails at run time on the others, as the original
does. Readers of the result then see the chunks of one tensor again (a ConcatFromSequence of
them is that tensor; a read at a run-time position is `at-even-chunks`).
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.provenance import split_source
from seqlower.rule import Context, Refusal, Rule, RuleSet

_END = np.iinfo(np.int64).max


@dataclasses.dataclass(frozen=True)
class EvenChunks:
    data: ir.Value  # the tensor split
    axis: int
    count: int  # n
    size: int  # s
    like: ir.Value  # an element, for the type of the new ones


def _even_chunks(node: ir.Node, ctx: Context) -> EvenChunks | Refusal:
    """The split the sequence read by `node` holds, when its chunks are even and static."""
    elements = ctx.known_elements(node.inputs[0])
    if isinstance(elements, Refusal):
        return elements
    source = split_source(elements, ctx.facts.values)
    if source is None or source.squeezed:
        return Refusal("the elements are not the chunks of one Split")
    if source.data.dtype == ir.DataType.STRING:
        return Refusal("string elements: the runtime-position rules handle them")
    sizes = {e.shape[source.axis] if e.shape is not None else None for e in elements}
    (size,) = sizes if len(sizes) == 1 else (None,)
    if not isinstance(size, int) or size == 0:
        return Refusal("the chunks do not share one static, non-zero size on the split axis")
    return EvenChunks(source.data, source.axis, len(elements), size, elements[0])


def _check_erase(node: ir.Node, ctx: Context) -> EvenChunks | Refusal:
    if len(node.inputs) < 2 or node.inputs[1] is None:
        return Refusal("no position: handled by erase-from-known")
    chunks = _even_chunks(node, ctx)
    if isinstance(chunks, EvenChunks) and chunks.count < 2:
        return Refusal("the result is empty, so nothing would check the position at run time")
    return chunks


def _check_insert(node: ir.Node, ctx: Context) -> EvenChunks | Refusal:
    if len(node.inputs) < 3 or node.inputs[2] is None:
        return Refusal("no position: handled by insert-into-known")
    chunks = _even_chunks(node, ctx)
    if isinstance(chunks, Refusal):
        return chunks
    tensor = node.inputs[1]
    like = chunks.like.shape
    if tensor is None or tensor.shape is None or like is None or len(tensor.shape) != len(like):
        return Refusal("the inserted tensor's rank is unknown or differs from the chunks'")
    if any(a != b for a, b in zip(tensor.shape, like, strict=True)):
        return Refusal("the inserted tensor's shape is not provably a chunk's")
    return chunks


def _bound(builder, chunks: EvenChunks, position: ir.Value, slots: int) -> ir.Value:  # type: ignore[no-untyped-def]
    """Gather([[0], [s], .., [(slots-1)s]], position): the start of the chunk at `position`."""
    table = np.arange(slots, dtype=np.int64).reshape(slots, 1) * chunks.size
    return builder.op("Gather", [builder.constant(table, "bounds"), position], {"axis": 0})


def _rechunked(node: ir.Node, chunks: EvenChunks, joined: ir.Value, count: int, ctx) -> None:  # type: ignore[no-untyped-def]
    builder = ctx.rewriter.before(node)
    joined.type = chunks.data.type
    dims = list(chunks.data.shape or ())
    if dims:  # the rank, for readers that undo the split before shapes are inferred again
        dims[chunks.axis] = count * chunks.size
        joined.shape = ir.Shape(dims)
    elements = builder.split(joined, chunks.axis, [chunks.size] * count, count)
    for element in elements:
        element.type, element.shape = chunks.like.type, chunks.like.shape
    ctx.replace_sequence(node.outputs[0], elements, builder)


def _erase(node: ir.Node, chunks: EvenChunks, ctx: Context) -> None:
    """SequenceErase(SequenceConstruct(Split(x, s, .., s, axis=a)...), p)
    -> SequenceConstruct(Split(Concat(Slice(x, 0, b), Slice(x, b + s, end), axis=a), s, .., s)),
    b = Gather([[0], [s], .., [(n-1)s]], p)"""
    builder = ctx.rewriter.before(node)
    axes = builder.ints([chunks.axis], "axes")
    start = _bound(builder, chunks, node.inputs[1], chunks.count)  # type: ignore[arg-type]
    after = builder.op("Add", [start, builder.ints([chunks.size], "size")])
    head = builder.op("Slice", [chunks.data, builder.ints([0], "zero"), start, axes])
    tail = builder.op("Slice", [chunks.data, after, builder.ints([_END], "end"), axes])
    joined = builder.op("Concat", [head, tail], {"axis": chunks.axis}, name="erased")
    _rechunked(node, chunks, joined, chunks.count - 1, ctx)


def _insert(node: ir.Node, chunks: EvenChunks, ctx: Context) -> None:
    """SequenceInsert(SequenceConstruct(Split(x, s, .., s, axis=a)...), t, p)
    -> SequenceConstruct(Split(Concat(Slice(x, 0, b), t, Slice(x, b, end), axis=a), s, .., s)),
    b = Gather([[0], [s], .., [ns]], p < 0 ? p - 1 : p)"""
    builder = ctx.rewriter.before(node)
    position = builder.op("Cast", [node.inputs[2]], {"to": int(ir.DataType.INT64)})
    zero = builder.constant(np.array(0, dtype=np.int64), "zero")
    one = builder.constant(np.array(1, dtype=np.int64), "one")
    negative = builder.op("Less", [position, zero])
    position = builder.op("Where", [negative, builder.op("Sub", [position, one]), position])
    axes = builder.ints([chunks.axis], "axes")
    start = _bound(builder, chunks, position, chunks.count + 1)
    head = builder.op("Slice", [chunks.data, builder.ints([0], "zero"), start, axes])
    tail = builder.op("Slice", [chunks.data, start, builder.ints([_END], "end"), axes])
    parts = [head, node.inputs[1], tail]
    joined = builder.op("Concat", parts, {"axis": chunks.axis}, name="inserted")
    _rechunked(node, chunks, joined, chunks.count + 1, ctx)


RULES = RuleSet(
    [
        Rule("erase-even-chunks", "SequenceErase", _check_erase, _erase, last_resort=True),
        Rule("insert-even-chunks", "SequenceInsert", _check_insert, _insert, last_resort=True),
    ]
)
