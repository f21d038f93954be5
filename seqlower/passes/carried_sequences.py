"""Element shapes of sequences built in a Loop, corrected after ONNX inference.

ONNX shape inference types a Loop's carried sequence output with the element shape of its
initial value, even when the body inserts elements of another shape:

    s0 = SequenceConstruct(x)                     # x: [3, 2]
    l = Loop(m, , s0) { out = SequenceInsert(acc, Slice(x, 0, i + 1)) }
    # inferred: l: seq(float[3, 2]); l holds [3, 2], [1, 2], [2, 2], ...

Every reader then inherits the wrong dims (`SequenceAt(l, 1)`: float[3, 2]), rules trust them,
and onnxruntime enforces them where they are declared (an If branch output). So, after each
inference, each carried sequence output gets the join of its initial element shape and the
shapes of the elements its body inserts (dims that differ become unknown; all of it when the
ranks differ or the body cannot be followed), and every value computed from a corrected one
keeps its rank only (its dims came from the wrong shape). Nothing is made more precise than
ONNX inference made it.
"""

from __future__ import annotations

__all__ = ["correct_loop_built_sequences"]

import onnx_ir as ir

from seqlower.ops import graph_nodes, subgraphs

_SAME_ELEMENTS = frozenset({"Identity", "SequenceErase"})
_MAX_ROUNDS = 4


def correct_loop_built_sequences(model: ir.Model) -> None:
    """Weaken, in place, the shapes ONNX inference derived from a loop-built sequence's initial
    element shape (see the module docstring)."""
    graphs = [model.graph, *(function.graph for function in model.functions.values())]
    for _ in range(_MAX_ROUNDS):  # a correction inside a body may change an outer loop's join
        tainted: dict[ir.Value, bool] = {}  # value -> its rank is still known
        for graph in graphs:
            _walk(graph, tainted)
        if not tainted:
            return


def _walk(graph: ir.Graph, tainted: dict[ir.Value, bool]) -> None:
    for node in graph_nodes(graph):
        inner = subgraphs(node)
        if node.op_type == "SequenceMap" and node.domain == "" and inner:
            # the body's inputs are typed by the elements of the sequences it maps
            for value, body_input in zip(node.inputs, inner[0].inputs):
                if value is not None and value in tainted and body_input not in tainted:
                    _weaken(body_input, tainted[value], tainted)
        for subgraph in inner:
            _walk(subgraph, tainted)
        if node.op_type == "Loop" and node.domain == "" and inner:
            _correct_loop(node, inner[0], tainted)
        rank_known = not _rank_from_dims(node)
        for output, sources in zip(node.outputs, _sources(node, inner)):
            reads = [value for value in sources if value is not None and value in tainted]
            if reads and output not in tainted:
                _weaken(output, rank_known and all(tainted[v] for v in reads), tainted)


def _sources(node: ir.Node, inner: list[ir.Graph]) -> list[list[ir.Value | None]]:
    """For each output of `node`, the values ONNX inference derived its shape from: an If
    output from its branches' outputs, a Loop output from its body output (and initial value),
    any other output from every input and every subgraph output."""
    if node.domain == "" and node.op_type == "If" and len(inner) == 2:
        return [[then, other] for then, other in zip(inner[0].outputs, inner[1].outputs)]
    if node.domain == "" and node.op_type == "Loop" and inner:
        carried = len(node.inputs) - 2
        body = inner[0].outputs[1:]
        return [
            [body[index], node.inputs[index + 2] if index < carried else None]
            for index in range(min(len(node.outputs), len(body)))
        ]
    everything = [*node.inputs, *(value for subgraph in inner for value in subgraph.outputs)]
    return [everything] * len(node.outputs)


def _correct_loop(node: ir.Node, body: ir.Graph, tainted: dict[ir.Value, bool]) -> None:
    carried = len(node.inputs) - 2
    for index in range(carried):
        output = node.outputs[index] if index < len(node.outputs) else None
        if output is None or not isinstance(output.type, ir.SequenceType):
            continue
        if output.shape is None or output in tainted:
            continue
        body_output = body.outputs[index + 1]
        if body_output in tainted:
            _weaken(output, tainted[body_output], tainted)
            continue
        shapes = _inserted_shapes(body_output, body.inputs[index + 2])
        initial = node.inputs[index + 2]
        if shapes is not None and not _is_empty_sequence(initial):
            shapes.append(initial.shape if initial is not None else None)
        joined = _join(shapes) if shapes else None
        if joined is None or not _same(joined, output.shape):
            rank_known = joined is not None and len(joined) == len(output.shape)
            _weaken(output, rank_known, tainted)
            if joined is not None and rank_known:
                output.shape = joined


def _inserted_shapes(value: ir.Value, carried_in: ir.Value) -> list[ir.Shape | None] | None:
    """The shapes of the elements the body adds to `carried_in` on the way to `value`, or None
    when the way is not a chain of SequenceInsert / SequenceErase / Identity."""
    shapes: list[ir.Shape | None] = []
    while value is not carried_in:
        producer = value.producer()
        if producer is None or producer.domain != "" or not producer.inputs:
            return None
        if producer.op_type == "SequenceInsert" and producer.inputs[1] is not None:
            shapes.append(producer.inputs[1].shape)
        elif producer.op_type not in _SAME_ELEMENTS:
            return None
        if producer.inputs[0] is None:
            return None
        value = producer.inputs[0]
    return shapes


def _is_empty_sequence(value: ir.Value | None) -> bool:
    producer = value.producer() if value is not None else None
    return producer is not None and producer.op_type == "SequenceEmpty"


def _join(shapes: list[ir.Shape | None]) -> ir.Shape | None:
    if any(shape is None for shape in shapes):
        return None
    ranks = {len(shape) for shape in shapes}  # type: ignore[arg-type]
    if len(ranks) != 1:
        return None
    first = shapes[0]
    assert first is not None
    dims = [
        dim if _known(dim) and all(_equal(dim, shape[axis]) for shape in shapes) else None  # type: ignore[index]
        for axis, dim in enumerate(first)
    ]
    return ir.Shape(dims)


def _known(dim: int | ir.SymbolicDim) -> bool:
    return isinstance(dim, int) or (dim.value is not None and not dim.value.startswith("unk__"))


def _equal(a: int | ir.SymbolicDim, b: int | ir.SymbolicDim) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a.value is not None and a.value == b.value


def _same(joined: ir.Shape, inferred: ir.Shape) -> bool:
    """Whether the inferred shape says nothing the join does not: no dim known there that the
    join leaves unknown or gives another value."""
    if len(joined) != len(inferred):
        return False
    return all(
        not _known(theirs) or (_known(ours) and _equal(ours, theirs))
        for ours, theirs in zip(joined, inferred)
    )


def _weaken(value: ir.Value, rank_known: bool, tainted: dict[ir.Value, bool]) -> None:
    tainted[value] = rank_known and value.shape is not None
    if value.shape is None:
        return
    value.shape = ir.Shape([None] * len(value.shape)) if tainted[value] else None


def _rank_from_dims(node: ir.Node) -> bool:
    """Operators whose output rank depends on input dims, not only on input ranks."""
    return (
        node.op_type == "Squeeze"
        and (len(node.inputs) < 2 or node.inputs[1] is None)
        and ("axes" not in node.attributes)
    )
