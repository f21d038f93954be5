"""SequenceErase and SequenceInsert at a run-time position, on the even chunks of one tensor:
index arithmetic on the position and one Slice each side, not a comparison per element.

    SequenceErase(SequenceConstruct(Split(x, s, .., s, axis=a)...), p)       (n chunks)
        -> SequenceConstruct(Split(Concat(Slice(x, 0, b), Slice(x, b + s, end)), s, .., s))
           b = Gather(B, p), B = [[0], [s], .., [(n-1)s]]
    SequenceInsert(SequenceConstruct(Split(x, s, .., s, axis=a)...), t, p)   (t: one chunk's shape)
        -> SequenceConstruct(Split(Concat(Slice(x, 0, b), t, Slice(x, b, end)), s, .., s))
           b = Gather(B, q), B = [[0], [s], .., [ns]], q = p < 0 ? p - 1 : p

    ConcatFromSequence(SplitToSequence(x, s (scalar), axis=a), axis=b, new_axis=1)
        -> Transpose(Reshape(x, [d0.., -1, Min(d, s), ..]))   (a stack of chunks: a moved to b)

The Gather over the table of bounds accepts exactly the positions the sequence operator does
([-n, n-1] for erase, [-n, n] for insert) and fails at run time on the others, as the original
does. Readers of the result then see the chunks of one tensor again (a ConcatFromSequence of
them is that tensor; a read at a run-time position is `at-even-chunks`). A stack needs chunks of
one shape: s divides d, or d < s and there is one chunk of d (hence Min(d, s), a constant when d
is static). Where neither holds, the Reshape fails at run time as the ConcatFromSequence does.
Over a dim of run-time size that is 0, onnxruntime fails (a ConcatFromSequence of no chunk) where
the Reshape gives an empty tensor (docs/design.md, "Deliberate deviations").
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


@dataclasses.dataclass(frozen=True)
class StackPlan:
    data: ir.Value
    axis: int  # the split axis
    size: int  # s
    chunk: int | None  # Min(d, s) when d is static
    perm: tuple[int, ...] | None  # the Transpose that moves the chunk axis to the stack axis


def _check_stack(node: ir.Node, ctx: Context) -> StackPlan | Refusal:
    if node.attributes.get_int("new_axis", 0) != 1:
        return Refusal("not a stack (new_axis is 0)")
    split = node.inputs[0].producer() if node.inputs and node.inputs[0] is not None else None
    if split is None or split.op_type != "SplitToSequence" or split.domain != "":
        return Refusal("the sequence does not come from SplitToSequence")
    sizes = split.inputs[1] if len(split.inputs) > 1 else None
    size = ctx.facts.values.get_int(sizes) if sizes is not None else None
    static = ctx.facts.static(sizes) if sizes is not None else None
    if size is None or static is None or static.ndim != 0 or size <= 0:
        return Refusal("the split size is not one static scalar")
    data = split.inputs[0]
    if data is None or data.shape is None:
        return Refusal("the rank of the split input is unknown")
    rank = len(data.shape)
    axis = split.attributes.get_int("axis", 0) % rank
    others = [d for k, d in enumerate(data.shape) if k != axis]
    if not all(isinstance(d, int) and d > 0 for d in others):
        return Refusal("a dim other than the split axis is not static (or is 0)")
    stack_axis = node.attributes.get_int("axis", 0)
    if not -rank - 1 <= stack_axis <= rank:
        return Refusal("the stack axis is out of range")
    stack_axis %= rank + 1
    dim = data.shape[axis]
    chunk = None
    if not isinstance(dim, int) and ctx.rewriter.opset(node.graph) < 12:
        return Refusal("a dim of run-time size needs Min over int64 (opset 12)")
    if isinstance(dim, int):
        if dim == 0 or (dim > size and dim % size):
            return Refusal("the chunks never share one shape: the original always fails here")
        chunk = min(dim, size)
    perm = None
    if stack_axis != axis:
        order = [k for k in range(rank + 1) if k != axis]
        order.insert(stack_axis, axis)
        perm = tuple(order)
    return StackPlan(data, axis, size, chunk, perm)


def _stack(node: ir.Node, plan: StackPlan, ctx: Context) -> None:
    """ConcatFromSequence(SplitToSequence(x, s (scalar), axis=a), axis=b, new_axis=1)
    -> Transpose(Reshape(x, [d0.., -1, Min(d, s), ..]), a moved to b)"""
    builder = ctx.rewriter.before(node)
    dims = list(plan.data.shape or ())
    before = [int(d) for d in dims[: plan.axis]]
    after = [int(d) for d in dims[plan.axis + 1 :]]
    if plan.chunk is not None:
        shape = builder.ints([*before, -1, plan.chunk, *after], "chunked_shape")
    else:  # one chunk of d when d < s
        if builder.opset >= 15:
            d = builder.op("Shape", [plan.data], {"start": plan.axis, "end": plan.axis + 1})
        else:
            axes = builder.ints([plan.axis], "axis")
            ends = builder.ints([plan.axis + 1], "axis_end")
            d = builder.op("Slice", [builder.op("Shape", [plan.data]), axes, ends])
        chunk = builder.op("Min", [d, builder.ints([plan.size], "size")])
        parts = [builder.ints([*before, -1], "leading"), chunk, builder.ints(after, "trailing")]
        shape = builder.op("Concat", parts, {"axis": 0}, name="chunked_shape")
    # allowzero (opset 14): a 0 is a size, not "copy the input's dim"
    attributes = {"allowzero": 1} if plan.chunk is None and builder.opset >= 14 else {}
    result = builder.op("Reshape", [plan.data, shape], attributes)
    if plan.perm is not None:
        result = builder.op("Transpose", [result], {"perm": list(plan.perm)})
    result.type = plan.data.type
    ctx.rewriter.replace(node.outputs[0], result)


RULES = RuleSet(
    [
        Rule("erase-even-chunks", "SequenceErase", _check_erase, _erase, last_resort=True),
        Rule("insert-even-chunks", "SequenceInsert", _check_insert, _insert, last_resort=True),
        Rule(
            "stack-of-even-split",
            "ConcatFromSequence",
            _check_stack,
            _stack,
            before_producers=True,  # one Reshape, before the split becomes n chunks
        ),
    ]
)
