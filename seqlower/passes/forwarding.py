"""The walk the cleanup rewrites share that drop a node giving one of its operands unchanged
(`x + 0`, `min(INT64_MAX, n)`, an Unsqueeze that broadcasting makes anyway):

    y = Op(x, ..)  ->  readers of y read x ; Op goes, and what only it read
"""

from __future__ import annotations

__all__ = ["Unchanged", "forward_unchanged"]

from collections.abc import Callable

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, iter_all_graphs
from seqlower.passes.dead_code import remove_dead_upstream

# the operand `node` gives unchanged, or None; the output it replaces is no graph output
Unchanged = Callable[[ir.Node, StaticValues], "ir.Value | None"]


def forward_unchanged(model: ir.Model, unchanged: Unchanged) -> int:
    """Remove every node of `model` for which `unchanged` names an operand, its readers reading
    that operand instead, then what the removed nodes alone read; returns how many."""
    removed = 0
    # provisional "not static" answers last until a node goes (each removal keeps every
    # value's content): a residual chain of 1,000 Adds is walked once, not once per Add
    values = StaticValues(model.opset_imports.get(""), lambda: removed)
    bypassed: list[ir.Node] = []  # read by nothing now: removed at the end, with what they read
    for graph in list(iter_all_graphs(model)):
        for node in list(graph_nodes(graph)):
            kept = unchanged(node, values)
            if kept is None:
                continue
            node.outputs[0].replace_all_uses_with(kept)
            bypassed.append(node)
            removed += 1
    if bypassed:
        remove_dead_upstream(bypassed)
    return removed
