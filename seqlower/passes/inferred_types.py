"""Taking the types and shapes ONNX inference wrote into a proto back into the IR.

Most values of a model share a few types, so each distinct `TypeProto` is deserialized once
(`TypeReader`) and its shape shared, frozen (a rule that needs another shape assigns a new one).
A value takes an inferred shape when it has none and an inferred type when it has none: declared
types are kept, declared shapes were cleared before inference (`normalize.infer_shapes`).
"""

from __future__ import annotations

__all__ = [
    "TypeReader",
    "dim_names",
    "graph_types",
    "merge_graph",
    "paired_subgraphs",
    "proto_subgraphs",
]

import collections
from collections.abc import Callable, Iterable, Iterator

import onnx
import onnx_ir as ir

from seqlower.ops import graph_nodes, subgraphs


class TypeReader:
    """Deserializes TypeProtos, once per distinct content. `rename` (dim name -> new name, or
    None to keep it) is applied to the symbolic dims that ONNX inference made up (`unk__<n>`)."""

    def __init__(self, rename: Callable[[str], str | None] | None = None) -> None:
        self._cache: dict[bytes, tuple[ir.Shape | None, ir.TypeProtocol]] = {}
        self._rename = rename

    def read(self, found: onnx.TypeProto) -> tuple[ir.Shape | None, ir.TypeProtocol]:
        key = found.SerializeToString()
        cached = self._cache.get(key)
        if cached is None:
            shape = ir.serde.deserialize_type_proto_for_shape(found)
            dims = None if shape is None else list(shape)
            if dims is not None and self._rename is not None and b"unk__" in key:
                dims = [self._renamed(dim) for dim in dims]
            cached = self._cache[key] = (
                None if dims is None else ir.Shape(dims, frozen=True),
                ir.serde.deserialize_type_proto_for_type(found),
            )
        return cached

    def _renamed(self, dim: int | ir.SymbolicDim) -> int | ir.SymbolicDim:
        if isinstance(dim, int) or not (dim.value or "").startswith("unk__"):
            return dim
        assert self._rename is not None
        new = self._rename(dim.value)  # type: ignore[arg-type]
        return dim if new is None else ir.SymbolicDim(new)

    def merge(self, values: Iterable[ir.Value], types: dict[str, onnx.TypeProto]) -> None:
        """Give each of `values` the inferred type and shape of its name, where it has none."""
        for value in values:
            if value.shape is not None and value.type is not None:
                continue
            found = types.get(value.name or "")
            if found is None:
                continue
            shape, type_ = self.read(found)
            if value.shape is None and shape is not None:
                value.shape = shape
            if value.type is None:
                value.type = type_


def dim_names(shape: ir.Shape | None) -> list[str]:
    """The names of the symbolic dims of `shape`."""
    if shape is None:
        return []
    return [dim.value for dim in shape if isinstance(dim, ir.SymbolicDim) and dim.value]


def graph_types(graph: onnx.GraphProto | onnx.FunctionProto) -> dict[str, onnx.TypeProto]:
    """Name -> inferred type of the values a graph (or function) declares."""
    infos = list(graph.value_info)
    if isinstance(graph, onnx.GraphProto):
        infos = [*graph.input, *infos, *graph.output]
    return {info.name: info.type for info in infos if info.HasField("type")}


def merge_graph(reader: TypeReader, graph: ir.Graph, types: dict[str, onnx.TypeProto]) -> None:
    """Merge into the inputs of `graph` and the outputs of its nodes (not its subgraphs)."""
    reader.merge(
        [*graph.inputs, *(output for node in graph_nodes(graph) for output in node.outputs)], types
    )


def paired_subgraphs(
    node: ir.Node, proto: onnx.NodeProto
) -> Iterator[tuple[ir.Graph, onnx.GraphProto]]:
    """The subgraphs of `node`, nested ones included, each with its counterpart in `proto` (the
    node serialized and inferred), breadth first; attributes keep their order when serialized."""
    queue = collections.deque(zip(subgraphs(node), proto_subgraphs(proto)))
    while queue:
        graph, graph_proto = queue.popleft()
        yield graph, graph_proto
        for inner, inner_proto in zip(graph, graph_proto.node):
            queue.extend(zip(subgraphs(inner), proto_subgraphs(inner_proto)))


def proto_subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The subgraphs a NodeProto holds (`seqlower.ops.subgraphs` for protobuf)."""
    found: list[onnx.GraphProto] = []
    for attr in node.attribute:
        if attr.ref_attr_name:
            continue
        if attr.type == onnx.AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found
