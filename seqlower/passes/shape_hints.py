"""Named dims in the declared shapes of intermediate values, for `--target tract` only: made
unknown, since tract holds a model to them.

    value_info: y: float[N,3]  (an intermediate value)     -> value_info: y: float[?,3]
    a subgraph's input or output: float[N,3]                -> float[?,3]

tract checks every declared shape against the shapes it infers from the input facts it is
given: a dim named `N` in a declared intermediate shape fails against a concrete input fact
("Impossible to unify Sym(N) with Val(4)", tract 0.23.9), where onnxruntime and OpenVINO read
declared intermediate shapes as hints. Such shapes are hints in ONNX too, so the tract target
keeps of them what holds for every input: the rank and the static dims (onnxruntime runs a
Scan only with the rank of every body output; the tract profile compares the static shapes of
an If's branches). The main graph's inputs and outputs, the model's interface, keep their
declared shapes.
"""

from __future__ import annotations

__all__ = ["RelaxShapeHintsPass"]

import onnx_ir as ir

from seqlower.ops import graph_nodes, iter_all_graphs


class RelaxShapeHintsPass(ir.passes.InPlacePass):
    """After the pass, `relaxed` counts the values whose declared shape lost its named dims."""

    def __init__(self) -> None:
        super().__init__()
        self.relaxed = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.relaxed = 0
        interface = {id(v) for v in (*model.graph.inputs, *model.graph.outputs)}
        for graph in iter_all_graphs(model):
            for value in [*graph.inputs, *(v for node in graph_nodes(graph) for v in node.outputs)]:
                if id(value) in interface or value.shape is None:
                    continue
                dims = [dim if isinstance(dim, int) else None for dim in value.shape]
                if any(not isinstance(dim, int) and dim.value is not None for dim in value.shape):
                    value.shape = ir.Shape(dims)
                    self.relaxed += 1
        return ir.passes.PassResult(model, self.relaxed > 0)
