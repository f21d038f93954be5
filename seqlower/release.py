"""Nodes removed for good are let go of: their reference cycles are broken, so that reference
counting frees them instead of Python's cyclic garbage collector."""

from __future__ import annotations

__all__ = ["let_go"]

import onnx_ir as ir


def let_go(node: ir.Node) -> None:
    """Break the reference cycles a node removed for good is part of (the node holds its
    outputs, each of which holds the node as its producer; its attributes hold it as their
    owner), so that reference counting frees it, its outputs and what they hold once nothing
    else does. Left to Python's cyclic collector, the nodes a lowering drops (300k objects on a
    15k-node chain) were collected at the end of `optimize`, in one pass that took a sixth of
    the run. Only the references onnx_ir keeps for a node in a graph are cleared: the node
    still has its outputs, their names and their types."""
    attributes = node.attributes
    if hasattr(attributes, "_owner"):  # onnx_ir's private fields: a release without them
        attributes._owner = None  # is left alone
    for output in node.outputs:
        if getattr(output, "_producer", None) is node:
            output._producer = None
