"""Remove what lowering left unused: dead nodes (subgraphs included), unused initializers,
functions and opset imports."""

from __future__ import annotations

__all__ = ["CleanupPass", "remove_dead_nodes"]

import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedFunctionsPass, RemoveUnusedNodesPass


def remove_dead_nodes(model: ir.Model) -> bool:
    """Dead-code elimination over the whole model. True when something was removed."""
    return RemoveUnusedNodesPass()(model).modified


class CleanupPass(ir.passes.InPlacePass):
    """Dead nodes, then unused initializers and functions."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = remove_dead_nodes(model)
        modified |= RemoveUnusedFunctionsPass()(model).modified
        return ir.passes.PassResult(model, modified)
