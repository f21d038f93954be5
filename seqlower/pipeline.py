"""`optimize`: normalize -> lower to a fixpoint -> clean up -> legality check, with a report."""

from __future__ import annotations

__all__ = [
    "OptimizeResult",
    "RegionForms",
    "collector_relaxed",
    "lower_in_place",
    "optimize",
    "region_forms",
]

import collections
import contextlib
import dataclasses
import functools
import gc
import os
import time
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar, overload

import onnx
import onnx_ir as ir

from seqlower.cost import SMALL_COUNT, node_costs_both
from seqlower.deadline import Deadline
from seqlower.declared_sizes import check_declared_sizes
from seqlower.errors import InvalidModelError, SeqlowerError
from seqlower.io import ModelSource, load_model
from seqlower.ops import is_sequence_value, iter_all_graphs, iter_all_nodes, quoted_node
from seqlower.options import OPENVINO_LOOP_TARGETS, SPEED_FIRST_TARGETS, Options, options_with
from seqlower.output_ranks import declare_output_ranks, shapeless_outputs
from seqlower.passes import CleanupPass, LowerSequencesPass, NormalizePass
from seqlower.passes.broadcast_unsqueeze import drop_broadcast_unsqueezes
from seqlower.passes.cleanup import forget_inferred_dim_names
from seqlower.passes.condition_declarations import match_loop_condition_declarations
from seqlower.passes.duplicate_nodes import merge_duplicate_nodes
from seqlower.passes.empty_rows import BATCHING_RULES, guard_empty_rows
from seqlower.passes.flatten_io import FlattenSequenceIOPass
from seqlower.passes.identity_arithmetic import remove_identity_arithmetic
from seqlower.passes.inline_functions import InlineSequenceFunctionsPass
from seqlower.passes.legality import count_sequence_ops, expanded_count
from seqlower.passes.lent_shapes import lent_shapes
from seqlower.passes.negated_terms import fold_negated_terms
from seqlower.passes.noop_casts import inferred_types, remove_noop_casts
from seqlower.passes.normalize import infer_shapes, resolve_split_keepdims
from seqlower.passes.onnxruntime_loops import LoopConditionPass, LoopsToScansPass
from seqlower.passes.output_shapes import relax_unproved_output_dims
from seqlower.passes.scan_output_shapes import DeclaredScanShapes
from seqlower.passes.shadowed_names import rename_shadowing_values
from seqlower.passes.shape_hints import RelaxShapeHintsPass
from seqlower.passes.single_element_conditions import SingleElementConditionsPass
from seqlower.passes.workarounds import RuntimeWorkaroundsPass
from seqlower.regions import region_costs
from seqlower.report import Report
from seqlower.report.labels import NodeLabels, in_user_names, user_node_label
from seqlower.report.outcomes import node_outcomes
from seqlower.report.reasons import remaining_sequence_ops
from seqlower.report.sites import collect_sites
from seqlower.report.warnings import split_reading_warnings
from seqlower.rule import RuleSet
from seqlower.speed_first import FROZEN_RULE, RegionCost, RegionPlan, relative_cost
from seqlower.targets import check_target

MIN_OPSET = 11
PARTIAL_RULE = "partial"  # the name the refusals of a model kept as only partly lowerable carry
# what to try about an operator kept because its lowering costs more (docs/performance.md)
KEPT_ORIGINAL_HINT = "the default target, which lowers it even so, at a cost"
# what to try about a model kept because lowering it only partly would grow it
KEPT_PARTIAL_HINT = "--partial (partial=True in Python), which lowers what it can even so"


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
        model = load_model(source, split_keepdims=options.split_keepdims)
        if isinstance(source, ir.Model):
            model = model.clone()
            original = source.clone
        else:  # the source is still there: read it again only if the original is kept
            original = functools.partial(load_model, source, split_keepdims=options.split_keepdims)
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
    speed keeps it because its lowering costs more (docs/performance.md): pass one (reading
    the file again, say) to spare the copy made up front without it, seconds on large models."""
    options = options or Options()
    with collector_relaxed() as collector:
        if original is None and _keeps_cheaper_original(options):
            original = functools.partial(_same, model.clone())  # `model` is about to change
        collector.settle()  # the model as given: live until the end
        nodes_before = _node_count(model)
        shapeless = shapeless_outputs(model)  # the checker requires a shape: declared at the end
        deadline = Deadline(options.time_limit)  # the clock starts here
        result = _lower(model, options, rules, _settling(after_pass, collector), original, deadline)
        grown = _partly_lowered_and_grown(options, result, nodes_before, deadline)
        if grown and original is not None:
            result = _kept_original(
                original(), result.report, grown, options.split_keepdims, partial=True
            )
        if deadline.reached:
            result.report.warnings.append(
                f"the time limit of {deadline.seconds:g} s was reached: the model is lowered "
                "only as far as the rewrites done by then (a larger --time-limit, or "
                "time_limit= in Python, lowers more)"
            )
        for name, rank in declare_output_ranks(result.model, shapeless).items():
            result.report.warnings.append(
                f"the output '{name}' is declared with no shape (the ONNX checker requires one):"
                f" the lowered model declares it of rank {rank}, which seqlower proves"
            )
        result.report.nodes_before = nodes_before
        result.report.nodes_after = _node_count(result.model)
        _judge(result.model, result.report, options)
        return result


def _settling(
    after_pass: Callable[[str, ir.Model], None] | None, collector: Collector
) -> Callable[[str, ir.Model], None]:
    """`after_pass`, after settling what the pass made (`Collector.settle`)."""

    def observe(name: str, model: ir.Model) -> None:
        collector.settle()
        if after_pass is not None:
            after_pass(name, model)

    return observe


def _node_count(model: ir.Model) -> int:
    """The nodes of every graph: each graph's length (kept by its node list), not a walk of
    its nodes."""
    return sum(len(graph) for graph in iter_all_graphs(model))


def _judge(model: ir.Model, report: Report, options: Options) -> None:
    """The target's verdict on the result, in the report (as `--target` prints it): its
    profile's, then, for a target whose runtime is installed (`Options.runtime_check`), the
    runtime's own on loading the model and running it once."""
    target = report.target = options.target
    if target == "generic":
        return  # any runtime: nothing to judge
    check = check_target(model, report, target)
    report.target_errors = check.errors
    report.target_warnings = check.warnings
    report.target_check = "operators"
    if not options.runtime_check or report.target_errors:
        return
    # imported here: it brings in seqlower.verification, which nothing else in `optimize` uses
    # (a third of the pipeline's import time, and more where no bytecode is cached)
    from seqlower.runtime_check import check_in_runtime

    started = time.perf_counter()
    checked = check_in_runtime(model, target, dims=options.dims)
    report.runtime_check_seconds = time.perf_counter() - started
    if checked is None:
        return  # no runtime to run for this target
    message = checked.message
    if checked.node:  # a node the lowering made is named by the node of the input it came from
        message = message.replace(f"node '{checked.node}'", user_node_label(model, checked.node))
    if checked.ok and checked.status != "confirmed":  # not installed, or inputs that fail anyway
        report.target_warnings.append(message)
        return
    report.target_check = "operators and runtime"
    if checked.status == "confirmed":
        report.target_confirmed = message
    else:
        report.target_errors.append(message)


@dataclasses.dataclass(frozen=True)
class RegionForms:
    """One region of a model in its two forms, for calibrating the cost model: `kept` is the
    model lowered everywhere but in this region, left as given; `as_given` and `lowered` are the
    region's estimates (`seqlower.cost`) in each form, and `as_given_small` and `lowered_small`
    the same on small inputs (`cost.SMALL_COUNT` iterations for a loop of run-time count): the
    two that `--target onnxruntime` weighs together (`RegionCost.lowered_costs_more`).
    `sequence_nodes` names it."""

    sequence_nodes: tuple[str, ...]
    as_given: float
    lowered: float
    kept: ir.Model
    as_given_small: float | None = None
    lowered_small: float | None = None

    @property
    def cost(self) -> RegionCost:
        """The region's estimates as the target rounds and weighs them (index 0)."""
        small = self.as_given_small is not None and self.lowered_small is not None
        return RegionCost(
            0,
            round(self.as_given),
            round(self.lowered),
            round(self.as_given_small) if small else None,
            round(self.lowered_small) if small else None,
        )


def region_forms(
    source: str | os.PathLike[str], options: Options | None = None
) -> tuple[ir.Model, list[RegionForms]]:
    """The model at `source` lowered everywhere, and each of its regions (`seqlower.regions`)
    with the model lowered everywhere but there: the two forms between which `--target
    onnxruntime` chooses, region by region (bench/calibrate.py times them). Both are made for
    `options.target` (onnxruntime unless given; `generic` lowers as the default target does)."""
    options = options or Options(target="onnxruntime")
    with collector_relaxed():
        run = _Run(
            load_model(source, split_keepdims=options.split_keepdims),
            options,
            None,
            _ignore,
            plan=True,
        )
        assert run.plan is not None
        regions = list(run.plan.regions)
        lowered = region_costs(run.model, regions, run.costs, run.lower.origins)
        small = region_costs(run.model, regions, run.costs_small, run.lower.origins)
        forms = []
        for index, region in enumerate(regions):
            cost = RegionCost(index, round(run.plan.as_given[index]), round(lowered[index]))
            kept = _Run(
                load_model(source, split_keepdims=options.split_keepdims),
                options,
                None,
                _ignore,
                keep=(run.plan, [cost]),
            )
            if kept.frozen is None:
                continue
            names = tuple(f"{node.op_type} '{node.name}'" for node in region.sites)
            forms.append(
                RegionForms(
                    names,
                    run.plan.as_given[index],
                    lowered[index],
                    kept.model,
                    run.plan.as_given_small[index],
                    small[index],
                )
            )
    return run.model, forms


def _ignore(name: str, model: ir.Model) -> None:
    pass


class Collector:
    """What `collector_relaxed` gives: `settle()` takes the objects made so far out of the
    collector's sight until the block ends."""

    def __init__(self, owns_frozen: bool) -> None:
        self._owns_frozen = owns_frozen

    def settle(self) -> None:
        """Freeze every object made so far (`gc.freeze`): the model as loaded, or as a pass
        left it, is live until the block ends, and each collection inside would scan it again
        (0.4 s of a 30k-node chain's run went to one collection over 800k objects, 40% of
        them the model as loaded, finding little to free). Nodes removed for good are freed as
        they go (`seqlower.release`); the few garbage cycles among frozen objects wait for the
        next full collection after the block. Does nothing when objects were frozen before the
        block (they are the caller's: `gc.unfreeze` at the end would let them go)."""
        if self._owns_frozen:
            gc.freeze()


@contextlib.contextmanager
def collector_relaxed() -> Iterator[Collector]:
    """Run Python's cyclic garbage collector less often inside the block. Loading and rewriting
    a model create millions of long-lived objects, and the collector's passes rescan them again
    and again: with the default thresholds that was a fifth of the run time on a 100k-node
    model. Garbage cycles are still collected, every million allocations; the thresholds (which
    are process-wide) are restored on leaving the block. `Collector.settle` freezes what
    was made so far, for good, until the block ends.

    On leaving, the objects made inside also join the oldest generation at once, as objects
    that outlived collections do (`gc.freeze` then `gc.unfreeze`, only when nothing was frozen
    before, so that no one else's frozen objects are let go): restored thresholds would
    otherwise set off, at the next allocation, one collection over every object made inside,
    the returned model's included (a second on a 100k-node sparse chain, a sixth of a 15k-node
    chain's run). The few garbage cycles left inside (nodes removed for good are freed as they
    go, `seqlower.release`) are collected by the next full collection."""
    thresholds = gc.get_threshold()
    owns_frozen = gc.get_freeze_count() == 0
    gc.set_threshold(1_000_000, 1000, 1000)
    try:
        yield Collector(owns_frozen)
    finally:
        if owns_frozen:
            gc.freeze()
            gc.unfreeze()
        gc.set_threshold(*thresholds)


def _lower(
    model: ir.Model,
    options: Options,
    rules: RuleSet | None,
    after_pass: Callable[[str, ir.Model], None] | None,
    original: Callable[[], ir.Model] | None,
    deadline: Deadline,
) -> OptimizeResult[ir.Model]:
    observe = after_pass or (lambda name, model: None)
    _check_supported(model)
    speed_first = original is not None and _keeps_cheaper_original(options)
    # the default target lowers every region, and says which cost more so (`--target
    # onnxruntime` would keep them): the estimates are made for it too
    costed = speed_first or options.target == "generic"
    # the default target weighs the regions only (`RegionPlan.of(whole=False)`)
    run = _Run(
        model, options, rules, observe, plan=costed, whole_costs=speed_first, deadline=deadline
    )
    if not speed_first and run.plan is not None and not deadline.reached:
        result = run.result()
        costlier = [  # of the regions lowered (in part at least)
            cost
            for cost in run.plan.costlier(run.model, run.lower.origins, run.costs, run.costs_small)
            if any(node.graph is None for node in run.plan.regions[cost.index].sites)
        ]
        graph_of = {site.node: site.graph for site in run.sites}
        result.report.costlier_lowered = run.plan.reported(costlier, run.labels, graph_of)
        return result
    # out of time, the regions are not weighed: a second run would start after the limit
    if not speed_first or run.plan is None or original is None or deadline.reached:
        return run.result()
    # speed first (docs/performance.md): every region keeps the cheaper of its two forms
    plan = run.plan
    costlier = plan.costlier(run.model, run.lower.origins, run.costs, run.costs_small)
    # weighed by the product of the estimates at both counts (`speed_first.relative_cost`)
    weight = round(run.cost_after) * round(run.cost_after_small)
    weight_given = round(plan.total) * round(plan.total_small)
    if not costlier and weight <= weight_given:
        return run.result()
    before, after = round(plan.total), round(run.cost_after)
    before_small, after_small = round(plan.total_small), round(run.cost_after_small)
    whole = (
        f"the lowered model costs an estimated {after} operator launches per run, more than "
        f'the {before} of the original (docs/performance.md, "Never slower")'
        if after > before
        else f"the lowered model costs an estimated {after_small} operator launches per run on "
        f"small inputs (each loop of run-time count run {SMALL_COUNT}x), more than the "
        f"{before_small} of the original, by more than it saves on large ones ({after} against "
        f'{before}; docs/performance.md, "Never slower")'
        if weight > weight_given
        else f"each of its regions costs more lowered than as given (estimated launches: "
        f"{', '.join(f'{c.lowered} against {c.as_given}' for c in costlier)}; docs/performance.md, "
        '"Never slower")'
    )
    best = run
    if costlier and len(costlier) < len(run.plan.regions):  # all of them: the original
        mixed = _Run(
            original(), options, rules, observe, keep=(run.plan, costlier), deadline=deadline
        )
        # the form the less dear relative to the original at both counts
        if mixed.frozen is not None and relative_cost(
            plan, mixed.cost_after, mixed.cost_after_small
        ) <= relative_cost(plan, run.cost_after, run.cost_after_small):
            best = mixed
    every_region = bool(costlier) and len(costlier) == len(run.plan.regions)
    costs_more = weight > weight_given
    if best is not run:  # regions kept, others lowered: only where that is the cheaper
        costs_more = relative_cost(plan, best.cost_after, best.cost_after_small) > 1.0
    if (best is run and every_region) or costs_more:
        graph_of = {site.node: site.graph for site in run.sites}
        # the regions that cost more lowered; all of them when only the whole model does
        named = costlier or run.plan.estimates(run.model, run.lower.origins, run.costs)
        run.report.kept_for_speed = run.plan.reported(named, run.labels, graph_of)
        return _kept_original(original(), run.report, whole, options.split_keepdims, run.interface)
    return best.result()


class _Run:
    """One pass of the pipeline over `model`: flatten inputs, inline, normalize, lower (leaving
    the nodes of the `keep` regions alone), flatten outputs, clean up. `plan=True` records the
    regions and their costs for a speed-first choice (`whole_costs=False`: the regions' costs
    only, all the default target reports); `result()` completes the report."""

    def __init__(
        self,
        model: ir.Model,
        options: Options,
        rules: RuleSet | None,
        observe: Callable[[str, ir.Model], None],
        *,
        plan: bool = False,
        whole_costs: bool = True,
        keep: tuple[RegionPlan, list[RegionCost]] | None = None,
        deadline: Deadline | None = None,
    ) -> None:
        self.model = model
        self.report = report = Report(sequence_ops_before=count_sequence_ops(model))
        self.labels = labels = NodeLabels()  # one name per node, for the report and messages
        self.interface = (
            [v.name or "" for v in model.graph.inputs if is_sequence_value(v)],
            [v.name or "" for v in model.graph.outputs if is_sequence_value(v)],
        )
        # a body value named as a value outside it would capture that name once a rewrite moves
        # a reader of the outer value into the body (or makes one there): renamed first and last
        rename_shadowing_values(model)
        declared_output_shapes = {value.name: value.shape for value in model.graph.outputs}
        declared_scan_shapes = DeclaredScanShapes(model)  # before inference replaces them
        self.flatten_inputs, self.flatten_outputs = _flatten_passes(options)
        self.flatten_inputs(model)
        observe("flatten-inputs", model)
        self.inline = InlineSequenceFunctionsPass()
        self.inline(model)
        observe("inline-functions", model)
        self.normalize = NormalizePass(options)
        self.normalize(model)
        self.conditions = LoopConditionPass()
        if options.target in SPEED_FIRST_TARGETS:  # before the estimates: both forms have it
            self.conditions(model)
        observe("normalize", model)
        self.sites = collect_sites(model, labels)  # types are inferred now
        maps = (site.node for site in self.sites if site.op_type == "SequenceMap")
        report.expanded_before = report.total_before + sum(expanded_count(m) - 1 for m in maps)
        self.plan = RegionPlan.of(model, whole=whole_costs) if plan else None
        self.frozen: dict[ir.Node, str] | None = None
        if keep is not None:
            graph_of = {site.node: site.graph for site in self.sites}
            found = keep[0].frozen(keep[1], model, labels, graph_of)
            if found is not None:
                self.frozen, report.kept_for_speed = found
        # the workarounds run once, last, below (a whole-model walk: 0.3 s at 100k nodes)
        lower = LowerSequencesPass(
            rules, options, runtime_workarounds=False, frozen=self.frozen, deadline=deadline
        )
        lower(model)
        observe("lower", model)
        if self.flatten_outputs(model).modified:
            lower = _lower_again(lower, model)
            observe("flatten-outputs", model)
        self.lower = lower
        # tract's Scans may carry a list that grows, declared (by ONNX inference) with the
        # shape it starts with: no shape of theirs is read as a constant
        self.cleanup = CleanupPass(
            dead_nodes=not lower.dead_code_free, fold_shapes=options.target != "tract"
        )
        self.cleanup(model)
        for made, node in self.cleanup.replaced.items():
            lower.origins.setdefault(made, lower.origins.get(node, node))
        self.scans = LoopsToScansPass()
        self.conditions_kept = SingleElementConditionsPass()
        changed = not self.cleanup.merged_last  # a node, since the cleanup merged duplicates
        # what computes from the rows of one tensor alone, run only where it has a row (last:
        # the nodes it moves into a branch are final; not for tract, held to declared shapes)
        self.guarded = 0
        if options.target != "tract":
            self.guarded = guard_empty_rows(model, _made_by_batching(lower))
            if self.guarded:  # what reads the If's results: the shapes a second lowering infers
                infer_shapes(model)
                forget_inferred_dim_names(model)
        changed |= bool(self.guarded)
        if options.target in SPEED_FIRST_TARGETS:
            changed |= self.scans(model).modified
            for made, loop in self.scans.made.items():
                lower.origins.setdefault(made, lower.origins.get(loop, loop))
            changed |= self.conditions_kept(model).modified
        changed |= RuntimeWorkaroundsPass(
            speed_first=options.target in SPEED_FIRST_TARGETS,
            openvino_loops=options.target in OPENVINO_LOOP_TARGETS,
        )(model).modified
        # an empty constant the workarounds remade may equal one made before (two ConstantOfShape
        # of [0]): merged here, or the cleanup of a second lowering would (not idempotent); when
        # no node changed since the cleanup's merge, merging again would find nothing
        if changed:
            merge_duplicate_nodes(model)
        _keep_declared_output_shapes(model, declared_output_shapes)
        declared_scan_shapes.restore(model)  # what a loop of no iteration gives
        match_loop_condition_declarations(model)  # an export's rank of a scalar condition
        rename_shadowing_values(model)
        if options.target == "tract":  # tract holds a model to its declared shapes
            RelaxShapeHintsPass()(model)
        observe("cleanup", model)
        # each twice: with `cost.DYNAMIC_COUNT` and `cost.SMALL_COUNT` iterations for a loop
        # of run-time count (`speed_first`)
        self.costs: dict[ir.Node, float] = {}
        self.costs_small: dict[ir.Node, float] = {}
        if self.plan is not None and not whole_costs:  # what the regions' estimates read
            counted = self.plan.counted(lower.origins)
            self.costs, self.costs_small = node_costs_both(model, counted=counted)
        elif plan or keep is not None:
            self.costs, self.costs_small = node_costs_both(model)
        self.cost_after = sum(self.costs.values())  # of the whole model when `whole_costs`
        self.cost_after_small = sum(self.costs_small.values())

    def result(self) -> OptimizeResult[ir.Model]:
        """The lowered model with its completed report."""
        model, report, lower, labels = self.model, self.report, self.lower, self.labels
        renamed = labels.trace(model, lower.origins)  # messages name the input's nodes only
        report.remaining = remaining_sequence_ops(model, lower.refusals, labels, renamed)
        if self.frozen:
            kept = {labels(node) for node in self.frozen}
            report.remaining = [
                dataclasses.replace(op, hint=KEPT_ORIGINAL_HINT) if op.node in kept else op
                for op in report.remaining
            ]
        report.nodes = node_outcomes(
            model,
            self.sites,
            report.remaining,
            lower.rewrites,
            labels,
            self.interface,
            renamed,
        )
        after = collections.Counter(op.op_type for op in report.remaining)
        report.sequence_ops_after = dict(sorted(after.items()))
        report.rules_fired = lower.fired
        if self.inline.inlined:
            report.rules_fired = {"inline-function": len(self.inline.inlined), **lower.fired}
        if self.cleanup.folded:
            folded = {"fold-constant-transpose": self.cleanup.folded}
            report.rules_fired = {**report.rules_fired, **folded}
        if self.cleanup.hoisted:
            hoisted = {"hoist-loop-invariant": self.cleanup.hoisted}
            report.rules_fired = {**report.rules_fired, **hoisted}
        if self.conditions_kept.count:
            kept = {"single-element-condition": self.conditions_kept.count}
            report.rules_fired = {**report.rules_fired, **kept}
        if self.cleanup.sunk:
            sunk = {"sink-into-branch": self.cleanup.sunk}
            report.rules_fired = {**report.rules_fired, **sunk}
        if self.guarded:
            guarded = {"guard-empty-rows": self.guarded}
            report.rules_fired = {**report.rules_fired, **guarded}
        report.rules_fired = {
            **report.rules_fired,
            **_loop_counts(model, self.conditions, self.scans),
        }
        report.stop_reason = lower.stop_reason
        report.iterations = lower.iterations
        # a warning may name a node made, then replaced, while lowering: named by its origin too
        # (the map is built only when there is a warning: a large model makes many nodes)
        made_names = renamed
        if lower.warnings:
            made_names = {
                made.name: labels(origin) for made, origin in lower.origins.items() if made.name
            }
            made_names.update(renamed)
        report.warnings = report.warnings + (
            self.inline.warnings
            + self.normalize.warnings
            + split_reading_warnings(self.normalize.split_readings, labels)
            + self.flatten_inputs.warnings
            + self.flatten_outputs.warnings
            + [in_user_names(warning, made_names) for warning in lower.warnings]
        )
        report.interface_changes = (
            self.normalize.bind_dims.changes
            + self.flatten_inputs.changes
            + self.flatten_outputs.changes
        )
        return OptimizeResult(model, report)


def _made_by_batching(lower: LowerSequencesPass) -> set[ir.Node]:
    """The nodes made from an input node that a rule of `BATCHING_RULES` rewrote."""
    batched = {
        lower.origins.get(node, node)
        for node, done in lower.rewrites.items()
        if any(rule in BATCHING_RULES for rule, _ in done)
    }
    return {made for made, origin in lower.origins.items() if origin in batched}


def _same(model: ir.Model) -> ir.Model:
    return model


def _keeps_cheaper_original(options: Options) -> bool:
    """Whether the target asks for speed first (with flattened sequence inputs or outputs, the
    interface asked for is not the original's, so the lowering stays)."""
    return options.target in SPEED_FIRST_TARGETS and not options.flatten_sequence_io


def _partly_lowered_and_grown(
    options: Options, result: OptimizeResult[ir.Model], nodes_before: int, deadline: Deadline
) -> str | None:
    """Why the default target returns the original instead of `result`, or None: sequence
    operators stay, the model has no sequence-typed input or output (its interface would stay
    a sequence either way), and the lowering grew it, so that it only added conversions at the
    boundary of what stays (`Options.partial`)."""
    if options.target != "generic" or options.partial or options.flatten_sequence_io:
        return None
    report, model = result.report, result.model
    kept = report.total_after
    if not kept or deadline.reached:
        return None
    graph = model.graph
    if any(is_sequence_value(v) for v in (*graph.inputs, *graph.outputs)):
        return None
    nodes_after = _node_count(model)
    if nodes_after <= nodes_before:
        return None
    return (
        f"{kept} of its {report.total_before} sequence operators would stay, and lowering the "
        f"rest grows it from {nodes_before} to {nodes_after} nodes (conversions at the boundary "
        f"of what stays); --partial lowers it even so"
    )


def _kept_original(
    model: ir.Model,
    report: Report,
    why: str,
    split_keepdims: str,
    interface: tuple[list[str], list[str]] = ([], []),
    *,
    partial: bool = False,
) -> OptimizeResult[ir.Model]:
    """The original as given (only the runtime workarounds applied, so that it loads, and each
    scalar split with keepdims=0 written in the form whose meaning the specification and
    onnxruntime agree on, read as `split_keepdims` says, so that it passes the ONNX checker),
    returned because its lowering costs more (`why`, the stop reason): every sequence operator
    stays.
    `partial`: because it can only be partly lowered, and that grows it; each operator that
    stayed in the lowering keeps its reasons, after that headline."""
    resolve_split_keepdims(model, split_keepdims)
    conditions, scans = LoopConditionPass(), LoopsToScansPass()
    if not partial:  # the default target makes neither change
        conditions(model)
        scans(model)
    # as the estimate of it assumed, on the shapes it read (an export declares none in its
    # loop bodies and branches: they are lent for these passes, then taken back)
    with lent_shapes(model):
        remove_noop_casts(model, inferred_types(model))
        remove_identity_arithmetic(model)
        fold_negated_terms(model)
        while drop_broadcast_unsqueezes(model):  # a chain: the first read the second
            pass
    RuntimeWorkaroundsPass(speed_first=not partial)(model)
    relax_unproved_output_dims(model)  # the sizes an export was traced with
    labels = NodeLabels()
    sites = collect_sites(model, labels)
    if partial:
        reason = f"{PARTIAL_RULE}: kept as given: the model can only be partly lowered"
        stayed = {op.node: [op.reason, *op.reasons] for op in report.remaining}
        refusals = {site.node: [reason, *stayed.get(labels(site.node), [])] for site in sites}
    else:
        reason = f"{FROZEN_RULE}: kept as given for speed: the model costs less as given"
        refusals = {site.node: [reason] for site in sites}
    remaining = remaining_sequence_ops(model, refusals, labels)
    nodes = node_outcomes(model, sites, remaining, {}, labels, interface)
    hint = KEPT_PARTIAL_HINT if partial else KEPT_ORIGINAL_HINT
    report.remaining = [dataclasses.replace(op, hint=op.hint or hint) for op in remaining]
    report.nodes = [
        dataclasses.replace(node, hint=node.hint or hint) if node.tier == "kept" else node
        for node in nodes
    ]
    after = collections.Counter(op.op_type for op in report.remaining)
    report.sequence_ops_after = dict(sorted(after.items()))
    report.rules_fired = {} if partial else _loop_counts(model, conditions, scans)
    report.costlier_lowered = []  # nothing is lowered
    report.stop_reason = f"kept the original: {why}"
    return OptimizeResult(model, report)


def _loop_counts(
    model: ir.Model, conditions: LoopConditionPass, scans: LoopsToScansPass
) -> dict[str, int]:
    """What the passes for onnxruntime's Loops did to the Loops `model` has, as rule counts
    for the report."""
    counts = {
        "loop-condition-passthrough": conditions.still_loops(model),
        "loop-to-scan": scans.count,
    }
    return {name: count for name, count in counts.items() if count}


def _keep_declared_output_shapes(model: ir.Model, declared: dict[str, ir.Shape | None]) -> None:
    """Give a shape to each model output whose shape inference could not recompute: the checker
    requires one on every tensor output of the main graph (rank at least). ONNX inference
    forgets the shape of a Loop's carried outputs (they may change between iterations) and
    keeps a declared one unchecked, even of another rank. So the shape is the one the Loop
    proves (`_carried_shape`) when it does; else the declared one, with its dims made
    anonymous: a declared dim can lie (an export declares the sizes it was traced with)."""
    for value in model.graph.outputs:
        if value.shape is not None or not isinstance(value.type, ir.TensorType):
            continue
        shape = _carried_shape(value)
        if shape is None:
            shape = declared.get(value.name or "")
            if shape is not None:
                shape = ir.Shape([None] * len(shape))
        if shape is not None:
            value.shape = shape


def _carried_shape(value: ir.Value) -> ir.Shape | None:
    """The shape of a Loop's carried output, when its initial value, the body's input and the
    body's output all have one of the same rank: the output is one of them (the initial value
    after no iteration). Dims on which they differ are anonymous."""
    loop = value.producer()
    if loop is None or loop.op_type != "Loop" or loop.domain != "" or "body" not in loop.attributes:
        return None
    body = loop.attributes["body"].as_graph()
    k = value.index()
    carried = len(loop.inputs) - 2
    if k is None or k >= carried or len(body.inputs) != carried + 2:
        return None
    if len(body.outputs) < carried + 1:
        return None
    initial = loop.inputs[k + 2]
    shapes = [v.shape if v is not None else None for v in (initial, body.inputs[k + 2])]
    shapes.append(body.outputs[k + 1].shape)
    if any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:  # type: ignore[arg-type]
        return None
    dims = [d[0] if all(x == d[0] for x in d) else None for d in zip(*shapes)]  # type: ignore[misc]
    return ir.Shape(dims)


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
    again = LowerSequencesPass(
        first.rules, first.options, runtime_workarounds=False, deadline=first.deadline
    )
    again(model)
    for name, count in first.fired.items():
        again.fired[name] = again.fired.get(name, 0) + count
    again.iterations += first.iterations
    again.rewrites = {**first.rewrites, **again.rewrites}
    again.origins = {**first.origins, **again.origins}
    again.warnings = first.warnings + [w for w in again.warnings if w not in first.warnings]
    return again


def _check_supported(model: ir.Model) -> None:
    check_declared_sizes(model)  # before anything reads a weight
    _check_flags(model)
    opset = model.opset_imports.get("")
    if opset is None:
        opset = model.opset_imports.get("ai.onnx")
    if opset is not None and opset < MIN_OPSET:
        raise InvalidModelError(
            f"opset {opset} is not supported: sequence operators need opset {MIN_OPSET} or newer"
        )


def _check_flags(model: ir.Model) -> None:
    """ConcatFromSequence's new_axis and SplitToSequence's keepdims are 0 or 1 (ONNX inference
    says so where it knows the elements' type; onnxruntime does not check, and stacks for any
    new_axis but 0): the rules read them as flags."""
    for node in iter_all_nodes(model):
        flag = _FLAGS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if flag is None:
            continue
        name, default = flag
        value = node.attributes.get_int(name, default)
        if value not in (0, 1):
            raise InvalidModelError(
                f"{quoted_node(node)}: {name} is {value}; the ONNX spec allows 0 or 1"
            )


_FLAGS = {"ConcatFromSequence": ("new_axis", 0), "SplitToSequence": ("keepdims", 1)}
