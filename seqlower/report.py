"""What a lowering did, as data: the answer to "what changed, and why did it stop here?".

The report is plain dataclasses; `to_dict()` gives the JSON form written by `--report`.
"""

from __future__ import annotations

__all__ = ["RemainingOp", "Report"]

import dataclasses
import json
from typing import Any


@dataclasses.dataclass(frozen=True)
class RemainingOp:
    """A sequence operator left in the output, and why it could not be lowered."""

    graph: str  # path of the graph holding it, e.g. "main" or "main/loop_1:body"
    node: str
    op_type: str
    reason: str


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

    @property
    def total_before(self) -> int:
        return sum(self.sequence_ops_before.values())

    @property
    def total_after(self) -> int:
        return sum(self.sequence_ops_after.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "sequence_ops_before": dict(sorted(self.sequence_ops_before.items())),
            "sequence_ops_after": dict(sorted(self.sequence_ops_after.items())),
            "total_before": self.total_before,
            "total_after": self.total_after,
            "rules_fired": dict(sorted(self.rules_fired.items())),
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "remaining": [dataclasses.asdict(op) for op in self.remaining],
            "warnings": list(self.warnings),
            "interface_changes": [dict(change) for change in self.interface_changes],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
