"""Target profiles: what a lowered model may still contain for the runtime that will run it.

A profile is data (`PROFILES`): how severe a leftover sequence operator is, how severe a Loop
whose scan outputs have a dynamic length is, which operators and element types the runtime
lacks, where that list comes from (`source`) and what lowering does differently for it
(`changes`). `check_target` applies one to a lowered model and returns the errors and warnings,
naming each node with its graph path; the CLI prints them and picks the exit code (`--target
tensorrt` fails on an error). `judge_nodes` gives the same judgement per node, as data, for
`inspect --target` to show.

- generic: any ONNX runtime; everything that can be lowered is; leftovers are already in the
  report, nothing more is said.

Where a list's elements have a rank known only at run time, generic and onnxruntime make it
tensors (`seqlower.lists.unranked`); the others keep it, for the reason `runtime_ranks` gives
(`seqlower.runtime_ranks`: OpenVINO and tract probed, portable and TensorRT need ranks); for
tensorrt, openvino and tract, a Reshape whose output's rank is known only at run time is an
error.
- portable: any runtime without sequence operators (onnx2tf, TVM, MIGraphX, NPU compilers):
  every leftover is an error.
- onnxruntime: runs sequence operators, but each one copies tensors in and out of a sequence: a
  warning per leftover. Asks for speed first: a region of sequence operators whose tensor form
  costs more is kept as given (docs/performance.md, "Never slower").
- tensorrt: has no sequence operators at all, and its loop outputs that concatenate iterations
  (ONNX scan outputs) need a length known when the engine is built: both are errors.
- openvino: its ONNX frontend converts the sequence operators but not SequenceMap, nor a
  SplitToSequence without 1-D sizes over a dim of run-time size, and no strings; Loop, If and
  Scan run.
- tract: no sequence operator, no Loop, no strings; Scan and If run. Lowering for tract also
  runs the rewrites of `seqlower.rules.target_tract` (If to Where, Loop unrolled or to Scan),
  `seqlower.rules.tract_while` (a bounded while loop to a masked Scan) and
  `seqlower.rules.tract_gather` (Compress to Gather), and leaves out the named dims of
  declared intermediate shapes (`seqlower.passes.shape_hints`).
"""

from __future__ import annotations

__all__ = [
    "PROFILES",
    "NodeJudgement",
    "Target",
    "TargetCheck",
    "TargetProfile",
    "check_target",
    "judge_nodes",
]

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

import onnx
import onnx_ir as ir

from seqlower.analysis.loop_shapes import LoopShapes
from seqlower.analysis.masked_loops import masked_scan_problem
from seqlower.analysis.static_values import StaticValues
from seqlower.errors import SeqlowerError
from seqlower.ops import SEQUENCE_OPS, graph_nodes, is_sequence_value
from seqlower.options import unknown_choice
from seqlower.passes.bind_dims import bindable_dims, dims_feeding
from seqlower.report import RemainingOp, Report
from seqlower.report.labels import (
    ORIGIN_KEY,
    describe,
    stored_label,
    user_value_label,
    walk_graphs,
)
from seqlower.report.reasons import remaining_sequence_ops
from seqlower.runtime_ranks import REFUSALS, RESHAPE_REFUSALS

Target = Literal["generic", "onnxruntime", "tensorrt", "openvino", "tract"]
Severity = Literal["ignore", "warning", "error"]


@dataclasses.dataclass(frozen=True)
class TargetProfile:
    """How one runtime judges what lowering leaves behind."""

    name: str
    description: str
    sequence_ops: Severity  # any sequence operator left
    sequence_io: Severity  # a sequence-typed input or output of the model
    dynamic_scan_loops: Severity  # a Loop with scan outputs whose length is not static
    # a Loop carrying a tensor whose shape changes between iterations (a tensor accumulator,
    # or a list in its tensor form)
    growing_loops: Severity = "ignore"
    # operators the runtime cannot load, each with why (checked in every graph)
    unsupported_ops: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # operators it loads but that are worth a warning (a known fault, a cost), with why
    doubtful_ops: Mapping[str, str] = dataclasses.field(default_factory=dict)
    strings: Severity = "ignore"  # a string tensor anywhere in the model
    source: str = ""  # where the support list comes from
    # what lowering does for the target
    changes: str = "nothing more than generic"
    # why a list whose elements' rank is known only at run time stays a sequence for this
    # target ("" where it becomes tensors: `seqlower.runtime_ranks`, whose text this is)
    runtime_ranks: str = ""


_SEQUENCE_OPS_NOTE = "has no sequence operators"
_TRACT_SOURCE = (
    "probed with tract 0.23.9 (PyPI): SplitToSequence, SequenceConstruct, SequenceEmpty and "
    "every other sequence operator fail with Unimplemented(...) ToTypedTranslator; Loop fails "
    "with Unimplemented(Loop); Scan, Where and If run. An If whose branches compute different "
    "constants gives the then-branch's value either way (docs/portability.md); one whose "
    "branches give different shapes fails to load ('Failed analyse for node ... If'). A Reshape "
    "to a shape of run-time length, which a list of elements of run-time rank needs as tensors, "
    "fails to load ('shape input is variable')."
)
_OPENVINO_SOURCE = (
    "probed with OpenVINO 2026.4.1 (CPU, INFERENCE_PRECISION_HINT=f32; python -m "
    "bench.portability --probe): its ONNX frontend converts SplitToSequence, SequenceConstruct, "
    "SequenceEmpty, SequenceInsert, SequenceErase, SequenceAt, SequenceLength and "
    "ConcatFromSequence, also carried by a Loop, but not SequenceMap, nor a SplitToSequence "
    "with a scalar or no split over a dim of run-time size ('scalar split input requires "
    "static dimension on the split axis'), nor a Loop that carries a constant of size 0 "
    "('Accessing out-of-range dimension'); Loop, If and Scan run; no string tensors. A Reshape "
    "to a shape of run-time length, which a list of elements of run-time rank needs as tensors, "
    'fails to compile ("CPU plug-in doesn\'t support Reshape operation with dynamic rank").'
)
_TENSORRT_SOURCE = (
    "the onnx-tensorrt operator support matrix (docs/operators.md, TensorRT 10.15): Loop "
    "('Scan output length cannot be dynamic. The shape of Loop carried dependencies must be "
    "the same across all loop iterations'), If ('Output tensors of the two conditional "
    "branches must have the same rank') and Scan are supported; every Sequence* operator, "
    "SequenceMap and Optional* are not; strings are not among its data types; its networks' "
    "tensors have a fixed rank (no list of elements of run-time rank as tensors). Not probed: "
    "no GPU here."
)


_PORTABILITY_CHANGES = "nothing more than generic"

PROFILES: dict[str, TargetProfile] = {
    "generic": TargetProfile(
        "generic",
        "any ONNX runtime; leftovers are reported, not judged",
        sequence_ops="ignore",
        sequence_io="ignore",
        dynamic_scan_loops="ignore",
    ),
    "portable": TargetProfile(
        "portable",
        "any runtime without sequence operators; lowered even where that costs speed",
        sequence_ops="error",
        sequence_io="error",
        dynamic_scan_loops="ignore",
        strings="ignore",
        changes=_PORTABILITY_CHANGES,
        runtime_ranks=REFUSALS["portable"],
    ),
    "onnxruntime": TargetProfile(
        "onnxruntime",
        "onnxruntime runs sequence operators, slowly; each leftover is a warning",
        sequence_ops="warning",
        sequence_io="ignore",
        dynamic_scan_loops="ignore",
        changes="speed first: a region of sequence operators whose tensor form costs more "
        "than the original is kept as given",
    ),
    "tensorrt": TargetProfile(
        "tensorrt",
        "TensorRT has no sequence types and needs static scan-output lengths",
        sequence_ops="error",
        sequence_io="error",
        dynamic_scan_loops="error",
        growing_loops="error",
        strings="error",
        source=_TENSORRT_SOURCE,
        changes=_PORTABILITY_CHANGES,
        runtime_ranks=REFUSALS["tensorrt"],
    ),
    "openvino": TargetProfile(
        "openvino",
        "OpenVINO converts sequence operators except SequenceMap (and some SplitToSequence)",
        sequence_ops="warning",
        sequence_io="error",
        dynamic_scan_loops="ignore",
        unsupported_ops={
            "SequenceMap": "OpenVINO's ONNX frontend does not convert SequenceMap",
        },
        strings="error",
        source=_OPENVINO_SOURCE,
        changes=_PORTABILITY_CHANGES,
        runtime_ranks=REFUSALS["openvino"],
    ),
    "tract": TargetProfile(
        "tract",
        "tract has no sequence operators and no Loop; it runs Scan and If",
        sequence_ops="error",
        sequence_io="error",
        dynamic_scan_loops="ignore",
        unsupported_ops={
            "Loop": "tract has no Loop (Unimplemented(Loop)); seqlower makes a Loop that cannot "
            "stop early a Scan (over a tensor axis, or over its iteration numbers when its "
            "carried values keep their shape) or unrolls it, and a bounded while loop a masked "
            "Scan, but not this one",
        },
        doubtful_ops={
            "If": "tract runs an If only when both branches infer the same shapes and values; "
            "with different constants per branch it returns the then-branch's value",
        },
        strings="error",
        source=_TRACT_SOURCE,
        runtime_ranks=REFUSALS["tract"],
        changes=f"{_PORTABILITY_CHANGES}; run-time If with cheap branches -> Where; static "
        "Loops unrolled within the budget; Loops over a tensor axis, or with a run-time trip "
        "count and no early exit, -> Scan; bounded while loops -> masked Scan; Compress and "
        "Split with run-time sizes -> Gather",
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
    model: ir.Model | onnx.ModelProto, report: Report | None = None, target: str = "generic"
) -> TargetCheck:
    """Judge a lowered `model` (as `optimize` returns it) for `target`, one of PROFILES.

    `report` (from `optimize`) gives the reasons leftovers were kept; without it they are
    recomputed from the model alone. Raises `SeqlowerError` for an unknown target.
    """
    profile = PROFILES.get(target)
    if profile is None:
        raise SeqlowerError(unknown_choice("target", target, tuple(PROFILES)))
    if isinstance(model, onnx.ModelProto):
        model = ir.from_proto(model)
    check = TargetCheck(profile.name)
    remaining = report.remaining if report is not None else remaining_sequence_ops(model, {})
    hints = {
        (node.op_type, node.node): node.hint
        for node in (report.kept_interface if report is not None else [])
    }
    for value in model.graph.inputs:
        if is_sequence_value(value):
            hint = hints.get(
                ("input", value.name or ""), f"--flatten-sequence-io --seq-len {value.name}=<n>"
            )
            _add(
                check,
                profile.sequence_io,
                f"main: input '{value.name}' is a sequence; "
                f"{profile.name} takes tensors only{_try(hint)}",
            )
    for value in model.graph.outputs:
        if is_sequence_value(value):
            hint = hints.get(("output", value.name or ""), "--flatten-sequence-io")
            _add(
                check,
                profile.sequence_io,
                f"main: output '{value.name}' is a sequence; "
                f"{profile.name} gives tensors only{_try(hint)}",
            )
    # what the profile says of a node beyond "a leftover sequence op" (reported here, with the
    # reason it was kept): other operators, and sequence ops the target cannot load at all
    judged = [
        j
        for j in judge_nodes(model, profile.name)
        if j.op_type not in SEQUENCE_OPS
        or (j.severity == "error" and profile.sequence_ops != "error")
    ]
    refused = {(j.graph, j.node, j.op_type) for j in judged}
    for op in remaining:
        if (op.graph, op.node, op.op_type) in refused:
            continue
        if profile.name == "onnxruntime" and op.kept_for_speed:
            continue  # kept because onnxruntime runs it faster: nothing to warn about
        _add(check, profile.sequence_ops, _leftover_message(profile, op))
    for judgement in judged:
        _add(check, judgement.severity, judgement.message)
    if profile.growing_loops != "ignore":
        for path, graph in walk_graphs(model):
            for node in graph_nodes(graph):
                grown = _growing_carries(node)
                if grown:
                    advice = f"; {STOPS_EARLY}" if _is_while_loop(node, StaticValues()) else ""
                    _add(
                        check,
                        profile.growing_loops,
                        f"{path}: {describe(node)} carries {grown}, whose shape may "
                        f"change between iterations; {profile.name} needs loop-carried values "
                        f"of one shape{advice}",
                    )
    if profile.dynamic_scan_loops != "ignore":
        bindable = bindable_dims(model)
        values = StaticValues()
        for path, graph in walk_graphs(model):
            for node in graph_nodes(graph):
                problem = _dynamic_scan(node, values, bindable)
                if problem:
                    where = f"{path}: {describe(node)}"
                    _add(check, profile.dynamic_scan_loops, f"{where} {problem}")
    return check


STOPS_EARLY = (
    "write a loop of a fixed count that runs every step (no `break` or `while` on a tensor's "
    "value; mask the steps after the end instead)"
)
"""The advice for a loop whose iterations depend on data, where the target needs them fixed."""


def _try(hint: str) -> str:
    """`: try <options>` for a hint (`--flag value (why)`); "" when no option helps."""
    flags = hint.split(" (", 1)[0]
    return f": try {flags}" if flags else " (no option makes its length static)"


def _add(check: TargetCheck, severity: Severity, message: str) -> None:
    if severity == "error":
        check.errors.append(message)
    elif severity == "warning":
        check.warnings.append(message)


def _leftover_message(profile: TargetProfile, op: RemainingOp) -> str:
    """One line per leftover: what the target says of it, then its own cause."""
    where = f"{op.graph}: {op.described}"
    if profile.name == "tensorrt":
        return f"{where}: TensorRT has no sequence operators (kept because {op.reason})"
    if profile.name == "portable":
        verdict = "a runtime without sequence operators cannot run it"
        return f"{where}: {verdict} (kept because {op.reason})"
    if profile.name in ("tract", "openvino"):
        verdict = (
            "has no sequence operators"
            if profile.sequence_ops == "error"
            else ("converts it (probed on small graphs only)")
        )
        return f"{where}: {profile.name} {verdict} (kept because {op.reason})"
    cost = (
        "its SequenceInsert into a loop-carried sequence copies the sequence every iteration "
        "(quadratic)"
        if op.op_type == "SequenceInsert" and "/" in op.graph
        else "each sequence operator copies tensors in and out of a sequence"
    )
    return f"{where} is kept: onnxruntime runs it, but {cost}; kept because {op.reason}"


def _growing_carries(node: ir.Node) -> str:
    """The loop-carried tensors of a Loop whose shape the loop analysis cannot prove the same
    in every iteration, quoted and joined ('' for none, or for a node that is no Loop)."""
    if node.op_type != "Loop" or node.domain != "" or "body" not in node.attributes:
        return ""
    body = node.attributes["body"].as_graph()
    carried = [
        (value, initial)
        for value, initial in zip(body.inputs[2:], node.inputs[2:])
        if isinstance(value.type, ir.TensorType)
    ]
    if not carried:
        return ""
    invariant = set(LoopShapes(node, StaticValues()).invariant_carried())
    labels = (user_value_label(v, initial) for v, initial in carried if v not in invariant)
    return ", ".join(dict.fromkeys(labels))  # two values made from one node: said once


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
    if trip is None or problem.startswith("may stop early"):
        message += f"; {STOPS_EARLY}"
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


@dataclasses.dataclass(frozen=True)
class NodeJudgement:
    """What a target says about one node: `severity` "error" (it cannot run there) or
    "warning", and why."""

    graph: str
    node: str
    op_type: str
    severity: Severity
    reason: str
    created_by: str = ""  # for a node the lowering made: the label of the node it came from

    @property
    def message(self) -> str:
        if self.created_by:
            return f"{self.graph}: {self.op_type} made from '{self.created_by}': {self.reason}"
        return f"{self.graph}: {self.op_type} '{self.node}': {self.reason}"

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def judge_nodes(model: ir.Model | onnx.ModelProto, target: str) -> list[NodeJudgement]:
    """Every node of `model` (all graphs) that `target` cannot run, or runs with a caveat, in
    graph order: unsupported and doubtful operators, leftover sequence operators, and nodes that
    read or make string tensors. Raises `SeqlowerError` for an unknown target."""
    profile = PROFILES.get(target)
    if profile is None:
        raise SeqlowerError(unknown_choice("target", target, tuple(PROFILES)))
    if isinstance(model, onnx.ModelProto):
        model = ir.from_proto(model)
    found = []
    values = StaticValues()
    for path, graph in walk_graphs(model):
        for node in graph_nodes(graph):
            if node.domain not in ("", "ai.onnx"):
                continue
            judged = _judge(profile, node)
            if judged is not None:
                severity, reason = judged
                if node.op_type == "Loop" and _is_while_loop(node, values):
                    reason += ": a data-dependent while loop, which tract cannot run"
                    problem = masked_scan_problem(node, values)
                    if problem:
                        reason += f", nor a masked Scan over its bound: {problem}; {STOPS_EARLY}"
                found.append(
                    NodeJudgement(
                        path,
                        stored_label(node),
                        node.op_type,
                        severity,
                        reason,
                        node.meta.get(ORIGIN_KEY, ""),
                    )
                )
    return found


def _judge(profile: TargetProfile, node: ir.Node) -> tuple[Severity, str] | None:
    if node.op_type in profile.unsupported_ops:
        return "error", profile.unsupported_ops[node.op_type]
    if profile.name in RESHAPE_REFUSALS and _reshape_to_runtime_rank(node):
        return "error", (
            "its shape has a length known only at run time, so its output's rank is known only "
            f"at run time too; {RESHAPE_REFUSALS[profile.name]}"
        )
    if profile.name == "openvino" and _split_over_runtime_size(node):
        return "error", (
            "OpenVINO's ONNX frontend needs a static size on the split axis of a "
            "SplitToSequence with a scalar or no split"
        )
    if profile.name == "openvino" and _carries_empty_constant(node):
        return "error", (
            "OpenVINO's ONNX frontend cannot convert a Loop that carries a constant of size 0 "
            "('Accessing out-of-range dimension')"
        )
    if profile.name == "tract" and node.op_type == "If":
        differ = _branch_output_shapes_differ(node)
        if differ:
            return "error", f"tract types an If only when both branches agree ({differ})"
    if profile.strings != "ignore" and any(
        v is not None and _is_string(v) for v in [*node.inputs, *node.outputs]
    ):
        return profile.strings, f"{profile.name} has no string tensors"
    if node.op_type in SEQUENCE_OPS and profile.sequence_ops != "ignore":
        why = (
            f"{profile.name} {_SEQUENCE_OPS_NOTE}"
            if profile.sequence_ops == "error"
            else f"{profile.name} converts it (probed on small graphs only)"
        )
        return profile.sequence_ops, why
    if node.op_type in profile.doubtful_ops:
        return "warning", profile.doubtful_ops[node.op_type]
    if profile.name == "tensorrt" and node.op_type == "If":
        ranks = _branch_output_ranks(node)
        if ranks:
            return "error", f"TensorRT needs both branches' outputs of one rank (here {ranks})"
    return None


def _reshape_to_runtime_rank(node: ir.Node) -> bool:
    """A Reshape whose output has no rank (neither ONNX's inference nor seqlower's rank rules
    give one) because its shape input has no static length."""
    if node.op_type != "Reshape" or len(node.inputs) < 2 or node.inputs[1] is None:
        return False
    if node.outputs[0].shape is not None:
        return False
    shape = node.inputs[1]
    if shape.const_value is not None:
        return False
    producer = shape.producer()
    if producer is not None and producer.op_type == "Constant" and producer.domain == "":
        return False
    return shape.shape is None or len(shape.shape) != 1 or not isinstance(shape.shape[0], int)


def _split_over_runtime_size(node: ir.Node) -> bool:
    """A SplitToSequence with no split or a scalar one over a dim whose size is not static."""
    if node.op_type != "SplitToSequence" or not node.inputs or node.inputs[0] is None:
        return False
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if split is not None and _rank(split) != 0:
        return False  # 1-D sizes (or an unknown rank): converted
    shape = node.inputs[0].shape
    if shape is None:
        return True
    axis = node.attributes.get_int("axis", 0)
    return not (-len(shape) <= axis < len(shape)) or not isinstance(shape[axis], int)


def _carries_empty_constant(node: ir.Node) -> bool:
    """A Loop one of whose carried values starts as a Constant (or an initializer) of size 0."""
    if node.op_type != "Loop":
        return False
    for value in node.inputs[2:]:
        if value is None:
            continue
        producer = value.producer()
        if producer is not None and producer.op_type == "Constant" and producer.domain == "":
            attr = producer.attributes.get("value")
            if attr is not None and 0 in attr.as_tensor().shape:
                return True
        elif (
            value.const_value is not None
            and not value.is_graph_input()
            and 0 in value.const_value.shape
        ):
            return True
    return False


def _branch_output_shapes_differ(node: ir.Node) -> str | None:
    """'shapes [4, 3] and [8, 3] for output y' for the first output whose branches certainly
    differ in shape (in rank, or in a static dim), or None."""
    if "then_branch" not in node.attributes or "else_branch" not in node.attributes:
        return None
    then_branch = node.attributes["then_branch"].as_graph()
    else_branch = node.attributes["else_branch"].as_graph()
    for a, b, out in zip(then_branch.outputs, else_branch.outputs, node.outputs):
        if a.shape is None or b.shape is None:
            continue
        dims_a, dims_b = list(a.shape), list(b.shape)
        if len(dims_a) != len(dims_b) or any(
            isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(dims_a, dims_b)
        ):
            shown = _dims_text(dims_a), _dims_text(dims_b)
            return f"shapes {shown[0]} and {shown[1]} for output {user_value_label(out)}"
    return None


def _dims_text(dims: list[int | ir.SymbolicDim]) -> str:
    """`[N, 3]`: a named dim by its name, a dim inference made up or left unnamed as `?`."""
    names = [str(d) if isinstance(d, int) else d.value or "?" for d in dims]
    return "[" + ", ".join("?" if n.startswith("unk__") else n for n in names) + "]"


def _rank(value: ir.Value) -> int | None:
    if value.shape is not None:
        return len(value.shape)
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and "value" in producer.attributes:
        return len(producer.attributes["value"].as_tensor().shape)
    return None


def _branch_output_ranks(node: ir.Node) -> str | None:
    """'then r1, else r2' for the first output whose branches differ in rank, or None."""
    if "then_branch" not in node.attributes or "else_branch" not in node.attributes:
        return None
    then_branch = node.attributes["then_branch"].as_graph()
    else_branch = node.attributes["else_branch"].as_graph()
    for a, b in zip(then_branch.outputs, else_branch.outputs):
        if a.shape is not None and b.shape is not None and len(a.shape) != len(b.shape):
            return f"{len(a.shape)} and {len(b.shape)} for output {user_value_label(a)}"
    return None


def _is_while_loop(node: ir.Node, values: StaticValues) -> bool:
    """True when the number of iterations depends on data: no trip count, or a condition that
    may end the loop early."""
    if "body" not in node.attributes:
        return False
    if not node.inputs or node.inputs[0] is None:
        return True
    return not _runs_every_iteration(node, node.attributes["body"].as_graph(), values)


def _is_string(value: ir.Value) -> bool:
    kind = value.type
    while isinstance(kind, (ir.SequenceType, ir.OptionalType)):
        kind = kind.elem_type
    return isinstance(kind, ir.TensorType) and kind.dtype == ir.DataType.STRING
