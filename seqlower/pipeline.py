"""`optimize`: normalize -> lower to a fixpoint -> clean up -> legality check, with a report."""

from __future__ import annotations

__all__ = ["OptimizeResult", "collector_relaxed", "lower_in_place", "optimize"]

import collections
import contextlib
import dataclasses
import functools
import gc
import os
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, overload

import onnx
import onnx_ir as ir

from seqlower.cost import launches
from seqlower.errors import InvalidModelError, SeqlowerError
from seqlower.io import ModelSource, load_model
from seqlower.ops import is_sequence_value, iter_all_nodes
from seqlower.options import PORTABILITY_TARGETS, Options, options_with
from seqlower.passes import CleanupPass, LowerSequencesPass, NormalizePass
from seqlower.passes.flatten_io import FlattenSequenceIOPass
from seqlower.passes.inline_functions import InlineSequenceFunctionsPass
from seqlower.passes.legality import count_sequence_ops, expanded_count
from seqlower.passes.workarounds import RuntimeWorkaroundsPass
from seqlower.report import KEPT_FOR_SPEED, Report
from seqlower.report.labels import NodeLabels
from seqlower.report.outcomes import node_outcomes
from seqlower.report.reasons import remaining_sequence_ops
from seqlower.report.sites import collect_sites
from seqlower.report.warnings import split_reading_warnings
from seqlower.rule import RuleSet
from seqlower.targets import check_target

MIN_OPSET = 11
# what to try about an operator kept because its lowering costs more (README, "Never slower")
KEPT_ORIGINAL_HINT = "--target portable (lowers it even so, at a cost)"


ModelT = TypeVar("ModelT", ir.Model, onnx.ModelProto)


class OptimizeResult(tuple[ModelT, Report], Generic[ModelT]):
    """The lowered model and what was done to it. Unpacks as `model, report`.

    `model` is of the kind `optimize` was given: an `onnx.ModelProto` for a ModelProto, an
    `onnx_ir.Model` for a path or an `onnx_ir.Model`.
    """

    __slots__ = ()

    def __new__(cls, model: ModelT, report: Report) -> OptimizeResult[ModelT]:
        return super().__new__(cls, (model, report))

    @property
    def model(self) -> ModelT:
        return self[0]

    @property
    def report(self) -> Report:
        return self[1]

    def __repr__(self) -> str:
        return f"OptimizeResult(model={type(self.model).__name__}, report={self.report!r})"


@overload
def optimize(
    source: onnx.ModelProto,
    options: Options | None = None,
    *,
    rules: RuleSet | None = None,
    after_pass: Callable[[str, ir.Model], None] | None = None,
    **option_overrides: object,
) -> OptimizeResult[onnx.ModelProto]: ...


@overload
def optimize(
    source: ir.Model | str | os.PathLike[str],
    options: Options | None = None,
    *,
    rules: RuleSet | None = None,
    after_pass: Callable[[str, ir.Model], None] | None = None,
    **option_overrides: object,
) -> OptimizeResult[ir.Model]: ...


def optimize(
    source: ModelSource,
    options: Options | None = None,
    *,
    rules: RuleSet | None = None,
    after_pass: Callable[[str, ir.Model], None] | None = None,
    **option_overrides: object,
) -> OptimizeResult[ir.Model] | OptimizeResult[onnx.ModelProto]:
    """Lower the sequence operators of a model; return it, of the kind given, with the report.

    `source` is an `onnx.ModelProto` (the result is a new `onnx.ModelProto`, ready for
    `onnx.save`), an `onnx_ir.Model` (not modified: a copy is lowered and returned) or a path
    (the result is an `onnx_ir.Model`; `seqlower.io.save_model` writes either kind). Keyword
    arguments override fields of `Options`, e.g. `split_keepdims="spec"`.
    `after_pass(name, model)` is called after each pass (progress display, `--dump-dir`).
    Raises `SeqlowerError` (with a one-line message) for input it cannot lower.
    """
    options = options_with(options, option_overrides)
    with collector_relaxed():  # loading builds most of the objects the collector would rescan
        model = load_model(source)
        if isinstance(source, ir.Model):
            model = model.clone()
            original = source.clone
        else:  # the source is still there: read it again only if the original is kept
            original = functools.partial(load_model, source)
        lowered, report = lower_in_place(
            model, options, rules=rules, after_pass=after_pass, original=original
        )
        if isinstance(source, onnx.ModelProto):
            return OptimizeResult(ir.to_proto(lowered), report)
        return OptimizeResult(lowered, report)


def lower_in_place(
    model: ir.Model,
    options: Options | None = None,
    *,
    rules: RuleSet | None = None,
    after_pass: Callable[[str, ir.Model], None] | None = None,
    original: Callable[[], ir.Model] | None = None,
) -> OptimizeResult[ir.Model]:
    """`optimize` on a model the caller owns: `model` itself is lowered and returned with the
    report. `original()` gives the model as it was, called only when a target that asks for
    speed keeps it because its lowering costs more (README, "Never slower"): pass one (reading
    the file again, say) to spare the copy made up front without it, seconds on large models."""
    options = options or Options()
    with collector_relaxed():
        if original is None and _keeps_cheaper_original(options):
            original = functools.partial(_same, model.clone())  # `model` is about to change
        nodes_before = _node_count(model)
        result = _lower(model, options, rules, after_pass, original)
        result.report.nodes_before = nodes_before
        result.report.nodes_after = _node_count(result.model)
        _judge(result.model, result.report, options.target)
        return result


def _node_count(model: ir.Model) -> int:
    return sum(1 for _ in iter_all_nodes(model))


def _judge(model: ir.Model, report: Report, target: str) -> None:
    """The target profile's verdict on the result, in the report (as `--target` prints it)."""
    report.target = target
    if target == "generic":
        return  # any runtime: nothing to judge
    check = check_target(model, report, target)
    report.target_errors = check.errors
    report.target_warnings = check.warnings


@contextlib.contextmanager
def collector_relaxed() -> Iterator[None]:
    """Run Python's cyclic garbage collector less often inside the block. Loading and rewriting
    a model create millions of long-lived objects, and the collector's passes rescan them again
    and again: with the default thresholds that was a fifth of the run time on a 100k-node
    model. Garbage cycles are still collected, every million allocations; the thresholds (which
    are process-wide) are restored on leaving the block."""
    thresholds = gc.get_threshold()
    gc.set_threshold(1_000_000, 1000, 1000)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _lower(
    model: ir.Model,
    options: Options,
    rules: RuleSet | None,
    after_pass: Callable[[str, ir.Model], None] | None,
    original: Callable[[], ir.Model] | None,
) -> OptimizeResult[ir.Model]:
    observe = after_pass or (lambda name, model: None)
    _check_supported(model)

    report = Report(sequence_ops_before=count_sequence_ops(model))
    labels = NodeLabels()  # one name per node, for the report and every message
    interface = (
        [v.name or "" for v in model.graph.inputs if is_sequence_value(v)],
        [v.name or "" for v in model.graph.outputs if is_sequence_value(v)],
    )
    declared_output_shapes = {value.name: value.shape for value in model.graph.outputs}
    flatten_inputs, flatten_outputs = _flatten_passes(options)
    flatten_inputs(model)
    observe("flatten-inputs", model)
    inline = InlineSequenceFunctionsPass()
    inline(model)
    observe("inline-functions", model)
    normalize = NormalizePass(options)
    normalize(model)
    observe("normalize", model)
    sites = collect_sites(model, labels)  # types are inferred now
    cost_before = launches(model)
    maps = (site.node for site in sites if site.op_type == "SequenceMap")
    report.expanded_before = report.total_before + sum(expanded_count(m) - 1 for m in maps)
    # the workarounds run once, last, below (a whole-model walk: 0.3 s at 100k nodes)
    lower = LowerSequencesPass(rules, options, runtime_workarounds=False)
    lower(model)
    observe("lower", model)
    if flatten_outputs(model).modified:
        lower = _lower_again(lower, model)
        observe("flatten-outputs", model)
    cleanup = CleanupPass(dead_nodes=not lower.dead_code_free)
    cleanup(model)
    RuntimeWorkaroundsPass()(model)
    _keep_declared_output_shapes(model, declared_output_shapes)
    observe("cleanup", model)

    cost_after = launches(model)
    if cost_after > cost_before:
        costlier = (
            f"the lowered model costs an estimated {cost_after:g} operator launches per run, "
            f'more than the {cost_before:g} of the original (README, "Never slower")'
        )
        if original is not None and _keeps_cheaper_original(options):
            # the hint is worth printing only if the lowering it asks for removes something
            lowers = sum(count_sequence_ops(model).values()) < report.total_before
            return _kept_original(original(), report, costlier, interface, lowers)
        report.warnings.append(f"{costlier}; kept for portability (--target {options.target})")
    renamed = labels.trace(model, lower.origins)  # messages name the input's nodes only
    report.remaining = remaining_sequence_ops(model, lower.refusals, labels, renamed)
    report.nodes = node_outcomes(model, sites, report.remaining, lower.rewrites, labels, interface)
    after = collections.Counter(op.op_type for op in report.remaining)
    report.sequence_ops_after = dict(sorted(after.items()))
    report.rules_fired = lower.fired
    if inline.inlined:
        report.rules_fired = {"inline-function": len(inline.inlined), **lower.fired}
    if cleanup.folded:
        report.rules_fired = {**report.rules_fired, "fold-constant-transpose": cleanup.folded}
    report.stop_reason = lower.stop_reason
    report.iterations = lower.iterations
    report.warnings = report.warnings + (
        inline.warnings
        + normalize.warnings
        + split_reading_warnings(normalize.split_readings, labels)
        + flatten_inputs.warnings
        + flatten_outputs.warnings
        + lower.warnings
    )
    report.interface_changes = (
        normalize.bind_dims.changes + flatten_inputs.changes + flatten_outputs.changes
    )
    return OptimizeResult(model, report)


def _same(model: ir.Model) -> ir.Model:
    return model


def _keeps_cheaper_original(options: Options) -> bool:
    """Whether the target asks for speed, not portability (with flattened sequence inputs or
    outputs, the interface asked for is not the original's, so the lowering stays)."""
    return options.target not in PORTABILITY_TARGETS and not options.flatten_sequence_io


def _kept_original(
    model: ir.Model,
    report: Report,
    why: str,
    interface: tuple[list[str], list[str]],
    lowers: bool,
) -> OptimizeResult[ir.Model]:
    """The original as given (only the runtime workarounds applied, so that it loads), returned
    because its lowering costs more: every sequence operator stays, with `why` as the reason,
    and `--target portable` as the hint when the lowering removes sequence operators
    (`lowers`)."""
    RuntimeWorkaroundsPass()(model)
    labels = NodeLabels()
    sites = collect_sites(model, labels)
    # the decision is the whole model's, said once in the stop reason; each node says only this
    kept = f"{KEPT_FOR_SPEED}: the original model is kept as given (its lowering costs more)"
    refusals = {site.node: [kept] for site in sites}
    remaining = remaining_sequence_ops(model, refusals, labels)
    nodes = node_outcomes(model, sites, remaining, {}, labels, interface)
    hint = KEPT_ORIGINAL_HINT if lowers else ""
    report.remaining = [dataclasses.replace(op, hint=op.hint or hint) for op in remaining]
    report.nodes = [
        dataclasses.replace(node, hint=node.hint or hint) if node.tier == "kept" else node
        for node in nodes
    ]
    after = collections.Counter(op.op_type for op in report.remaining)
    report.sequence_ops_after = dict(sorted(after.items()))
    report.rules_fired = {}
    report.stop_reason = f"kept the original: {why}"
    return OptimizeResult(model, report)


def _keep_declared_output_shapes(model: ir.Model, declared: dict[str, ir.Shape | None]) -> None:
    """A model output whose shape inference could not recompute keeps its declared shape: the
    checker requires a shape on every tensor output of the main graph (rank at least)."""
    for value in model.graph.outputs:
        shape = declared.get(value.name or "")
        if value.shape is None and shape is not None and isinstance(value.type, ir.TensorType):
            value.shape = shape


def _flatten_passes(options: Options) -> tuple[FlattenSequenceIOPass, FlattenSequenceIOPass]:
    """Inputs are flattened before normalizing, outputs after lowering (no-ops unless asked)."""
    if options.seq_lens and not options.flatten_sequence_io:
        raise SeqlowerError(
            "seq_lens (--seq-len) needs flatten_sequence_io (--flatten-sequence-io)"
        )
    enabled = options.flatten_sequence_io
    return (
        FlattenSequenceIOPass(options.seq_lens, inputs=enabled, outputs=False),
        FlattenSequenceIOPass(inputs=False, outputs=enabled),
    )


def _lower_again(first: LowerSequencesPass, model: ir.Model) -> LowerSequencesPass:
    """Lower once more (flattened outputs may read elements the first run left), counting both
    runs in the returned pass's `fired`, `iterations` and `warnings`."""
    again = LowerSequencesPass(first.rules, first.options, runtime_workarounds=False)
    again(model)
    for name, count in first.fired.items():
        again.fired[name] = again.fired.get(name, 0) + count
    again.iterations += first.iterations
    again.rewrites = {**first.rewrites, **again.rewrites}
    again.origins = {**first.origins, **again.origins}
    again.warnings = first.warnings + [w for w in again.warnings if w not in first.warnings]
    return again


def _check_supported(model: ir.Model) -> None:
    opset = model.opset_imports.get("")
    if opset is None:
        opset = model.opset_imports.get("ai.onnx")
    if opset is not None and opset < MIN_OPSET:
        raise InvalidModelError(
            f"opset {opset} is not supported: sequence operators need opset {MIN_OPSET} or newer"
        )
