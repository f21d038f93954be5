"""What the shape analysis of a Loop proved, remembered across analyses while the model stays
as it was.

The analysis of a Loop (`LoopShapes`) derives the shape of a tensor another Loop carries out by
analysing that Loop (`carried_output_shape`): which of its carried tensors keep the shape of
their initial value. In a chain of Loops, each reading what the one before carried out, every
analysis analysed the Loop before it, and that one the Loop before it: K Loops in a row in one
body took some K * K / 2 analyses, nested K deep (300 Loops: a RecursionError).

A `LoopMemo` keeps, per Loop node, the carried body inputs that keep their shape, as an analysis
without hypotheses found them. It answers only for the `StaticValues` it was made with, and
forgets everything when `generation` changes (`Rewriter.generation`: a node emitted, a value
replaced, a rewrite done; or a count of the shapes declared): an answer is what a new analysis
would find on the model as it is. It may also hold a `DerivedShapes` (`derived`), which
outlives the generations: its owner forgets what each rewrite changes.

It also keeps the last analysis made without hypotheses (`analysis`, `keep_analysis`): the
rules tried on one Loop in turn (loop-concat-to-scan, loop-append-to-scan, ...) each asked for
the same analysis of its body, of thousands of nodes in a large body, while nothing changed.
Only the last one is kept, so the memory held is one analysis at most; it is forgotten with the
rest when the generation changes.
"""

from __future__ import annotations

__all__ = ["LoopMemo"]

from collections.abc import Callable
from typing import TYPE_CHECKING

import onnx_ir as ir

from seqlower.analysis.derived_shapes import DerivedShapes
from seqlower.analysis.static_values import StaticValues

if TYPE_CHECKING:
    from seqlower.analysis.loop_shapes import LoopShapes


class LoopMemo:
    """The carried body inputs each Loop keeps the shape of, per Loop node, for as long as
    `generation()` gives the same number (without `generation`, for the memo's lifetime: the
    caller then keeps it no longer than the model stays unchanged)."""

    def __init__(
        self,
        values: StaticValues,
        generation: Callable[[], int] | None = None,
        derived: DerivedShapes | None = None,
    ) -> None:
        self.values = values
        # the shapes derived for outer values, kept across generations: the caller forgets
        # what each rewrite changes (`DerivedShapes.forget_downstream`)
        self.derived = derived
        self._generation = generation
        self._seen = generation() if generation is not None else 0
        self._invariant: dict[ir.Node, tuple[ir.Value, ...]] = {}
        self._last: tuple[ir.Node, LoopShapes] | None = None  # the last analysis kept

    def invariant_carried(self, loop: ir.Node, values: StaticValues) -> tuple[ir.Value, ...] | None:
        """What an analysis of `loop` over `values` found, if one did since the model last
        changed; None otherwise."""
        if values is not self.values:
            return None
        return self._current().get(loop)

    def remember(self, loop: ir.Node, values: StaticValues, invariant: list[ir.Value]) -> None:
        """Note what an analysis of `loop` over `values`, without hypotheses, found."""
        if values is self.values:
            self._current()[loop] = tuple(invariant)

    def analysis(self, loop: ir.Node, values: StaticValues) -> LoopShapes | None:
        """The analysis of `loop` over `values`, without hypotheses, kept last
        (`keep_analysis`), if the model has not changed since; None otherwise."""
        if values is not self.values:
            return None
        self._current()
        if self._last is None or self._last[0] is not loop:
            return None
        return self._last[1]

    def keep_analysis(self, loop: ir.Node, values: StaticValues, shapes: LoopShapes) -> None:
        """Keep `shapes`, an analysis of `loop` over `values` without hypotheses, in place of
        the one kept before."""
        if values is self.values:
            self._current()
            self._last = (loop, shapes)

    def _current(self) -> dict[ir.Node, tuple[ir.Value, ...]]:
        if self._generation is not None:
            seen = self._generation()
            if seen != self._seen:
                self._seen, self._invariant, self._last = seen, {}, None
        return self._invariant
