"""Per-node outcomes of a lowering: the tier every sequence node ended in, and for what stays, the
one reason that matters and what to try.

The pipeline labels the nodes of the input (`NodeLabels`), collects the nodes that produce or read
a sequence value before lowering (`collect_sites`), lets `LowerSequencesPass` record which rule
rewrote which node, and after cleanup turns it all into `NodeOutcome`s (`node_outcomes`). This is
the one source of truth that `optimize --report` and `seqlower inspect` both show.

A node removed without a rule firing on it (a SplitToSequence whose readers now read the tensor)
takes the costliest tier of its readers, else of its writers, else of the node whose body holds it.
"""

from __future__ import annotations

__all__ = [
    "LABEL_KEY",
    "NodeLabels",
    "Site",
    "collect_sites",
    "deepest_reason",
    "hint_for",
    "node_outcomes",
    "reason_rank",
    "rewrite_tier",
    "stored_label",
]

import collections
import dataclasses
import re
from collections.abc import Iterable, Mapping

import onnx_ir as ir

from seqlower.analysis import Facts, Unknown
from seqlower.ops import is_sequence_op, is_sequence_value, node_subgraphs
from seqlower.passes.bind_dims import bindable_dims, dims_feeding
from seqlower.report import TIERS, NodeOutcome, RemainingOp

_COST = {tier: rank for rank, tier in enumerate(TIERS)}


LABEL_KEY = "seqlower.label"  # a node's label in its (never serialized) `meta`


def stored_label(node: ir.Node) -> str:
    """The label `NodeLabels` gave `node` during lowering, else its name, else its op type."""
    return node.meta.get(LABEL_KEY) or node.name or node.op_type


class NodeLabels:
    """One label per node, used everywhere a node is named: its name when no node before it
    has that name, else `<op_type>#<k> (<first output>)` for an unnamed node (`<name>#<k>` for
    a repeated name), numbered per op type in the order labels are asked for (the pipeline asks
    in the order of the graphs, once per sequence node, before lowering). `visit` each node in
    that order first, so that the first of two nodes with one name keeps it."""

    def __init__(self) -> None:
        self._labels: dict[ir.Node, str] = {}
        self._first: dict[str, ir.Node] = {}  # name -> the first node visited with it
        self._counters: dict[str, int] = {}

    def visit(self, node: ir.Node) -> None:
        if node.name:
            self._first.setdefault(node.name, node)

    def __call__(self, node: ir.Node) -> str:
        label = self._labels.get(node)
        if label is None:
            self.visit(node)
            name = node.name
            label = name if name and self._first[name] is node else self._fresh(node)
            self._labels[node] = label
            node.meta[LABEL_KEY] = label  # for what reads the lowered model later (targets)
        return label

    def _fresh(self, node: ir.Node) -> str:
        base = node.name or node.op_type
        while True:
            self._counters[base] = self._counters.get(base, -1) + 1
            label = f"{base}#{self._counters[base]}"
            if label not in self._first:
                break
        first = node.outputs[0].name if node.outputs and not node.name else ""
        return f"{label} ({first})" if first else label


@dataclasses.dataclass
class Site:
    """A node of the input that produces or reads a sequence value, before lowering."""

    node: ir.Node
    graph: str
    label: str
    op_type: str
    outputs: tuple[str, ...]
    readers: tuple[ir.Node, ...]  # nodes that read its sequence outputs
    writers: tuple[ir.Node, ...]  # nodes that produce its sequence inputs
    owner: ir.Node | None  # the node whose subgraph holds it


def collect_sites(model: ir.Model, labels: NodeLabels) -> list[Site]:
    """Every node that produces or reads a sequence value, in every graph (types inferred):
    one walk, in which every node is also `visit`ed for `labels`."""
    # the exact class, not ir.SequenceType: its isinstance goes through a slow protocol check,
    # and this loop looks at every output of the model
    sequence_type = type(ir.SequenceType(ir.TensorType(ir.DataType.FLOAT)))
    readers: set[ir.Node] = set()  # nodes reading a sequence seen so far (producers first)
    sites = []
    # walk_graphs' order and paths, with the owner of each graph
    queue: collections.deque[tuple[str, ir.Graph, ir.Node | None]] = collections.deque(
        [("main", model.graph, None)]
    )
    queue.extend(
        (f"function {f.domain}::{f.name}", f.graph, None) for f in model.functions.values()
    )
    while queue:
        path, graph, owner = queue.popleft()
        for value in graph.inputs:
            if type(value.type) is sequence_type:
                readers.update(value.consumers())
        for node in graph:
            labels.visit(node)
            for name, subgraph in node_subgraphs(node):
                queue.append((f"{path}/{labels(node)}:{name}", subgraph, node))
            outputs = [v for v in node.outputs if type(v.type) is sequence_type]
            if not (outputs or node in readers or is_sequence_op(node)):
                continue
            for output in outputs:
                readers.update(output.consumers())
            producers = (v.producer() for v in node.inputs if is_sequence_value(v))
            sites.append(
                Site(
                    node,
                    path,
                    labels(node),
                    node.op_type if node.domain == "" else f"{node.domain}::{node.op_type}",
                    tuple(v.name or "" for v in outputs),
                    tuple(c for output in outputs for c in output.consumers()),
                    tuple(p for p in producers if p is not None),
                    owner,
                )
            )
    return sites


def rewrite_tier(rule_name: str, created: Iterable[ir.Node]) -> str:
    """The tier of one rewrite, from the rule's name and the nodes it made."""
    if "batch" in rule_name:
        return "batch"
    loops = [n for n in created if n.op_type in ("Loop", "Scan") and n.domain == ""]
    if loops:
        carries_sequence = any(is_sequence_value(v) for loop in loops for v in loop.outputs)
        return "loop" if carries_sequence else "scan"
    if "unroll" in rule_name:
        return "unroll"
    return "direct"


def node_outcomes(
    model: ir.Model,
    sites: list[Site],
    remaining: list[RemainingOp],
    rewrites: Mapping[ir.Node, list[tuple[str, str]]],
    origins: Mapping[ir.Node, ir.Node],
    labels: NodeLabels,
    interface: tuple[list[str], list[str]],
) -> list[NodeOutcome]:
    """The outcome of every site, of the model's sequence inputs and outputs, and of each kept
    node the lowering made (placed after the site it came from)."""
    from seqlower.passes.legality import walk_graphs

    final: set[ir.Node] | None = None  # the nodes left, walked for only when needed
    kept_ops = {op.node: op for op in remaining}
    by_node = {site.node: site for site in sites}
    tiers: dict[ir.Node, str] = {}
    outcomes: dict[ir.Node, NodeOutcome] = {}
    for site in sites:
        if site.node.graph is None:  # removed
            continue
        if final is None:
            final = {node for _, graph in walk_graphs(model) for node in graph}
        if site.node in final and _is_sequence_node(site.node):
            tiers[site.node] = "kept"
            outcomes[site.node] = _kept(site, kept_ops.get(site.label), rewrites, model, labels)
    for site in sites:
        if site.node not in outcomes:
            tier = _resolved_tier(site.node, by_node, rewrites, tiers, set())
            fired = tuple(rule for rule, _ in rewrites.get(site.node, []))
            outcomes[site.node] = NodeOutcome(
                site.graph, site.label, site.op_type, tier, site.outputs, fired
            )
    result = _interface(model, interface, labels) + [outcomes[site.node] for site in sites]

    original = {site.label for site in sites}
    made: dict[str, list[NodeOutcome]] = {}
    for op in remaining:
        if op.node in original:
            continue
        node = next((n for n in origins if labels(n) == op.node), None)
        origin = origins.get(node) if node is not None else None
        created_by = labels(origin) if origin is not None else ""
        made.setdefault(created_by, []).append(
            NodeOutcome(
                op.graph, op.node, op.op_type, "kept", op.outputs, (), op.reason, op.hint,
                op.reasons, created_by,
            )
        )  # fmt: skip
    if made:
        placed = []
        for outcome in result:
            placed.append(outcome)
            placed.extend(made.pop(outcome.node, []) if outcome.op_type != "input" else [])
        result = placed + [outcome for group in made.values() for outcome in group]
    return result


def _kept(
    site: Site,
    op: RemainingOp | None,
    rewrites: Mapping[ir.Node, list[tuple[str, str]]],
    model: ir.Model,
    labels: NodeLabels,
) -> NodeOutcome:
    fired = tuple(rule for rule, _ in rewrites.get(site.node, []))
    if op is not None:
        reason, hint, reasons = op.reason, op.hint, op.reasons
    else:  # a Loop or If that still carries sequences
        inside = "its body holds sequence operators" if site.node.attributes else "no rule applies"
        reason = f"it still carries sequence values ({inside})"
        lowerable = site.node.op_type in ("Loop", "If", "Identity") and site.node.domain == ""
        hint = hint_for(site.node, model) if lowerable else ""  # no rule lowers the others
        reasons = (reason,)
    return NodeOutcome(
        site.graph, site.label, site.op_type, "kept", site.outputs, fired, reason, hint, reasons
    )


def _resolved_tier(
    node: ir.Node,
    sites: Mapping[ir.Node, Site],
    rewrites: Mapping[ir.Node, list[tuple[str, str]]],
    tiers: dict[ir.Node, str],
    seen: set[ir.Node],
) -> str:
    """A node's tier: that of the last rewrite of it, or for a node removed without a rewrite of
    its own, the costliest tier of its readers (a split absorbed into the loop that reads it),
    or else of the nodes that wrote its sequence inputs (a concat the rewrite of its producer
    made useless), or else of the node whose body holds it (an append in a Loop that became a
    scan)."""
    if node in tiers:
        return tiers[node]
    fired = rewrites.get(node)
    if fired:
        tier = fired[-1][1]
    else:
        seen.add(node)
        tier = "direct"
        site = sites.get(node)
        groups = (site.readers, site.writers, (site.owner,)) if site is not None else ()
        for neighbours in groups:
            found = [
                _resolved_tier(other, sites, rewrites, tiers, seen)
                for other in neighbours
                if other is not None and other not in seen
            ]
            found = [t for t in found if t not in ("kept", "flattened")]
            if found:
                tier = max(found, key=_COST.__getitem__)
                break
    tiers[node] = tier
    return tier


def _interface(
    model: ir.Model, interface: tuple[list[str], list[str]], labels: NodeLabels
) -> list[NodeOutcome]:
    """The outcome of the sequence-typed inputs and outputs the input model had."""
    inputs, outputs = interface
    result = []
    final_inputs = {v.name: v for v in model.graph.inputs}
    for name in inputs:
        value = final_inputs.get(name)
        if value is not None and is_sequence_value(value):
            reason = "the model's interface is kept unless asked"
            hint = f"--flatten-sequence-io --seq-len {name}=<n> (one tensor input per element)"
            if value.shape is None:  # flattening needs the elements' rank at least
                reason += "; its elements declare no shape, so it cannot be flattened"
                hint = ""
            result.append(NodeOutcome("main", name, "input", "kept", (name,), (), reason, hint))
        else:
            result.append(NodeOutcome("main", name, "input", "flattened", (name,)))
    final_outputs = {v.name: v for v in model.graph.outputs}
    facts: Facts | None = None
    for name in outputs:
        value = final_outputs.get(name)
        if value is None or not is_sequence_value(value):
            result.append(NodeOutcome("main", name, "output", "flattened", (name,)))
            continue
        facts = facts or Facts(model)
        fact = facts.sequence(value)
        if isinstance(fact, Unknown):
            reason = f"its length is unknown: {fact.reason}"
            hint = hint_for_value(value, model)
            if hint and "--flatten-sequence-io" not in hint:  # static then, but still a sequence
                flags, why = hint.split(" (", 1)
                hint = f"{flags} --flatten-sequence-io ({why}"
        else:
            reason = "the model's interface is kept unless asked"
            names = ", ".join(f"{name}_{k}" for k in range(min(fact.length, 3)))
            more = ", ..." if fact.length > 3 else ""
            hint = f"--flatten-sequence-io (gives {fact.length} outputs {names}{more})"
        result.append(NodeOutcome("main", name, "output", "kept", (name,), (), reason, hint))
    return result


# -- the reason that matters, and what to try ------------------------------------------------

# refusals that say a rule's pattern does not match: true, but never the cause
_MISMATCH = re.compile(
    r"does not come from|handled by|not produced by|no position|not a |is not |only for "
)
# refusals that name where the unknown comes from
_ROOT = re.compile(r"model input|computed at run time|depends on|run-time|symbolic dim")


_RULE_PREFIX = re.compile(r"^[a-z0-9-]+: ")


def reason_rank(text: str) -> int:
    """0 for a reason naming the root of an unknown, 1 for another cause, 2 for a mismatch."""
    if _ROOT.search(text):
        return 0
    return 2 if _MISMATCH.search(text) else 1


def deepest_reason(reasons: list[str]) -> str:
    """The one refusal that matters among `rule: why` entries: one naming the root of the
    unknown (a model input, a run-time value) before others, pattern mismatches last, the
    first rule's (the preferred lowering's) among equals; the rule's name is left off."""
    texts = [_RULE_PREFIX.sub("", reason, count=1) for reason in reasons]
    return min(texts, key=reason_rank) if texts else "no rule applies"


def hint_for(node: ir.Node, model: ir.Model, owners: Mapping[int, ir.Node] | None = None) -> str:
    """What to try for a kept node, from the cause: flatten the sequence-typed model inputs its
    sequences come from, bind the symbolic dims their lengths follow, flatten the sequence
    output it feeds; for a node in a body, what helps the node around it; "" when no option
    would help. `owners` maps a subgraph's id to the node holding it."""
    hint = _hint_from(structural_inputs(node), model)
    if hint:
        return hint
    outputs = [v for v in node.outputs if is_sequence_value(v)]
    fed = [v for v in outputs if v.is_graph_output() and v.graph is model.graph]
    if fed and all(Facts(model).length(v) is not None for v in fed):
        return "--flatten-sequence-io (it feeds a sequence-typed model output)"
    for output in outputs:  # a sequence built for a Loop or If that stays
        for consumer in output.consumers():
            if consumer.op_type in ("Loop", "If") and consumer.domain == "":
                hint = hint_for(consumer, model, owners)
                if hint:
                    return hint
    owner = (owners or {}).get(id(node.graph)) if node.graph is not None else None
    return hint_for(owner, model, owners) if owner is not None else ""


def hint_for_value(value: ir.Value, model: ir.Model) -> str:
    """What to try for a sequence value of unknown length ("" when nothing helps)."""
    return _hint_from([value], model)


_MAX_DEPTH = 16  # producers walked up from a kept node
# the inputs that decide a sequence's length: split sizes, trip counts, and insert positions
# unless every element has one static shape (the elements' data never keeps a sequence; a
# run-time read position does not either once the elements are known: SequenceAt becomes a
# Gather, SequenceErase and such an insert a Where)
_STRUCTURAL = {
    "SequenceInsert": (2,),
    "SplitToSequence": (1,),
    "Loop": (0,),
}


def structural_inputs(node: ir.Node) -> list[ir.Value]:
    """The sequences `node` reads, and the inputs that decide lengths and positions."""
    wanted = _STRUCTURAL.get(node.op_type, ()) if node.domain == "" else ()
    if node.op_type == "SequenceInsert" and _one_static_shape(node.inputs[:2]):
        wanted = ()
    values = [
        value
        for index, value in enumerate(node.inputs)
        if value is not None and (index in wanted or is_sequence_value(value))
    ]
    if node.op_type == "Loop" and node.domain == "":
        values += _captured_sequences(node)
    return values


def _hint_from(values: list[ir.Value], model: ir.Model) -> str:
    """Walk up from `values` through the producers of sequences and of the values that decide
    lengths and positions: the sequence-typed model inputs reached and the bindable dims the
    lengths follow. "" when a run-time value (a tensor input, an overridable initializer)
    decides too: no option would make it static."""
    inputs: list[str] = []
    dims: list[str] = []
    bindable: set[str] | None = None
    seen: set[ir.Value] = set()
    frontier = [(value, 0) for value in values]
    while frontier:
        value, depth = frontier.pop()
        if value in seen:
            continue
        if depth > _MAX_DEPTH:
            return ""
        seen.add(value)
        producer = value.producer()
        if producer is None:
            if value.graph is not model.graph:
                continue  # a body input: the Loop around it decides (its trip count is walked)
            if isinstance(value.type, ir.SequenceType) and value.is_graph_input():
                if value.shape is None:
                    return ""  # its elements declare no shape: --flatten-sequence-io refuses it
                inputs.append(value.name or "")
            elif value.is_graph_input():
                return ""  # a run-time tensor decides
            continue
        if producer.domain != "":
            return ""
        if producer.op_type == "Shape" and producer.inputs and producer.inputs[0] is not None:
            bindable = bindable if bindable is not None else bindable_dims(model)
            found = dims_feeding(producer.inputs[0], bindable, depth=0)
            if not found:
                return ""
            dims.extend(d for d in found if d not in dims)
            continue
        if producer.op_type == "SplitToSequence":
            bindable = bindable if bindable is not None else bindable_dims(model)
            found = _split_dims(producer, bindable)
            if found is None:  # the split dim is computed: from a sequence, or nothing helps
                data = producer.inputs[0].producer() if producer.inputs[0] is not None else None
                if data is None or not is_sequence_op(data):
                    return ""
                frontier.extend((v, depth + 1) for v in structural_inputs(data))
            else:
                dims.extend(d for d in found if d not in dims)
        if is_sequence_op(producer) or producer.op_type in ("Loop", "If", "Identity"):
            follow = structural_inputs(producer)
        elif is_sequence_value(value):
            return ""  # an operator no rule lowers (OptionalGetElement...) makes the sequence
        else:  # tensor arithmetic on the way to a length or a position
            follow = [v for v in producer.inputs if v is not None]
        frontier.extend((v, depth + 1) for v in follow)
    if inputs:
        lens = " ".join(f"--seq-len {name}=<n>" for name in sorted(inputs))
        return f"--flatten-sequence-io {lens} (the length comes from the sequence input)"
    if dims:
        binds = " ".join(f"--dim {d}=<size>" for d in dims)
        return f"{binds} (the length follows the symbolic dim {', '.join(dims)})"
    return ""


def _one_static_shape(values: Iterable[ir.Value | None]) -> bool:
    """True when the values (a sequence: its elements) all have one fully static shape."""
    shapes = [v.shape if v is not None else None for v in values]
    if any(shape is None or not all(isinstance(d, int) for d in shape) for shape in shapes):
        return False
    return len({tuple(shape) for shape in shapes}) == 1  # type: ignore[arg-type]


def _captured_sequences(node: ir.Node) -> list[ir.Value]:
    """The sequences that the subgraphs of `node` read from the graphs around it."""
    inner: set[ir.Graph] = set()
    found: list[ir.Value] = []
    pending = [subgraph for _, subgraph in node_subgraphs(node)]
    bodies = []
    while pending:
        graph = pending.pop()
        inner.add(graph)
        bodies.append(graph)
        for child in graph:
            pending.extend(subgraph for _, subgraph in node_subgraphs(child))
    for graph in bodies:
        for child in graph:
            for value in child.inputs:
                outer = value is not None and value.graph not in inner
                if outer and is_sequence_value(value) and value not in found:
                    found.append(value)
    return found


def _split_dims(node: ir.Node, bindable: set[str]) -> list[str] | None:
    """The bindable dims a SplitToSequence's element count depends on; None when the split
    dim is neither static nor a bindable dim of a model input."""
    data = node.inputs[0] if node.inputs else None
    if data is None or data.shape is None:
        return None
    axis = node.attributes.get_int("axis", 0)
    if not -len(data.shape) <= axis < len(data.shape):
        return None
    dim = data.shape[axis]
    if isinstance(dim, int):
        split = node.inputs[1] if len(node.inputs) > 1 else None
        return dims_feeding(split, bindable) if split is not None else []
    if isinstance(dim, ir.SymbolicDim) and dim.value in bindable:
        return [dim.value]
    return None


def _is_sequence_node(node: ir.Node) -> bool:
    return is_sequence_op(node) or any(is_sequence_value(v) for v in (*node.inputs, *node.outputs))


def _sequence_outputs(node: ir.Node) -> tuple[str, ...]:
    return tuple(v.name or "" for v in node.outputs if is_sequence_value(v))
