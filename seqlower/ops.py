"""Names of the ONNX sequence operators and small questions about values and nodes."""

from __future__ import annotations

__all__ = [
    "SEQUENCE_OPS",
    "is_sequence_op",
    "is_sequence_value",
    "iter_all_graphs",
    "iter_all_nodes",
]

import collections
from collections.abc import Iterator

import onnx_ir as ir

SEQUENCE_OPS: frozenset[str] = frozenset(
    {
        "ConcatFromSequence",
        "SequenceAt",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceErase",
        "SequenceInsert",
        "SequenceLength",
        "SequenceMap",
        "SplitToSequence",
    }
)


def is_sequence_op(node: ir.Node) -> bool:
    """True for a node of the default domain whose operator is a sequence operator."""
    return node.domain == "" and node.op_type in SEQUENCE_OPS


def is_sequence_value(value: ir.Value | None) -> bool:
    """True when the value's declared type is a sequence (of tensors)."""
    return value is not None and isinstance(value.type, ir.SequenceType)


def iter_all_graphs(model: ir.Model) -> Iterator[ir.Graph]:
    """The main graph, every subgraph (If/Loop/Scan/SequenceMap bodies, nested) and the graph of
    every model-local function, parents before children."""
    queue = collections.deque([model.graph])
    queue.extend(function.graph for function in model.functions.values())
    while queue:
        graph = queue.popleft()
        yield graph
        for node in graph:
            # `.data` is the plain dict under onnx_ir's Attributes (a UserDict): iterating it
            # directly makes this walk, done several times per sweep, about 3x faster
            for attr in node.attributes.data.values():
                if attr.is_ref():
                    continue
                if attr.type == ir.AttributeType.GRAPH:
                    queue.append(attr.as_graph())
                elif attr.type == ir.AttributeType.GRAPHS:
                    queue.extend(attr.as_graphs())


def iter_all_nodes(model: ir.Model) -> Iterator[ir.Node]:
    """Every node of the model, subgraphs and functions included."""
    for graph in iter_all_graphs(model):
        yield from graph
