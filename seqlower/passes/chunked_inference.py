"""ONNX shape inference in linear time on models with many subgraphs.

`onnx.shape_inference` copies the whole outer scope's table of types each time it enters a
subgraph (an If branch, a Loop, Scan or SequenceMap body), so its time grows with (number of
subgraphs) x (number of values): a 100k-node model with 5000 SequenceMap bodies took ~45 s, and
the same model without them under a second. When the main graph holds many subgraphs, it is cut
into runs of consecutive nodes, each inferred as a model of its own whose inputs are the values it
reads from earlier runs, with the types inferred there: a subgraph's outer scope is then one run.

Data propagation (shape arithmetic on Shape/Gather/Concat...) does not cross a cut, so models
with few subgraphs are inferred in one piece, exactly as before, and cuts are far apart.
"""

from __future__ import annotations

__all__ = ["infer_shapes"]

from collections.abc import Iterator

import onnx
from onnx import helper

SUBGRAPH_LIMIT = 64  # main-graph nodes holding a subgraph, beyond which the graph is cut
CHUNK_NODES = 1000


def infer_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """`onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)`, cut into
    runs of nodes when the main graph holds more than SUBGRAPH_LIMIT subgraph-carrying nodes."""
    carriers = sum(1 for node in proto.graph.node if _has_subgraph(node))
    if carriers <= SUBGRAPH_LIMIT:
        return onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    return _infer_in_runs(proto)


_GRAPH_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return bool(node.attribute) and any(attr.type in _GRAPH_TYPES for attr in node.attribute)


def _subgraph_reads(node: onnx.NodeProto) -> Iterator[str]:
    """Every name read by a node inside the subgraphs of `node` (their own values included: the
    caller keeps only the names it knows from the main graph)."""
    for attr in node.attribute:
        for subgraph in [attr.g] if attr.HasField("g") else list(attr.graphs):
            for inner in subgraph.node:
                yield from inner.input
                yield from _subgraph_reads(inner)


def _dim_params(info: onnx.ValueInfoProto) -> Iterator[str]:
    type_proto = info.type
    while type_proto.HasField("sequence_type"):
        type_proto = type_proto.sequence_type.elem_type
    if type_proto.HasField("tensor_type"):
        for dim in type_proto.tensor_type.shape.dim:
            if dim.dim_param:
                yield dim.dim_param


def _rename_new_dims(graph: onnx.GraphProto, inherited: set[str], run: int) -> None:
    """Each run numbers the dims it makes up from `unk__0`: unrelated dims of two runs would
    share a name, and one name means one size. Give the new ones names unique to the run.
    (Serialized bytes are searched first: a cheap test in C++ that skips most values.)"""
    if b"unk__" not in graph.SerializeToString():
        return
    for node in graph.node:
        for attr in node.attribute:
            for subgraph in [attr.g] if attr.HasField("g") else list(attr.graphs):
                _rename_new_dims(subgraph, inherited, run)
    for info in [*graph.value_info, *graph.input, *graph.output]:
        if b"unk__" not in info.SerializeToString():
            continue
        type_proto = info.type
        while type_proto.HasField("sequence_type"):
            type_proto = type_proto.sequence_type.elem_type
        if not type_proto.HasField("tensor_type"):
            continue
        for dim in type_proto.tensor_type.shape.dim:
            if dim.dim_param.startswith("unk__") and dim.dim_param not in inherited:
                dim.dim_param = f"unk__run{run}_{dim.dim_param[5:]}"


def _infer_in_runs(proto: onnx.ModelProto) -> onnx.ModelProto:
    graph = proto.graph
    known: dict[str, onnx.ValueInfoProto] = {}
    for info in [*graph.input, *graph.value_info]:
        known[info.name] = info
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    constants = {
        node.output[0]: node
        for node in graph.node
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1
    }
    nodes = list(graph.node)
    inferred_nodes: list[onnx.NodeProto] = []
    inferred_infos: list[onnx.ValueInfoProto] = []
    for start in range(0, len(nodes), CHUNK_NODES):
        run = nodes[start : start + CHUNK_NODES]
        produced = {name for node in run for name in node.output}
        reads: dict[str, None] = {}
        for node in run:
            reads.update(dict.fromkeys(node.input))
            if _has_subgraph(node):
                reads.update(dict.fromkeys(_subgraph_reads(node)))
        free = [name for name in reads if name and name not in produced]
        # constants read from earlier runs are copied in: their values matter to inference
        copied = [constants[name] for name in free if name in constants]
        free = [name for name in free if name not in constants]
        inputs = [known[name] for name in free if name in known and name not in initializers]
        run_graph = helper.make_graph(
            [*copied, *run],
            f"{graph.name}_run_{start}",
            inputs,
            [],
            initializer=[initializers[name] for name in free if name in initializers],
        )
        run_model = helper.make_model(
            run_graph,
            opset_imports=proto.opset_import,
            ir_version=proto.ir_version,
            functions=proto.functions,
        )
        inferred = onnx.shape_inference.infer_shapes(run_model, strict_mode=False, data_prop=True)
        _rename_new_dims(inferred.graph, {d for info in inputs for d in _dim_params(info)}, start)
        copied_names = {node.output[0] for node in copied}
        for info in inferred.graph.value_info:
            if info.name not in copied_names:
                known[info.name] = info
                inferred_infos.append(info)
        inferred_nodes.extend(inferred.graph.node[len(copied) :])
    result = onnx.ModelProto()
    result.CopyFrom(proto)
    del result.graph.node[:]
    result.graph.node.extend(inferred_nodes)
    result.graph.value_info.extend(inferred_infos)
    return result
