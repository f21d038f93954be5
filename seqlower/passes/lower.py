"""The rewrite driver: apply rules to every node of every graph until nothing changes.

One sweep visits the graphs (main graph, subgraphs, functions) and their nodes in order, and tries
the rules registered for each node's operator in priority order; the first that accepts rewrites.
Rules that consume whole patterns (`Rule.before_producers`) are tried on every node first. After
each rewrite, what it left dead is removed at once (the rewritten node, the producers of what it
read, transitively), so the rest of the sweep sees exact uses. Sweeps repeat, with shape inference
between them, to a fixpoint bounded by `Options.max_iterations`; a whole-model dead-code pass
confirms the fixpoint. After a sweep, only the nodes it emitted or rewired are inferred
(`region_inference`) when that provably gives the shapes whole-model inference would. Within a
sweep, a value a rewrite makes in place of another takes that one's static shape (the same
tensor), and rules give what they emit the static shapes they know, so that the next link of a
chain of lists is lowered in the same sweep, not one link per sweep. Rules
that commit to a run-time form (`Rule.last_resort`) join only in a sweep that follows one where
no other rule applied, so that static lengths and positions found by any rewrite reach the rules
of the static forms first. The pass records why it stopped and
how often each rule fired (as egg's runner does). Its last step is `RuntimeWorkaroundsPass`, so
that the lowered model loads in onnxruntime whatever a user runs after it.
"""

from __future__ import annotations

__all__ = ["LowerSequencesPass"]

import logging
from collections.abc import Mapping

import onnx_ir as ir

from seqlower.analysis import Facts
from seqlower.analysis.derived_shapes import DerivedShapes
from seqlower.deadline import Deadline
from seqlower.lists import lower_lists
from seqlower.ops import graph_nodes, is_sequence_value, subgraphs
from seqlower.options import OPENVINO_LOOP_TARGETS, SPEED_FIRST_TARGETS, Options
from seqlower.passes import region_inference
from seqlower.passes.dead_carried import remove_dead_carried
from seqlower.passes.dead_code import is_dead, remove_dead_nodes, remove_dead_upstream
from seqlower.passes.declared_ranks import declare_ranks
from seqlower.passes.index_vectors import fold_index_vectors
from seqlower.passes.normalize import SHAPE_ARGUMENTS, infer_shapes
from seqlower.passes.shared_empty_lists import unshare_empty_lists
from seqlower.passes.single_concat import remove_single_concats
from seqlower.passes.trivial_min import fold_trivial_mins
from seqlower.passes.workarounds import RuntimeWorkaroundsPass
from seqlower.report import LIST_TIER
from seqlower.report.sites import rewrite_tier
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.runtime_ranks import refusal

logger = logging.getLogger(__name__)

_LIST_ROUNDS = 4  # rounds of the tensor-list tier and the rules after it, at most


class LowerSequencesPass(ir.passes.InPlacePass):
    """Lower sequence operators with `rules` to a fixpoint.

    After the pass: `fired` counts rewrites per rule, `refusals` maps each node that a rule
    looked at but did not rewrite to the reasons, `stop_reason` and `iterations` say how it ended,
    `rewrites` maps each rewritten node to its (rule, tier) rewrites and `origins` each node a
    rewrite made to the node of the input it came from (for the report's per-node outcomes).
    `runtime_workarounds=False` leaves out the last step (`RuntimeWorkaroundsPass`), for a
    pipeline that runs it itself at its very end. `frozen` maps nodes no rule may touch to the
    reason (a region `--target onnxruntime` keeps as given: `seqlower.speed_first`); each stays
    with that reason as its only refusal. `deadline` is the run's time limit (by default one of
    `Options.time_limit` seconds from the start of the pass): once it expires no rewrite
    starts, and the stop reason says so.
    """

    def __init__(
        self,
        rules: RuleSet | None = None,
        options: Options | None = None,
        *,
        runtime_workarounds: bool = True,
        frozen: Mapping[ir.Node, str] | None = None,
        deadline: Deadline | None = None,
    ) -> None:
        super().__init__()
        self.deadline = deadline
        self.runtime_workarounds = runtime_workarounds
        self.frozen: Mapping[ir.Node, str] = frozen or {}
        if rules is None:
            from seqlower.rules import default_rules

            rules = default_rules()
        self.rules = rules
        self.options = options or Options()
        self.fired: dict[str, int] = {}
        self.refusals: dict[ir.Node, list[str]] = {}
        self.rewrites: dict[ir.Node, list[tuple[str, str]]] = {}
        self.origins: dict[ir.Node, ir.Node] = {}
        self.warnings: list[str] = []
        self.stop_reason = ""
        self.iterations = 0
        self.dead_code_free = False  # True after a fixpoint: no dead node is left anywhere
        self._deferred = False  # a sweep left a last-resort rule out on a node it did not change
        self._touched: list[ir.Node] = []  # since the last inference: emitted or rewritten
        self._rebuilt: ir.Node | None = None  # what the last rewrite made of its node, if alike
        self._elsewhere = False  # since the last inference: a rewrite outside the main graph

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if self.deadline is None:
            self.deadline = Deadline(self.options.time_limit)
        # shapes are current (normalize's inference): a sweep's rewrites may be inferred alone
        stamp = region_inference.current_stamp(model)
        rewriter = _TrackingRewriter(model)
        # dead code holds rules back: a dead reader keeps a sequence in use, a dead body op
        # with no batching rule keeps a map from being batched
        modified = remove_dead_nodes(model)
        # so do values a Loop carries that nothing reads (a list it grows for no one keeps the
        # Loop from being batched)
        if self._drop_dead_carried(model):
            modified = True
            infer_shapes(model)
            stamp = region_inference.current_stamp(model)
        changed, stamp = self._fixpoint(model, rewriter, stamp, first=0)
        modified |= changed
        # the last tier, then the rules again on the tensors the lists became (a Loop that now
        # grows a tensor by Concat, say), until neither changes anything: lowering the result
        # again then changes nothing (a rule may make a list anew, a scan output's elements)
        rounds = 0
        while (
            self.options.tensor_lists
            and self.dead_code_free
            and rounds < _LIST_ROUNDS
            and not self.deadline.expired()
        ):
            rounds += 1
            # as normalize did: a rule may have left one empty list read in several places (a
            # Loop unrolled around it), each of which is lowered on its own
            unshare_empty_lists(model)
            kept = self._lower_lists(model, rewriter)
            if kept is None:
                break
            modified = True
            infer_shapes(model)
            # as cleanup will: the rules then see what a second lowering would see (a Loop
            # that carries a list's row counts only, its rows unread: a tensor grown by Concat)
            dropped = self._drop_dead_carried(model)
            # the minimum of a length and the largest int64 is the length (`trivial_min`), as
            # cleanup folds it, and before the index vectors: they would rebuild the Concat the
            # minimum reads, which no fold reads as a minimum then
            dropped |= bool(fold_trivial_mins(model))
            if fold_index_vectors(model) or dropped:
                infer_shapes(model)
            stamp = region_inference.current_stamp(model)
            _, stamp = self._fixpoint(model, rewriter, stamp, first=self.iterations)
            for node, reason in kept.items():
                self.refusals.setdefault(node, []).insert(0, f"{LIST_TIER}: {reason}")
        self.fired = dict(rewriter.fired)
        self.warnings = list(rewriter.warnings)
        if stamp is not None:  # dead code removed since: the shapes are still current
            region_inference.write_stamp(model, stamp.carriers)
        # whatever runs after this pass, the model must load
        workarounds = RuntimeWorkaroundsPass(
            self.options.target in SPEED_FIRST_TARGETS,
            openvino_loops=self.options.target in OPENVINO_LOOP_TARGETS,
        )
        if self.runtime_workarounds and workarounds(model).modified:
            modified = True
            region_inference.forget_stamp(model)
        return ir.passes.PassResult(model, modified)

    def _drop_dead_carried(self, model: ir.Model) -> bool:
        """Remove what Loops carry and Ifs return that nothing needs (`remove_dead_carried`),
        each rebuilt node tracing back to the node it came from; whether any went."""
        replaced: dict[ir.Node, ir.Node] = {}
        dropped = remove_dead_carried(model, replaced, self.frozen or ())
        for made, node in replaced.items():
            self.origins.setdefault(made, self.origins.get(node, node))
        return bool(dropped)

    def _fixpoint(
        self,
        model: ir.Model,
        rewriter: _TrackingRewriter,
        stamp: region_inference.ShapeStamp | None,
        first: int,
    ) -> tuple[bool, region_inference.ShapeStamp | None]:
        """Sweep to a fixpoint (numbering the sweeps after `first`); (whether anything changed,
        the stamp under which the shapes are current)."""
        modified = False
        rewriter.fresh = set()  # the shapes are inferred: none is the rewriter's own now
        whole_model_clean = True  # no rewrite since the last whole-model dead-code removal
        self.stop_reason = f"iteration limit ({self.options.max_iterations}) reached"
        self.dead_code_free = False
        last_resort = False  # whether this sweep tries the last-resort rules too
        for iteration in range(first + 1, first + self.options.max_iterations + 1):
            self.iterations = iteration
            facts = Facts(
                model, rewriter.generation, rewriter.list_generation, derived=DerivedShapes()
            )
            context = Context(facts, rewriter, self.options)
            previous, self.refusals = self.refusals, {}
            self._deferred = False
            changed = self._sweep(model, context, last_resort)
            if changed:
                modified, whole_model_clean, last_resort = True, False, False
                stamp = self._infer(model, rewriter, stamp)
            if self.deadline.expired():  # type: ignore[union-attr]
                # the nodes this sweep did not reach keep the reasons of the one before
                self.refusals = {**previous, **self.refusals}
                self.stop_reason = self.deadline.stop_reason  # type: ignore[union-attr]
                break
            if changed:
                continue
            # a fixpoint, unless dead code that the local removals missed holds a rule back
            # (a dead node, or a value a Loop carries or an If returns for no one), or a
            # Concat of one input a rule left (a list of one element joined): the cleanup
            # removes it, and a rule may match its reader then (a stack of Unsqueezes), so a
            # second lowering would change the output
            if not whole_model_clean:
                whole_model_clean = True
                removed = bool(remove_single_concats(model))
                removed |= remove_dead_nodes(model)
                if self._drop_dead_carried(model):
                    infer_shapes(model)
                    stamp = region_inference.current_stamp(model)
                    removed = True
                if removed:
                    continue
            if self._deferred:  # nothing else applies: now the last-resort rules may
                last_resort = True
                continue
            self.stop_reason = "fixpoint: no rule applies"
            self.dead_code_free = True
            break
        return modified, stamp

    def _lower_lists(
        self, model: ir.Model, rewriter: _TrackingRewriter
    ) -> dict[ir.Node, str] | None:
        """The last tier: every list the rules left becomes tensors where its elements have a
        known rank (`seqlower.lists`). None when nothing changed; else the lists kept, each
        with why (the caller records them as refusals once the rules have run again)."""
        if not any(is_sequence_value(v) for v in _sequence_candidates(model)):
            return None
        lowered = lower_lists(model, rewriter, self.frozen, refusal(self.options.target))
        for node, layout in lowered.converted:
            origin = self.origins.get(node, node)
            self.rewrites.setdefault(origin, []).append((LIST_TIER, layout))
        for made, node in lowered.made.items():
            self.origins.setdefault(made, self.origins.get(node, node))
        if not lowered.converted:
            for node, reason in lowered.kept.items():
                self.refusals.setdefault(node, []).insert(0, f"{LIST_TIER}: {reason}")
            return None
        rewriter.fired[LIST_TIER] += len(lowered.converted)
        rewriter.take_touched()
        return dict(lowered.kept)

    def _infer(
        self,
        model: ir.Model,
        rewriter: _TrackingRewriter,
        stamp: region_inference.ShapeStamp | None,
    ) -> region_inference.ShapeStamp | None:
        """Shapes for what the sweep made: of the region it rewrote when that is exact, else of
        the whole model. Returns the stamp under which the shapes are current, if any."""
        local = (
            stamp is not None
            and not self._elsewhere
            and region_inference.infer_region(
                model,
                self._touched,
                rewriter.rewired,
                stamp,
                SHAPE_ARGUMENTS,
                content_moved=rewriter.content_moved,
            )
        )
        self._touched, self._elsewhere = [], False
        rewriter.rewired, rewriter.content_moved = [], False
        rewriter.fresh = set()
        if local:
            if declare_ranks(model):  # ranks inference of the region could not give
                region_inference.forget_stamp(model)
                return None
            return stamp
        infer_shapes(model)
        return region_inference.current_stamp(model)

    def _sweep(self, model: ir.Model, context: Context, last_resort: bool) -> bool:
        """Try the rules on every live node: first the rules that consume whole patterns
        (`Rule.before_producers`, subgraphs before the graphs that hold them), then all of
        them (the `last_resort` ones only when told; `_deferred` says whether one was left
        out on a node that no other rule rewrote)."""
        changed = False
        rule_ops = {rule.op_type for rule in self.rules.rules}  # most nodes have no rule
        graphs, owners = _graphs_and_owners(model)
        for before_producers_only in (True, False):
            # patterns complete inside out: a map in a body is batched before the map around it
            for graph in reversed(graphs) if before_producers_only else graphs:
                # a rewrite may have killed the node owning this subgraph (an unrolled loop, an
                # inlined branch): its old body is not lowered any more
                if not _is_live(graph, owners):
                    continue
                context.built.clear()  # what rewrites built is reused in this walk only
                for node in list(graph_nodes(graph)):
                    if self.deadline is not None and self.deadline.expired():
                        return changed  # every rewrite so far is complete
                    if node in self.frozen:
                        self.refusals[node] = [self.frozen[node]]
                        continue
                    if node.op_type not in rule_ops or node.domain != "":
                        continue
                    rules = self.rules.for_op(
                        node.op_type,
                        before_producers_only=before_producers_only,
                        last_resort=last_resort,
                    )
                    left_out = not (last_resort or before_producers_only) and (
                        node.op_type in self.rules.last_resort_ops
                    )
                    if not (rules or left_out) or node.graph is not graph or is_dead(node):
                        continue
                    fired = bool(rules) and self._apply_first(node, rules, context)
                    changed |= fired
                    self._deferred |= left_out and not fired
                    if fired:
                        self._rewrite_rebuilt(node, rules, context)
        return changed

    def _rewrite_rebuilt(self, node: ir.Node, rules: list[Rule], context: Context) -> None:
        """A rule that rebuilt the node it rewrote (a Loop carrying one list fewer) gets to
        rewrite the rebuilt node again in this sweep, rather than one list per sweep: a Loop
        carrying a hundred lists is lowered in one sweep, not left at the sweep limit. At most
        once per value the node read or made, so that no pair of rules can cycle here."""
        budget = len(node.inputs) + len(node.outputs)
        while budget > 0 and self._rebuilt is not None:
            rebuilt, self._rebuilt = self._rebuilt, None
            budget -= 1
            if rebuilt in self.frozen or is_dead(rebuilt):
                return
            self._apply_first(rebuilt, rules, context)

    def _apply_first(self, node: ir.Node, rules: list[Rule], context: Context) -> bool:
        self.refusals.pop(node, None)
        refused: list[tuple[str, Refusal]] = []  # the reasons are read if no rule applies
        for rule in rules:
            match = rule.check(node, context)
            if isinstance(match, Refusal):
                refused.append((rule.name, match))
                continue
            logger.debug("%s applies to %s '%s'", rule.name, node.op_type, node.name)
            read = [value.producer() for value in node.inputs if value is not None]
            graph = node.graph
            rewired = len(context.rewriter.rewired)  # type: ignore[attr-defined]
            rule.rewrite(node, match, context)
            context.rewriter.fired[rule.name] += 1
            touched, holders = context.rewriter.take_touched()
            context.facts.forget_rewritten(
                [node, *touched, *context.rewriter.rewired[rewired:]]  # type: ignore[attr-defined]
            )
            self._record(node, rule.name, touched)
            for other, name in context.rewriter.take_consumed():
                context.rewriter.fired[name] += 1
                self._record(other, name, touched)
            main = context.rewriter.model.graph
            self._elsewhere = self._elsewhere or any(n.graph is not main for n in (node, *touched))
            self._touched += [node, *touched]
            remove_dead_upstream([*(p for p in read if p is not None), node, *touched], holders)
            self._rebuilt = _rebuilt(node, graph, touched)
            return True
        if refused:
            self.refusals[node] = [f"{name}: {match.reason}" for name, match in refused]
        self._rebuilt = None
        return False

    def _record(self, node: ir.Node, rule: str, touched: list[ir.Node]) -> None:
        """Note which rule rewrote `node`, at which tier, and where the nodes it made come from."""
        self.rewrites.setdefault(node, []).append((rule, rewrite_tier(rule, touched)))
        origin = self.origins.get(node, node)
        for made in touched:
            if made is not node:
                self.origins.setdefault(made, origin)


def _graphs_and_owners(model: ir.Model) -> tuple[list[ir.Graph], dict[int, ir.Node]]:
    """Every graph of the model (as `iter_all_graphs` orders them), and the node that holds
    each subgraph, in one walk."""
    graphs = [model.graph, *(function.graph for function in model.functions.values())]
    owners: dict[int, ir.Node] = {}
    for graph in graphs:  # grows while iterating: a breadth-first walk
        for node in graph_nodes(graph):
            for subgraph in subgraphs(node):
                owners[id(subgraph)] = node
                graphs.append(subgraph)
    return graphs, owners


def _sequence_candidates(model: ir.Model):
    """Sequence-typed values of the main graph and its subgraphs, lazily."""
    graphs = [model.graph]
    for graph in graphs:
        yield from graph.inputs
        for node in graph_nodes(graph):
            yield from node.outputs
            graphs.extend(subgraphs(node))


def _rebuilt(node: ir.Node, graph: ir.Graph | None, touched: list[ir.Node]) -> ir.Node | None:
    """The one node a rewrite of `node` made in its place: of its op type, in its graph, while
    `node` itself is gone; else None."""
    if graph is None or node.graph is graph:
        return None
    alike = [
        made
        for made in touched
        if made.op_type == node.op_type and made.domain == node.domain and made.graph is graph
    ]
    return alike[0] if len(alike) == 1 else None


def _is_live(graph: ir.Graph, owners: dict[int, ir.Node]) -> bool:
    """True when every node on the chain of owners from `graph` up to a root graph is still in
    its graph and alive (dead nodes await removal)."""
    owner = owners.get(id(graph))
    while owner is not None:
        if owner.graph is None or is_dead(owner):
            return False
        owner = owners.get(id(owner.graph))
    return True


class _TrackingRewriter(Rewriter):
    """A `Rewriter` that also notes, for region inference, the nodes whose inputs `replace`
    rewired and whether a replaced value or its replacement may carry content; and that gives
    a new value the static shape of the value it replaces (`_carry_static_shape`)."""

    def __init__(self, model: ir.Model) -> None:
        super().__init__(model)
        self.rewired: list[ir.Node] = []
        self.content_moved = False
        self.fresh: set[ir.Node] = set()  # emitted since the last inference (`_infer`)

    def record_emitted(self, node: ir.Node) -> None:
        super().record_emitted(node)
        self.fresh.add(node)

    def replace(self, old: ir.Value, new: ir.Value) -> None:
        if old is not new:
            _carry_static_shape(old, new, self.fresh)
            self.rewired += [use.node for use in old.uses()]
            self.content_moved = (
                self.content_moved
                or region_inference.may_carry_content(old)
                or region_inference.may_carry_content(new)
            )
        super().replace(old, new)


def _carry_static_shape(old: ir.Value, new: ir.Value, fresh: set[ir.Node]) -> None:
    """Give `new`, which replaces `old`, `old`'s shape when that is static and `new` has none:
    the same tensor, so the same shape, known before inference runs. Only a value one of the
    `fresh` nodes makes (emitted since the last inference): the inference after the sweep infers
    those again (a region's, or the whole model's, which clears every shape first), so the
    shape lasts only as long as this sweep and reaches no inference as an input. A symbolic or
    unknown dim is not carried: inference may know more of `new` (the Concat of four [1, 8]
    rows is [4, 8]; the ConcatFromSequence it replaces only [unk, 8]), and a rule that read
    the vaguer shape would take another, weaker form (a run-time split) than the next sweep
    would. Tensors only (a list's shape is what its elements share)."""
    shape = old.shape
    if new.shape is not None or shape is None or type(new.type) is not ir.TensorType:
        return
    if new.type != old.type or not all(type(dim) is int for dim in shape):
        return
    if new.producer() in fresh:
        new.shape = ir.Shape(list(shape))
