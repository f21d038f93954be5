"""`optimize`: normalize -> lower to a fixpoint -> clean up -> legality check, with a report."""

from __future__ import annotations

__all__ = ["OptimizeResult", "optimize"]

import dataclasses
from typing import NamedTuple

import onnx_ir as ir

from seqlower.errors import InvalidModelError
from seqlower.io import ModelSource, load_model
from seqlower.options import Options
from seqlower.passes import CleanupPass, LowerSequencesPass, NormalizePass
from seqlower.passes.legality import count_sequence_ops, remaining_sequence_ops
from seqlower.report import Report
from seqlower.rule import RuleSet

MIN_OPSET = 11


class OptimizeResult(NamedTuple):
    """The lowered model and what was done to it. Unpacks as `model, report`."""

    model: ir.Model
    report: Report


def optimize(
    source: ModelSource,
    options: Options | None = None,
    *,
    rules: RuleSet | None = None,
    **option_overrides: object,
) -> OptimizeResult:
    """Lower the sequence operators of a model.

    `source` is an `onnx_ir.Model` (not modified: a copy is lowered), an `onnx.ModelProto` or a
    path. Keyword arguments override fields of `Options`, e.g. `split_keepdims="spec"`.
    """
    options = dataclasses.replace(options or Options(), **option_overrides)  # type: ignore[arg-type]
    model = load_model(source)
    if isinstance(source, ir.Model):
        model = model.clone()
    _check_supported(model)

    report = Report(sequence_ops_before=count_sequence_ops(model))
    normalize = NormalizePass(options)
    normalize(model)
    lower = LowerSequencesPass(rules, options)
    lower(model)
    CleanupPass()(model)

    report.sequence_ops_after = count_sequence_ops(model)
    report.rules_fired = lower.fired
    report.stop_reason = lower.stop_reason
    report.iterations = lower.iterations
    report.warnings = normalize.warnings + lower.warnings
    report.remaining = remaining_sequence_ops(model, lower.refusals)
    return OptimizeResult(model, report)


def _check_supported(model: ir.Model) -> None:
    opset = model.opset_imports.get("")
    if opset is None:
        opset = model.opset_imports.get("ai.onnx")
    if opset is not None and opset < MIN_OPSET:
        raise InvalidModelError(
            f"opset {opset} is not supported: sequence operators need opset {MIN_OPSET} or newer"
        )
