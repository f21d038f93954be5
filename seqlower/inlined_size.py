"""How many nodes a model makes once every call of a model-local function is inlined.

A function may call another many times over: f0 calls f1 twice, f1 calls f2 twice, and so on,
so that a file of forty nodes stands for 2**20 of them. ONNX's type and shape inference infers
a function's body anew at every call (2 s at 2**16 nodes, doubling with each level), onnx_ir's
inliner writes every copy out, and a runtime runs them all. So the count is taken from the file
first, each function counted once (the checker has refused cyclic calls):

    size(graph)    = sum over its nodes of 1 + size(the function it calls, if local)
                     + size(each subgraph the node holds)
    size(function) = size(its body)
"""

from __future__ import annotations

__all__ = ["MAX_INLINED_FACTOR", "inlined_node_count", "too_many_inlined"]

import onnx

from seqlower.budget import MAX_EXPANSION

MAX_INLINED_FACTOR = 100  # the nodes inlining may make, per node of the file, above MAX_EXPANSION

_Key = tuple[str, str, str]


def inlined_node_count(proto: onnx.ModelProto) -> tuple[int, int]:
    """(the nodes of the model once every call of a local function is inlined, the nodes in
    the file). Functions are counted once each, in an order where callees come first."""
    functions: dict[_Key, onnx.FunctionProto] = {
        (f.domain, f.name, f.overload): f for f in proto.functions
    }
    sizes: dict[_Key, int] = {}
    # callees first: a depth-first walk kept on a stack (the checker bounds the depth of calls
    # but not the number of functions)
    entered: set[_Key] = set()
    for key in functions:
        stack = [(key, False)]
        while stack:
            current, ready = stack.pop()
            if current in sizes or (not ready and current in entered):
                continue
            entered.add(current)
            callees = [c for c in _calls(functions[current].node, functions) if c not in sizes]
            if ready or not callees:
                sizes[current] = _size(functions[current].node, functions, sizes)
                continue
            stack.append((current, True))
            stack.extend((callee, False) for callee in callees)
    in_file = sum(len(nodes) for nodes in _all_node_lists(proto))
    return _size(proto.graph.node, functions, sizes), in_file


def too_many_inlined(proto: onnx.ModelProto) -> str | None:
    """Why inlining the model's functions would make too many nodes, or None."""
    if not proto.functions:
        return None
    total, in_file = inlined_node_count(proto)
    limit = max(MAX_EXPANSION, MAX_INLINED_FACTOR * in_file)
    if total <= limit:
        return None
    return (
        f"its model-local functions call each other over and over: inlining every call would "
        f"make {total} nodes from the {in_file} in the file, more than seqlower reads "
        f"(at most {limit})"
    )


def _key(node: onnx.NodeProto) -> _Key:
    return (node.domain, node.op_type, node.overload)


def _subgraph_nodes(node: onnx.NodeProto) -> list:
    found = []
    for attribute in node.attribute:
        if attribute.HasField("g"):
            found.append(attribute.g.node)
        found.extend(graph.node for graph in attribute.graphs)
    return found


def _calls(nodes, functions: dict[_Key, onnx.FunctionProto]) -> list[_Key]:
    """The local functions `nodes` and their subgraphs call."""
    found: list[_Key] = []
    stack = [nodes]
    while stack:
        for node in stack.pop():
            if _key(node) in functions:
                found.append(_key(node))
            stack.extend(_subgraph_nodes(node))
    return found


def _size(nodes, functions: dict[_Key, onnx.FunctionProto], sizes: dict[_Key, int]) -> int:
    """The nodes of `nodes` and their subgraphs, each call of a local function counted as the
    size of its body (known in `sizes`; a call not yet counted counts as one node)."""
    total = 0
    stack = [nodes]
    while stack:
        for node in stack.pop():
            total += 1 + sizes.get(_key(node), 0)
            stack.extend(_subgraph_nodes(node))
    return total


def _all_node_lists(proto: onnx.ModelProto) -> list:
    """The node lists of the main graph, of every function and of every subgraph in them."""
    found = []
    stack = [proto.graph.node, *(f.node for f in proto.functions)]
    while stack:
        nodes = stack.pop()
        found.append(nodes)
        for node in nodes:
            stack.extend(_subgraph_nodes(node))
    return found
