"""A Loop body's condition input whose declared rank the Loop's condition contradicts
declares no shape.

    c = If(..)                           # the export declares c bool[d]: it is a scalar
    Loop(M, c, .., body(i, cond: bool[d], ..))
    -> after lowering, inference gives c the shape [] (the branches' lists are tensors now)
    -> body(i, cond: bool, ..)           # no shape: inference gives it c's

ONNX type inference gives a Loop body's condition input the type of the Loop's condition and
merges it with what the body declares. PyTorch's TorchScript exporter declares the scalar
`bool(a == b)` of a `while` condition as rank 1; onnxruntime runs the model, and the two
declarations agree while the condition's producer reads lists, whose elements have no declared
shape. Once lowering makes those elements tensors, inference proves the condition a scalar, and
the full check of the lowered model fails on the body's declaration alone. Where the two ranks
differ, the body's condition input declares no shape: the declaration that inference
contradicts was the export's guess, and the value passed is the same. (No shape rather than the
condition's: onnxruntime refuses to load a body that declares a scalar condition for a
condition of shape [1], and runs one that declares none.)

The main graph's own Loops are checked on input (`seqlower.loop_condition`): a condition whose
rank differs from its body's declaration there is refused, onnxruntime failing to load it.
"""

from __future__ import annotations

__all__ = ["match_loop_condition_declarations"]

import onnx_ir as ir

from seqlower.ops import iter_all_graphs


def match_loop_condition_declarations(model: ir.Model) -> int:
    """Drop the declared shape of the condition input of each Loop body whose declared rank
    differs from the rank of the Loop's condition value (both known); how many were dropped."""
    changed = 0
    for graph in iter_all_graphs(model):
        for node in graph:
            if node.op_type != "Loop" or node.domain != "" or len(node.inputs) < 2:
                continue
            condition = node.inputs[1]
            body_attr = node.attributes.get("body")
            if condition is None or condition.shape is None or body_attr is None:
                continue
            body = body_attr.as_graph()
            if len(body.inputs) < 2:
                continue
            declared = body.inputs[1]
            if declared.shape is None or len(declared.shape) == len(condition.shape):
                continue
            declared.shape = None
            changed += 1
    return changed
