"""ConcatFromSequence becomes Concat, or disappears when it undoes a split.

    ConcatFromSequence(SequenceConstruct(e0..en), axis=a)             -> Concat(e0..en, axis=a)
    ConcatFromSequence(SequenceConstruct(e0..en), axis=a, new_axis=1)
        -> Reshape(Concat(e0..en, axis=a), [0]*a + [n+1, d_a, ...])   (the ei of one known shape)
        -> Concat(Unsqueeze(e0, a), ..., Unsqueeze(en, a), axis=a)    (otherwise)
    ConcatFromSequence(SequenceConstruct(Split(x, axis=a)), axis=a)   -> x
    ConcatFromSequence(SequenceConstruct(Squeeze(Split(x, 1s, a))), axis=a, new_axis=1) -> x
    ConcatFromSequence(SplitToSequence(x, axis=a, keepdims=0), axis=a, new_axis=1)       -> x
    ConcatFromSequence(SplitToSequence(x, axis=a, keepdims=1), axis=a)                   -> x

With new_axis=1 the axis may be in [-r-1, r]; Unsqueeze reads a negative axis the same way.
A stack of elements whose shapes are the same for certain (the same numbers and named dims,
every dim from the stacking axis on a number, not 0, but at most one) is one Concat and one Reshape
(2 operator launches, not n + 1): the Reshape's target is a constant, 0 copying the dims
before the axis and -1 standing for the one dim that is not a number (then only where every
dim before the axis is a number: one that is 0 at run time would leave -1 undetermined).
Concatenating an empty sequence is an error in the spec and is reported, not lowered.
"""

from __future__ import annotations

__all__ = ["RULES"]

import onnx_ir as ir

from seqlower.analysis.provenance import split_source
from seqlower.ops import same_dim
from seqlower.rule import Context, Refusal, Rule, RuleSet, never_empty
from seqlower.rules.access import _producer


def _attrs(node: ir.Node) -> tuple[int, bool]:
    return node.attributes.get_int("axis", 0), node.attributes.get_int("new_axis", 0) == 1


def _normalized_axis(axis: int, element_rank: int | None, new_axis: bool) -> int | None:
    if element_rank is None:
        return None
    rank = element_rank + (1 if new_axis else 0)
    return axis % rank if -rank <= axis < rank else None


def _check_known(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = ctx.known_elements(node.inputs[0])
    if not isinstance(elements, Refusal):
        return never_empty(node, elements, "concatenates", ctx) or elements
    return elements


def _check_undo_split(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = _check_known(node, ctx)
    if isinstance(elements, Refusal):
        return elements
    source = split_source(elements, ctx.facts.values)
    if source is None:
        return Refusal("the elements are not the chunks of one Split")
    axis, new_axis = _attrs(node)
    rank = len(source.data.shape) - (1 if source.squeezed else 0)  # type: ignore[arg-type]
    if new_axis != source.squeezed or _normalized_axis(axis, rank, new_axis) != source.axis:
        return Refusal("the concatenation does not undo the split (different axis or form)")
    return source.data


def _undo_split(node: ir.Node, data: ir.Value, ctx: Context) -> None:
    """ConcatFromSequence(SequenceConstruct(Split(x, axis=a)...), axis=a) -> x"""
    ctx.rewriter.replace(node.outputs[0], data)


def _concat_known(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """ConcatFromSequence(SequenceConstruct(e0..en), axis=a, new_axis=k)
    -> Concat(e0..en, axis=a)  or, with new_axis=1, Concat(Unsqueeze(e, a)..., axis=a)"""
    axis, new_axis = _attrs(node)
    builder = ctx.rewriter.before(node)
    target = _stacked_target(elements, axis) if new_axis and len(elements) > 1 else None
    if target is not None:
        rank = len(target) - 1
        joined = builder.op("Concat", list(elements), {"axis": axis % (rank + 1)})
        result = builder.op("Reshape", [joined, builder.ints(target, "stacked_shape")])
        result.type = node.outputs[0].type
        ctx.rewriter.replace(node.outputs[0], result)
        return
    parts = [builder.unsqueeze(e, [axis]) for e in elements] if new_axis else list(elements)
    result = builder.op("Concat", parts, {"axis": axis})
    result.type = node.outputs[0].type
    result.shape = _joined_shape(parts, axis)
    ctx.rewriter.replace(node.outputs[0], result)


def _joined_shape(parts: list[ir.Value], axis: int) -> ir.Shape | None:
    """The shape of the Concat of `parts` along `axis` when every part's is static (as ONNX
    inference gives it: the parts' dims, summed along the axis), else None. Known at once, the
    SplitToSequence that reads the result is lowered in the same sweep."""
    shapes = [part.shape for part in parts]
    first = shapes[0]
    if first is None or not -len(first) <= axis < len(first):
        return None
    dims = list(first)
    for shape in shapes:
        if shape is None or len(shape) != len(dims) or not all(type(d) is int for d in shape):
            return None
    axis %= len(dims)
    if any(shape[i] != dims[i] for shape in shapes for i in range(len(dims)) if i != axis):
        return None
    dims[axis] = sum(shape[axis] for shape in shapes)
    return ir.Shape(dims)


def _stacked_target(elements, axis: int) -> list[int] | None:  # type: ignore[no-untyped-def]
    """The constant Reshape target that stacks `elements` joined along `axis` (the stack's
    axis, in [-r-1, r]), or None: the elements must have one shape for certain, with at most
    one dim from the axis on that is not a number (it becomes -1), and none that is 0; with a
    -1, every dim before the axis a number above 0 (a dim of 0, copied, would leave -1 to
    any size: onnxruntime's Reshape fails on it)."""
    shapes = [e.shape for e in elements]
    first = shapes[0]
    if first is None or any(s is None or len(s) != len(first) for s in shapes):
        return None
    for dims in zip(*shapes):
        if not all(same_dim(dims[0], d) for d in dims[1:]):
            return None
    rank = len(first)
    if not -rank - 1 <= axis <= rank:
        return None
    axis %= rank + 1
    if axis == rank:
        return None  # along a new last axis the elements interleave: not a Concat's order
    tail = [d if isinstance(d, int) else -1 for d in list(first)[axis:]]
    if tail.count(-1) > 1 or 0 in tail:  # a 0 would copy a dim of the joined tensor
        return None
    head = list(first)[:axis]
    if -1 in tail and not all(isinstance(d, int) and d > 0 for d in head):
        return None  # a copied dim of 0 at run time leaves -1 undetermined: Reshape fails
    return [0] * axis + [len(elements), *tail]


def _check_of_split(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    split = _producer(node.inputs[0], "SplitToSequence")
    if split is None:
        return Refusal("the sequence does not come from SplitToSequence")
    data = split.inputs[0]
    if data is None or data.shape is None:
        return Refusal("the rank of the split input is unknown")
    rank = len(data.shape)
    has_split = len(split.inputs) > 1 and split.inputs[1] is not None
    squeezed = not has_split and split.attributes.get_int("keepdims", 1) == 0
    axis, new_axis = _attrs(node)
    split_axis = split.attributes.get_int("axis", 0) % rank
    if new_axis != squeezed or _normalized_axis(axis, rank - squeezed, new_axis) != split_axis:
        return Refusal("the concatenation does not undo the split (different axis or form)")
    return data


def _of_split(node: ir.Node, data: ir.Value, ctx: Context) -> None:
    """ConcatFromSequence(SplitToSequence(x, axis=a, keepdims=k), axis=a, new_axis=1-k) -> x"""
    ctx.rewriter.replace(node.outputs[0], data)


RULES = RuleSet(
    [
        Rule("concat-undoes-split", "ConcatFromSequence", _check_undo_split, _undo_split),
        Rule("concat-of-split-to-sequence", "ConcatFromSequence", _check_of_split, _of_split),
        Rule("concat-known", "ConcatFromSequence", _check_known, _concat_known),
    ]
)
