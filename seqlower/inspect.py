"""`inspect_model`: where a model's sequence values are, how each would be lowered, and why what
stays would stay, with what the user can do about it.

It lowers a copy with the real pipeline (the caller's model is never touched) through rules
wrapped to record which rule rewrote which node, and maps the outcome back to every node that
produces or consumes a sequence value, and to the sequence-typed inputs and outputs of the model.

Tiers, cheapest first (design.md, "SequenceMap lowering tiers"):

    direct   rewritten into tensor operators on the whole data (a Split, a Gather, a Concat...)
    batch    a SequenceMap body applied once to the stacked elements
    unroll   one copy of the computation per element (static length)
    scan     a Loop that collects its results as scan outputs (dynamic length, tensors only)
    loop     a Loop that carries a sequence (SequenceAt / SequenceInsert each iteration)
    kept     still there after lowering, with the reason and hints (`--dim N=<size>`...)

A node removed without a rule firing on it (a SplitToSequence whose readers now read the tensor)
takes the tier of its readers. The model's own sequence inputs and outputs are `kept` (the
interface is kept unless the user asks) or `flattened` (`--flatten-sequence-io`).
"""

from __future__ import annotations

__all__ = [
    "InspectReport",
    "SequenceSite",
    "format_inspect",
    "format_inspect_footer",
    "inspect_model",
]

import dataclasses
import functools
import os
import re
from collections.abc import Iterable
from typing import Any

import onnx_ir as ir

from seqlower.analysis import Facts, Unknown
from seqlower.io import ModelSource, load_model
from seqlower.ops import is_sequence_op, is_sequence_value
from seqlower.options import Options
from seqlower.passes.bind_dims import bindable_dims, dims_feeding
from seqlower.passes.legality import subgraph_owners, walk_graphs
from seqlower.passes.normalize import infer_shapes
from seqlower.pipeline import optimize
from seqlower.report import Report
from seqlower.rule import Context, Rule, RuleSet
from seqlower.targets import TargetCheck, check_target

TIERS = ("direct", "batch", "unroll", "scan", "loop", "kept", "flattened")
_COST = {tier: rank for rank, tier in enumerate(TIERS)}


@dataclasses.dataclass(frozen=True)
class SequenceSite:
    """One node that produces or reads a sequence value, or one sequence-typed model input or
    output (`op_type` "input" / "output", `node` the value's name)."""

    graph: str  # "main", "main/loop:body", "function ::f"...
    node: str  # the node's name; for an unnamed node a label "<op_type>#<k>" (named=False)
    op_type: str
    tier: str  # one of TIERS
    values: tuple[str, ...] = ()  # the sequence values it produces
    rules: tuple[str, ...] = ()  # rules that rewrote it, in order
    reason: str = ""  # why it is kept
    hints: tuple[str, ...] = ()  # what the user can do about it
    named: bool = True
    created_by: str = ""  # for a kept node that lowering created: the node it came from

    @property
    def label(self) -> str:
        """The node's name, in parentheses when it is a label for an unnamed node."""
        return self.node if self.named else f"({self.node})"

    @property
    def detail(self) -> str:
        """One line for a table: the rules that rewrote it, or why it is kept."""
        if self.tier == "kept":
            detail = self.reason
        elif self.rules:
            detail = ", ".join(self.rules)
        elif self.op_type in ("input", "output"):
            detail = ""
        else:
            detail = "removed along with the nodes around it"
        return f"[from {self.created_by}] {detail}" if self.created_by else detail

    def to_dict(self) -> dict[str, Any]:
        entry = dataclasses.asdict(self)
        for key in ("values", "rules", "hints"):
            entry[key] = list(entry[key])
        return entry


@dataclasses.dataclass
class InspectReport:
    """What `inspect_model` found. `lowering` is the report of the trial lowering."""

    model: str
    sites: list[SequenceSite]
    lowering: Report
    target: TargetCheck
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def tiers(self) -> dict[str, int]:
        counts = {tier: 0 for tier in TIERS}
        for site in self.sites:
            counts[site.tier] += 1
        return {tier: count for tier, count in counts.items() if count}

    @property
    def kept(self) -> list[SequenceSite]:
        return [site for site in self.sites if site.tier == "kept"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "seqlower.inspect/1",
            "model": self.model,
            "options": dict(self.options),
            "tiers": self.tiers,
            "sites": [site.to_dict() for site in self.sites],
            "lowering": self.lowering.to_dict(),
            "target": self.target.to_dict(),
        }


def inspect_model(
    source: ModelSource,
    options: Options | None = None,
    *,
    target: str = "generic",
    rules: RuleSet | None = None,
    **option_overrides: object,
) -> InspectReport:
    """Classify every sequence value of `source` by the tier that would lower it.

    `source` is a path, an `onnx.ModelProto` or an `onnx_ir.Model`; none is modified. Options
    and keyword overrides are those of `optimize` (e.g. `dims={"N": 8}` to see what binding a
    symbolic dimension would change). Raises `SeqlowerError` on a bad model or option.
    """
    options = dataclasses.replace(options or Options(), **option_overrides)  # type: ignore[arg-type]
    model = load_model(source)
    if isinstance(source, ir.Model):
        model = model.clone()  # load_model hands an ir.Model back as is
    labels = _label_nodes(model)
    typed = model.clone()  # inferred types say which values are sequences; `model` keeps its
    infer_shapes(typed)  # declared shapes for the trial lowering, as optimize would see them
    sites = _collect_sites(typed, labels)
    interface_inputs = [v.name or "" for v in model.graph.inputs if is_sequence_value(v)]
    interface_outputs = [v.name or "" for v in model.graph.outputs if is_sequence_value(v)]

    recorder = _Recorder()
    if rules is None:
        from seqlower.rules import default_rules

        rules = default_rules()
    lowered, report = optimize(model, options, rules=recorder.wrap(rules))

    hints = _Hints(lowered, bindable_dims(lowered))
    result = _interface_sites(lowered, interface_inputs, interface_outputs, hints)
    result += _classify(sites, lowered, report, recorder, hints)
    return InspectReport(
        model=_describe_source(source),
        sites=result,
        lowering=report,
        target=check_target(lowered, report, target),
        options={
            "dims": dict(options.dims),
            "flatten_sequence_io": options.flatten_sequence_io,
            "seq_lens": dict(options.seq_lens),
            "split_keepdims": options.split_keepdims,
            "target": target,
        },
    )


def _describe_source(source: ModelSource) -> str:
    if isinstance(source, ir.Model):
        return source.graph.name or "<onnx_ir.Model>"
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    return getattr(getattr(source, "graph", None), "name", "") or "<onnx.ModelProto>"


# -- before lowering ---------------------------------------------------------------------------


def _label_nodes(model: ir.Model) -> dict[str, bool]:
    """Give every node a unique name (the copy's unnamed or duplicate ones get a label) so the
    lowered clone can be matched back; returns name -> whether it is the node's own name."""
    labels: dict[str, bool] = {}
    taken = {node.name for _, graph in walk_graphs(model) for node in graph if node.name}
    counters: dict[str, int] = {}
    for _, graph in walk_graphs(model):
        for node in graph:
            if node.name and node.name not in labels:
                labels[node.name] = True
                continue
            base = node.name or node.op_type
            while True:
                counters[base] = counters.get(base, -1) + 1
                label = f"{base}#{counters[base]}"
                if label not in taken:
                    break
            taken.add(label)
            node.name = label
            labels[label] = False
    return labels


@dataclasses.dataclass
class _Site:
    graph: str
    name: str
    op_type: str
    values: tuple[str, ...]
    readers: tuple[str, ...]  # nodes that read its sequence outputs
    writers: tuple[str, ...]  # nodes that produce its sequence inputs
    owner: str  # the node whose subgraph holds it ("" in the main graph)
    named: bool

    def finish(
        self, tier: str, recorder: _Recorder, reason: str = "", hints: tuple[str, ...] = ()
    ) -> SequenceSite:
        return SequenceSite(
            graph=self.graph,
            node=self.name,
            op_type=self.op_type,
            tier=tier,
            values=self.values,
            rules=tuple(rule for rule, _ in recorder.fired.get(self.name, [])),
            reason=reason,
            hints=hints,
            named=self.named,
        )


def _collect_sites(model: ir.Model, labels: dict[str, bool]) -> list[_Site]:
    owners = {key: node.name or "" for key, node in subgraph_owners(model).items()}
    sites = []
    for path, graph in walk_graphs(model):
        for node in graph:
            if not _is_sequence_node(node):
                continue
            readers = tuple(
                consumer.name or ""
                for output in node.outputs
                if is_sequence_value(output)
                for consumer in output.consumers()
            )
            producers = (v.producer() for v in node.inputs if is_sequence_value(v))
            writers = tuple(p.name or "" for p in producers if p is not None)
            sites.append(
                _Site(
                    path,
                    node.name or "",
                    node.op_type if node.domain == "" else f"{node.domain}::{node.op_type}",
                    _sequence_outputs(node),
                    readers,
                    writers,
                    owners.get(id(graph), ""),
                    labels.get(node.name or "", True),
                )
            )
    return sites


def _is_sequence_node(node: ir.Node) -> bool:
    return is_sequence_op(node) or any(is_sequence_value(v) for v in (*node.inputs, *node.outputs))


def _is_sequence_output(value: ir.Value, model: ir.Model) -> bool:
    return is_sequence_value(value) and value.is_graph_output() and value.graph is model.graph


def _sequence_outputs(node: ir.Node) -> tuple[str, ...]:
    return tuple(v.name or "" for v in node.outputs if is_sequence_value(v))


# -- during lowering ---------------------------------------------------------------------------


class _Recorder:
    """Wraps rules so that each rewrite records (rule, tier) under the rewritten node's name."""

    def __init__(self) -> None:
        self.fired: dict[str, list[tuple[str, str]]] = {}

    def wrap(self, rules: RuleSet) -> RuleSet:
        # dataclasses.replace keeps the driver's ordering flags (before_producers, last_resort)
        return RuleSet(dataclasses.replace(r, rewrite=self._wrap(r)) for r in rules)

    def _wrap(self, rule: Rule):  # type: ignore[no-untyped-def]
        @functools.wraps(rule.rewrite)
        def rewrite(node: ir.Node, match: Any, ctx: Context) -> None:
            graph = node.graph
            before = set(graph) if isinstance(graph, ir.Graph) else set()
            rule.rewrite(node, match, ctx)
            created = [n for n in graph if n not in before] if isinstance(graph, ir.Graph) else []
            self.fired.setdefault(node.name or "", []).append(
                (rule.name, _rule_tier(rule.name, created))
            )

        return rewrite

    def tier(self, name: str) -> str | None:
        fired = self.fired.get(name)
        return fired[-1][1] if fired else None


def _rule_tier(rule_name: str, created: Iterable[ir.Node]) -> str:
    """The tier of one rewrite, from the rule's name and the nodes it created."""
    if "batch" in rule_name:
        return "batch"
    loops = [n for n in created if n.op_type in ("Loop", "Scan") and n.domain == ""]
    if loops:
        carries_sequence = any(is_sequence_value(v) for loop in loops for v in loop.outputs)
        return "loop" if carries_sequence else "scan"
    if "unroll" in rule_name:
        return "unroll"
    return "direct"


# -- after lowering ----------------------------------------------------------------------------


def _classify(
    sites: list[_Site], lowered: ir.Model, report: Report, recorder: _Recorder, hints: _Hints
) -> list[SequenceSite]:
    """Every original site with its tier, then the kept nodes the lowering created, each placed
    after the site it came from."""
    final = {node.name: node for _, graph in walk_graphs(lowered) for node in graph}
    reasons = {op.node: op.reason for op in report.remaining}  # node names are unique here
    tiers: dict[str, str] = {}
    result: list[SequenceSite] = []
    for site in sites:
        node = final.get(site.name)
        if node is not None and _is_sequence_node(node):
            reason = reasons.get(site.name, "") or _carrier_reason(node)
            tiers[site.name] = "kept"
            result.append(site.finish("kept", recorder, reason, hints.for_node(node, reason)))
    for site in sites:
        if tiers.get(site.name) != "kept":
            tier = _resolved_tier(site.name, sites, recorder, tiers, set())
            result.append(site.finish(tier, recorder))
    result = _borrow_hints(result, sites)

    original = {site.name for site in sites}
    for op in report.remaining:
        if op.node in original:
            continue
        created = final.get(op.node)
        result.append(
            SequenceSite(
                graph=op.graph,
                node=op.node,
                op_type=op.op_type,
                tier="kept",
                values=_sequence_outputs(created) if created is not None else (),
                reason=op.reason,
                hints=hints.for_node(created, op.reason) if created is not None else (),
                created_by=_origin(op.node, original),
            )
        )
    order = {site.name: index for index, site in enumerate(sites)}
    result.sort(key=lambda s: order.get(s.node, order.get(s.created_by, len(order)) + 0.5))
    return result


def _resolved_tier(
    name: str, sites: list[_Site], recorder: _Recorder, tiers: dict[str, str], seen: set[str]
) -> str:
    """A rewritten node's tier. A node removed without a rewrite of its own takes the costliest
    tier of its readers (a split absorbed into the loop that reads it), or else of the nodes
    that wrote its sequence inputs (a concat the rewrite of its producer made useless), or else
    of the node whose body holds it (an append in a Loop that became a scan)."""
    if name in tiers:
        return tiers[name]
    tier = recorder.tier(name)
    if tier is None:
        site = next((s for s in sites if s.name == name), None)
        seen.add(name)
        tier = "direct"
        groups = (site.readers, site.writers, (site.owner,)) if site is not None else ()
        for neighbours in groups:
            found = [
                _resolved_tier(other, sites, recorder, tiers, seen)
                for other in neighbours
                if other and other not in seen
            ]
            found = [t for t in found if t not in ("kept", "flattened")]
            if found:
                tier = max(found, key=_COST.__getitem__)
                break
    tiers[name] = tier
    return tier


def _borrow_hints(result: list[SequenceSite], sites: list[_Site]) -> list[SequenceSite]:
    """A kept node without hints of its own stays because of a kept neighbour (the Loop whose
    body holds it, or that reads it): what helps that neighbour helps it too."""
    hints = {site.node: site.hints for site in result if site.tier == "kept" and site.hints}
    by_name = {site.name: site for site in sites}
    borrowed = []
    for site in result:
        source = by_name.get(site.node)
        if site.tier == "kept" and not site.hints and source is not None:
            for other in (source.owner, *source.readers):
                if hints.get(other):
                    site = dataclasses.replace(site, hints=hints[other])
                    break
        borrowed.append(site)
    return borrowed


def _carrier_reason(node: ir.Node) -> str:
    inside = "its body still holds sequence operators" if node.attributes else "no rule applies"
    return f"still carries sequence values ({inside})"


def _origin(name: str, originals: set[str]) -> str:
    """The original node a lowering-created node was named after (the rewriter names new nodes
    '<anchor>/<what>' or '<anchor>_<what>'), or ''."""
    best = ""
    for original in originals:
        if len(original) > len(best) and re.match(re.escape(original) + r"[/_]", name):
            best = original
    return best


def _interface_sites(
    lowered: ir.Model, inputs: list[str], outputs: list[str], hints: _Hints
) -> list[SequenceSite]:
    sites = []
    final_inputs = {v.name: v for v in lowered.graph.inputs}
    for name in inputs:
        value = final_inputs.get(name)
        if value is not None and is_sequence_value(value):
            reason = "a sequence-typed model input: the interface is kept unless asked"
            hint = f"--flatten-sequence-io --seq-len {name}=<n> (one tensor input per element)"
            sites.append(SequenceSite("main", name, "input", "kept", (name,), (), reason, (hint,)))
        else:
            sites.append(SequenceSite("main", name, "input", "flattened", (name,)))
    final_outputs = {v.name: v for v in lowered.graph.outputs}
    facts = Facts(lowered)
    for name in outputs:
        value = final_outputs.get(name)
        if value is None or not is_sequence_value(value):
            sites.append(SequenceSite("main", name, "output", "flattened", (name,)))
            continue
        fact = facts.sequence(value)
        if isinstance(fact, Unknown):
            reason = f"a sequence-typed model output of unknown length: {fact.reason}"
            extra = hints.for_sequence(value)
        else:
            reason = "a sequence-typed model output: the interface is kept unless asked"
            names = ", ".join(f"{name}_{k}" for k in range(min(fact.length, 3)))
            more = ", ..." if fact.length > 3 else ""
            extra = (f"--flatten-sequence-io (gives {fact.length} outputs {names}{more})",)
        sites.append(SequenceSite("main", name, "output", "kept", (name,), (), reason, extra))
    return sites


class _Hints:
    """What the user can do about a kept node: bind a dim, flatten an input or an output."""

    def __init__(self, model: ir.Model, bindable: set[str]) -> None:
        self.model = model
        self.bindable = bindable
        self.facts = Facts(model)

    def for_node(self, node: ir.Node, reason: str) -> tuple[str, ...]:
        hints: list[str] = []
        dims: list[str] = []
        inputs: list[str] = []
        for value in node.inputs:
            if is_sequence_value(value):
                self._upstream(value, dims, inputs, set())  # type: ignore[arg-type]
        if node.op_type == "SplitToSequence" and node.domain == "":
            dims.extend(d for d in self._split_dims(node) if d not in dims)
        for name in dims:
            hints.append(f"--dim {name}=<size> (the length depends on symbolic dim {name})")
        for name in inputs:
            hints.append(f"--flatten-sequence-io --seq-len {name}=<n> (model input '{name}')")
        for value in node.outputs:
            if _is_sequence_output(value, self.model):
                if self.facts.length(value) is not None:
                    hints.append("--flatten-sequence-io (it feeds a sequence-typed model output)")
                else:
                    hints.extend(h for h in self.for_sequence(value) if h not in hints)
        if not hints and "sequence-typed model input" in reason:
            for name in re.findall(r"'([^']+)' is a sequence-typed model input", reason):
                hints.append(f"--flatten-sequence-io --seq-len {name}=<n> (model input '{name}')")
        return tuple(dict.fromkeys(hints))

    def for_sequence(self, value: ir.Value) -> tuple[str, ...]:
        dims: list[str] = []
        inputs: list[str] = []
        self._upstream(value, dims, inputs, set())
        hints = [f"--dim {d}=<size> (the length depends on symbolic dim {d})" for d in dims]
        hints += [f"--flatten-sequence-io --seq-len {n}=<n> (model input '{n}')" for n in inputs]
        return tuple(hints)

    def _upstream(
        self, value: ir.Value, dims: list[str], inputs: list[str], seen: set[ir.Value]
    ) -> None:
        """Walk up the producers of a sequence: which dims decide its length, and which
        sequence-typed model inputs it comes from."""
        if value in seen:
            return
        seen.add(value)
        producer = value.producer()
        if producer is None:
            main_input = value.is_graph_input() and value.graph is self.model.graph
            if main_input and value.name and value.name not in inputs:
                inputs.append(value.name)
            return
        if producer.op_type == "SplitToSequence" and producer.domain == "":
            found = self._split_dims(producer)
        elif is_sequence_op(producer) or producer.op_type == "Identity":
            found = []
        else:  # a Loop, an If...: whatever feeds it
            found = [d for v in producer.inputs for d in dims_feeding(v, self.bindable)]
        dims.extend(d for d in found if d not in dims)
        for source in producer.inputs:
            if is_sequence_value(source):
                self._upstream(source, dims, inputs, seen)  # type: ignore[arg-type]

    def _split_dims(self, node: ir.Node) -> list[str]:
        """The bindable dims a SplitToSequence's element count depends on."""
        data = node.inputs[0] if node.inputs else None
        if data is None or data.shape is None:
            return []
        axis = node.attributes.get_int("axis", 0)
        if not -len(data.shape) <= axis < len(data.shape):
            return []
        dim = data.shape[axis]
        if isinstance(dim, int):
            split = node.inputs[1] if len(node.inputs) > 1 else None
            return dims_feeding(split, self.bindable) if split is not None else []
        if isinstance(dim, ir.SymbolicDim) and dim.value in self.bindable:
            return [dim.value]
        return dims_feeding(data, self.bindable)  # an inferred dim: look at what computes it


# -- text --------------------------------------------------------------------------------------


def format_inspect(report: InspectReport) -> str:
    """The inspect report as a compact plain-text table, one line per site, hints below."""
    tiers = ", ".join(f"{count} {tier}" for tier, count in report.tiers.items()) or "none"
    lines = [f"{report.model}: {len(report.sites)} sequence sites ({tiers})"]
    if report.sites:
        rows = [("graph", "node", "op", "tier", "rules / why kept")]
        for site in report.sites:
            rows.append((site.graph, site.label, site.op_type, site.tier, site.detail))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for index, row in enumerate(rows):
            cells = [cell.ljust(width) for cell, width in zip(row, widths)]
            lines.append("  ".join([*cells, row[4]]).rstrip())
            if index:
                site = report.sites[index - 1]
                lines.extend(f"    try {hint}" for hint in site.hints)
    return "\n".join(lines + format_inspect_footer(report))


def format_inspect_footer(report: InspectReport) -> list[str]:
    """The lines under the table: interface changes, warnings, the target's verdict."""
    lines = [f"interface: {_describe_change(c)}" for c in report.lowering.interface_changes]
    lines.extend(f"warning: {warning}" for warning in report.lowering.warnings)
    if report.target.target != "generic":
        verdict = "ok" if report.target.ok else f"{len(report.target.errors)} error(s)"
        lines.append(f"target {report.target.target}: {verdict}")
        lines.extend(f"  error: {error}" for error in report.target.errors)
        lines.extend(f"  warning: {warning}" for warning in report.target.warnings)
    return lines


def _describe_change(change: dict[str, Any]) -> str:
    kind = change.get("kind")
    if kind == "bind_dim":
        inputs = ", ".join(change.get("inputs", []))
        return f"dim {change['dim']} fixed to {change['size']} (inputs {inputs})"
    if kind in ("flatten_input", "flatten_output"):
        side = "input" if kind == "flatten_input" else "output"
        names = ", ".join(change.get("new_names", [])) or "nothing (empty)"
        return f"sequence {side} '{change['name']}' -> tensors {names}"
    return str(change)
