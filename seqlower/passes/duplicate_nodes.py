"""Nodes that compute what an earlier node of their graph computes are removed: their readers
read the earlier node's outputs.

    a = Unsqueeze(x, Constant([1]))
    b = Unsqueeze(x, Constant([1]))      ->    (removed, with its Constant; b's readers read a)
    c = Concat(a, b, a, b)                     c = Concat(a, a, a, a)

Two nodes are the same computation when they have the same operator and attributes and read the
same values, where a small Constant (or a small initializer that no caller can override) counts
as its content (the Constants themselves stay, each where it was, as onnxruntime holds them as
initializers at no cost per run): TorchScript writes every literal as a Constant of its own, so
`torch.stack((sx, sy, sx, sy))` unsqueezes sx and sy twice, each time with axes from a new
Constant. onnxruntime merges equal nodes only when they read the same values, not equal
constants, and runs each copy: per iteration when in a loop body. Only operators of the default
domain that hold no subgraph and draw no random values are merged; a node whose output is an
output of its graph, or is read by a subgraph from around it, stays.
"""

from __future__ import annotations

__all__ = ["merge_duplicate_nodes"]

from collections.abc import Hashable

import numpy as np
import onnx_ir as ir

from seqlower.ops import constant_tensor, graph_nodes, has_subgraph, is_tensor, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream

# operators whose two runs on the same inputs may differ
_RANDOM_OPS = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial"}
    | {"Bernoulli", "Dropout"}
)
# constants up to this many elements are compared by content (shapes, axes, positions)
_MAX_COMPARED = 64


def merge_duplicate_nodes(model: ir.Model) -> int:
    """Merge every node into the first earlier node of its graph computing the same (see the
    module docstring); returns how many nodes were removed."""
    contents = _Contents()
    return sum(_merge_in(graph, contents) for graph in list(iter_all_graphs(model)))


class _Contents:
    """Each tensor's `_content`, computed once per merge: the same constant (an epsilon, an
    axes list) is read by thousands of nodes, and each reading asked numpy for its bytes."""

    def __init__(self) -> None:
        # id -> (the tensor, kept alive so that its id is not reused; its content)
        self._found: dict[int, tuple[object, Hashable | None]] = {}

    def __call__(self, tensor: object) -> Hashable | None:
        found = self._found.get(id(tensor))
        if found is None:
            found = self._found[id(tensor)] = (tensor, _content(tensor))
        return found[1]


def _merge_in(graph: ir.Graph, contents: _Contents) -> int:
    seen: dict[Hashable, ir.Node] = {}
    dropped: list[ir.Node] = []
    # asked once per node: the first of many copies is asked again for each, and its readers
    # grow by one per merge (linear, not the number of copies times its readers)
    apart: dict[ir.Node, bool] = {}

    def read_elsewhere(node: ir.Node) -> bool:
        if node not in apart:
            apart[node] = _read_elsewhere(node, graph)
        return apart[node]

    for node in list(graph_nodes(graph)):
        key = _key(node, graph, contents)
        if key is None:
            continue
        first = seen.setdefault(key, node)
        if first is node or any(out.is_graph_output() for out in node.outputs):
            continue
        if read_elsewhere(node) or read_elsewhere(first):
            continue
        for old, new in zip(node.outputs, first.outputs, strict=True):
            old.replace_all_uses_with(new)
        dropped.append(node)
    remove_dead_upstream(dropped)
    return len(dropped)


def _read_elsewhere(node: ir.Node, graph: ir.Graph) -> bool:
    """Whether a subgraph reads an output of `node` from around it. Such values stay apart:
    ONNX shape inference with data propagation (onnx 1.18 to 1.23) gave a Reshape after a Loop
    a wrong rank once a value the Loop's body read was also read by the Slices computing the
    Reshape's target, and the lowered model then failed the checker."""
    return any(use.node.graph is not graph for out in node.outputs for use in out.uses())


def _key(node: ir.Node, graph: ir.Graph, contents: _Contents) -> Hashable | None:
    """What `node` computes, as a hashable key, or None when it is not to be merged."""
    op_type = node.op_type
    if node.domain not in ("", "ai.onnx") or op_type in _RANDOM_OPS or node.graph is not graph:
        return None
    if op_type == "Constant":
        return None  # equal Constants stay apart: what reads them is merged
    found = node.attributes.data  # the plain dict (see ops.node_subgraphs)
    if found and has_subgraph(node):
        return None
    attributes = []
    for name in sorted(found) if found else ():
        attr = found[name]
        if attr.is_ref():
            return None
        value = attr.value
        if isinstance(value, list | tuple):
            value = tuple(value)
        elif is_tensor(value):  # ConstantOfShape's value
            content = contents(value)
            if content is None:
                return None
            value = content
        elif not isinstance(value, int | float | str | bytes):
            return None  # a type, a sparse tensor: not compared
        attributes.append((name, int(attr.type), value))
    inputs = tuple(_input_key(value, contents) for value in node.inputs)
    return (op_type, node.overload, len(node.outputs), tuple(attributes), inputs)


def _input_key(value: ir.Value | None, contents: _Contents) -> Hashable:
    if value is None:
        return None
    tensor = constant_tensor(value)
    content = None if tensor is None else contents(tensor)
    return ("value", id(value)) if content is None else ("constant", content)


def _content(tensor: object) -> Hashable | None:
    """A small tensor's element type, shape and bytes; None for a large one or one whose bytes
    do not say its value (strings)."""
    if not is_tensor(tensor) or tensor.size > _MAX_COMPARED:
        return None
    try:
        array = np.asarray(tensor.numpy())
    except Exception:  # a type numpy does not hold: compared as a value
        return None
    if array.dtype.kind == "O":
        return None
    return (int(tensor.dtype), array.shape, array.tobytes())
