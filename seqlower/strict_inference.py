"""ONNX's full check (the checker, then strict type and shape inference) in linear time on a
graph that holds many subgraphs.

ONNX inference copies the outer scope's table of types into every subgraph it enters, so on a
main graph of n nodes holding m subgraphs it takes time n x m: 10,000 Ifs in one graph took
7 s in `onnx.checker.check_model(full_check=True)`, 5,000 took 1.75 s, 2,000 0.3 s. Beyond
SUBGRAPH_LIMIT such nodes the main graph is inferred in runs of consecutive nodes (as the
lowering's own inference is: `seqlower.passes.chunked_inference`), at most CHUNK_NODES nodes and
RUN_SUBGRAPHS nodes holding subgraphs each (every subgraph gets a copy of its run's scope), each
a model whose inputs are what it reads from earlier runs, typed as inference found them there;
constants and small initializers cross a cut with their content, and each run keeps what the
graph declares about the values it makes (value_info, outputs), which strict inference checks
against what it infers. The full check does not propagate data, so a cut hides nothing from it.
"""

from __future__ import annotations

__all__ = ["check_fully", "inferred_in_runs", "strict_inference"]

import onnx
import onnx.shape_inference

from seqlower.passes.chunked_inference import (
    RUN_SUBGRAPHS,
    SMALL_INITIALIZER_BYTES,
    SUBGRAPH_LIMIT,
    cut_in_runs,
)


def check_fully(model: onnx.ModelProto) -> None:
    """Raise what `onnx.checker.check_model(model, full_check=True)` raises (the checker,
    then strict inference with type checking), in linear time when the main graph holds many
    subgraphs."""
    if not inferred_in_runs(model.graph):
        onnx.checker.check_model(model, full_check=True)
        return
    onnx.checker.check_model(model, full_check=False)
    strict_inference(model)


def strict_inference(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """Strict ONNX type and shape inference of `model` with type checking, raising what it
    raises; returns the types of the main graph's values as inferred, by name (in runs when
    `inferred_in_runs`: see the module docstring; in one piece, the last of a name counts, as
    the graph's inputs, value_info and outputs list them)."""
    graph = model.graph
    if not inferred_in_runs(graph):
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        found = inferred.graph
        return {value.name: value for value in [*found.input, *found.value_info, *found.output]}
    inputs = {value.name: value for value in graph.input}
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    outputs = {value.name: value for value in graph.output}
    declared = {value.name: value for value in graph.value_info}
    known: dict[str, onnx.ValueInfoProto] = dict(inputs)
    constants: dict[str, onnx.NodeProto] = {}
    for run in cut_in_runs(graph.node, _holds_subgraphs, RUN_SUBGRAPHS):
        made_in_order = [name for node in run for name in node.output]  # read once a run
        made = set(made_in_order)
        proto = onnx.ModelProto(ir_version=model.ir_version)
        proto.opset_import.extend(model.opset_import)
        proto.functions.extend(model.functions)
        run_graph = proto.graph
        run_graph.name = graph.name
        for name in _names_read(run):
            if name in made:
                continue
            if name in constants:
                run_graph.node.append(constants[name])
            elif name in initializers and name not in inputs:
                tensor = initializers[name]
                if _tensor_bytes(tensor) <= SMALL_INITIALIZER_BYTES:
                    run_graph.initializer.append(tensor)
                else:
                    run_graph.input.append(
                        onnx.helper.make_tensor_value_info(name, tensor.data_type, tensor.dims)
                    )
            elif name in known:
                run_graph.input.append(known[name])
        run_graph.node.extend(run)
        named = [name for name in made_in_order if name]
        run_graph.value_info.extend(declared[name] for name in named if name in declared)
        run_graph.output.extend(outputs[name] for name in named if name in outputs)
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
        for value in [*inferred.graph.value_info, *inferred.graph.output]:
            name = value.name  # read once: a protobuf field read makes a new string
            if name in made:
                known[name] = value
        for node in run:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                constants.update((name, node) for name in node.output)
    return known


def inferred_in_runs(graph: onnx.GraphProto) -> bool:
    """Whether so many of the main graph's nodes hold subgraphs that ONNX's inference of it in
    one piece would be quadratic (see the module docstring)."""
    holders = 0
    for node in graph.node:  # counted until the answer is known
        if node.attribute and node_subgraphs([node]):
            holders += 1
            if holders > SUBGRAPH_LIMIT:
                return True
    return False


def _holds_subgraphs(node: onnx.NodeProto) -> bool:
    return any(attribute.HasField("g") or attribute.graphs for attribute in node.attribute)


def node_subgraphs(nodes) -> list[onnx.GraphProto]:
    """The subgraphs the attributes of `nodes` hold (not those nested in them)."""
    graphs = []
    for node in nodes:
        attributes = node.attribute
        if not attributes:  # most nodes: no attribute to look into
            continue
        for attribute in attributes:
            if attribute.HasField("g"):
                graphs.append(attribute.g)
            graphs.extend(attribute.graphs)
    return graphs


def _names_read(nodes: list[onnx.NodeProto]) -> list[str]:
    """The names `nodes` read, those their subgraphs read included, in order, once each."""
    names: dict[str, None] = {}
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        names.update(dict.fromkeys(node.input))
        if node.attribute:
            for subgraph in reversed(node_subgraphs([node])):
                stack.extend(reversed(subgraph.node))
    names.pop("", None)  # an optional input left out
    return list(names)


def _tensor_bytes(tensor: onnx.TensorProto) -> int:
    """Roughly the bytes a tensor's content takes (external data counts as large)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return SMALL_INITIALIZER_BYTES + 1
    return tensor.ByteSize()
