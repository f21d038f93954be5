"""The mean of a chunk that nothing reads where the chunk is empty: divided by its size alone.

The masked mean of a chunk divides its sum by Max(size, 1), so that an empty chunk's mean is 0
(what onnxruntime gives; the specification leaves it undefined). Where every value computed
from the mean is read only through the chunk's own mask (a Where that keeps the masked value
and fills the rest, or the Compress that joins the chunks back), an empty chunk's mean is
never read: each of its slots is filled or dropped. The clamp then goes:

    Div(sum, Cast(Reshape(Max(sizes, 1), ..)))  ->  Div(sum, Cast(Reshape(sizes, ..)))
        (0 / 0 = NaN at an empty chunk, only in slots its mask leaves out)

`drop_unread_clamps` runs once the batched loop is emitted and joined, and walks each mean's
uses: elementwise operators on through, the mask's Where and Compress stop; anything else (a
mean stacked as it is, a value read through another chunk's mask, a graph output) keeps the
clamp.
"""

from __future__ import annotations

__all__ = ["ClampedMean", "drop_unread_clamps"]

import dataclasses

import onnx_ir as ir

from seqlower.rewriter import Rewriter

# position by position, with operands broadcast: a chunk's slots stay the chunk's slots
_ELEMENTWISE = frozenset(
    {"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Relu", "Exp", "Sqrt", "Pow", "Sigmoid", "Tanh"}
)


@dataclasses.dataclass(frozen=True)
class ClampedMean:
    """A masked mean `mean` [N, 1.., 1 at the axis, ..], dividing by `clamped` =
    Max(`sizes`, 1), of chunks held with `mask` [N, 1.., m, 1..]."""

    mean: ir.Value
    clamped: ir.Value
    sizes: ir.Value
    mask: ir.Value


def drop_unread_clamps(clamps: list[ClampedMean], rewriter: Rewriter) -> None:
    """Divide each of `clamps` by its sizes alone where nothing reads it but through its mask."""
    for clamp in clamps:
        if _read_through_mask_only(clamp.mean, clamp.mask):
            rewriter.replace(clamp.clamped, clamp.sizes)


def _read_through_mask_only(mean: ir.Value, mask: ir.Value) -> bool:
    seen, pending = {mean}, [mean]
    while pending:
        value = pending.pop()
        if value.is_graph_output():
            return False
        for use in value.uses():
            node, index = use.node, use.idx
            if node.op_type == "Where" and index == 1 and node.inputs[0] is mask:
                continue  # kept where the mask holds, filled elsewhere
            if node.op_type == "Reshape" and index == 0 and _joined_by(node.outputs[0], mask):
                continue  # flattened for the Compress by the flattened mask
            if node.op_type not in _ELEMENTWISE or node.domain not in ("", "ai.onnx"):
                return False
            for output in node.outputs:
                if output not in seen:
                    seen.add(output)
                    pending.append(output)
    return True


def _joined_by(value: ir.Value, mask: ir.Value) -> bool:
    """Whether `value` is read only by Compress(value, Reshape(mask, [-1]), axis=0)."""
    uses = list(value.uses())
    for use in uses:
        node = use.node
        axis = node.attributes.get_int("axis", None)
        if node.op_type != "Compress" or use.idx != 0 or axis != 0 or value.is_graph_output():
            return False
        positions = node.inputs[1]
        producer = None if positions is None else positions.producer()
        if producer is None or producer.op_type != "Reshape" or producer.inputs[0] is not mask:
            return False
    return bool(uses)
