"""A dim read from a whole Shape, where the graph reads the same dim as a Shape of one entry,
is read from that Shape too.

    s = Shape(x)
    n = Gather(s, k)                ->    n = Squeeze(Shape(x, start=k, end=k + 1), [0])
    d = Shape(x, start=k, end=k + 1)      (d elsewhere in the graph)

(the new Shape takes the start and end as d writes them: `start=-1, end=2` of a rank-2 x is
dim 1, and written alike the two Shapes are merged)

Lowering reads a dim both ways (a batched loop's `Shape(x, 1, 2)`, the export's own
`x.size(1)` as `Gather(Shape(x), 1)`); read one way, the merge of duplicates joins them and
one Shape and a Squeeze run where two Shapes, a Squeeze and a Gather ran. Exact where k is a
constant scalar within x's declared rank (0 <= k < rank, or -rank <= k < 0 taken as k + rank):
the Gather then gives the scalar dim k, as the Squeeze of the one-entry Shape does, and neither
can fail. Only where such a Shape of x exists in the same graph (else two kernels replace two),
and not where the Gather's output is a graph output. The new Shape and Squeeze go before the
Gather, so they precede its readers; the merge then joins the Shapes, whichever comes first.
"""

from __future__ import annotations

__all__ = ["read_dims_alike"]

import numpy as np
import onnx_ir as ir

from seqlower.ops import constant_tensor, graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream


def read_dims_alike(model: ir.Model) -> int:
    """Make every Gather of a whole Shape read the dim as the graph's Shapes of one entry do
    (module docstring); returns how many."""
    replaced: list[ir.Node] = []
    for graph in list(iter_all_graphs(model)):
        entries = _one_entry_shapes(graph)
        for node in list(graph_nodes(graph)):
            found = _dim_read(node, entries)
            if found is None:
                continue
            x, (start, end) = found
            shape = ir.node("Shape", [x], {"start": start, "end": end})
            axes = ir.node("Constant", [], {"value": ir.tensor(np.array([0], dtype=np.int64))})
            squeeze = ir.node("Squeeze", [shape.outputs[0], axes.outputs[0]])
            graph.insert_before(node, [shape, axes, squeeze])
            squeeze.outputs[0].dtype = ir.DataType.INT64
            squeeze.outputs[0].shape = ir.Shape([])
            shape.outputs[0].dtype = ir.DataType.INT64
            shape.outputs[0].shape = ir.Shape([1])
            axes.outputs[0].dtype = ir.DataType.INT64  # declared now, as a second run finds it
            axes.outputs[0].shape = ir.Shape([1])
            node.outputs[0].replace_all_uses_with(squeeze.outputs[0])
            replaced.append(node)
    if replaced:
        remove_dead_upstream(replaced)
    return len(replaced)


def _one_entry_shapes(graph: ir.Graph) -> dict[tuple[int, int], tuple[int, int]]:
    """(id of x, k) -> (start, end) as written, for each Shape(x, start, end) of `graph` that
    keeps dim k of x alone (k not negative; the first such Shape)."""
    found: dict[tuple[int, int], tuple[int, int]] = {}
    for node in graph_nodes(graph):
        if node.op_type != "Shape" or node.domain != "" or len(node.inputs) != 1:
            continue
        x = node.inputs[0]
        start, end = node.attributes.get("start"), node.attributes.get("end")
        if x is None or start is None or end is None or x.shape is None:
            continue
        rank = x.shape.rank()
        first, last = start.as_int(), end.as_int()
        first = first + rank if first < 0 else first
        last = last + rank if last < 0 else last
        if 0 <= first < rank and last == first + 1:
            found.setdefault((id(x), first), (start.as_int(), end.as_int()))
    return found


def _dim_read(
    node: ir.Node, entries: dict[tuple[int, int], tuple[int, int]]
) -> tuple[ir.Value, tuple[int, int]] | None:
    """(x, the start and end that read its dim k), when `node` is Gather(Shape(x), k) of a dim
    `entries` holds."""
    if node.op_type != "Gather" or node.domain != "" or len(node.inputs) != 2:
        return None
    if node.outputs[0].is_graph_output() or node.attributes.get_int("axis", 0) != 0:
        return None
    data, index = node.inputs
    shape = data.producer() if data is not None else None
    if shape is None or shape.op_type != "Shape" or shape.domain != "":
        return None
    if "start" in shape.attributes or "end" in shape.attributes or len(shape.inputs) != 1:
        return None
    x = shape.inputs[0]
    tensor = constant_tensor(index) if index is not None else None
    if x is None or x.shape is None or tensor is None:
        return None
    array = tensor.numpy()
    if array.shape != () or array.dtype not in (np.int64, np.int32):
        return None
    rank = x.shape.rank()
    k = int(array)
    k = k + rank if k < 0 else k
    if not 0 <= k < rank or (id(x), k) not in entries:
        return None
    return x, entries[id(x), k]
