"""How a SplitToSequence node cuts its input, when that is known before running the model.

The plan is shared by the analysis (which needs the element count) and the rule that turns the
node into a Split. It encodes design.md trap 1 to 3: a 1-D `split` ignores keepdims, a scalar
split that does not divide the dim leaves a smaller last chunk, zero-size chunks are legal.
"""

from __future__ import annotations

__all__ = ["SplitPlan", "plan_split"]

import dataclasses

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.budget import over_budget


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """Chunk sizes along `axis`, and whether each chunk is squeezed on that axis.

    `sizes` is None when the count is static but the sizes are computed at run time (a 1-D
    `split` input of static length); `runtime_sizes` is then that input.
    """

    axis: int  # normalized, non-negative
    count: int
    sizes: tuple[int, ...] | None
    squeeze: bool
    runtime_sizes: ir.Value | None = None


def plan_split(node: ir.Node, values: StaticValues) -> SplitPlan | str:
    """The plan for a SplitToSequence node, or the reason it cannot be known statically.

    Expects a normalized node (see `seqlower.passes.normalize`): the scalar-split/keepdims=0
    ambiguity of trap 1 has already been resolved into an unambiguous form.
    """
    data = node.inputs[0]
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if data is None or data.shape is None:
        return "the rank of the input is unknown"
    rank = len(data.shape)
    axis = node.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return f"axis {axis} is out of range for rank {rank}"
    axis %= rank
    dim = data.shape[axis]
    keepdims = node.attributes.get_int("keepdims", 1)

    if split is None:
        if not isinstance(dim, int):
            return f"the split count depends on the size of dim {axis}, unknown before run time"
        if (too_many := over_budget(dim, "chunks")) is not None:
            return too_many
        return SplitPlan(axis, dim, (1,) * dim, squeeze=keepdims == 0)

    if split.shape is not None and len(split.shape) == 1:
        sizes = values.get_ints(split)
        if sizes is not None:
            if any(s < 0 for s in sizes) or (isinstance(dim, int) and sum(sizes) != dim):
                return f"split sizes {sizes} do not add up to dim {axis} of size {dim}"
            return SplitPlan(axis, len(sizes), tuple(sizes), squeeze=False)
        length = split.shape[0]
        if isinstance(length, int):
            if (too_many := over_budget(length, "chunks")) is not None:
                return too_many
            return SplitPlan(axis, length, None, squeeze=False, runtime_sizes=split)
        return "the number of split sizes depends on data"

    chunk = values.get_int(split)
    if chunk is None:
        return "the split size is computed at run time, so the split count depends on data"
    if chunk <= 0:
        return f"split size {chunk} is not positive"
    if not isinstance(dim, int):
        return f"the split count depends on the size of dim {axis}, unknown before run time"
    full, rest = divmod(dim, chunk)
    if (too_many := over_budget(full + (rest > 0), "chunks")) is not None:
        return too_many
    sizes = (chunk,) * full + ((rest,) if rest else ())
    return SplitPlan(axis, len(sizes), sizes, squeeze=False)
