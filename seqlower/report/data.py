"""What a lowering did, as data: the answer to "what changed, and why did it stop here?".

The report is plain dataclasses; `to_dict()` gives the JSON form written by `--report`.
"""

from __future__ import annotations

__all__ = [
    "KEPT_FOR_SPEED",
    "LIST_TIER",
    "TIERS",
    "KeptRegion",
    "NodeOutcome",
    "RemainingOp",
    "Report",
]

import dataclasses
import json
from typing import Any

# How a node's sequence work ended, cheapest first (design.md, "SequenceMap lowering tiers"):
# direct (tensor operators on the whole data), batch (a map body applied once to the stacked
# elements), unroll (a copy per element), scan (a Loop with scan outputs), then the list as
# tensors (`seqlower.lists`): stacked (elements of one shape in one tensor), ragged (elements
# concatenated on their first dim, plus their first dims), flat (elements flattened into one
# buffer, plus a table of their shapes), unranked (the same for elements whose rank is known
# only at run time: their shapes concatenated, plus a table of sizes and ranks); loop (a Loop
# carrying a sequence), kept (still there, with the reason), flattened (a sequence input or
# output that became tensors on request).
TIERS = (
    "direct",
    "batch",
    "unroll",
    "scan",
    "stacked",
    "ragged",
    "flat",
    "unranked",
    "loop",
    "kept",
    "flattened",
)

# The refusal prefix of an operator kept because its tensor form costs more in onnxruntime
# (docs/performance.md, "Never slower"): a choice for speed, not a failure to lower.
# the name of the last tier (seqlower.lists) in the report: its refusal is a whole list's cause
LIST_TIER = "tensor-list"
KEPT_FOR_SPEED = "speed-first"  # the rule name the refusals of a region kept for speed carry


@dataclasses.dataclass(frozen=True)
class RemainingOp:
    """A sequence operator left in the output, and why it could not be lowered.

    `node` is the node's label: its name, or `<op_type>#<k> (<first output>)` for an unnamed
    node, the same everywhere seqlower names it. `reason` is the one cause that matters, `hint`
    what to try about it, `reasons` every refusal the rules gave (`rule: why`)."""

    graph: str  # path of the graph holding it, e.g. "main" or "main/loop_1:body"
    node: str
    op_type: str
    reason: str
    hint: str = ""
    outputs: tuple[str, ...] = ()  # the names of its output values
    reasons: tuple[str, ...] = ()
    created_by: str = ""  # for a node the lowering made: the label of the node it came from

    @property
    def kept_for_speed(self) -> bool:
        """Kept because its tensor form costs more, not because no rule could lower it."""
        return any(reason.startswith(f"{KEPT_FOR_SPEED}:") for reason in self.reasons)

    @property
    def described(self) -> str:
        """The node as messages name it: `Op 'label'`, or `Op made from 'origin'`."""
        if self.created_by:
            return f"{self.op_type} made from '{self.created_by}'"
        return f"{self.op_type} '{self.node}'"

    def to_dict(self) -> dict[str, Any]:
        entry = dataclasses.asdict(self)
        entry["outputs"] = list(self.outputs)
        entry["reasons"] = list(self.reasons)
        return entry


@dataclasses.dataclass(frozen=True)
class NodeOutcome:
    """What lowering did to one node that produces or reads a sequence value, or to one
    sequence-typed model input or output (`op_type` "input" / "output", `node` its name)."""

    graph: str
    node: str  # the label, as in RemainingOp
    op_type: str
    tier: str  # one of TIERS
    outputs: tuple[str, ...] = ()  # the sequence values it produces
    rules: tuple[str, ...] = ()  # the rules that rewrote it, in order
    reason: str = ""  # why it is kept: the one cause that matters
    hint: str = ""  # what to try about it
    reasons: tuple[str, ...] = ()  # every refusal, for --verbose
    created_by: str = ""  # for a kept node the lowering created: the label of its origin

    def to_dict(self) -> dict[str, Any]:
        entry = dataclasses.asdict(self)
        for key in ("outputs", "rules", "reasons"):
            entry[key] = list(entry[key])
        return entry


@dataclasses.dataclass(frozen=True)
class KeptRegion:
    """A region of sequence operators kept as given because its lowered form costs more
    (`--target onnxruntime`): the node that names it, how many sequence nodes it has, and the
    two estimates in whole operator launches per run (`seqlower.cost`), and the same on small
    inputs (`cost.SMALL_COUNT` iterations for a loop of run-time count) when they were made."""

    graph: str
    node: str  # the label of its first sequence node
    op_type: str
    sequence_nodes: int
    as_given: int
    lowered: int
    as_given_small: int | None = None
    lowered_small: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Report:
    """Facts about one run of the lowering pipeline."""

    sequence_ops_before: dict[str, int] = dataclasses.field(default_factory=dict)
    sequence_ops_after: dict[str, int] = dataclasses.field(default_factory=dict)
    rules_fired: dict[str, int] = dataclasses.field(default_factory=dict)
    stop_reason: str = ""
    iterations: int = 0
    remaining: list[RemainingOp] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    # changes to the model's interface the user asked for (`--dim`, `--flatten-sequence-io`);
    # each entry has a "kind" (docs/report-schema.md)
    interface_changes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # every node that produced or read a sequence value, and the model's sequence inputs and
    # outputs, with the tier each ended in: what `seqlower inspect` shows
    nodes: list[NodeOutcome] = dataclasses.field(default_factory=list)
    # sequence ops of the input with each SequenceMap counted as its expansion (SequenceLength,
    # SequenceAt per sequence input, SequenceEmpty and SequenceInsert per output), the measure
    # against which a map lowered to a Loop adds nothing
    expanded_before: int = 0
    # the target profile's judgement of the result (`seqlower.targets.check_target`): errors
    # make it unfit for that runtime (the command line then writes nothing), warnings cost time
    target: str = "generic"
    target_errors: list[str] = dataclasses.field(default_factory=list)
    target_warnings: list[str] = dataclasses.field(default_factory=list)
    # how the target was judged: "operators" (its profile, from the operators alone), or
    # "operators and runtime" (the model was also loaded in the target's runtime and run once);
    # "" for the generic target, which judges nothing
    target_check: str = ""
    # what the target's runtime said when it loaded and ran the model ("" when it did not)
    target_confirmed: str = ""
    # seconds the runtime check took (loading the model in the target's runtime and running it
    # once; 0.0 when it did not run): the command line prints it apart from the lowering's time.
    # Not in `to_dict`: a report is the same for the same input.
    runtime_check_seconds: float = dataclasses.field(default=0.0, compare=False)
    # every node of the input and of the output (subgraphs included)
    nodes_before: int = 0
    nodes_after: int = 0
    # regions kept as given because their lowered form costs more (`--target onnxruntime`)
    kept_for_speed: list[KeptRegion] = dataclasses.field(default_factory=list)
    # regions the default target lowered although their lowered form costs more (the estimates
    # `--target onnxruntime` weighs; that target keeps them as given)
    costlier_lowered: list[KeptRegion] = dataclasses.field(default_factory=list)

    @property
    def total_before(self) -> int:
        return sum(self.sequence_ops_before.values())

    @property
    def total_after(self) -> int:
        return sum(self.sequence_ops_after.values())

    @property
    def fits_target(self) -> bool:
        """True when the target profile found nothing the runtime cannot run (and, when
        `target_check` says so, the runtime loaded and ran the model)."""
        return not self.target_errors

    @property
    def kept_interface(self) -> list[NodeOutcome]:
        """The model's sequence-typed inputs and outputs left as sequences (the interface is
        kept unless `--flatten-sequence-io`): like `remaining`, what a runtime without sequence
        types cannot take."""
        return [n for n in self.nodes if n.op_type in ("input", "output") and n.tier == "kept"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence_ops_before": dict(sorted(self.sequence_ops_before.items())),
            "sequence_ops_after": dict(sorted(self.sequence_ops_after.items())),
            "total_before": self.total_before,
            "total_after": self.total_after,
            "rules_fired": dict(sorted(self.rules_fired.items())),
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "expanded_before": self.expanded_before,
            "remaining": [op.to_dict() for op in self.remaining],
            "warnings": list(self.warnings),
            "interface_changes": [dict(change) for change in self.interface_changes],
            "nodes": [node.to_dict() for node in self.nodes],
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "target": {
                "name": self.target,
                "ok": self.fits_target,
                "checked": self.target_check,
                "confirmed": self.target_confirmed,
                "errors": list(self.target_errors),
                "warnings": list(self.target_warnings),
            },
            "kept_for_speed": [region.to_dict() for region in self.kept_for_speed],
            "costlier_lowered": [region.to_dict() for region in self.costlier_lowered],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def __str__(self) -> str:
        """The summary `seqlower optimize` prints, with the target's verdict and warnings."""
        from seqlower.report.text import format_report  # text reads this module

        return format_report(self)
