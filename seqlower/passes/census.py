"""Which operators a model holds, so that a pass that rewrites only certain operators is not
run over a model that has none of them.

Each of the cleanup's small passes walks every node of every graph looking for its own
operators (a Cast, a ReduceMin, a Loop...); on a 30k-node model each walk takes a few
hundredths of a second, and most find nothing. One walk counts the operators; a pass whose
operators are absent is skipped, which is what it would have done, found nothing. The count is
taken again after a pass that changed the model (it may have made an operator anew).

    census = OpCensus(model)
    removed = census.run({"Cast"}, remove_noop_casts, model)   # 0 without a walk if no Cast
"""

from __future__ import annotations

__all__ = ["OpCensus"]

from collections.abc import Callable, Collection
from typing import TypeVar

import onnx_ir as ir

from seqlower.ops import iter_all_nodes

_Result = TypeVar("_Result", int, bool)


class OpCensus:
    """The operator types of every node of `model` (subgraphs and functions included, any
    domain: a superset of what a pass of the default domain looks for)."""

    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self._ops: set[str] | None = None

    def holds_any(self, ops: Collection[str]) -> bool:
        if self._ops is None:
            self._ops = {node.op_type for node in iter_all_nodes(self._model)}
        return not self._ops.isdisjoint(ops)

    def changed(self) -> None:
        """The model changed: count again when next asked."""
        self._ops = None

    def run(
        self, ops: Collection[str], rewrite: Callable[[ir.Model], _Result], model: ir.Model
    ) -> _Result | int:
        """`rewrite(model)` when the model holds one of `ops` (the operators `rewrite` looks
        for: with none of them it changes nothing), else 0."""
        if not self.holds_any(ops):
            return 0
        result = rewrite(model)
        if result:
            self.changed()
        return result
