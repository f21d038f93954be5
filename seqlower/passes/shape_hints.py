"""Declared shapes of intermediate values, for `--target tract` only: dropped, since tract holds
a model to them.

    value_info: y: float[N,3]  (an intermediate value)     -> value_info: y: float  (no shape)
    a subgraph's input or output: float[N,3]                -> float[?,?]  (the rank kept)

tract checks every declared shape against the shapes it infers from the input facts it is
given: a dim named `N` in a declared intermediate shape fails against a concrete input fact
("Impossible to unify Sym(N) with Val(4)", tract 0.23.9), where onnxruntime and OpenVINO read
declared intermediate shapes as hints. Such shapes are hints in ONNX too (a PyTorch export's
may even be wrong), so the tract target leaves them out; the rank of a subgraph's inputs and
outputs stays, since onnxruntime runs a Scan only with the rank of every body output. The main
graph's inputs and outputs, the model's interface, keep their declared shapes.
"""

from __future__ import annotations

__all__ = ["DropShapeHintsPass"]

import onnx_ir as ir

from seqlower.ops import iter_all_graphs


class DropShapeHintsPass(ir.passes.InPlacePass):
    """After the pass, `dropped` counts the values whose declared shape was dropped or made
    rank-only."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.dropped = 0
        interface = {id(v) for v in (*model.graph.inputs, *model.graph.outputs)}
        for graph in iter_all_graphs(model):
            boundary = {id(v) for v in (*graph.inputs, *graph.outputs)}
            values = [*graph.inputs, *(v for node in graph for v in node.outputs)]
            for value in values:
                if id(value) in interface or value.shape is None:
                    continue
                if id(value) in boundary:
                    relaxed = ir.Shape([None] * len(value.shape))
                    if list(relaxed) == list(value.shape):
                        continue
                    value.shape = relaxed
                else:
                    value.shape = None
                self.dropped += 1
        return ir.passes.PassResult(model, self.dropped > 0)
