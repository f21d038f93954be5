"""What a Range from 0 by 1 gives again: a Range up to its length is that Range, and a read of
it at entries taken from it is those entries.

    r = Range(0, m, 1)                        (int64)
    n = Squeeze(Shape(r, start=0, end=1))     (or Gather(Shape(r), 0), or Size(r))
    q = Range(0, n, 1)                        ->   q's readers read r

    k = Compress(r, c, axis=0)
    g = Gather(r, k, axis=0)                  ->   g's readers read k

    d = Shape(v, start=a, end=a + 1)          (int64[1]: one dim of v)
    r = Range(0, Squeeze(d), 1)
    l = Shape(r, start=0, end=1)              (or Shape(r))   ->   l's readers read d

A loop batched over its iteration numbers `Range(0, trip_count, 1)` and an If batched inside it
count the elements again (`Range(0, N)` for the rows each branch takes, N the length of the
iteration numbers): the same values, two kernels more. A Range from 0 by 1 holds 0, 1, ..,
len - 1 whatever m is (none for m <= 0), so q and r are equal, element type included (both
int64). Range cannot fail on scalar int64 operands, nor Shape, Squeeze of a dim of one, Gather
of a Shape at 0 (a Range has rank 1) or Size: nothing that fails is dropped. The rows a
batched If takes are such a Compress of the iteration numbers, and a branch that reads the
iteration number reads them at those rows: entry j of r is j, and every entry of k is an entry
of r (so within r: the Gather cannot fail). q and g, when outputs of their graph, stay.

The length of a Range from 0 by 1 up to a dim is that dim: a dim is never negative, so the
Range holds d entries and its Shape is [d], the Shape d read it from. A batched loop counts
the rows of its iterations (`Range(0, n)`, n = `x.size(0)`) and reads that count again as the
Range's Shape (to expand a value to every row): one kernel more. Only the Shape goes (it cannot
fail); d must be declared int64[1] (a Shape whose start and end keep one dim), so that the
Squeeze gives the scalar the Range needs (else the Range fails, and the Shape stays).
"""

from __future__ import annotations

__all__ = ["fold_ranges_of_ranges"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.passes.forwarding import forward_unchanged


def fold_ranges_of_ranges(model: ir.Model) -> int:
    """Make every reader of a Range over the length of a Range read that Range (module
    docstring); returns how many."""
    return forward_unchanged(model, _same_range)


def _same_range(node: ir.Node, values: StaticValues) -> ir.Value | None:
    if node.op_type == "Gather":
        return _own_entries(node, values)
    if node.op_type == "Shape":
        return _dim_counted(node, values)
    counted = _counting(node, values)
    if counted is None or node.outputs[0].is_graph_output():
        return None
    source = _length_of(counted, values)
    if source is None:
        return None
    made = source.producer()
    if made is None or _counting(made, values) is None:
        return None
    return source


def _own_entries(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """k when `node` is Gather(r, k, axis=0), k = Compress(r, c, axis=0), r = Range(0, m, 1)."""
    if node.domain != "" or len(node.inputs) != 2 or node.outputs[0].is_graph_output():
        return None
    source, index = node.inputs
    if source is None or index is None or node.attributes.get_int("axis", 0) != 0:
        return None
    made, picked = source.producer(), index.producer()
    if made is None or picked is None or _counting(made, values) is None:
        return None
    if picked.op_type != "Compress" or picked.domain != "" or picked.inputs[0] is not source:
        return None
    axis = picked.attributes.get_int("axis", None)
    return index if axis in (None, 0, -1) else None  # (r has rank 1: no axis flattens r)


def _dim_counted(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """d when `node` is Shape(r) or Shape(r, 0, 1) (an end that keeps r's one dim), r =
    Range(0, Squeeze(d), 1), d = Shape(v, ..) declared int64[1]."""
    if node.domain != "" or not node.inputs or node.outputs[0].is_graph_output():
        return None
    end = node.attributes.get_int("end", None)
    if node.attributes.get_int("start", 0) not in (0, -1) or (end is not None and end < 1):
        return None  # (r has rank 1: start 0 or -1 and an end from 1 keep its one dim)
    made = node.inputs[0].producer() if node.inputs[0] is not None else None
    limit = _counting(made, values) if made is not None else None
    squeeze = limit.producer() if limit is not None else None
    if squeeze is None or squeeze.op_type != "Squeeze" or squeeze.domain != "":
        return None
    axes = values.get_ints(squeeze.inputs[1]) if len(squeeze.inputs) > 1 else None
    if axes is None and len(squeeze.inputs) < 2:
        axes = list(squeeze.attributes.get_ints("axes", [0]))
    if axes not in ([0], [-1]):
        return None
    dim = squeeze.inputs[0]
    shape = dim.producer() if dim is not None else None
    if shape is None or shape.op_type != "Shape" or shape.domain != "":
        return None
    if dim.dtype != ir.DataType.INT64 or dim.shape is None or tuple(dim.shape) != (1,):
        return None
    return dim


def _counting(node: ir.Node, values: StaticValues) -> ir.Value | None:
    """The limit of `node` when it is Range(0, limit, 1) on int64, else None."""
    if node.op_type != "Range" or node.domain != "" or len(node.inputs) != 3:
        return None
    start, limit, delta = node.inputs
    if limit is None or limit.dtype != ir.DataType.INT64:
        return None
    if values.get_int(start) != 0 or values.get_int(delta) != 1:
        return None
    return limit


def _length_of(limit: ir.Value, values: StaticValues) -> ir.Value | None:
    """v when `limit` is the length of the rank-1 value v: Squeeze(Shape(v, 0, 1)),
    Gather(Shape(v), 0) or Size(v)."""
    node = limit.producer()
    if node is None or node.domain != "" or not node.inputs or node.inputs[0] is None:
        return None
    if node.op_type == "Size":
        return _rank_one(node.inputs[0])
    if node.op_type == "Squeeze":
        axes = values.get_ints(node.inputs[1]) if len(node.inputs) > 1 else None
        if axes is None and len(node.inputs) < 2:
            axes = list(node.attributes.get_ints("axes", [0]))
        if axes not in ([0], [-1]):
            return None
        return _shaped(node.inputs[0], check_end=True)
    if node.op_type == "Gather" and len(node.inputs) == 2:
        if node.attributes.get_int("axis", 0) != 0 or values.get_int(node.inputs[1]) != 0:
            return None
        return _shaped(node.inputs[0], check_end=False)
    return None


def _shaped(value: ir.Value, check_end: bool) -> ir.Value | None:
    """v of rank one when `value` is Shape(v) from its first dim (with `check_end`, to an end
    that keeps that dim)."""
    shape = value.producer()
    if shape is None or shape.op_type != "Shape" or shape.domain != "":
        return None
    if shape.attributes.get_int("start", 0) != 0:
        return None
    end = shape.attributes.get_int("end", None)
    if check_end and end is not None and end < 1:  # (v of rank one: end 0 or -1 gives no dim)
        return None
    return _rank_one(shape.inputs[0])


def _rank_one(value: ir.Value | None) -> ir.Value | None:
    if value is None or value.shape is None or len(value.shape) != 1:
        return None
    return value
