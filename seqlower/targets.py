"""Target profiles: what a lowered model may still contain for the runtime that will run it.

A profile is data (`PROFILES`): how severe a leftover sequence operator is, and how severe a Loop
whose scan outputs have a dynamic length is. `check_target` applies one to a lowered model and
returns the errors and warnings, naming each node with its graph path; the CLI prints them and
picks the exit code (`--target tensorrt` fails on an error).

- generic: any ONNX runtime; leftovers are already in the report, nothing more is said.
- onnxruntime: runs sequence operators, but each one copies tensors in and out of a sequence
  (design.md: 3x to 130x slower than the tensor forms): a warning per leftover.
- tensorrt: has no sequence operators at all, and its loop outputs that concatenate iterations
  (ONNX scan outputs) need a length known when the engine is built: both are errors.
"""

from __future__ import annotations

__all__ = ["PROFILES", "Target", "TargetCheck", "TargetProfile", "check_target"]

import dataclasses
from typing import Any, Literal

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.errors import SeqlowerError
from seqlower.ops import is_sequence_value
from seqlower.passes.bind_dims import bindable_dims, dims_feeding
from seqlower.passes.legality import remaining_sequence_ops, walk_graphs
from seqlower.passes.outcomes import stored_label
from seqlower.report import RemainingOp, Report

Target = Literal["generic", "onnxruntime", "tensorrt"]
Severity = Literal["ignore", "warning", "error"]


@dataclasses.dataclass(frozen=True)
class TargetProfile:
    """How one runtime judges what lowering leaves behind."""

    name: str
    description: str
    sequence_ops: Severity  # any sequence operator left
    sequence_io: Severity  # a sequence-typed input or output of the model
    dynamic_scan_loops: Severity  # a Loop with scan outputs whose length is not static


PROFILES: dict[str, TargetProfile] = {
    "generic": TargetProfile(
        "generic",
        "any ONNX runtime; leftovers are reported, not judged",
        sequence_ops="ignore",
        sequence_io="ignore",
        dynamic_scan_loops="ignore",
    ),
    "onnxruntime": TargetProfile(
        "onnxruntime",
        "onnxruntime runs sequence operators, slowly; each leftover is a warning",
        sequence_ops="warning",
        sequence_io="ignore",
        dynamic_scan_loops="ignore",
    ),
    "tensorrt": TargetProfile(
        "tensorrt",
        "TensorRT has no sequence types and needs static scan-output lengths",
        sequence_ops="error",
        sequence_io="error",
        dynamic_scan_loops="error",
    ),
}


@dataclasses.dataclass
class TargetCheck:
    """What a target profile says about a model: errors make it unfit, warnings cost time."""

    target: str
    errors: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "ok": self.ok,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
        }


def check_target(
    model: ir.Model, report: Report | None = None, target: str = "generic"
) -> TargetCheck:
    """Judge a lowered `model` for `target` ("generic", "onnxruntime" or "tensorrt").

    `report` (from `optimize`) gives the reasons leftovers were kept; without it they are
    recomputed from the model alone. Raises `SeqlowerError` for an unknown target.
    """
    profile = PROFILES.get(target)
    if profile is None:
        raise SeqlowerError(f"unknown target '{target}': choose one of {', '.join(PROFILES)}")
    check = TargetCheck(profile.name)
    remaining = report.remaining if report is not None else remaining_sequence_ops(model, {})
    for value in model.graph.inputs:
        if is_sequence_value(value):
            hint = f"--flatten-sequence-io --seq-len {value.name}=<n>"
            _add(
                check,
                profile.sequence_io,
                f"main: input '{value.name}' is a sequence; "
                f"{profile.name} takes tensors only: try {hint}",
            )
    for value in model.graph.outputs:
        if is_sequence_value(value):
            _add(
                check,
                profile.sequence_io,
                f"main: output '{value.name}' is a sequence; "
                f"{profile.name} gives tensors only: try --flatten-sequence-io",
            )
    for op in remaining:
        _add(check, profile.sequence_ops, _leftover_message(profile, op))
    if profile.dynamic_scan_loops != "ignore":
        bindable = bindable_dims(model)
        values = StaticValues()
        for path, graph in walk_graphs(model):
            for node in graph:
                problem = _dynamic_scan(node, values, bindable)
                if problem:
                    where = f"{path}: Loop '{stored_label(node)}'"
                    _add(check, profile.dynamic_scan_loops, f"{where} {problem}")
    return check


def _add(check: TargetCheck, severity: Severity, message: str) -> None:
    if severity == "error":
        check.errors.append(message)
    elif severity == "warning":
        check.warnings.append(message)


def _leftover_message(profile: TargetProfile, op: RemainingOp) -> str:
    where = f"{op.graph}: {op.op_type} '{op.node}'"
    if profile.name == "tensorrt":
        return f"{where}: TensorRT has no sequence operators (kept because {op.reason})"
    cost = (
        "its SequenceInsert into a loop-carried sequence copies the sequence every iteration "
        "(quadratic)"
        if op.op_type == "SequenceInsert" and "/" in op.graph
        else "each sequence operator copies tensors in and out of a sequence (3x to 130x "
        "slower than the tensor forms)"
    )
    return f"{where} is kept: onnxruntime runs it, but {cost}; kept because {op.reason}"


def _dynamic_scan(node: ir.Node, values: StaticValues, bindable: set[str]) -> str | None:
    """Why the scan outputs of a Loop have a dynamic length, or None (no scan outputs, or a
    static length: a static trip count and a condition that never stops the loop early)."""
    if node.op_type != "Loop" or node.domain != "" or "body" not in node.attributes:
        return None
    body = node.attributes["body"].as_graph()
    carried = len(node.inputs) - 2
    scans = len(body.outputs) - 1 - carried
    if scans <= 0:
        return None
    trip = node.inputs[0] if node.inputs else None
    problem = None
    if trip is None:
        problem = "has no trip count (a while loop)"
    elif values.get_int(trip) is None:
        problem = "has a trip count computed at run time"
    elif not _runs_every_iteration(node, body, values):
        problem = "may stop early on its condition"
    if problem is None:
        return None
    message = f"{problem}, so its {scans} scan output(s) have a dynamic length"
    if any(is_sequence_value(v) for v in node.outputs):
        message += " (and it carries sequences)"
    dims = dims_feeding(trip, bindable) if trip is not None else []
    if dims:
        message += (
            "; the length follows "
            + ", ".join(dims)
            + ": try "
            + " ".join(f"--dim {d}=<size>" for d in dims)
        )
    return message


def _runs_every_iteration(node: ir.Node, body: ir.Graph, values: StaticValues) -> bool:
    """True when the loop condition is true on entry and passed through unchanged."""
    initial = node.inputs[1] if len(node.inputs) > 1 else None
    if initial is not None:
        start = values.get(initial)
        if start is None or start.size != 1:
            return False
        if not bool(start.reshape(-1)[0]):
            return True  # never runs: every scan output is empty, a static length
    if len(body.inputs) < 2 or not body.outputs:
        return False
    condition_in, condition_out = body.inputs[1], body.outputs[0]
    while condition_out is not condition_in:
        producer = condition_out.producer()
        if producer is not None and producer.op_type == "Identity" and producer.domain == "":
            condition_out = producer.inputs[0]  # type: ignore[assignment]
            continue
        constant = values.get(condition_out)
        return constant is not None and constant.size == 1 and bool(constant.reshape(-1)[0])
    return True
