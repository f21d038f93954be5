"""Batching rules for ops that make or move a ragged value, or read its lengths.

A ragged value (`Operand.ragged_axis`) is held padded, with the mask [N, 1.., d, 1..] of the
positions each element holds along its ragged axis (`Emitter.masks`); the held positions need
not be contiguous.

    NonZero(x), x of rank 1 ([d])        -> the positions [N, 1, d] (Range(0, d) for every
                                            element), ragged along axis 1, mask x != 0
    NonZero(x), x of static shape S      -> the coordinates [N, r, prod(S)] of every position,
                                            mask Reshape(x != 0, [N, 1, prod(S)])
    Transpose / Squeeze / Unsqueeze(v)   -> the same op on V and on its mask (the ragged axis
                                            moves with the permutation; it is never squeezed)
    Shape(v)                             -> the padded dims, with the count of held positions
                                            ReduceSum(mask) along the ragged axis (per element)
    Size(v)                              -> ReduceProd of that (the count times the product of
                                            the other dims, when they are static)
    Gather(v, i, axis = ragged axis), i a constant scalar
        -> GatherElements(V, the position of the i-th held one (-1: the last)), the position
           out of range where an element holds i or fewer: it fails there as Gather does; the
           position is [N, 1] as found for an element of rank 1 (mask and V are both [N, d]),
           and Expanded along the other element axes (where the mask has 1) otherwise

Only the first input of each is ragged; everything else they read is the same for every element.
"""

from __future__ import annotations

__all__ = ["RAGGED_RULES", "makes_ragged"]

import numpy as np
import onnx_ir as ir

from seqlower.batching.core import Batched, Emitter, OpRule, OpView, normalize_axis
from seqlower.rule import Refusal


def makes_ragged(view: OpView) -> bool:
    """Whether `view`'s op gives a ragged value from plain ones (NonZero of a batched value)."""
    return view.op_type == "NonZero" and view.batched(0)


def _nonzero(view: OpView) -> Batched | Refusal:
    operand = view.operand(0)
    if operand.ragged_axis is not None:
        return Refusal("NonZero of a value whose size differs per element")
    if operand.shape is None or len(operand.shape) == 0:
        return Refusal("NonZero of an element of unknown rank or of rank 0")
    dtype = view.node.inputs[0].dtype  # type: ignore[union-attr]
    if dtype is None or dtype == ir.DataType.STRING:
        return Refusal("NonZero of strings or of an unknown element type")
    rank = len(operand.shape)
    static = operand.static_shape
    if rank > 1 and static is None:
        return Refusal("NonZero of an element of rank above 1 whose dims are not all static")
    positions = int(np.prod(static)) if static is not None else None
    padded = ir.Shape([rank, positions if positions is not None else operand.shape[0]])
    result = view.node.outputs[0]

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data = inputs[0]
        assert data is not None
        held = data
        if dtype != ir.DataType.BOOL:
            zero = em.scalar(np.zeros((), dtype.numpy()))
            held = em.op("Not", [em.op("Equal", [data, zero])])
        if rank == 1:
            mask = em.unsqueeze(held, [1])  # [N, 1, d]
            dim = em.squeeze(em.dims(data, 1, 2), [0])
            zero, one = em.scalar(np.array(0, np.int64)), em.scalar(np.array(1, np.int64))
            coordinates = em.unsqueeze(em.op("Range", [zero, dim, one]), [0, 1])  # [1, 1, d]
        else:
            assert static is not None and positions is not None
            target = em.op("Concat", [em.count(), em.ints([1, positions])], {"axis": 0})
            mask = em.reshape(held, target)
            table = np.indices(static, dtype=np.int64).reshape(1, rank, positions)
            coordinates = em.scalar(table)
        em.masks[result] = mask
        full = em.op("Concat", [em.count(), em.ints([rank]), em.dims(mask, 2, 3)], {"axis": 0})
        return [em.op("Expand", [coordinates, full])]

    return Batched(emit, ragged_axis=1, ragged_shape=padded)


def _moved(view: OpView) -> Batched | Refusal:
    """Transpose, Squeeze, Unsqueeze of a ragged value: the plain rule on the padded value, the
    same op on the mask, and the ragged axis where the op puts it."""
    from seqlower.batching.ops import OP_RULES

    operand = view.operand(0)
    axis, shape = operand.ragged_axis, operand.shape
    assert axis is not None and shape is not None
    rank = len(shape)
    for index in range(1, len(view.operands)):
        if view.batched(index):
            return Refusal(f"input {index} of {view.op_type} differs per element")
    if view.op_type == "Transpose":
        perm = view.attr_ints("perm") or list(reversed(range(rank)))
        if sorted(perm) != list(range(rank)):
            return Refusal(f"perm {perm} is not a permutation of the element axes")
        moved, dims = perm.index(axis), [shape[p] for p in perm]
    else:
        axes = view.static_ints(1) if view.present(1) else view.attr_ints("axes")
        if not axes:
            return Refusal(f"{view.op_type} of a ragged value without constant axes")
        out_rank = rank - len(axes) if view.op_type == "Squeeze" else rank + len(axes)
        normalized = [
            normalize_axis(a, rank if view.op_type == "Squeeze" else out_rank) for a in axes
        ]
        if None in normalized or len(set(normalized)) != len(axes):
            return Refusal(f"axes {axes} are invalid for rank {rank}")
        if view.op_type == "Squeeze":
            if axis in normalized:
                return Refusal("Squeeze of the axis whose size differs per element")
            moved = axis - sum(1 for a in normalized if a < axis)  # type: ignore[operator]
            dims = [d for i, d in enumerate(shape) if i not in normalized]
        else:
            kept = [i for i in range(out_rank) if i not in normalized]
            moved = kept[axis]
            dims = [1] * out_rank
            for position, dim in zip(kept, shape):
                dims[position] = dim
    plain = OP_RULES[view.op_type](view)
    if isinstance(plain, Refusal):
        return plain
    source, result = view.node.inputs[0], view.node.outputs[0]

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        mask = em.masks[source]  # type: ignore[index]
        if view.op_type == "Transpose":
            em.masks[result] = em.transpose(mask, [0, *(p + 1 for p in perm)])
        elif view.op_type == "Squeeze":
            em.masks[result] = em.squeeze(mask, [a + 1 for a in normalized])  # type: ignore[operator]
        else:
            em.masks[result] = em.unsqueeze(mask, [a + 1 for a in normalized])  # type: ignore[operator]
        return plain.emit(em, inputs)

    return Batched(emit, ragged_axis=moved, ragged_shape=ir.Shape(dims))


def _reduce(em: Emitter, op_type: str, data: ir.Value, axes: list[int], keepdims: int) -> ir.Value:
    """A reduction over `axes`, written as the opset takes them (an input from opset 13 for
    ReduceSum, from 18 for the others)."""
    if em.opset >= (13 if op_type == "ReduceSum" else 18):
        return em.op(op_type, [data, em.ints(axes)], {"keepdims": keepdims})
    return em.op(op_type, [data], {"axes": axes, "keepdims": keepdims})


def _counts(em: Emitter, mask: ir.Value, rank: int, keepdims: int) -> ir.Value:
    """How many positions each element holds: ReduceSum of the mask over the element axes."""
    held = em.op("Cast", [mask], {"to": int(ir.DataType.INT64)})
    return _reduce(em, "ReduceSum", held, list(range(1, rank + 1)), keepdims)


def _clamp(index: int, rank: int) -> int:
    index = index + rank if index < 0 else index
    return min(max(index, 0), rank)


def _shape(view: OpView) -> Batched | Refusal:
    operand = view.operand(0)
    axis, shape = operand.ragged_axis, operand.shape
    assert axis is not None and shape is not None
    rank = len(shape)
    start = _clamp(view.attr_int("start", 0), rank)
    end = _clamp(view.attr_int("end", rank), rank)
    source = view.node.inputs[0]
    at_axis = np.arange(rank) == axis
    others = _static_others(shape, axis)

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data = inputs[0]
        assert data is not None
        counts = _counts(em, em.masks[source], rank, 0)  # type: ignore[index]
        if rank == 1:
            dims = em.unsqueeze(counts, [1])
        else:  # the dims off the ragged axis, the same for every element
            padded = em.unsqueeze(em.dims(data, 1), [0]) if others is None else em.ints(others)
            dims = em.op("Where", [em.scalar(at_axis), em.unsqueeze(counts, [1]), padded])
        if (start, end) == (0, rank):
            return [dims]
        return [em.op("Slice", [dims, em.ints([start]), em.ints([end]), em.ints([1])])]

    return Batched(emit)


def _static_others(shape: ir.Shape, axis: int) -> list[int] | None:
    """The element dims with 1 at the ragged axis, when all the others are static."""
    dims = [1 if i == axis else d for i, d in enumerate(shape)]
    return [int(d) for d in dims] if all(isinstance(d, int) for d in dims) else None


def _size(view: OpView) -> Batched | Refusal:
    operand = view.operand(0)
    assert operand.ragged_axis is not None and operand.shape is not None
    others = _static_others(operand.shape, operand.ragged_axis)
    shape = _shape(view)
    assert isinstance(shape, Batched)
    source, rank = view.node.inputs[0], len(operand.shape)

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        if others is None:
            dims = shape.emit(em, inputs)[0]
            return [_reduce(em, "ReduceProd", dims, [1], 0)]
        counts = _counts(em, em.masks[source], rank, 0)  # type: ignore[index]
        product = int(np.prod(others))
        if product == 1:
            return [counts]
        return [em.op("Mul", [counts, em.scalar(np.array(product, np.int64))])]

    return Batched(emit)


def _gather(view: OpView) -> Batched | Refusal:
    operand = view.operand(0)
    axis, shape = operand.ragged_axis, operand.shape
    assert axis is not None and shape is not None
    rank = len(shape)
    if view.batched(1):
        return Refusal("Gather from a ragged value at positions that differ per element")
    gathered = normalize_axis(view.attr_int("axis", 0), rank)
    if gathered != axis:
        return Refusal("Gather from a ragged value along another axis than its ragged one")
    position = view.static_ints(1)
    index_shape = view.operand(1).shape
    if position is None or index_shape is None or len(index_shape) != 0:
        return Refusal("Gather from a ragged value at a position other than a constant scalar")
    (index,) = position
    source = view.node.inputs[0]

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        data = inputs[0]
        assert data is not None
        mask = em.masks[source]  # type: ignore[index]
        held = em.op("Cast", [mask], {"to": int(ir.DataType.INT64)})
        counts = _reduce(em, "ReduceSum", held, [axis + 1], 1)
        if index >= 0:
            present = em.op("Greater", [counts, em.scalar(np.array(index, np.int64))])
        else:
            present = em.op("GreaterOrEqual", [counts, em.scalar(np.array(-index, np.int64))])
        chosen = mask  # the first (or, for -1, the last) held position: ArgMax finds it
        if index not in (0, -1):
            along = em.scalar(np.array(axis + 1, np.int64))
            running = em.op("CumSum", [held, along])  # how many held positions up to here
            wanted = (
                em.scalar(np.array(index + 1, np.int64))
                if index >= 0
                else em.op("Add", [counts, em.scalar(np.array(index + 1, np.int64))])
            )
            chosen = em.op("And", [mask, em.op("Equal", [running, wanted])])
        flags = em.op("Cast", [chosen], {"to": int(ir.DataType.INT32)})
        last = {"select_last_index": 1} if index == -1 else {}
        found = em.op("ArgMax", [flags], {"axis": axis + 1, "keepdims": 1, **last})
        # where an element holds too few positions, one past the end: GatherElements fails
        beyond = em.dims(data, axis + 1, axis + 2)
        place = em.op("Where", [present, found, beyond])
        places = place
        if rank > 1:  # the mask is 1 along the other element axes: the data's dims there
            target = em.op(
                "Concat",
                [em.dims(data, 0, axis + 1), em.ints([1]), em.dims(data, axis + 2)],
                {"axis": 0},
            )
            places = em.op("Expand", [place, target])
        picked = em.op("GatherElements", [data, places], {"axis": axis + 1})
        return [em.squeeze(picked, [axis + 1])]

    return Batched(emit)


RAGGED_RULES: dict[str, OpRule] = {
    "NonZero": _nonzero,
    "Transpose": _moved,
    "Squeeze": _moved,
    "Unsqueeze": _moved,
    "Shape": _shape,
    "Size": _size,
    "Gather": _gather,
}
