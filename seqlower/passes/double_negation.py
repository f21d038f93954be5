"""A negation of a negation is the value negated twice.

    n = Not(x)
    y = Not(n)          ->   y's readers read x

A loop that stops early lowers to the flags of the iterations that go on and the Not of them
(`loop_break`: the iterations that stop); where the flag read is itself `Not(stop)` (TorchScript
writes `if stop: break` as an If that gives Not(stop)), the two cancel. onnxruntime runs each
Not as a kernel. Not cannot fail and gives its input's shape, so nothing is lost; the inner Not
stays while anything else reads it, and a result that is an output of its graph stays.
"""

from __future__ import annotations

__all__ = ["fold_double_negations"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.passes.forwarding import forward_unchanged


def fold_double_negations(model: ir.Model) -> int:
    """Make every reader of Not(Not(x)) read x (module docstring); returns how many."""
    return forward_unchanged(model, _negated_twice)


def _negated_twice(node: ir.Node, _: StaticValues) -> ir.Value | None:
    if node.op_type != "Not" or node.domain != "" or not node.inputs:
        return None
    inner = node.inputs[0].producer() if node.inputs[0] is not None else None
    if inner is None or inner.op_type != "Not" or inner.domain != "" or not inner.inputs:
        return None
    if node.outputs[0].is_graph_output() or inner.graph is not node.graph:
        return None
    return inner.inputs[0]
