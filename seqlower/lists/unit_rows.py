"""Stacked lists whose elements have a dim of one: the list axis takes that dim's place.

PyTorch code keeps dims of one everywhere: `h: [1, H]` states of tree-LSTMs and decoders,
`x[i:i+1]` rows, `unsqueeze(0)` before an append, `[B, 1, V]` decoder steps. Stacked on a new
axis, such a list is `[n, 1, H]`: every push an Unsqueeze and a Concat, and `torch.cat(xs, 0)`
a Reshape. With the list axis in the place of the dim of one (`Layout.unit` = u, a dim of S
that is 1 in every element), the data is S with n at u (`[n, H]`), element i the row
`data[i:i+1]` along u, and (`seqlower.lists.stacked` emits the rest along u as it does along
axis 0):

    SequenceEmpty()               -> ConstantOfShape(S with 0 at u)
    SequenceConstruct(x0..xk)     -> Concat(x0..xk, axis=u)           (one element: x0)
    SequenceInsert(s, x)          -> Concat(data, x, axis=u)          (no Unsqueeze)
    SequenceAt(s, p)              -> Gather(data, [p], axis=u)        (fails outside [-n, n-1];
                                     [p] is made once per position and graph)
    SequenceLength(s)             -> Shape(data)[u]
    SplitToSequence(x, axis=u), chunks of one kept -> x
    ConcatFromSequence(s, axis=u) -> data                             (no Reshape)
    ConcatFromSequence(s, axis=a) -> Reshape(data, S with -1 at a)    (a Transpose first where
                                     the list axis must pass a dim that is not 1 to reach a)
    ConcatFromSequence(s, new_axis=1, axis=u or u + 1) -> Unsqueeze(data, u + 1 or u)
    SequenceInsert(SequenceErase(s, p), x, p)  (`xs[p] = x`, u = 0)
                                  -> ScatterND(data, [[p]], x)

`unit_axis` picks u where a list may take this form, and refuses (the list axis stays a new
axis 0) elements whose dim is not provably one (a dim named by a model input, or unknown, may be
1 at run time only: a Concat along it would not fail where the stack fails), strings (their
reads slice), lists split with the chunk axis squeezed or by sizes, a u > 0 on lists edited at
positions (ScatterND addresses leading axes only), and lists whose reads at run-time positions
(one `[p]` each) outweigh the Unsqueezes and Reshapes the form saves, each weighed by the loops
around it (`LOOP_WEIGHT` per level: a tree-LSTM's list of states, pushed once per node and read
in a loop over the nodes before, keeps a new axis; the children's list it feeds takes the form).
"""

from __future__ import annotations

__all__ = ["concat", "empty_shape", "unit_axis"]

from collections.abc import Callable, Sequence

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.lists.tensors import Layout, TensorList
from seqlower.rewriter import Builder

LOOP_WEIGHT = 16  # iterations assumed per Loop around a node (as `seqlower.cost` assumes)


def unit_axis(
    values: Sequence[ir.Value],
    layout: Layout,
    values_known: StaticValues,
    depth: Callable[[ir.Graph | None], int],
) -> int | None:
    """The axis of the elements' shape S the list axis takes the place of, or None (see the
    module docstring for the refusals). Preferred, in order: the axis a split cuts its chunks
    of one along (the input is the data then), the axis a ConcatFromSequence joins the elements
    along (the data is its result), the first dim of one. `depth(graph)`: how many Loop bodies
    the graph is in."""
    if layout.kind != "stacked" or layout.rank is None or layout.dtype == ir.DataType.STRING:
        return None
    ones = [k for k, d in enumerate(layout.dims) if type(d) is int and d == 1]
    if len(layout.dims) != layout.rank or not ones:
        return None
    split_axis: int | None = None
    saved, edits = 0, 0  # saved: launches the form saves, weighed by the loops around them

    def weight(node: ir.Node) -> int:
        return LOOP_WEIGHT ** depth(node.graph)

    reads: dict[tuple[int, int], int] = {}  # (position, graph) -> weight: one [p] each
    joins: list[tuple[int, int]] = []  # (axis, weight) of each ConcatFromSequence joining them
    stacks: list[tuple[int, int]] = []  # the same for the stacks (new_axis=1)
    for value in values:
        producer = value.producer()
        if producer is not None and producer.domain == "":
            op = producer.op_type
            if op == "SplitToSequence":
                axis = _split_axis(producer, layout.rank)
                if axis is None or axis not in ones or split_axis not in (None, axis):
                    return None
                split_axis = axis
                saved += weight(producer)  # the split is its input: no Unsqueeze
            elif op == "SequenceConstruct":
                saved += sum(x is not None for x in producer.inputs) * weight(producer)
            elif op == "SequenceInsert":
                saved += weight(producer)
                edits += len(producer.inputs) > 2 and producer.inputs[2] is not None
            elif op == "SequenceErase":
                edits += 1
        for use in value.uses():
            reader = use.node
            if reader.domain != "" or use.idx != 0:
                continue
            if reader.op_type == "SequenceAt":
                position = reader.inputs[1]
                if position is not None and values_known.get_int(position) is None:
                    reads[(id(position), id(reader.graph))] = weight(reader)
            elif reader.op_type == "ConcatFromSequence":
                new_axis = reader.attributes.get_int("new_axis", 0) == 1
                axis = reader.attributes.get_int("axis", 0)
                axis += (layout.rank + new_axis) if axis < 0 else 0
                (stacks if new_axis else joins).append((axis, weight(reader)))
    joined = [a for a, _ in joins if a in ones]
    unit = split_axis if split_axis is not None else (joined or ones)[0]
    if unit > 0 and edits:
        return None
    saved += sum(w for a, w in joins if a == unit)
    # a stack on axis 0 was the data itself, and is an Unsqueeze now
    cost = sum(reads.values()) + sum(w for a, w in stacks if a == 0)
    return unit if saved > 0 and saved >= cost else None


def _split_axis(node: ir.Node, rank: int) -> int | None:
    """The axis a SplitToSequence cuts chunks of one along, kept in each chunk; None for a
    split by sizes or one that squeezes the axis."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return None
    if node.attributes.get_int("keepdims", 1) == 0:
        return None
    axis = node.attributes.get_int("axis", 0)
    return axis + rank if axis < 0 else axis


def empty_shape(layout: Layout) -> list[int | str | None]:
    """S with 0 at the unit axis."""
    assert layout.unit is not None
    shape = list(layout.dims)
    shape[layout.unit] = 0
    return shape


def concat(b: Builder, s: TensorList, axis: int, new_axis: bool) -> ir.Value:
    """ConcatFromSequence of a list of unit rows (`axis` >= 0)."""
    data, unit, dims = s.data, s.layout.unit, s.layout.dims
    assert unit is not None
    rank = len(dims)
    if new_axis:
        if axis in (unit, unit + 1):  # the list axis beside the dim of one: n, 1 or 1, n
            return b.unsqueeze(data, [unit + 1 if axis == unit else unit])
        # the list axis at u, the dim of one back beside it, then moved to `axis`
        spread = b.unsqueeze(data, [unit + 1])
        order = [k for k in range(rank + 1) if k != unit]
        order.insert(axis, unit)
        return b.op("Transpose", [spread], {"perm": order}, name="stacked")
    if axis == unit:
        return data
    # the list axis goes just before `axis`, then merges with it; the dim of one stays at u
    order = [k for k in range(rank) if k != unit]
    order.insert(order.index(axis), unit)
    passed = range(axis, unit) if axis < unit else range(unit + 1, axis)
    moved = data
    if any(dims[k] != 1 for k in passed):  # a transpose moves data only past dims not 1
        moved = b.op("Transpose", [data], {"perm": order})
    if all(type(d) is int and d > 0 for k, d in enumerate(dims) if k != axis):
        target = b.ints([-1 if k == axis else d for k, d in enumerate(dims)], "target")  # type: ignore[misc]
        return b.op("Reshape", [moved, target], name="concat")
    # dims known at run time only: the data's dims, n * S[axis] at `axis` and 1 at u
    shape = b.op("Shape", [data])
    pieces = []
    for k in range(rank):
        if k == unit:
            pieces.append(b.ints([1], "one"))
        elif k == axis:
            count = b.op("Slice", [shape, b.ints([unit], "unit"), b.ints([unit + 1], "after")])
            dim = b.op("Slice", [shape, b.ints([k], "axis"), b.ints([k + 1], "after")])
            pieces.append(b.op("Mul", [count, dim], name="merged"))
        else:
            pieces.append(b.op("Slice", [shape, b.ints([k], "axis"), b.ints([k + 1], "after")]))
    target = b.op("Concat", pieces, {"axis": 0}, name="target")
    return b.op("Reshape", [moved, target], {"allowzero": 1}, name="concat")
