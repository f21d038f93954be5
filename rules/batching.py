"""SequenceMap over elements of one shape becomes one batched computation (as `jax.vmap` does).

    ConcatFromSequence(SequenceMap(SplitToSequence(x, axis=0, keepdims=0), W, body=f),
                       axis=0, new_axis=1)
        -> f'(x, W)                         (f' = f applied once to the stack [N, *element])
    SequenceMap(SequenceConstruct(a0..an), body=f)      (a_i of one shape)
        -> SplitToSequence(f'(Concat(Unsqueeze(a_i, 0)...)), axis=0, keepdims=0)

The stack of the elements is read without copying where it exists already: the input of a
SplitToSequence (or of the Split it was lowered to) with its axis moved to the front, reshaped
when the chunks are larger than 1. Otherwise the elements are stacked. N may be dynamic.

Every body op that reads a value varying per element needs a batching rule (see
`seqlower.batching.ops`); extra tensor inputs and what depends only on them run once, unbatched.
A ConcatFromSequence of the result reads the batched tensor directly; other consumers get
SplitToSequence(result, axis=0, keepdims=0), which the other rules lower further.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses
from collections.abc import Callable, Sequence

import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.analysis.provenance import split_source
from seqlower.analysis.required_sizes import required_size
from seqlower.batching.body import BodyPlan, emit_body, plan_body
from seqlower.batching.core import Emitter, Operand
from seqlower.ops import same_dim
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.access import _producer
from seqlower.rules.loop_appends import splittable
from seqlower.rules.stacks import (
    ALLOW_ZERO,
    chunks,
    equal_split_size,
    merged_shape,
    moveaxis_to_front,
)

Dim = int | ir.SymbolicDim | None


@dataclasses.dataclass(frozen=True)
class Source:
    """How to build the stack [N, *element_shape] of one sequence input."""

    element_shape: ir.Shape
    length: Dim
    build: Callable[[Builder], ir.Value]
    # the chunks are equal only because a reader fails on any other size: every chunk must be
    # read for a failure of the original to stand for the batched form's
    pinned: bool = False


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    body: BodyPlan
    sources: tuple[Source | None, ...]  # per node input; None for an extra tensor input
    length: Dim


def _source_of_split(
    node: ir.Node, ctx: Context, reader: ir.Value | None = None
) -> Source | Refusal:
    """The stack of the chunks of SplitToSequence `node`. `reader`, where given, is what one
    chunk is read as in every iteration: an op that needs it to have the split size along the
    axis (`required_size`) proves the chunks equal where the dim's size is not known."""
    data = node.inputs[0]
    if data is None or data.shape is None:
        return Refusal("the rank of the SplitToSequence input is unknown")
    rank = len(data.shape)
    axis = node.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return Refusal(f"SplitToSequence axis {axis} is out of range for rank {rank}")
    axis %= rank
    dims = list(data.shape)
    dim = dims[axis]
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if split is None:
        if node.attributes.get_int("keepdims", 1) == 0:
            element = ir.Shape(dims[:axis] + dims[axis + 1 :])
            return Source(element, dim, lambda b: moveaxis_to_front(b, data, axis, rank))
        size, count = 1, dim
    elif split.shape is not None and len(split.shape) == 0:
        size = ctx.facts.static_int(split)  # type: ignore[assignment]
        if size is None or size <= 0:
            return Refusal("the split size is computed at run time")
        if size == 1:
            count = dim
        elif isinstance(dim, int) and dim % size == 0:
            count = dim // size
        elif not isinstance(dim, int) and reader is not None and _pinned(reader, axis, size):
            count = None  # dim / size: a dim of another size fails in every form
        else:
            return Refusal(f"chunks of {size} along a dim of {dim} do not share a shape")
    else:
        sizes = ctx.facts.values.get_ints(split)
        if sizes is None or len(set(sizes)) > 1:
            return Refusal("the split sizes are not known to be equal")
        if not sizes:
            return Refusal("the split has no chunks")
        size, count = sizes[0], len(sizes)
        if isinstance(dim, int) and size * count != dim:
            return Refusal(f"split sizes {sizes} do not add up to dim {axis} of size {dim}")
    element = ir.Shape([*dims[:axis], size, *dims[axis + 1 :]])
    if size != 1 and count is not None and not isinstance(count, int):
        return Refusal("the chunk count is not static")
    build = chunks(data, axis, count, size)  # type: ignore[arg-type]
    return Source(element, count, build, pinned=count is None)


def _pinned(reader: ir.Value, axis: int, size: int) -> bool:
    """Whether every run that succeeds reads `reader` with `size` along `axis`."""
    if reader.shape is None or len(reader.shape) <= axis:
        return False
    return required_size(reader, axis) == size


def _source_of_elements(elements: Sequence[ir.Value], ctx: Context) -> Source | Refusal:
    origin = split_source(elements, ctx.facts.values)
    if origin is not None and origin.squeezed:
        dims = list(origin.data.shape)  # type: ignore[arg-type]
        element = ir.Shape(dims[: origin.axis] + dims[origin.axis + 1 :])
        return Source(
            element,
            len(elements),
            lambda b: moveaxis_to_front(b, origin.data, origin.axis, len(dims)),
        )
    if origin is not None:  # chunks of one Split: equal when its sizes are
        size = equal_split_size(
            elements[0].producer(),  # type: ignore[arg-type]
            origin.data,
            origin.axis,
            ctx.facts.values,
        )
        if size is None:
            return Refusal("the chunks of the Split do not share a shape")
        dims = list(origin.data.shape)  # type: ignore[arg-type]
        element = ir.Shape([*dims[: origin.axis], size, *dims[origin.axis + 1 :]])
        return Source(element, len(elements), chunks(origin.data, origin.axis, len(elements), size))
    # Stacking needs one static shape. Symbolic dims are not trusted here: a value copied from
    # a body (an unrolled map) carries the body's dims, which may differ between copies.
    first = elements[0].shape
    if first is None or not all(isinstance(d, int) for d in first):
        return Refusal(f"the shape of element '{elements[0].name}' is not static")
    for element in elements[1:]:
        if element.shape != first or element.dtype != elements[0].dtype:
            return Refusal("the elements do not share a shape")
    return Source(first, len(elements), lambda b: b.stack(list(elements)))


def _source(sequence: ir.Value, ctx: Context, reader: ir.Value | None = None) -> Source | Refusal:
    """The stack of `sequence`'s elements; `reader` is one element as every iteration reads it
    (see `_source_of_split`)."""
    split = _producer(sequence, "SplitToSequence")
    if split is not None:
        return _source_of_split(split, ctx, reader)
    elements = ctx.known_elements(sequence)
    if isinstance(elements, Refusal):
        return elements
    if not elements:
        return Refusal("the sequence is empty")
    return _source_of_elements(elements, ctx)


def _merge_shapes(source: ir.Shape, declared: ir.Shape | None) -> ir.Shape | None:
    """The element shape, completed by the body's declared input shape; None on a conflict."""
    if declared is None:
        return source
    if len(declared) != len(source):
        return None
    dims: list[Dim] = []
    for have, said in zip(source, declared):
        if isinstance(have, int) and isinstance(said, int) and have != said:
            return None
        dims.append(have if isinstance(have, int) or not isinstance(said, int) else said)
    return ir.Shape(dims)


def _check(node: ir.Node, ctx: Context) -> BatchPlan | Refusal:
    body = node.attributes["body"].as_graph() if "body" in node.attributes else None
    if body is None or len(body.inputs) != len(node.inputs):
        return Refusal("the body does not match the node")
    if len(body.outputs) != len(node.outputs):
        return Refusal("the body does not match the node")
    sources: list[Source | None] = []
    operands: list[Operand] = []
    length: Dim = None
    first = True
    for index, (value, body_input) in enumerate(zip(node.inputs, body.inputs)):
        if value is None:
            return Refusal(f"input {index} is missing")
        if index > 0 and not isinstance(value.type, ir.SequenceType):
            sources.append(None)
            operands.append(Operand(False, value.shape))
            continue
        source = _source(value, ctx, body_input)
        if isinstance(source, Refusal):
            return source
        if first:
            length, first = source.length, False
        elif not same_dim(source.length, length):
            return Refusal("the zipped sequences are not known to have the same length")
        shape = _merge_shapes(source.element_shape, body_input.shape)
        if shape is None:
            return Refusal(
                f"elements of shape {source.element_shape} do not match the body input "
                f"'{body_input.name}' declared as {body_input.shape}"
            )
        sources.append(source)
        operands.append(Operand(True, shape))
    for output in node.outputs:
        dtype = element_dtype(output)
        if output.is_graph_output() and not splittable(dtype):
            return Refusal(
                f"the model returns the list '{output.name}', and onnxruntime cannot split "
                f"{dtype.name.lower() if dtype else 'its'} elements back out of one tensor"
            )
    plan = plan_body(body, operands, ctx.facts.values, ctx.rewriter.opset(node.graph))
    if isinstance(plan, Refusal):
        return plan
    return BatchPlan(plan, tuple(sources), length)


def _batch(node: ir.Node, plan: BatchPlan, ctx: Context) -> None:
    """SequenceMap(SplitToSequence(x, axis=0, keepdims=0), t, body=f) -> SplitToSequence(f'(x, t))
    and ConcatFromSequence(SequenceMap(...), axis=0, new_axis=1) -> f'(x, t)"""
    builder = ctx.rewriter.before(node)
    arguments: list[ir.Value] = []
    stacks: list[ir.Value] = []
    for value, source in zip(node.inputs, plan.sources):
        assert value is not None
        if source is None:
            arguments.append(value)
            continue
        stack = source.build(builder)
        if stack.shape is None and stack.producer() is not None and stack.graph is builder.graph:
            # a new value (a model input used as the stack as it is keeps its declaration)
            stack.type = ir.TensorType(element_dtype(value) or ir.DataType.FLOAT)
            stack.shape = ir.Shape([plan.length, *source.element_shape])
        stacks.append(stack)
        arguments.append(stack)
    static_count = plan.length if isinstance(plan.length, int) else None
    emitter = Emitter(builder, stacks[0], static_count)
    results = emit_body(plan.body, arguments, emitter, plan.length)
    for index, (output, result) in enumerate(zip(node.outputs, results)):
        rank = plan.body.outputs[index].rank
        _connect(output, result, rank, plan.length, builder, ctx)


def _connect(
    output: ir.Value, result: ir.Value, rank: int | None, length: Dim, b: Builder, ctx: Context
) -> None:
    """Let the consumers of the sequence `output` read the batched `result` [N, *element]."""
    needs_sequence = output.is_graph_output()
    for consumer in dict.fromkeys(use.node for use in output.uses()):
        concat = _concat_of(consumer, result, rank, length, b)
        if concat is None:
            needs_sequence = True
            continue
        concat.type = consumer.outputs[0].type or result.type
        ctx.rewriter.replace(consumer.outputs[0], concat)
    if needs_sequence:
        sequence = b.op("SplitToSequence", [result], {"axis": 0, "keepdims": 0}, name="elements")
        dtype = element_dtype(output) or result.dtype or ir.DataType.FLOAT
        sequence.type = ir.SequenceType(ir.TensorType(dtype))
        ctx.rewriter.replace(output, sequence)


def _concat_of(
    consumer: ir.Node, result: ir.Value, rank: int | None, length: Dim, b: Builder
) -> ir.Value | None:
    """ConcatFromSequence of the elements of `result`, read from `result` itself."""
    if consumer.op_type != "ConcatFromSequence" or consumer.domain != "" or rank is None:
        return None
    axis = consumer.attributes.get_int("axis", 0)
    if consumer.attributes.get_int("new_axis", 0) == 1:
        if not -rank - 1 <= axis <= rank:
            return None
        axis %= rank + 1
        perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
        if axis == 0:
            return result
        return b.op("Transpose", [result], {"perm": perm}, name="stacked")
    if not -rank <= axis < rank:
        return None
    axis %= rank
    perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
    shape = result.shape
    moved_dims = None if shape is None else [shape[i] for i in perm]
    moved = result
    if axis:
        moved = b.op("Transpose", [result], {"perm": perm})
        moved.shape = None if moved_dims is None else ir.Shape(moved_dims)
    if moved_dims is not None and moved_dims[axis + 1] == 1:  # one slice each (x.split(1))
        return b.squeeze(moved, [axis + 1])
    target = merged_shape(b, moved, rank + 1, moved_dims, axis)
    return b.op("Reshape", [moved, target], ALLOW_ZERO, name="concatenated")


# before the split rule: a SplitToSequence batched from directly is never split into chunks
RULES = RuleSet([Rule("sequence-map-batch", "SequenceMap", _check, _batch, before_producers=True)])
