"""Inline the model-local functions that hold or pass sequences.

    y = local.f(x), f(a) => (b) { s = SplitToSequence(a); b = ConcatFromSequence(s) }
        -> s' = SplitToSequence(x); y = ConcatFromSequence(s')     (then lowered as usual)

The lowering driver visits function bodies too, but there it can rarely do anything: a function's
inputs have no types or shapes, ONNX shape inference records none inside function bodies, and a
sequence passed to or returned by a function has an unknown length inside it. Inlining each call
puts the body where shapes and sequence facts are known. Only functions that use sequence
operators, call such functions, or take or return sequences at some call site are inlined; the
others keep their calls. A function whose inlining fails (cyclic calls, conflicting opsets) stays
and is named in a warning.
"""

from __future__ import annotations

__all__ = ["InlineSequenceFunctionsPass"]

import logging

import onnx_ir as ir
from onnx_ir.passes.common import InlinePass

from seqlower.ops import graph_nodes, is_sequence_op, is_sequence_value, iter_all_graphs

logger = logging.getLogger(__name__)


class InlineSequenceFunctionsPass(ir.passes.InPlacePass):
    """Inline the calls of model-local functions that hold or pass sequences.

    After the pass: `inlined` names the functions inlined, `warnings` those that could not be.
    """

    def __init__(self) -> None:
        super().__init__()
        self.inlined: list[str] = []
        self.warnings: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        targets = _sequence_functions(model)
        if not targets:
            return ir.passes.PassResult(model, False)
        names = {f"{f.domain}::{f.name}" for f in model.functions.values() if id(f) in targets}
        try:
            result = _InlineWithDistinctNames(criteria=lambda f: id(f) in targets)(model)
        except Exception as error:  # the model stays as it was: the pass checks first
            self.warnings.append(
                f"functions {', '.join(sorted(names))} use sequences but could not be inlined "
                f"({str(error).splitlines()[0] if str(error) else type(error).__name__}); "
                "their sequences stay"
            )
            return ir.passes.PassResult(model, False)
        self.inlined = sorted(names)
        logger.debug("inlined %s", self.inlined)
        return ir.passes.PassResult(model, result.modified)


class _InlineWithDistinctNames(InlinePass):
    """onnx_ir's `InlinePass`, each copy of a function's body starting from names of its own.

    The pass names a copy's nodes and values after the body's, and finds a free name by trying
    `name_2`, `name_3`, ... from 2 every time: the k-th copy of a name tries k names, so a
    function called 4,096 times took 8 s in naming alone (quadratic). Here the body's names
    carry the number of the copy (`name_k`) while it is copied, and are restored after."""

    def __init__(self, criteria) -> None:  # type: ignore[no-untyped-def]
        super().__init__(criteria=criteria)
        self._copies: dict[int, int] = {}

    def _instantiate_call(self, node, call_site_id):  # type: ignore[no-untyped-def]
        function = self._functions[node.op_identifier()]
        copy = self._copies[id(function)] = self._copies.get(id(function), 0) + 1
        named = [(n, n.name, [(v, v.name) for v in n.outputs]) for n in function]
        for body_node, name, outputs in named:
            body_node.name = f"{name or 'node'}_{copy}"
            for value, value_name in outputs:
                value.name = f"{value_name or 'val'}_{copy}"
        try:
            return super()._instantiate_call(node, call_site_id)
        finally:
            for body_node, name, outputs in named:
                body_node.name = name
                for value, value_name in outputs:
                    value.name = value_name


def _sequence_functions(model: ir.Model) -> set[int]:
    """ids of the functions to inline: those using sequence ops or taking/returning sequences
    at a call site, and those calling such functions."""
    functions = {function.identifier(): function for function in model.functions.values()}
    targets: set[int] = set()
    if not functions:  # nothing to inline: no walk over the model
        return targets
    for function in functions.values():
        if any(is_sequence_op(node) for node in function.graph.all_nodes()):
            targets.add(id(function))
    for graph in iter_all_graphs(model):
        for node in graph_nodes(graph):
            callee = functions.get(node.op_identifier())
            if callee is None:
                continue
            if any(is_sequence_value(v) for v in (*node.inputs, *node.outputs)):
                targets.add(id(callee))
    changed = True
    while changed:  # callers of targets are targets: the sequences move into them
        changed = False
        for function in functions.values():
            if id(function) in targets:
                continue
            calls = (functions.get(n.op_identifier()) for n in function.graph.all_nodes())
            if any(callee is not None and id(callee) in targets for callee in calls):
                targets.add(id(function))
                changed = True
    return targets
