"""The Shape of an Expand that can only broadcast its input to its target is the target.

    e = Expand(z, s)          (z: float[1, 0, 6]; s = Concat(n, [0, 6]), n never negative)
    d = Shape(e)        ->    d = s

Lowering holds a list of n copies of one tensor as `Expand(Unsqueeze(z, 0), Concat(n, dims))`
(`[torch.zeros(0, 6)] * n`) and reads the count back from that tensor's Shape: the Expand runs
for its shape alone once its data is read no more (a merge into an empty tensor folded away).
Exact where proved: Expand broadcasts z to s, aligned on the last axis; where z's declared dim
is 1 the result's dim is s's entry there (0 included), where it is a number equal to s's entry
(proved, `seqlower.analysis.vector_elements`) it is that number, and s's leading entries beyond
z's rank are the result's. s is proved never negative (`seqlower.lists.signs`), so the Expand
cannot fail (an entry that is neither 1 nor z's dim fails it, so each entry is proved one of
those), and its shape is s, entry by entry. A Shape with start or end is not folded.

The readers of the Shape read s; the Expand goes where nothing else reads it. Not where the
Shape's output is a graph output.
"""

from __future__ import annotations

__all__ = ["fold_expanded_shapes"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.analysis.vector_elements import vector_elements
from seqlower.lists.signs import never_negative
from seqlower.passes.forwarding import forward_unchanged


def fold_expanded_shapes(model: ir.Model) -> int:
    """Make every Shape of an Expand that only broadcasts read the Expand's target (module
    docstring); returns how many."""
    return forward_unchanged(model, _expanded_target)


def _expanded_target(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """The target s, when `node` is Shape(Expand(z, s)) and the Expand's shape is s."""
    if node.op_type != "Shape" or node.domain != "" or len(node.inputs) != 1:
        return None
    if "start" in node.attributes or "end" in node.attributes:
        return None
    if node.outputs[0].is_graph_output():
        return None
    expand = node.inputs[0].producer() if node.inputs[0] is not None else None
    if expand is None or expand.op_type != "Expand" or expand.domain != "":
        return None
    if len(expand.inputs) != 2 or expand.inputs[0] is None or expand.inputs[1] is None:
        return None
    source, target = expand.inputs
    if source.shape is None or target.dtype != ir.DataType.INT64:
        return None
    elements = vector_elements(target, values)
    if elements is None or len(elements) < source.shape.rank():
        return None
    aligned = elements[len(elements) - source.shape.rank() :]
    for dim, element in zip(source.shape, aligned):
        if not isinstance(dim, int):
            return None
        if dim != 1 and dim != element:
            return None
    if not never_negative(target, values):
        return None
    return target
