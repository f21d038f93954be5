"""Single dims known before running, where shape inference leaves the value without a shape.

TorchScript exports `x.squeeze(-1)` of a tensor whose shape it does not know as

    c = Equal(Gather(Shape(x), [-1]), [1])
    y = If(c) { Squeeze(x, [-1]) } else { Identity(x) }

whose branches differ in rank, so the If's rank is unknown, and so is the rank of everything
computed from it (in a Loop, of the state it feeds back). Often the dim is known from how x is
made, whatever x's other dims: ArgMax with keepdims gives 1 on its axis, GatherElements keeps
its indices' shape (`si.gather(-1, p.argmax(-1, keepdim=True))`). `known_dim` answers for one
dim from the producer's operator; `decided` answers such a condition, so that only the branch
that runs gives the If its rank.

    known_dim(ArgMax<axis=-1, keepdims=1>(t), -1)          -> 1
    decided(Equal(Gather(Shape(GatherElements(d, that)), [-1]), [1]))   -> True
"""

from __future__ import annotations

__all__ = ["decided", "known_dim"]

from collections.abc import Callable

import onnx_ir as ir

from seqlower.analysis.shape_rules import SAME_SHAPE_OPS
from seqlower.analysis.static_values import StaticValues

_MAX_DEPTH = 32  # producers followed for one dim


RankOf = Callable[[ir.Value], "int | None"]


def known_dim(
    value: ir.Value | None, axis: int, rank_of: RankOf, values: StaticValues, depth: int = 0
) -> int | None:
    """Dim `axis` (negative: from the end) of `value` when its producer fixes it; else None.
    `rank_of` gives a value's rank where known (to compare a negative axis with a positive)."""
    if value is None or depth > _MAX_DEPTH:
        return None
    if value.shape is not None and -len(value.shape) <= axis < len(value.shape):
        dim = value.shape[axis]
        if isinstance(dim, int):
            return dim
    node = value.producer()
    if node is None or node.domain != "":
        return None
    op = node.op_type
    if op in SAME_SHAPE_OPS or op == "GatherElements":
        source = node.inputs[1] if op == "GatherElements" else node.inputs[0]
        return known_dim(source, axis, rank_of, values, depth + 1)
    if op in ("ArgMax", "ArgMin") and node.attributes.get_int("keepdims", 1) == 1:
        reduced = node.attributes.get_int("axis", 0)
        return 1 if _same_axis(reduced, axis, value, rank_of) else None
    return None


def _same_axis(a: int, b: int, value: ir.Value, rank_of: RankOf) -> bool:
    """Whether axes `a` and `b` of `value` are one axis (of either sign)."""
    if (a < 0) == (b < 0):
        return a == b
    rank = rank_of(value)
    return rank is not None and a % rank == b % rank


def decided(condition: ir.Value | None, rank_of: RankOf, values: StaticValues) -> bool | None:
    """The value of `condition` when it is `Equal(Gather(Shape(x), k), c)` (either order, k
    and c constants of one element) and dim k of x is known; else None."""
    node = condition.producer() if condition is not None else None
    if node is None or node.op_type != "Equal" or node.domain != "" or len(node.inputs) != 2:
        return None
    for read, constant in (node.inputs, reversed(node.inputs)):
        size = _read_dim(read, rank_of, values)
        wanted = values.get(constant)
        if size is not None and wanted is not None and wanted.size == 1:
            return bool(size == int(wanted.reshape(())))
    return None


def _read_dim(value: ir.Value | None, rank_of: RankOf, values: StaticValues) -> int | None:
    """The dim `Gather(Shape(x), k)` reads, when known."""
    gather = value.producer() if value is not None else None
    if gather is None or gather.op_type != "Gather" or gather.domain != "":
        return None
    index = values.get(gather.inputs[1])
    shape = gather.inputs[0].producer() if gather.inputs[0] is not None else None
    if index is None or index.size != 1 or shape is None or shape.op_type != "Shape":
        return None
    if shape.domain != "" or "start" in shape.attributes or "end" in shape.attributes:
        return None
    return known_dim(shape.inputs[0], int(index.reshape(())), rank_of, values)
