"""ONNX shape inference in linear time on models with many subgraphs.

`onnx.shape_inference` copies the whole outer scope's table of types each time it enters a
subgraph (an If branch, a Loop, Scan or SequenceMap body), so its time grows with (number of
subgraphs) x (number of values): a 100k-node model with 5000 SequenceMap bodies took ~45 s, and
the same model without them under a second. When the main graph holds many subgraphs, it is cut
into runs of consecutive nodes, each serialized straight from the IR and inferred as a model of
its own whose inputs are the values it reads from earlier runs, with the types inferred there
(each run's results are merged into the IR before the next run is built): a subgraph's outer
scope is then one run.

Data propagation (shape arithmetic on Shape/Gather/Concat...) does not cross a cut, so models
with few subgraphs are inferred in one piece, and cuts are far apart. `infer_in_runs` says
whether a cut may have lost something that way (a run reads a value that may carry content).
"""

from __future__ import annotations

__all__ = [
    "CHUNK_NODES",
    "DATA_PROPAGATING_OPS",
    "SMALL_INITIALIZER_BYTES",
    "SUBGRAPH_LIMIT",
    "RUN_SUBGRAPHS",
    "as_constants",
    "cut_in_runs",
    "infer_in_runs",
]

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.ops import subgraphs
from seqlower.passes.data_prop_bound import DATA_PROPAGATING_OPS, data_prop_is_bounded
from seqlower.passes.inferred_types import (
    TypeReader,
    dim_names,
    graph_types,
    paired_subgraphs,
)

SUBGRAPH_LIMIT = 64  # main-graph nodes holding a subgraph, beyond which the graph is cut
CHUNK_NODES = 1000
# nodes holding a subgraph in one run, at most: each subgraph gets a copy of the run's scope, so
# a run of 1,000 Ifs was quadratic itself (the strict inference of 10,000 Ifs: 0.77 s of CPU in
# runs of 1,000 nodes, 0.37 s in runs of 64 Ifs)
RUN_SUBGRAPHS = SUBGRAPH_LIMIT

_Node = TypeVar("_Node")

# initializers up to this size are given to inference with their content, as
# onnx_ir.passes.common._c_api_utils.call_onnx_api does for the whole model
SMALL_INITIALIZER_BYTES = 1000
_INTEGERS = frozenset({ir.DataType.INT64, ir.DataType.INT32})


def infer_in_runs(model: ir.Model, folded: dict[str, np.ndarray]) -> bool:
    """Infer the model's main graph in runs of at most CHUNK_NODES nodes and RUN_SUBGRAPHS nodes
    holding subgraphs, taking the inferred types and shapes into the values that have none
    (subgraphs included). Nodes computing a value in `folded` are given to inference as
    Constants. Returns True when no run reads a value that may carry content from an earlier run
    (inference in one piece would find the same shapes). Raises what ONNX inference raises."""
    graph = model.graph
    functions = [ir.serde.serialize_function(f) for f in model.functions.values()]
    exact = True
    start = 0
    for run in cut_in_runs(graph, _holds_subgraphs, RUN_SUBGRAPHS):
        proto, inherited, crossing, propagating = _run_model(model, run, folded, functions)
        exact = exact and not crossing
        hide_overridable_initializers(proto.graph)
        # a run holding no data-propagating node is bounded: its proto walk is not needed
        bounded = not propagating or data_prop_is_bounded(proto.graph)
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=bounded)
        reader = TypeReader(_renamer(inherited, start))
        types = graph_types(inferred.graph)
        reader.merge((output for node in run for output in node.outputs), types)
        proto_nodes = inferred.graph.node[len(proto.graph.node) - len(run) :]
        for node, node_proto in zip(run, proto_nodes):
            if not node.attributes:
                continue
            for subgraph, subgraph_proto in paired_subgraphs(node, node_proto):
                values = [*subgraph.inputs, *(o for n in subgraph for o in n.outputs)]
                reader.merge(values, graph_types(subgraph_proto))
        start += len(run)
    return exact


def _holds_subgraphs(node: ir.Node) -> bool:
    return bool(node.attributes) and any(True for _ in subgraphs(node))


def _run_model(
    model: ir.Model,
    run: list[ir.Node],
    folded: dict[str, np.ndarray],
    functions: list[onnx.FunctionProto],
) -> tuple[onnx.ModelProto, set[str], bool, bool]:
    """The model inference is given for one run; the dim names its inputs carry; whether one of
    its inputs may carry content (data propagation) that a cut hides; whether a node of the run
    or of its subgraphs is a data-propagating operator (any domain).

    Without such a node the proto is bounded (`data_prop_is_bounded` answers False only for a
    long value read by a default-domain node of DATA_PROPAGATING_OPS): the nodes the proto holds
    besides the run's own are Constants (copied in, or made by `as_constants`, which only turns
    nodes into Constants or adds them), so its walk can be skipped.

        run of Ifs whose branches hold Constant -> SequenceAt  :  no walk, data_prop=True
        a Cast anywhere in the run (its subgraphs included)     :  data_prop_is_bounded(proto)"""
    graph = model.graph
    members = set(run)
    reads: dict[ir.Value, None] = {}
    propagating = False
    for node in run:
        reads.update((value, None) for value in node.inputs if value is not None)
        propagating = propagating or node.op_type in DATA_PROPAGATING_OPS
        if node.attributes:
            for subgraph in subgraphs(node):
                propagating = _outer_reads(subgraph, graph, reads) or propagating
    proto = onnx.ModelProto(ir_version=model.ir_version)
    for domain, version in model.opset_imports.items():
        proto.opset_import.add(domain=domain, version=version)
    proto.functions.extend(functions)
    run_graph = proto.graph
    run_graph.name = f"{graph.name}_run"
    inherited: set[str] = set()
    crossing = False
    for value in reads:
        producer = value.producer()
        if value.graph is not graph or producer in members or not value.name:
            continue
        if producer is not None and value.name in folded and producer.op_type != "Constant":
            run_graph.node.append(_constant(value.name, folded[value.name]))
            continue
        if producer is not None and producer.op_type == "Constant" and producer.domain == "":
            ir.serde.serialize_node_into(run_graph.node.add(), producer)
            continue  # constants read from earlier runs are copied in: inference reads them
        tensor = value.const_value if value.is_initializer() else None
        if tensor is not None and tensor.nbytes <= SMALL_INITIALIZER_BYTES:
            ir.serde.serialize_tensor_into(run_graph.initializer.add(), tensor)
            continue
        if value.type is None:
            continue
        ir.serde.serialize_value_into(run_graph.input.add(), value)
        inherited.update(dim_names(value.shape))
        crossing = crossing or (
            producer is not None
            and producer.op_type in DATA_PROPAGATING_OPS
            and (value.dtype in _INTEGERS or producer.op_type == "Cast")
        )
    for node in run:
        ir.serde.serialize_node_into(run_graph.node.add(), node)
    if folded:
        as_constants(run_graph, folded)
    return proto, inherited, crossing, propagating


def _outer_reads(subgraph: ir.Graph, graph: ir.Graph, reads: dict[ir.Value, None]) -> bool:
    """Add the values of `graph` that nodes in `subgraph` (nested ones included) read; whether
    one of those nodes is of DATA_PROPAGATING_OPS (any domain)."""
    propagating = False
    for node in subgraph:
        reads.update(
            (value, None) for value in node.inputs if value is not None and value.graph is graph
        )
        propagating = propagating or node.op_type in DATA_PROPAGATING_OPS
        if node.attributes:
            for inner in subgraphs(node):
                propagating = _outer_reads(inner, graph, reads) or propagating
    return propagating


def _constant(name: str, array: np.ndarray, node_name: str = "") -> onnx.NodeProto:
    value = onnx.numpy_helper.from_array(array)
    return onnx.helper.make_node("Constant", [], [name], name=node_name, value=value)


def hide_overridable_initializers(graph: onnx.GraphProto) -> None:
    """In a copy given to inference, drop the initializers that are also graph inputs: the
    caller may feed another value, but ONNX data propagation would compute shapes from the
    default (Range(0, n) of an overridable n = 5 inferred as [5])."""
    inputs = {value.name for value in graph.input}
    kept = [tensor for tensor in graph.initializer if tensor.name not in inputs]
    if len(kept) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(kept)


def as_constants(graph: onnx.GraphProto, folded: dict[str, np.ndarray]) -> None:
    """In a copy given to inference, the nodes computing `folded` values become Constants
    (subgraphs included), and a subgraph that reads a folded value of an outer scope gets a
    Constant of its own for it: ONNX inference reads the content of a Constant or initializer
    of the subgraph's own scope only (a ReduceSum in a Loop body whose axes are a Constant of
    the main graph otherwise loses even its rank)."""
    if not folded:
        return
    graphs = [(graph, True)]
    while graphs:
        current, is_root = graphs.pop()
        read: dict[str, None] = {}  # folded values this subgraph reads, in order
        for node in current.node:
            attributes = node.attribute
            if attributes:  # most nodes of a large graph hold no subgraph: looked at quickly
                for attr in attributes:
                    if attr.HasField("g"):
                        graphs.append((attr.g, False))
                    elif attr.graphs:
                        graphs.extend((g, False) for g in attr.graphs)
            outputs = node.output
            if len(outputs) == 1 and outputs[0] in folded and node.op_type != "Constant":
                node.CopyFrom(_constant(outputs[0], folded[outputs[0]], node.name))
            if not is_root:
                read.update((name, None) for name in node.input if name in folded)
        if read:
            defined = {name for node in current.node for name in node.output}
            defined.update(v.name for v in current.input)
            defined.update(t.name for t in current.initializer)
            captured = [name for name in read if name not in defined]
            for name in reversed(captured):
                current.node.insert(0, _constant(name, folded[name]))


def _renamer(inherited: set[str], run: int) -> Callable[[str], str | None]:
    """Each run numbers the dims it makes up from `unk__0`: unrelated dims of two runs would
    share a name, and one name means one size. The new ones get names unique to the run."""

    def rename(name: str) -> str | None:
        return None if name in inherited else f"unk__run{run}_{name[5:]}"

    return rename


def cut_in_runs(
    nodes: Iterable[_Node], holds_subgraphs: Callable[[_Node], bool], most_holders: int
) -> Iterator[list[_Node]]:
    """`nodes` in runs of consecutive nodes, each of at most CHUNK_NODES nodes and at most
    `most_holders` nodes that `holds_subgraphs`."""
    run: list[_Node] = []
    holders = 0
    for node in nodes:
        holds = holds_subgraphs(node)
        if run and (len(run) == CHUNK_NODES or (holds and holders == most_holders)):
            yield run
            run, holders = [], 0
        run.append(node)
        holders += holds
    if run:
        yield run
