"""A read at a constant index of a stack is the value that was stacked there.

    u0 = Unsqueeze(y0, [a]) .. un = Unsqueeze(yn, [a])
    s = Concat(u0, .., un, axis=a)
    g = Gather(s, k, axis=a)          (k a constant scalar)   ->   g's readers read yk

TorchScript writes `torch.stack((x1, y1, x2, y2), dim=1)` as one Unsqueeze per part and a Concat,
and `boxes[:, 2] - boxes[:, 0]` right after it as Gathers at constant indices of the stack:
torchvision's box clipping, `remove_small_boxes` and box areas all do it, in every iteration of a
per-image loop. onnxruntime runs those Gathers (as a Split and one Squeeze per part) although the
values they give were computed just before. A part need not be an Unsqueeze: a part whose size
along the axis is a known number only moves the parts after it; the part that holds entry k must
be an Unsqueeze on the same axis, and its input is what the Gather gives (same dtype, same
shape). A negative k counts from the end (all sizes known); an index out of range stays (the
Gather fails at run time, as it must).

The Concat fails where its parts differ in shape beyond the axis; removing its last reader would
remove that failure, so the Gather is folded only while the Concat keeps another reader (one
that is not a Gather, or a graph output), or where every part's shape is known to be the same.
The Gather's output, when an output of its graph, stays computed.
"""

from __future__ import annotations

__all__ = ["fold_stacked_reads"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.passes.forwarding import forward_unchanged

_INT64_MAX = 9223372036854775807


def fold_stacked_reads(model: ir.Model) -> int:
    """Replace every read at a constant index of a stack by the stacked value (module
    docstring); returns how many."""
    return forward_unchanged(model, _stacked_part)


def _stacked_part(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """The value `node` reads unchanged, when it is a Gather at a constant index of a stack."""
    if node.op_type != "Gather" or node.domain != "" or len(node.inputs) != 2:
        return None
    if node.outputs[0].is_graph_output():
        return None
    read, index = node.inputs
    stack = _through_whole_slices(read, values)
    concat = stack.producer() if stack is not None else None
    if concat is None or concat.op_type != "Concat" or concat.domain != "" or not concat.inputs:
        return None
    k = values.get(index)
    if k is None or k.ndim != 0 or k.dtype.kind not in "iu":
        return None
    rank = _rank(stack, concat)
    axis = _axis(_int_attr(concat, "axis", None), rank)
    if axis is None or axis != _axis(_int_attr(node, "axis", 0), rank):
        return None
    sizes: list[int] = []
    stacked: list[ir.Value | None] = []
    for part in concat.inputs:
        if part is None:
            return None
        source = _unsqueezed(part, axis, rank, values)
        if source is not None:
            sizes.append(1)
            stacked.append(source)
            continue
        size = _static_dim(part, axis)
        if size is None:
            return None
        sizes.append(size)
        stacked.append(None)
    position = int(k)
    total = sum(sizes)
    if position < 0:
        position += total
    if not 0 <= position < total:
        return None
    for size, source in zip(sizes, stacked, strict=True):
        if position < size:
            if source is None or not _failure_kept(stack, concat, values):
                return None
            return source
        position -= size
    return None


def _through_whole_slices(value: ir.Value | None, values: StaticValues) -> ir.Value | None:
    """`value`, or what it copies whole: TorchScript's `x[:, 2]` is `Slice(x, [0], [INT64_MAX],
    [0], [1])` (every row) before the Gather."""
    while value is not None and _whole_slice(value.producer(), values):
        value = value.producer().inputs[0]
    return value


def _whole_slice(node: ir.Node | None, values: StaticValues) -> bool:
    """Whether `node` is a Slice that keeps every entry: starts 0, ends the largest int64,
    steps 1 (or none) on every axis it names."""
    if node is None or node.op_type != "Slice" or node.domain != "" or len(node.inputs) < 3:
        return False
    if any(v is None for v in node.inputs[:3]):
        return False
    starts = values.get_ints(node.inputs[1])
    ends = values.get_ints(node.inputs[2])
    steps = values.get_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] else None
    if starts is None or ends is None or len(starts) != len(ends):
        return False
    if len(node.inputs) > 4 and node.inputs[4] is not None and steps is None:
        return False
    if len(node.inputs) > 3 and node.inputs[3] is not None:
        axes = values.get_ints(node.inputs[3])
        if axes is None or len(axes) != len(starts):
            return False
    return (
        all(s == 0 for s in starts)
        and all(e == _INT64_MAX for e in ends)
        and (steps is None or all(s == 1 for s in steps))
    )


def _rank(stack: ir.Value, concat: ir.Node) -> int | None:
    """The rank of the stack, from its shape or from any part's (parts share a rank)."""
    for value in (stack, *concat.inputs):
        if value is not None and value.shape is not None:
            return len(value.shape)
    return None


def _axis(axis: int | None, rank: int | None) -> int | None:
    """`axis` counted from the front, or None where it cannot be (a negative axis of an unknown
    rank, or out of range)."""
    if axis is None:
        return None
    if axis < 0:
        if rank is None:
            return None
        axis += rank
    if axis < 0 or (rank is not None and axis >= rank):
        return None
    return axis


def _int_attr(node: ir.Node, name: str, default: int | None) -> int | None:
    attr = node.attributes.get(name)
    if attr is None:
        return default
    if attr.type != ir.AttributeType.INT:
        return None
    return int(attr.value)


def _unsqueezed(
    part: ir.Value, axis: int, rank: int | None, values: StaticValues
) -> ir.Value | None:
    """The input of `part` when `part` is an Unsqueeze of one axis, `axis`."""
    node = part.producer()
    if node is None or node.op_type != "Unsqueeze" or node.domain != "" or not node.inputs:
        return None
    if len(node.inputs) >= 2:  # opset 13 on: the axes are an input
        axes = values.get_ints(node.inputs[1]) if len(node.inputs) == 2 else None
    else:
        attr = node.attributes.get("axes")
        axes = list(attr.value) if attr is not None and attr.type == ir.AttributeType.INTS else None
    if axes is None or len(axes) != 1 or _axis(int(axes[0]), rank) != axis:
        return None
    return node.inputs[0]


def _read_beyond_gathers(value: ir.Value, values: StaticValues) -> bool:
    if value.is_graph_output():
        return True
    for user, _ in value.uses():
        if _whole_slice(user, values) and user.inputs[0] is value:
            if _read_beyond_gathers(user.outputs[0], values):
                return True
        elif user.op_type != "Gather" or user.domain != "":
            return True
    return False


def _static_dim(part: ir.Value, axis: int) -> int | None:
    shape = part.shape
    if shape is None or axis >= len(shape):
        return None
    dim = shape[axis]
    return dim if isinstance(dim, int) else None


def _failure_kept(stack: ir.Value, concat: ir.Node, values: StaticValues) -> bool:
    """Whether the Concat still runs (and fails where its parts do not fit) once Gathers read
    past it, or cannot fail: another reader that is not a Gather (nor a whole Slice read only
    by Gathers), a graph output, or parts of one fully known shape."""
    if _read_beyond_gathers(stack, values):
        return True
    shapes = [part.shape for part in concat.inputs if part is not None]
    if not shapes or any(s is None or not all(isinstance(d, int) for d in s) for s in shapes):
        return False
    return all(tuple(s) == tuple(shapes[0]) for s in shapes)
