"""`inspect_model`: a dry run of `optimize` that shows, for every node that produces or reads a
sequence value and for the model's sequence inputs and outputs, the tier that lowered it and, for
what stays, the one reason that matters and what to try.

It lowers a copy with the real pipeline (the caller's model is never touched) and reads the
report's per-node outcomes (`Report.nodes`), so inspect and optimize cannot disagree. Tiers,
cheapest first (design.md, "SequenceMap lowering tiers"):

    direct   rewritten into tensor operators on the whole data (a Split, a Gather, a Concat...)
    batch    a SequenceMap body applied once to the stacked elements
    unroll   one copy of the computation per element (static length)
    scan     a Loop that collects its results as scan outputs (dynamic length, tensors only)
    loop     a Loop that carries a sequence (SequenceAt / SequenceInsert each iteration)
    kept     still there after lowering, with the reason and a hint (`--dim N=<size>`...)
    flattened  a sequence input or output turned into tensors (`--flatten-sequence-io`)
"""

from __future__ import annotations

__all__ = ["InspectReport", "inspect_model"]

import dataclasses
import os
from typing import Any

import onnx_ir as ir

from seqlower.io import ModelSource
from seqlower.options import Options, options_with
from seqlower.pipeline import optimize
from seqlower.report import TIERS, NodeOutcome, Report
from seqlower.rule import RuleSet
from seqlower.targets import TargetCheck, check_target


@dataclasses.dataclass
class InspectReport:
    """What `inspect_model` found: `sites` are the trial lowering's per-node outcomes,
    `lowering` its whole report, `target` the target profile's verdict on its result."""

    model: str
    sites: list[NodeOutcome]
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
    def kept(self) -> list[NodeOutcome]:
        return [site for site in self.sites if site.tier == "kept"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "seqlower.inspect/2",
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
    """Lower a copy of `source` as `optimize` would and report what happened to each node.

    `source` is a path, an `onnx.ModelProto` or an `onnx_ir.Model`; none is modified. Options
    and keyword overrides are those of `optimize` (e.g. `dims={"N": 8}` to see what binding a
    symbolic dimension would change). Raises `SeqlowerError` on a bad model or option.
    """
    options = options_with(options, option_overrides)
    # lowered as `optimize --target` would; judged from the operators only (no runtime is loaded)
    options = dataclasses.replace(options, target=target, runtime_check=False)
    lowered, report = optimize(source, options, rules=rules)
    return InspectReport(
        model=_describe_source(source),
        sites=list(report.nodes),
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
