"""Rewrite patterns that crash a known runtime into equivalent ones that do not.

    Cast(Transpose(x, perm), to=T)  ->  Transpose(Cast(x, to=T), perm)

onnxruntime (1.20 to at least 1.32, x86_64, default optimization level; quirk
`transpose-cast-matmul-crash` in seqlower.runtime_quirks) dies with a segmentation
fault while creating a session for Transpose -> Cast -> MatMul: its MatMul-Transpose fusion swaps
the Cast and the Transpose with nodes that carry no operator schema, and the NCHWc layout
transformer then dereferences that missing schema (microsoft/onnxruntime#28392). Batching emits
exactly that chain when a body casts a stacked input before a MatMul. With the Cast first the
fusion has nothing to swap, and the result is the same: Cast works element by element.
"""

from __future__ import annotations

__all__ = ["RuntimeWorkaroundsPass"]

import onnx_ir as ir

from seqlower.ops import iter_all_graphs


class RuntimeWorkaroundsPass(ir.passes.InPlacePass):
    """After the pass, `swapped` counts the Transpose -> Cast pairs put in the other order, to
    a fixpoint: Casts after a chain of Transposes end up before the whole chain."""

    def __init__(self) -> None:
        super().__init__()
        self.swapped = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.swapped = 0
        for graph in iter_all_graphs(model):
            queue = [node for node in graph if _is_cast_of_private_transpose(node)]
            while queue:
                cast = queue.pop()
                if cast.graph is not graph or not _is_cast_of_private_transpose(cast):
                    continue
                new_cast, new_transpose = _cast_first(graph, cast)
                self.swapped += 1
                # the new Cast may follow another Transpose, and a Cast that read the old one
                # now follows the moved Transpose
                queue.append(new_cast)
                queue.extend(new_transpose.outputs[0].consumers())
        return ir.passes.PassResult(model, self.swapped > 0)


def _is_cast_of_private_transpose(node: ir.Node) -> bool:
    """A Cast whose input is a Transpose output read by that Cast alone."""
    if node.op_type != "Cast" or node.domain != "" or not node.inputs or node.inputs[0] is None:
        return False
    transposed = node.inputs[0]
    transpose = transposed.producer()
    return (
        transpose is not None
        and transpose.op_type == "Transpose"
        and transpose.domain == ""
        and transpose.graph is node.graph
        and len(transposed.uses()) == 1
        and not transposed.is_graph_output()
    )


def _cast_first(graph: ir.Graph, cast: ir.Node) -> tuple[ir.Node, ir.Node]:
    """Put `cast` before the Transpose it reads; returns the new Cast and Transpose."""
    transposed = cast.inputs[0]
    assert transposed is not None
    transpose = transposed.producer()
    assert transpose is not None
    data = transpose.inputs[0]
    result = cast.outputs[0]
    new_cast = ir.Node("", "Cast", [data], list(cast.attributes.values()), name=cast.name)
    new_transpose = ir.Node(
        "",
        "Transpose",
        [new_cast.outputs[0]],
        list(transpose.attributes.values()),
        name=transpose.name,
    )
    graph.insert_before(transpose, [new_cast, new_transpose])
    casted = new_cast.outputs[0]
    casted.type = result.type
    casted.shape = None if data is None or data.shape is None else ir.Shape(list(data.shape))
    new_transpose.outputs[0].type = result.type
    new_transpose.outputs[0].shape = result.shape
    names = (transposed.name, result.name)
    result.replace_all_uses_with(new_transpose.outputs[0], replace_graph_outputs=True)
    graph.remove([cast, transpose], safe=True)
    casted.name, new_transpose.outputs[0].name = names
    return new_cast, new_transpose
