"""The length of a vector, read as a scalar from its Shape, is its Size.

    s = Shape(v)                  (v of rank 1; start/end, if any, keep its one dim)
    n = Gather(s, 0)              (or -1; or Reshape(s, []), or Squeeze(s))   ->   n = Size(v)

Lowering reads the length of a list of scalars (`SequenceLength`, `len(xs)` in a loop's trip
count or a bound) as the first dim of the tensor that holds it; TorchScript's `x.size(0)` of a
1-D tensor is `Gather(Shape(x), 0)`. onnxruntime runs the Shape and the read as two kernels;
`Size` is one. Exact: a rank-1 v has shape `[n]`, so Shape gives `[n]` (an int64 vector of one
element), and a Gather of a scalar index 0 or -1 on axis 0, a Reshape to the empty shape and a
Squeeze (of no axes, or of axis 0 or -1) each give the int64 scalar n, none of them can fail;
`Size` gives the number of elements, n, as an int64 scalar, and cannot fail. That holds at
n = 0 too.

The Shape node becomes the Size in place (its output, now a scalar, keeps its name) and the
reads go, their readers reading it: only where every reader of the Shape is such a read (so the
Shape and the reads all go), the Shape's output and no read's output is a graph output, and v's
rank is declared 1 (the cleanup runs this fold only where declared shapes are trusted). Linear:
each Shape's readers are looked at once.
"""

from __future__ import annotations

__all__ = ["fold_vector_lengths"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream


def fold_vector_lengths(model: ir.Model) -> int:
    """Make every Shape of a vector read only as its length a Size (module docstring);
    returns how many reads were folded."""
    folded = 0
    opset = model.opset_imports.get("")
    values = StaticValues(opset, lambda: folded)  # no fold changes a value's content
    bypassed: list[ir.Node] = []  # the reads, read by nothing now: removed at the end
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            reads = _length_reads(node, values, opset)
            if reads is None:
                continue
            length = node.outputs[0]
            node.op_type = "Size"  # in place: the output keeps its name
            node.attributes.clear()
            length.shape = ir.Shape([])
            for read in reads:
                read.outputs[0].replace_all_uses_with(length)
            bypassed.extend(reads)
            folded += len(reads)
    if bypassed:  # with the constants only they read
        remove_dead_upstream(bypassed)
    return folded


def _length_reads(node: ir.Node, values: StaticValues, opset: int | None) -> list[ir.Node] | None:
    """The reads of `node`'s one output as a scalar length, when `node` is a Shape of a
    rank-1 tensor whose every reader is such a read; else None."""
    if node.op_type != "Shape" or node.domain != "" or len(node.inputs) != 1:
        return None
    source, shape = node.inputs[0], node.outputs[0]
    if source is None or not isinstance(source.type, ir.TensorType) or source.shape is None:
        return None
    if len(source.shape) != 1 or shape.is_graph_output() or not _whole(node):
        return None
    reads: list[ir.Node] = []
    for use in shape.uses():
        read = use.node
        if use.idx != 0 or read in reads or read.outputs[0].is_graph_output():
            return None
        if not _reads_scalar(read, values, opset):
            return None
        reads.append(read)
    return reads or None


def _whole(node: ir.Node) -> bool:
    """Whether a Shape of a rank-1 tensor keeps its one dim: [start, end), each made
    non-negative by adding the rank 1 and clamped to [0, 1], is [0, 1)."""
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", None)
    start = min(max(start + 1 if start < 0 else start, 0), 1)
    end = 1 if end is None else min(max(end + 1 if end < 0 else end, 0), 1)
    return start == 0 and end == 1


def _reads_scalar(read: ir.Node, values: StaticValues, opset: int | None) -> bool:
    """Whether `read` (reading a `[n]` at its input 0) gives the scalar n."""
    if read.domain != "" or len(read.outputs) != 1:
        return False
    op = read.op_type
    if op == "Gather":
        if len(read.inputs) != 2 or read.attributes.get_int("axis", 0) not in (0, -1):
            return False
        index = values.get(read.inputs[1]) if read.inputs[1] is not None else None
        return index is not None and index.ndim == 0 and int(index) in (0, -1)
    if op == "Reshape":
        if len(read.inputs) != 2 or read.inputs[1] is None:
            return False
        target = values.get(read.inputs[1])
        return target is not None and target.shape == (0,)
    if op == "Squeeze":
        if opset is not None and opset < 13:
            axes = read.attributes.get_ints("axes", None)
            return axes is None or list(axes) in ([0], [-1])
        if len(read.inputs) == 1 or (len(read.inputs) == 2 and read.inputs[1] is None):
            return True
        if len(read.inputs) != 2:
            return False
        given = values.get(read.inputs[1])
        return given is not None and given.ndim == 1 and given.tolist() in ([0], [-1])
    return False
