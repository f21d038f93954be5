"""seqlower's passes composed in the order `seqlower.optimize` runs them, for a user's own
`onnx_ir` pipeline:

    SequenceLoweringPass(options)
        == InlineSequenceFunctionsPass -> NormalizePass (-> LoopConditionPass)
           -> LowerSequencesPass -> CleanupPass (-> LoopsToScansPass) -> RuntimeWorkaroundsPass
           (-> RelaxShapeHintsPass)

(the passes in parentheses for target="onnxruntime", the last for target="tract")

The last pass matters: without it, some batched models crash onnxruntime while it loads them
(docs/design.md, "Where the specification and onnxruntime disagree", item 7).
`LowerSequencesPass` applies it too, so any order a user composes from the public passes gives
a model that loads. What `seqlower.optimize` adds on top is the report (rules fired, what remains
and why) and `--flatten-sequence-io`.
"""

from __future__ import annotations

__all__ = ["SequenceLoweringPass", "default_passes"]

import onnx_ir as ir

from seqlower.options import OPENVINO_LOOP_TARGETS, SPEED_FIRST_TARGETS, Options
from seqlower.passes.cleanup import CleanupPass
from seqlower.passes.inline_functions import InlineSequenceFunctionsPass
from seqlower.passes.lower import LowerSequencesPass
from seqlower.passes.normalize import NormalizePass
from seqlower.passes.onnxruntime_loops import LoopConditionPass, LoopsToScansPass
from seqlower.passes.shape_hints import RelaxShapeHintsPass
from seqlower.passes.workarounds import RuntimeWorkaroundsPass
from seqlower.rule import RuleSet


def default_passes(
    options: Options | None = None, rules: RuleSet | None = None
) -> list[ir.passes.PassBase]:
    """Fresh instances of the passes `seqlower.optimize` runs, in its order."""
    options = options or Options()
    speed_first = options.target in SPEED_FIRST_TARGETS
    passes: list[ir.passes.PassBase] = [
        InlineSequenceFunctionsPass(),
        NormalizePass(options),
        *([LoopConditionPass()] if speed_first else []),
        LowerSequencesPass(rules, options),
        CleanupPass(),
        *([LoopsToScansPass()] if speed_first else []),
        RuntimeWorkaroundsPass(
            speed_first=speed_first, openvino_loops=options.target in OPENVINO_LOOP_TARGETS
        ),
    ]
    if options.target == "tract":  # tract holds a model to its declared shapes
        passes.append(RelaxShapeHintsPass())
    return passes


class SequenceLoweringPass(ir.passes.InPlacePass):
    """`default_passes()` as one in-place pass: lower a model's sequence operators.

    Unlike `onnx_ir.passes.Sequential`, a `SeqlowerError` (a model the specification makes
    invalid, say) reaches the caller as itself. After the pass, `passes` holds the instances
    that ran, e.g. for the rule counts of the `LowerSequencesPass` (`passes[2].fired`).
    """

    def __init__(self, options: Options | None = None, rules: RuleSet | None = None) -> None:
        super().__init__()
        self.options = options or Options()
        self.rules = rules
        self.passes: list[ir.passes.PassBase] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.passes = default_passes(self.options, self.rules)
        modified = False
        for step in self.passes:
            modified |= step(model).modified
        return ir.passes.PassResult(model, modified)
