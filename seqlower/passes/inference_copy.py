"""The copy of a model that ONNX shape inference reads, rebuilt from the last one.

Every whole-model inference (`normalize.infer_shapes`) hands ONNX a protobuf of the model
without its large weights, as onnx_ir's `call_onnx_api` makes it. Serializing is Python work
for every node (about a sixth of a torchvision detector's lowering: 16 inferences of 2,500
nodes), and from one inference to the next almost every node is the same. `call_with_copy`
builds the same protobuf, byte for byte, but copies the NodeProto of a node from the last copy
when nothing onnx_ir's serializer reads from the node has changed since:

    key(node) = operator, domain, overload, name, doc string, metadata, the names of its
                inputs and outputs, and each attribute object with its name and doc string
                (an attribute's value cannot be replaced in place; a tensor's name is read too)

A node that holds a subgraph is written anew every time (its body's shapes change between
inferences), but its body's nodes are copied alike, at every depth: a Loop whose body holds
thousands of nodes costs the nodes that changed, not the whole body, in each copy.
Everything else (inputs, initializers, value_info, outputs, of the main graph and of every
body) is serialized as `onnx_ir.serde.serialize_graph_into` does, in its order, from the same
values: the weights moved to the inputs as `call_onnx_api` moves them, with the same lasting
effects on the model (an initializer without a shape or type gets its tensor's; the large ones
are registered again, last). Models this does not cover (functions, graph metadata, device
configurations, initializers without a tensor) go to `call_onnx_api`.
"""

from __future__ import annotations

__all__ = ["call_with_copy"]

from collections.abc import Callable
from typing import TypeVar

import onnx
import onnx_ir as ir
from onnx_ir import serde
from onnx_ir.passes.common import _c_api_utils

from seqlower.ops import graph_nodes

_R = TypeVar("_R")
# in `ir.Model.meta`: node -> (key, its bytes, its attributes, held so their ids stay theirs)
_CACHE_KEY = "seqlower.inference_nodes"
_BIG_TENSOR_BYTES = 1000  # `call_onnx_api` leaves out initializers larger than this

_NodeKey = tuple
_Entry = tuple  # (key, the node as a GraphProto field, its attributes)


def call_with_copy(function: Callable[[onnx.ModelProto], _R], model: ir.Model) -> _R:
    """`function(copy)`, where `copy` is the model without its large main-graph initializers
    (each an input of its type and shape): what `call_onnx_api(function, model)` does."""
    graph = model.graph
    initializers = tuple(graph.initializers.values())
    if (
        model.functions
        or graph.metadata_props
        or getattr(model, "device_configurations", None)
        or any(value.const_value is None for value in initializers)
    ):
        return _c_api_utils.call_onnx_api(function, model)
    nodes: dict[ir.Node, _Entry] = model.meta.get(_CACHE_KEY) or {}
    proto = _header(model)
    for value in initializers:  # as `call_onnx_api` leaves them, shape and type given
        tensor = value.const_value
        if value.shape is None:
            value.shape = tensor.shape  # type: ignore[union-attr, assignment]
        if value.dtype is None:
            value.dtype = tensor.dtype  # type: ignore[union-attr]
    big = [value for value in initializers if value.const_value.nbytes > _BIG_TENSOR_BYTES]  # type: ignore[union-attr]
    made = _graph_into(proto.graph, graph, initializers, {id(v) for v in big}, nodes)
    model.meta[_CACHE_KEY] = made
    for value in big:  # `call_onnx_api` takes them out and registers them again, last
        graph.initializers.pop(value.name)  # type: ignore[arg-type]
        graph.register_initializer(value)
    return function(proto)


def _header(model: ir.Model) -> onnx.ModelProto:
    """The model's fields outside its graph, as onnx_ir serializes them (the graph is left
    empty: a graph of no node, with the model's opsets, stands in for it)."""
    graph = model.graph
    stand_in = ir.Graph((), (), nodes=(), opset_imports=graph.opset_imports)
    model.graph = stand_in
    try:
        proto = serde.serialize_model(model)
    finally:
        model.graph = graph
    proto.ClearField("graph")
    return proto


def _graph_into(
    graph_proto: onnx.GraphProto,
    graph: ir.Graph,
    initializers: tuple[ir.Value, ...],
    big: set[int],
    cached: dict[ir.Node, _Entry],
) -> dict[ir.Node, _Entry]:
    """`serde.serialize_graph_into` of `graph` as `call_onnx_api` changes it (every
    initializer an input too, the `big` ones no initializer), main-graph nodes from `cached`
    when their key is the same. Returns the cache for the next copy."""
    if graph.name:
        graph_proto.name = graph.name
    if graph.doc_string:
        graph_proto.doc_string = graph.doc_string
    inputs = list(graph.inputs)
    listed = set(inputs)
    inputs += [value for value in initializers if value not in listed]
    kept = [value for value in initializers if id(value) not in big]
    kept_names = {value.name for value in kept}
    for value in inputs:
        serde.serialize_value_into(graph_proto.input.add(), value)
        if value.name not in kept_names:
            serde._maybe_add_quantization_annotation(graph_proto, value)
    input_names = {value.name for value in inputs}
    for value in kept:
        serde._maybe_add_quantization_annotation(graph_proto, value)
        if serde._should_create_value_info_for_value(value) and value.name not in input_names:
            serde.serialize_value_into(graph_proto.value_info.add(), value)
        value.const_value.name = value.name  # type: ignore[union-attr]
        serde.serialize_tensor_into(graph_proto.initializer.add(), from_=value.const_value)  # type: ignore[arg-type]
    nodes = _Nodes(cached)
    nodes.into(graph_proto, graph)
    for output in graph.outputs:
        serde.serialize_value_into(graph_proto.output.add(), from_=output)
        serde._maybe_add_quantization_annotation(graph_proto, output)
    return nodes.made


class _Nodes:
    """The nodes of the copy: each as `serde.serialize_node_into` writes it, from `cached` when
    its key is the same; a node that holds subgraphs is written anew, its bodies as
    `serde.serialize_graph_into` writes them, their nodes from `cached` alike. `made` is the
    cache for the next copy."""

    def __init__(self, cached: dict[ir.Node, _Entry]) -> None:
        self.cached = cached
        self.made: dict[ir.Node, _Entry] = {}
        self.types = _Types()

    def into(self, graph_proto: onnx.GraphProto, graph: ir.Graph) -> None:
        """The nodes of `graph` into `graph_proto`, with the value_info of their outputs, as
        `serde.serialize_graph_into` writes them."""
        cached, made = self.cached, self.made
        encoded: list[bytes] = []  # the nodes as `node` fields of a GraphProto, parsed at once
        annotate, wanted = (
            serde._maybe_add_quantization_annotation,
            serde._should_create_value_info_for_value,
        )
        value_into, add_info = self.types.value_into, graph_proto.value_info.add
        for node in graph_nodes(graph):
            key = _key(node)
            entry = cached.get(node) if key is not None else None
            if entry is None or entry[0] != key:
                node_proto = onnx.NodeProto()
                if key is None and _holds_subgraphs(node):
                    self._holder_into(node_proto, node)
                else:
                    serde.serialize_node_into(node_proto, from_=node)
                entry = (
                    key,
                    _node_field(node_proto.SerializeToString()),
                    tuple(node.attributes.values()),
                )
            if key is not None:
                made[node] = entry
            encoded.append(entry[1])
            for output in node.outputs:
                if output.is_graph_output():
                    continue
                annotate(graph_proto, output)
                if wanted(output):
                    value_into(add_info(), output)
        graph_proto.MergeFromString(b"".join(encoded))  # appended to no node: in this order

    def _holder_into(self, node_proto: onnx.NodeProto, node: ir.Node) -> None:
        """`serde.serialize_node_into` of a node that holds subgraphs (and no device
        configurations), each body's nodes from the cache."""
        node_proto.op_type = node.op_type
        if node.domain:
            node_proto.domain = node.domain
        if node.name:
            node_proto.name = node.name
        if node.overload:
            node_proto.overload = node.overload
        if node.doc_string:
            node_proto.doc_string = node.doc_string
        if node.metadata_props:
            serde._serialize_metadata_props_into(node_proto.metadata_props, node.metadata_props)
        for value in node.inputs:
            node_proto.input.append("" if value is None else value.name)  # type: ignore[arg-type]
        for value in serde._remove_trailing_outputs(node.outputs):
            node_proto.output.append(value.name)  # type: ignore[arg-type]
        for attribute in node.attributes.values():
            proto = node_proto.attribute.add()
            if attribute.is_ref():
                serde.serialize_reference_attribute_into(proto, from_=attribute)  # type: ignore[arg-type]
            elif attribute.type == ir.AttributeType.GRAPH:
                self._named(proto, attribute)
                self._graph_into(proto.g, attribute.value)
                proto.type = onnx.AttributeProto.GRAPH
            elif attribute.type == ir.AttributeType.GRAPHS:
                self._named(proto, attribute)
                for body in attribute.value:
                    self._graph_into(proto.graphs.add(), body)
                proto.type = onnx.AttributeProto.GRAPHS
            else:
                serde.serialize_attribute_into(proto, from_=attribute)  # type: ignore[arg-type]

    @staticmethod
    def _named(proto: onnx.AttributeProto, attribute: ir.Attr) -> None:
        proto.name = attribute.name
        if attribute.doc_string:
            proto.doc_string = attribute.doc_string

    def _graph_into(self, graph_proto: onnx.GraphProto, graph: ir.Graph) -> None:
        """`serde.serialize_graph_into` of a subgraph, its nodes from the cache."""
        if graph.name:
            graph_proto.name = graph.name
        if graph.doc_string:
            graph_proto.doc_string = graph.doc_string
        initializers = graph.initializers
        for value in graph.inputs:
            serde.serialize_value_into(graph_proto.input.add(), value)
            if value.name not in initializers:
                serde._maybe_add_quantization_annotation(graph_proto, value)
        input_names = {value.name for value in graph.inputs}
        for value in initializers.values():
            serde._maybe_add_quantization_annotation(graph_proto, value)
            if serde._should_create_value_info_for_value(value) and value.name not in input_names:
                serde.serialize_value_into(graph_proto.value_info.add(), value)
            if value.const_value is None:  # as onnx_ir skips them, with its warning
                serde.logger.warning(
                    "Initializer '%s' does not have a constant value set.", value.name
                )
                continue
            value.const_value.name = value.name
            serde.serialize_tensor_into(graph_proto.initializer.add(), from_=value.const_value)
        self.into(graph_proto, graph)
        for output in graph.outputs:
            serde.serialize_value_into(graph_proto.output.add(), from_=output)
            serde._maybe_add_quantization_annotation(graph_proto, output)
        if graph.metadata_props:
            serde._serialize_metadata_props_into(graph_proto.metadata_props, graph.metadata_props)


def _holds_subgraphs(node: ir.Node) -> bool:
    """Whether `node` holds a subgraph and has no device configurations (what `_Nodes` writes
    itself)."""
    if getattr(node, "device_configurations", None):
        return False
    return any(attribute.type in _SUBGRAPHS for attribute in node.attributes.data.values())


def _node_field(data: bytes) -> bytes:
    """`data` (a serialized NodeProto) as field 1 (`node`) of a GraphProto: its tag, its
    length as a varint, itself."""
    size, head = len(data), bytearray(b"\x0a")
    while size >= 0x80:
        head.append((size & 0x7F) | 0x80)
        size >>= 7
    head.append(size)
    return bytes(head) + data


def _key(node: ir.Node) -> _NodeKey | None:
    """What `serde.serialize_node_into` reads from `node`; None for a node serialized anew each
    time (it holds a subgraph, or device configurations)."""
    attributes: list = []
    for attribute in node.attributes.data.values():  # the dict itself: iterating is faster
        kind = attribute.type
        if kind in _SUBGRAPHS:
            return None
        # by identity (the cache holds the object, so its id is not reused meanwhile)
        attributes += (id(attribute), attribute.name, attribute.doc_string)
        if kind == _TENSOR:
            attributes.append(attribute.value.name)
    if getattr(node, "device_configurations", None):
        return None
    metadata = node.metadata_props
    return (
        node.op_type,
        node.domain,
        node.overload,
        node.name,
        node.doc_string,
        tuple(metadata.items()) if metadata else (),
        tuple([value.name if value is not None else None for value in node.inputs]),
        tuple([value.name for value in node.outputs]),
        tuple(attributes),
    )


_SUBGRAPHS = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
_TENSOR = ir.AttributeType.TENSOR


class _Types:
    """`serde.serialize_value_into` for many values, quicker for the common one: a tensor
    value without a shape (inference's are cleared before it runs), doc string, metadata or
    type denotation is its name and its element type."""

    def __init__(self) -> None:
        self._codes: dict[ir.DataType, int] = {}

    def value_into(self, proto: onnx.ValueInfoProto, value: ir.Value) -> None:
        type_ = value.type
        if (
            type(type_) is not ir.TensorType
            or type_.denotation
            or value.shape is not None
            or value.doc_string
            or value.metadata_props
        ):
            serde.serialize_value_into(proto, value)
            return
        proto.name = value.name  # type: ignore[assignment]
        dtype = type_.dtype
        code = self._codes.get(dtype)
        if code is None:
            code = self._codes[dtype] = dtype.value
        proto.type.tensor_type.elem_type = code
