"""Element shapes inside a body region, inferred from the shapes of what it is fed.

A body exported by TorchScript declares its values with unknown dims (`float[?, ?]`), and ONNX
shape inference over the whole model cannot see through the sequence an element comes from. When
the element shape is known (a chunk [1, 64] of a split), inferring the region alone, fed that
shape, gives every body value its element shape: the batched form then knows, for instance, that
the chunks' unit axis is still 1 at the end and concatenates them with a Squeeze, not with a
Reshape to a computed shape.
"""

from __future__ import annotations

__all__ = ["infer_region_shapes"]

from collections.abc import Iterable, Mapping

import onnx
import onnx_ir as ir

from seqlower.ops import outer_reads


def infer_region_shapes(
    nodes: Iterable[ir.Node],
    fed: Mapping[ir.Value, ir.Shape | None],
    opset_imports: Mapping[str, int],
    known: Mapping[ir.Value, ir.Shape] | None = None,
) -> dict[ir.Value, ir.Shape]:
    """The shapes ONNX shape inference gives the outputs of `nodes` (in order) when the values in
    `fed` have those shapes and every other value read has its own; a dim inference leaves
    unknown keeps what the value declares. `known`: outputs whose dims are known otherwise (a
    slice of run-time bounds keeps the dims it does not slice), declared to the inference so
    that what reads them sees those dims. Empty when inference fails."""
    nodes = list(nodes)
    made = {output for node in nodes for output in node.outputs}
    read: dict[ir.Value, None] = {}
    for node in nodes:
        for value in [*node.inputs, *outer_reads(node)]:
            if value is not None and value not in made:
                read[value] = None
    inputs, constants = [], []
    for value in read:
        if value.name is None or not isinstance(value.type, ir.TensorType):
            return {}
        shape = fed.get(value, value.shape) if value in fed else value.shape
        inputs.append(_value_info(value.name, value.type.dtype, shape))
        if value not in fed and value.const_value is not None and value.const_value.size <= 64:
            constants.append(ir.serde.serialize_tensor(value.const_value))  # a Reshape's target
            constants[-1].name = value.name
    try:
        declared = [
            _value_info(value.name, value.dtype, shape)
            for value, shape in (known or {}).items()
            if value.name is not None and value.dtype is not None
        ]
        graph = onnx.helper.make_graph(
            [ir.serde.serialize_node(node) for node in nodes],
            "region",
            inputs,
            [],
            constants,
            value_info=declared,
        )
        opsets = [
            onnx.helper.make_opsetid(domain, version) for domain, version in opset_imports.items()
        ]
        model = onnx.helper.make_model(graph, opset_imports=opsets)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:
        return {}
    by_name = {info.name: info for info in inferred.graph.value_info}
    shapes: dict[ir.Value, ir.Shape] = {}
    for value in made:
        info = by_name.get(value.name or "")
        if info is None or not info.type.tensor_type.HasField("shape"):
            continue
        found = [
            dim.dim_value if dim.HasField("dim_value") else None
            for dim in info.type.tensor_type.shape.dim
        ]
        shapes[value] = _completed(found, value.shape)
    return shapes


def _value_info(name: str, dtype: ir.DataType, shape: ir.Shape | None) -> onnx.ValueInfoProto:
    dims = None
    if shape is not None:
        dims = [d if isinstance(d, int) else None for d in shape]
    return onnx.helper.make_tensor_value_info(name, int(dtype), dims)


def _completed(found: list[int | None], declared: ir.Shape | None) -> ir.Shape:
    """Inferred dims, with the declared ones where inference knows nothing (same rank only)."""
    if declared is None or len(declared) != len(found):
        return ir.Shape(found)
    return ir.Shape([dim if dim is not None else said for dim, said in zip(found, declared)])
