"""The rewrite driver: apply rules to every node of every graph until nothing changes.

One sweep visits the graphs (main graph, subgraphs, functions) and their nodes in order, and tries
the rules registered for each node's operator in priority order; the first that accepts rewrites.
Rewrites only add nodes and rewire uses, so a sweep is safe while iterating; dead nodes are
removed between sweeps. Sweeps repeat to a fixpoint, bounded by `Options.max_iterations`, and the
pass records why it stopped and how often each rule fired (as egg's runner does).
"""

from __future__ import annotations

__all__ = ["LowerSequencesPass"]

import logging

import onnx_ir as ir

from seqlower.analysis import Facts
from seqlower.ops import iter_all_graphs, subgraphs
from seqlower.options import Options
from seqlower.passes.cleanup import remove_dead_nodes
from seqlower.passes.normalize import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal, RuleSet

logger = logging.getLogger(__name__)


class LowerSequencesPass(ir.passes.InPlacePass):
    """Lower sequence operators with `rules` to a fixpoint.

    After the pass: `fired` counts rewrites per rule, `refusals` maps each node that a rule
    looked at but did not rewrite to the reasons, `stop_reason` and `iterations` say how it ended.
    """

    def __init__(self, rules: RuleSet | None = None, options: Options | None = None) -> None:
        super().__init__()
        if rules is None:
            from seqlower.rules import default_rules

            rules = default_rules()
        self.rules = rules
        self.options = options or Options()
        self.fired: dict[str, int] = {}
        self.refusals: dict[ir.Node, list[str]] = {}
        self.warnings: list[str] = []
        self.stop_reason = ""
        self.iterations = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        rewriter = Rewriter(model)
        modified = False
        self.stop_reason = f"iteration limit ({self.options.max_iterations}) reached"
        for iteration in range(1, self.options.max_iterations + 1):
            self.iterations = iteration
            context = Context(Facts(model), rewriter, self.options)
            self.refusals = {}
            if not self._sweep(model, context):
                self.stop_reason = "fixpoint: no rule applies"
                break
            modified = True
            remove_dead_nodes(model)
            infer_shapes(model)
        self.fired = dict(rewriter.fired)
        self.warnings = list(rewriter.warnings)
        return ir.passes.PassResult(model, modified)

    def _sweep(self, model: ir.Model, context: Context) -> bool:
        changed = False
        graphs = list(iter_all_graphs(model))
        owners = {id(sub): node for graph in graphs for node in graph for sub in subgraphs(node)}
        for graph in graphs:
            # a rewrite may have killed the node owning this subgraph (an unrolled loop, an
            # inlined branch): its old body is not lowered any more
            if not _is_live(graph, owners):
                continue
            for node in list(graph):
                if node.graph is not graph or _is_dead(node):
                    continue
                changed |= self._apply_first(node, context)
        return changed

    def _apply_first(self, node: ir.Node, context: Context) -> bool:
        rules = self.rules.for_op(node.op_type) if node.domain == "" else []
        reasons: list[str] = []
        for rule in rules:
            match = rule.check(node, context)
            if isinstance(match, Refusal):
                reasons.append(f"{rule.name}: {match.reason}")
                continue
            logger.debug("%s applies to %s '%s'", rule.name, node.op_type, node.name)
            rule.rewrite(node, match, context)
            context.rewriter.fired[rule.name] += 1
            return True
        if reasons:
            self.refusals[node] = reasons
        return False


def _is_live(graph: ir.Graph, owners: dict[int, ir.Node]) -> bool:
    """True when every node on the chain of owners from `graph` up to a root graph is still in
    its graph and alive (dead nodes await removal)."""
    owner = owners.get(id(graph))
    while owner is not None:
        if owner.graph is None or _is_dead(owner):
            return False
        owner = owners.get(id(owner.graph))
    return True


def _is_dead(node: ir.Node) -> bool:
    return all(not output.uses() and not output.is_graph_output() for output in node.outputs)
