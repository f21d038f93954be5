"""Declare the ranks ONNX shape inference could not give (`seqlower.analysis.ranks`), and the
dims that follow from them.

    y = Conv(SequenceAt(l, i), w)       # in a Loop body; ONNX inference: y has no shape
    -> y: float[?, ?, ?, ?]             # the rank, each dim unknown

    d = Loop(n, , d0) {...}             # a list's tensor form a Loop carries; ONNX: no shape
    e = Gather(d, [0])                  # ONNX: no shape (it had no rank for d)
    -> d: float[?], e: float[1]         # d's rank proved; e's dims inferred from it

A value with no shape after inference gets a shape of unknown dims, one per proved rank (for a
sequence value, the shape of its elements). Then each such tensor whose operator reads a value
so declared is inferred again, node by node in graph order, by ONNX's inference of that one
operator (`onnx.shape_inference.infer_node_outputs`) given the shapes its inputs now have: the
dims it gives for the proved rank are taken. What a fold declared from such a rank (a read at
a constant index made a read of one row, `[1]`) is then what a second lowering infers too. The
rules and the tensor form of lists read ranks from the shapes of values, so they see these as
they see inference's. The model inputs are left as declared (the interface).
"""

from __future__ import annotations

__all__ = ["declare_ranks"]

import onnx
import onnx_ir as ir

from seqlower.analysis.ranks import Ranks
from seqlower.ops import graph_nodes, iter_all_graphs

_INTEGERS = frozenset({ir.DataType.INT64, ir.DataType.INT32})
_SMALL = 64  # elements of a constant given to inference with its content (a shape, axes)


def declare_ranks(model: ir.Model) -> int:
    """Give each value with no shape and a proved rank a shape of that many unknown dims, and
    then the dims ONNX infers for it from them (module docstring); returns how many values
    were given one."""
    ranks: Ranks | None = None
    declared: list[ir.Value] = []
    main_inputs = set(model.graph.inputs)
    for graph in list(iter_all_graphs(model)):
        values = [*graph.inputs, *(o for node in graph_nodes(graph) for o in node.outputs)]
        for value in values:
            if value.shape is not None or value in main_inputs or not _tensor_like(value):
                continue
            if ranks is None:  # only where inference left a value without a shape
                ranks = Ranks(model)
            rank = ranks.rank(value)
            if rank is not None:
                value.shape = ir.Shape([None] * rank)
                declared.append(value)
    if declared:
        _infer_declared_dims(model, declared)
    return len(declared)


def _infer_declared_dims(model: ir.Model, declared: list[ir.Value]) -> None:
    """Give each tensor of `declared` (in graph order, parents first) whose producer reads
    another of them the dims ONNX's inference of that producer alone gives, where it gives the
    declared rank. Producers holding subgraphs or of another domain are left alone."""
    opset = model.opset_imports.get("")
    if opset is None:
        return
    rank_only = set(declared)
    imports = [onnx.helper.make_opsetid("", opset)]
    done: set[ir.Node] = set()
    for value in declared:
        node = value.producer()
        if node is None or node in done:
            continue
        done.add(node)
        if node.domain != "" or (node.attributes.data and _holds_graphs(node)):
            continue
        if not any(i in rank_only for i in node.inputs if i is not None):
            continue
        found = _node_outputs(node, opset, imports)
        for output in node.outputs:
            inferred = found.get(output.name or "")
            if output not in rank_only or inferred is None:
                continue
            assert output.shape is not None
            if len(inferred) == len(output.shape) and any(d is not None for d in inferred):
                output.shape = ir.Shape(inferred)


def _holds_graphs(node: ir.Node) -> bool:
    return any(
        attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
        for attr in node.attributes.data.values()
    )


def _node_outputs(
    node: ir.Node, opset: int, imports: list[onnx.OperatorSetIdProto]
) -> dict[str, list[int | str | None]]:
    """Output name -> dims (an int, a dim name, or None) that ONNX infers for `node` from the
    types and shapes of its inputs and the contents of those that are constants; empty where
    an input is not a typed tensor or inference fails."""
    types: dict[str, onnx.TypeProto] = {}
    data: dict[str, onnx.TensorProto] = {}
    for value in node.inputs:
        if value is None or not value.name:
            continue
        if not isinstance(value.type, ir.TensorType):
            return {}
        info = onnx.ValueInfoProto()
        ir.serde.serialize_value_into(info, value)
        types[value.name] = info.type
        content = _constant(value)
        if content is not None:
            data[value.name] = ir.serde.serialize_tensor(content)
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
        proto = ir.serde.serialize_node(node)
        found = onnx.shape_inference.infer_node_outputs(
            schema, proto, types, data, opset_imports=imports
        )
    except Exception:  # inference is best effort: the rank stays declared
        return {}
    dims: dict[str, list[int | str | None]] = {}
    for name, type_ in found.items():
        if not type_.HasField("tensor_type") or not type_.tensor_type.HasField("shape"):
            continue
        dims[name] = [
            d.dim_value if d.HasField("dim_value") else d.dim_param or None
            for d in type_.tensor_type.shape.dim
        ]
    return dims


def _constant(value: ir.Value) -> ir.TensorProtocol | None:
    """The content of a small integer tensor (a shape, axes, indices) that a Constant node or
    an initializer gives, else None."""
    if value.dtype not in _INTEGERS:
        return None
    tensor = value.const_value
    producer = value.producer()
    if tensor is None and producer is not None and producer.op_type == "Constant":
        attribute = producer.attributes.get("value") if producer.domain == "" else None
        if attribute is not None and attribute.type == ir.AttributeType.TENSOR:
            tensor = attribute.as_tensor()
    if tensor is None or tensor.size > _SMALL:
        return None
    return tensor


def _tensor_like(value: ir.Value) -> bool:
    """A tensor, or a sequence of tensors, or a value of no type yet."""
    type_ = value.type
    if isinstance(type_, ir.SequenceType):
        type_ = type_.elem_type
    return type_ is None or isinstance(type_, ir.TensorType)
