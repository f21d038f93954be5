"""One empty list per use: a SequenceEmpty read in several places becomes one SequenceEmpty each.

    e = SequenceEmpty()                      e1 = SequenceEmpty(); e2 = SequenceEmpty()
    If(c) { ... } else { -> (e, e, e) }  ->  If(c) { ... } else { -> (e, e1, e2) }
    a = SequenceInsert(e, x)                 a = SequenceInsert(e, x)
    b = SequenceInsert(e, y)                 b = SequenceInsert(e1, y)

TorchScript's exporter writes one SequenceEmpty for every list a `while True: ... break` loop
leaves undefined on its exit path, and returns it for each of them: Tacotron 2's decoder returns
it as its mel frames (rank 1) and its alignments (rank 2). Lists that share a value are lowered
together (one component, one layout), so such lists of differing element ranks all took the
general flat form, and the portable target refused them ("its elements have different ranks").
An empty list holds no element and SequenceEmpty reads nothing: a copy per use computes the
same, and each list is then lowered on its own.
"""

from __future__ import annotations

__all__ = ["unshare_empty_lists"]

import onnx_ir as ir

from seqlower.ops import iter_all_graphs
from seqlower.rewriter import NameAllocator
from seqlower.uses import use_count


def unshare_empty_lists(model: ir.Model) -> int:
    """Give every use of a SequenceEmpty but the first its own SequenceEmpty; returns how many
    were made."""
    shared = [
        (graph, node)
        for graph in iter_all_graphs(model)
        for node in graph
        if node.op_type == "SequenceEmpty" and node.domain == "" and _readers(graph, node) > 1
    ]
    if not shared:
        return 0  # no walk of the model for its names
    names = NameAllocator.for_model(model)
    return sum(_unshare(graph, node, names) for graph, node in shared)


def _readers(graph: ir.Graph, node: ir.Node) -> int:
    value = node.outputs[0]
    return use_count(value) + sum(1 for v in graph.outputs if v is value)


def _unshare(graph: ir.Graph, node: ir.Node, names: NameAllocator) -> int:
    value = node.outputs[0]
    uses = list(value.uses())
    outputs = [i for i, v in enumerate(graph.outputs) if v is value]
    # the first reader keeps the original: a graph output if there is one, else the first node
    extra_outputs = outputs[1:] if outputs else []
    extra_uses = uses if outputs else uses[1:]
    made = 0
    anchor = node
    for user, index in extra_uses:
        copy = _copy(node, value, names)
        graph.insert_after(anchor, copy)
        anchor = copy
        user.replace_input_with(index, copy.outputs[0])
        made += 1
    for position in extra_outputs:
        copy = _copy(node, value, names)
        graph.insert_after(anchor, copy)
        anchor = copy
        graph.outputs[position] = copy.outputs[0]
        made += 1
    return made


def _copy(node: ir.Node, value: ir.Value, names: NameAllocator) -> ir.Node:
    copy = ir.Node(
        "",
        "SequenceEmpty",
        [],
        attributes=list(node.attributes.values()),
        name=names.fresh(node.name or "SequenceEmpty"),
    )
    out = copy.outputs[0]
    out.name = names.fresh(value.name or "empty")
    out.type = value.type
    return copy
