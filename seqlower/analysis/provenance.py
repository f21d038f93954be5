"""Where a list of element values came from, to undo a split instead of re-stacking it.

After SplitToSequence(x) is lowered, its elements are the outputs of one Split of x (each
squeezed on the split axis when keepdims=0). Concatenating or stacking those elements again,
or gathering one of them at a run-time position, can read x itself.
"""

from __future__ import annotations

__all__ = ["SplitSource", "split_source"]

import dataclasses
from collections.abc import Sequence

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues


@dataclasses.dataclass(frozen=True)
class SplitSource:
    """The elements are every chunk of `data` along `axis`, in order.

    When `squeezed`, every chunk had size 1 and was squeezed: stacking them on `axis` gives
    `data`. Otherwise concatenating them on `axis` gives `data`.
    """

    data: ir.Value
    axis: int
    squeezed: bool


def split_source(elements: Sequence[ir.Value], values: StaticValues) -> SplitSource | None:
    """The Split the elements came from, if they are all its chunks in order."""
    if not elements:
        return None
    peeled = [_peel_squeeze(element, values) for element in elements]
    chunks = [chunk for chunk, _ in peeled]
    squeeze_axes = {axis for _, axis in peeled}
    split = chunks[0].producer()
    if split is None or split.op_type != "Split" or split.domain != "":
        return None
    if list(split.outputs) != chunks or len(squeeze_axes) != 1:
        return None
    data = split.inputs[0]
    if data is None or data.shape is None:
        return None
    rank = len(data.shape)
    axis = split.attributes.get_int("axis", 0) % rank
    (squeeze_axis,) = squeeze_axes
    if squeeze_axis is _NOT_SQUEEZED:
        return SplitSource(data, axis, squeezed=False)
    if isinstance(squeeze_axis, int) and squeeze_axis % rank == axis:
        return SplitSource(data, axis, squeezed=True)
    return None


_NOT_SQUEEZED = "not squeezed"


def _peel_squeeze(element: ir.Value, values: StaticValues) -> tuple[ir.Value, object]:
    """(the value under a Squeeze, its single axis) or (element, _NOT_SQUEEZED)."""
    producer = element.producer()
    if producer is None or producer.op_type != "Squeeze" or producer.domain != "":
        return element, _NOT_SQUEEZED
    return producer.inputs[0], _single_axis(producer, values)  # type: ignore[return-value]


def _single_axis(squeeze: ir.Node, values: StaticValues) -> int | None:
    if len(squeeze.inputs) > 1 and squeeze.inputs[1] is not None:
        axes = values.get_ints(squeeze.inputs[1])
    else:
        found = squeeze.attributes.get_ints("axes")
        axes = None if found is None else list(found)
    return axes[0] if axes is not None and len(axes) == 1 else None
