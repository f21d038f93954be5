"""The report: what a lowering did, why each sequence operator left stays, and what to try.

Everything a user reads about a lowering is made here and nowhere else. The passes feed it (the
driver records which rule rewrote which node and the refusals it met), the pipeline builds it,
and the CLI and `inspect` only show it.

- `data`: the report as plain dataclasses (`Report`, `RemainingOp`, `NodeOutcome`, `TIERS`).
- `labels`: one label per node, and the path of every graph.
- `sites`: the nodes of the input that produce or read a sequence, and the tier of a rewrite.
- `reasons`: the one reason that matters for a kept operator, and every refusal behind it.
- `hints`: what to try about it (options that, followed, make progress).
- `outcomes`: the tier every sequence node ended in, for `inspect` and `--report`.
- `text`: the report as text, the summary `optimize` prints and `str(report)`.
- `catalogue`: the rewrites passes make, named in the rule counts as rules are.
"""

from seqlower.report.data import (
    KEPT_FOR_SPEED,
    LIST_TIER,
    TIERS,
    KeptRegion,
    NodeOutcome,
    RemainingOp,
    Report,
)

__all__ = [
    "KEPT_FOR_SPEED",
    "LIST_TIER",
    "TIERS",
    "KeptRegion",
    "NodeOutcome",
    "RemainingOp",
    "Report",
]
