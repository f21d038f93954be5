"""Differential check of one generated program: original versus lowered, under onnxruntime.

    outcome = check_program(generate(seed))
    outcome.status        # "pass", "skip" or "fail"; outcome.reason says why

Steps: the original passes the ONNX checker (full_check) and runs under onnxruntime (its outputs
must equal the generator's numpy oracle, else the generator or onnxruntime is wrong); the program
is lowered with `seqlower.optimize`; the result passes the checker (full_check), loads and runs
under onnxruntime, and gives the original's outputs (exact for ints and bools, tight tolerance for
floats; same sequence lengths, shapes and dtypes), also with each scalar int64 input at 0 and -1
and each scalar bool input false wherever the original runs on them (`edge_feeds_problem`: trip
counts of zero and below, conditions false at the start, positions at 0 and -1). When
onnxruntime cannot run the original for a reason the generator predicted (design.md trap 11), the
oracle is the reference instead; any other rejection of the original is a skip with its reason,
never a pass.

With `properties=True` it also checks: the output never has more sequence ops than the input;
lowering the output again fires no rule and gives byte-identical bytes (idempotence); lowering the
same input twice gives byte-identical bytes (determinism); no reason given for a node that stays
blames a run-time trip count or loop condition (lists cross such loops as tensors).
"""

from __future__ import annotations

__all__ = [
    "Outcome",
    "check_program",
    "compare_outputs",
    "edge_feeds",
    "edge_feeds_problem",
    "rejected_by_the_specification",
    "run_ort",
    "sequence_op_total",
]

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from generator import Program

import seqlower
from seqlower import runtime_quirks
from seqlower.io import model_to_bytes
from seqlower.passes.legality import count_sequence_ops, sequence_op_budget

ORT_VERSION = ort.__version__


@dataclasses.dataclass
class Outcome:
    seed: int
    status: str  # "pass", "skip" or "fail"
    reason: str = ""
    detail: str = ""
    oracle: bool = False  # the reference was the numpy oracle, not onnxruntime on the original
    lowered: onnx.ModelProto | None = None
    sequence_ops: tuple[int, int] = (0, 0)  # before, after
    rules_fired: dict[str, int] = dataclasses.field(default_factory=dict)  # by the lowering


def sequence_op_total(model: ir.Model | onnx.ModelProto) -> int:
    if isinstance(model, onnx.ModelProto):
        model = ir.serde.deserialize_model(model)
    return sum(count_sequence_ops(model).values())


def run_ort(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def parse(graph: str, opset: int = 18) -> onnx.ModelProto:
    """A minimised regression model from ONNX text (the graph, without the header), checked."""
    model = onnx.parser.parse_model(f'<ir_version: 8, opset_import: ["" : {opset}]>\n{graph}')
    onnx.checker.check_model(model, full_check=True)
    return model


def lower_and_compare(model: onnx.ModelProto, feeds: dict) -> ir.Model:
    """Lower for the portable target, check the result (full_check) and compare it with the
    original under onnxruntime."""
    expected = run_ort(model, feeds)
    lowered, _ = seqlower.optimize(ir.from_proto(model), target="portable")
    proto = ir.to_proto(lowered)
    onnx.checker.check_model(proto, full_check=True)
    problem = compare_outputs(expected, run_ort(proto, feeds))
    assert problem is None, problem
    return lowered


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:300]


def compare_outputs(expected: Sequence[Any], actual: Sequence[Any]) -> str | None:
    """None when equal; else where and how they differ."""
    if len(expected) != len(actual):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for index, (want, got) in enumerate(zip(expected, actual)):
        problem = _compare_value(want, got, f"output {index}")
        if problem:
            return problem
    return None


def _compare_value(want: Any, got: Any, where: str) -> str | None:
    if isinstance(want, list):
        if not isinstance(got, list):
            return f"{where}: a sequence expected, got {type(got).__name__}"
        if len(want) != len(got):
            return f"{where}: sequence length {len(got)}, expected {len(want)}"
        for k, (w, g) in enumerate(zip(want, got)):
            problem = _compare_value(w, g, f"{where}[{k}]")
            if problem:
                return problem
        return None
    if isinstance(got, list):
        return f"{where}: a tensor expected, got a sequence"
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return f"{where}: shape {got.shape}, expected {want.shape}"
    if want.dtype != got.dtype:
        return f"{where}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind == "f":
        tolerance = 1e-3 if want.dtype == np.float16 else 1e-5
        if not np.allclose(got, want, rtol=tolerance, atol=tolerance, equal_nan=True):
            error = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))
            return f"{where}: values differ (max abs error {error:.3g})"
    elif not np.array_equal(got, want):
        return f"{where}: values differ"
    return None


def check_program(program: Program, *, properties: bool = False) -> Outcome:
    """The differential check (and, optionally, the properties) of one program."""
    seed, original = program.seed, program.model
    try:
        # shape inference reads the keepdims corner the spec's way (design.md trap 1)
        onnx.checker.check_model(original, full_check=not program.keepdims_corner)
    except Exception as error:
        return Outcome(
            seed, "fail", "generator: the original fails the checker", _first_line(error)
        )

    oracle = False
    try:
        reference = run_ort(original, program.feeds)
    except Exception as error:
        if program.ort_may_reject is None:
            return Outcome(
                seed, "skip", "onnxruntime rejects the original (unexpected)", _first_line(error)
            )
        reference, oracle = program.expected, True
    else:
        problem = compare_outputs(program.expected, reference)
        if problem:
            return Outcome(
                seed, "fail", "generator: the numpy oracle disagrees with onnxruntime", problem
            )

    try:
        # the lowering itself is fuzzed: the speed-first default would return the original
        # where the lowering costs more (tests/fuzz/test_properties.py checks that decision)
        options = {"target": "portable", **program.options}
        lowered, report = seqlower.optimize(original, **options)
    except Exception as error:
        return Outcome(seed, "fail", "optimize raised", _first_line(error), oracle)
    proto = lowered if isinstance(lowered, onnx.ModelProto) else ir.to_proto(lowered)
    counts = (sequence_op_total(original), sequence_op_total(lowered))
    outcome = Outcome(seed, "fail", "", "", oracle, proto, counts, dict(report.rules_fired))

    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as error:
        outcome.reason, outcome.detail = "the lowered model fails the checker", _first_line(error)
        return outcome
    try:
        actual = run_ort(proto, program.feeds)
    except Exception as error:
        outcome.reason = "onnxruntime cannot run the lowered model"
        outcome.detail = _first_line(error)
        if "FusedMatMul" in outcome.detail and runtime_quirks.holds("fused-matmul-double"):
            outcome.status = "skip"  # an onnxruntime fault, probed (README quirk table)
            outcome.reason += f" (quirk fused-matmul-double of onnxruntime {ORT_VERSION})"
        return outcome
    problem = compare_outputs(reference, actual)
    if problem:
        outcome.reason = "the lowered model computes something else"
        outcome.detail = problem + (" (reference: numpy oracle)" if oracle else "")
        return outcome
    warned = any("SplitToSequence" in w for w in report.warnings)
    if program.keepdims_corner and warned:  # always a split of 1, read as onnxruntime reads it
        outcome.reason = "a warning for a scalar split of 1 with keepdims=0 read as PyTorch meant"
        return outcome
    problem = edge_feeds_problem(original, proto, program.feeds)
    if problem:
        outcome.reason = "the lowered model computes something else at an edge"
        outcome.detail = problem
        return outcome
    if properties:
        problem = check_properties(original, lowered, options)
        if problem:
            outcome.reason = problem
            return outcome
        blamed = blames_run_time_loops(report, options)
        if blamed:
            outcome.reason = "a reason for what stays blames a run-time trip count or condition"
            outcome.detail = blamed
            return outcome
    outcome.status = "pass"
    return outcome


def edge_feeds(feeds: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The feeds again with each scalar int64 input (a trip count, a position, a size) at 0 and
    -1, and each scalar bool input (a loop or If condition) false, one at a time."""
    variants = []
    for name, value in feeds.items():
        if not isinstance(value, np.ndarray) or value.ndim != 0:
            continue
        edges = {np.dtype(np.int64): (0, -1), np.dtype(np.bool_): (False,)}.get(value.dtype, ())
        for edge in edges:
            if value != edge:
                variants.append((f"{name}={edge}", {**feeds, name: np.asarray(edge, value.dtype)}))
    return variants


def edge_feeds_problem(
    original: onnx.ModelProto, lowered: onnx.ModelProto, feeds: dict[str, Any]
) -> str | None:
    """Where the original runs on an edge feed, the lowered model runs and gives its outputs.
    Where the original fails, anything goes (design.md: a failure of the original may become a
    result). One difference is allowed: a Loop of no iteration gives an empty scan output whose
    other dims onnxruntime takes from the body output's type, which lowering may know better
    (the original's `[0]` for a body output of no shape, the lowered `[0, 3]`, or stacked in a
    list of one, `[1, 0, 0]` and `[1, 0, 3]`; the specification does not say, onnx.reference
    fails), and what is derived from such a stack where the original, given the dims the stack
    has where its Loop runs, computes the lowered model's outputs (`empty_scan_outputs_explain`)."""
    for label, variant in edge_feeds(feeds):
        try:
            expected = run_ort(original, variant)
        except Exception:
            continue
        try:
            actual = run_ort(lowered, variant)
        except Exception as error:
            problem = f"the original runs, the lowered model fails: {_first_line(error)}"
        else:
            problem = compare_outputs(
                expected, [_as_empty_like(w, g) for w, g in zip(expected, actual)]
            )
            if problem and empty_scan_outputs_explain(original, actual, feeds, variant):
                problem = None
        if problem and not rejected_by_the_specification(original, lowered, feeds, variant):
            return f"{label}: {problem}"
    return None


def empty_scan_outputs_explain(
    original: onnx.ModelProto, actual: Sequence[Any], feeds: dict[str, Any], variant: dict[str, Any]
) -> bool:
    """Whether the lowered model's outputs `actual` on `variant` are what the original computes
    there once each empty scan output of a main-graph Loop of no iteration is given the other
    dims it has where that Loop runs. onnxruntime takes those dims from the body output's
    declared type (an undeclared dim as 0), the lowered model may know them, and what is
    derived from such a stack may differ beyond its own shape: `SplitToSequence(y, axis=1)`
    of a `[0, 0]` is a list of no element, of a `[0, 2]` one of two. Only a Loop whose body
    output leaves a dim undeclared, empty on `variant` and not on the program's own `feeds`
    (where its dims are read), is given them (declared on its body output); every other value
    is the original's, so a difference of anything else is still one."""
    loops = [
        (index, *scan)
        for index, node in enumerate(original.graph.node)
        if node.op_type == "Loop" and node.domain == ""
        for scan in _undeclared_scan_outputs(node)
    ]
    if not loops:
        return False
    probe = onnx.ModelProto()
    probe.CopyFrom(original)
    names = [v.name for v in probe.graph.output]
    for _, output, elem_type, _ in loops:
        if output not in names:
            probe.graph.output.append(onnx.helper.make_tensor_value_info(output, elem_type, None))
            names.append(output)
    try:
        running, edge = run_ort(probe, feeds), run_ort(probe, variant)
    except Exception:
        return False
    explained = onnx.ModelProto()
    explained.CopyFrom(original)
    given = 0
    for index, output, _, position in loops:
        ran, empty = np.shape(running[names.index(output)]), np.shape(edge[names.index(output)])
        if not ran or not empty or ran[0] == 0 or empty[0] != 0:
            continue
        body = next(a.g for a in explained.graph.node[index].attribute if a.name == "body")
        declared = body.output[position].type.tensor_type
        declared.shape.Clear()
        for size in ran[1:]:
            declared.shape.dim.add().dim_value = size
        given += 1
    if not given:
        return False
    try:
        expected = run_ort(explained, variant)
    except Exception:
        return False
    actual = [_as_empty_like(w, g) for w, g in zip(expected, actual)]
    return compare_outputs(expected, actual) is None


def _undeclared_scan_outputs(loop: onnx.NodeProto) -> list[tuple[str, int, int]]:
    """(name, element type, position among the body outputs) of each scan output of `loop`
    whose body output is a tensor that declares no shape or a dim of no size."""
    body = next((a.g for a in loop.attribute if a.name == "body"), None)
    if body is None:
        return []
    carried = len(loop.input) - 2
    found = []
    for k, name in enumerate(loop.output[carried:]):
        position = 1 + carried + k
        if not name or position >= len(body.output):
            continue
        type_ = body.output[position].type
        if not type_.HasField("tensor_type"):
            continue
        shape = type_.tensor_type.shape
        if not type_.tensor_type.HasField("shape") or any(
            not d.HasField("dim_value") for d in shape.dim
        ):
            found.append((name, type_.tensor_type.elem_type, position))
    return found


def rejected_by_the_specification(
    original: onnx.ModelProto,
    lowered: onnx.ModelProto,
    feeds: dict[str, Any],
    variant: dict[str, Any],
) -> bool:
    """Whether onnxruntime ran both models on an input the specification rejects, so that
    neither's values mean anything: onnxruntime concatenates an empty element whose other dims
    differ without a check, into uninitialized memory (quirk concat-empty-misfit). Asked only
    for a model that concatenates, and only of an `onnx.reference` that computes onnxruntime's
    outputs of the original on the program's own feeds (it has bugs of its own): it must fail
    on the variant for the original and for the lowered model alike."""
    if not runtime_quirks.holds("concat-empty-misfit"):
        return False
    concatenates = {"Concat", "ConcatFromSequence"}
    if not any(node.op_type in concatenates for node in _all_nodes(original.graph)):
        return False
    if concatenates_a_misfit(original, variant):
        return True
    from onnx.reference import ReferenceEvaluator  # slow to import: only here

    try:
        found = ReferenceEvaluator(original).run(None, feeds)
        if compare_outputs(run_ort(original, feeds), found) is not None:
            return False
    except Exception:
        return False
    for model in (original, lowered):
        try:
            ReferenceEvaluator(model).run(None, variant)
        except Exception:
            continue
        return False
    return True


def concatenates_a_misfit(model: onnx.ModelProto, feeds: dict[str, Any]) -> bool:
    """Whether onnxruntime, running `model` on `feeds`, concatenates pieces the specification
    refuses to: a Concat or ConcatFromSequence of the main graph whose inputs, as onnxruntime
    computes them (each made an output of a copy of the model), differ in rank or in a dim
    other than the axis (every dim with new_axis=1). onnxruntime runs such a concatenation when
    a piece is empty (quirk concat-empty-misfit); this sees it also where `onnx.reference`
    cannot run the model. False where the copy does not run."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    inferred = onnx.shape_inference.infer_shapes(copy)
    typed = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.input]}
    typed.update({v.name: v for v in inferred.graph.output})
    outputs = [v.name for v in copy.graph.output]
    checks: list[tuple[list[int], int, bool, bool]] = []  # (positions, axis, new_axis, list)
    for node in copy.graph.node:
        if node.op_type not in ("Concat", "ConcatFromSequence") or node.domain != "":
            continue
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        of_list = node.op_type == "ConcatFromSequence"
        names = [node.input[0]] if of_list else list(node.input)
        if not names or any(name not in typed for name in names):
            continue
        positions = []
        for name in names:
            if name not in outputs:
                outputs.append(name)
                copy.graph.output.append(typed[name])
            positions.append(outputs.index(name))
        new_axis = of_list and bool(attributes.get("new_axis", 0))
        checks.append((positions, int(attributes.get("axis", 0)), new_axis, of_list))
    if not checks:
        return False
    try:
        found = run_ort(copy, feeds)
    except Exception:
        return False
    for positions, axis, new_axis, of_list in checks:
        pieces = found[positions[0]] if of_list else [found[k] for k in positions]
        shapes = [np.shape(piece) for piece in pieces]
        if len({len(shape) for shape in shapes}) > 1:
            return True
        if len(shapes) < 2:
            continue
        rank = len(shapes[0])
        kept = range(rank) if new_axis else [d for d in range(rank) if d != axis % max(rank, 1)]
        if any(len({shape[d] for shape in shapes}) > 1 for d in kept):
            return True
    return False


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The nodes of `graph` and of every subgraph in it."""
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for attribute in node.attribute:
            subgraphs = [attribute.g] if attribute.HasField("g") else []
            for subgraph in [*subgraphs, *attribute.graphs]:
                nodes.extend(_all_nodes(subgraph))
    return nodes


def _as_empty_like(want: Any, got: Any) -> Any:
    """`want` where both are empty tensors of one dtype that agree on their first dim of 0 and
    on every dim before it (what follows is the dims a Loop of no iteration gives its scan
    output, which may reach the output inside a stack of other values, or as an element of a
    list output: compared element by element)."""
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return [_as_empty_like(w, g) for w, g in zip(want, got)]
    if isinstance(want, list) or isinstance(got, list):
        return got
    want, got = np.asarray(want), np.asarray(got)
    if want.size or got.size or want.dtype != got.dtype or not want.ndim or not got.ndim:
        return got
    first = want.shape.index(0)
    if got.shape[: first + 1] == want.shape[: first + 1]:
        return want
    return got


# a run-time trip count or loop condition stops no list from becoming tensors: a reason that
# blames one hides the real one (tract, which has no Loop, may say so)
_RUN_TIME_LOOP = re.compile(r"(trip count|condition)( '[^']*')? is computed at run time")


def blames_run_time_loops(report: Any, options: dict[str, Any]) -> str | None:
    """The first reason for a node that stays which blames a run-time trip count or loop
    condition (none for target tract), or None."""
    if options.get("target") == "tract":
        return None
    for remaining in report.remaining:
        if _RUN_TIME_LOOP.search(remaining.reason):
            return f"{remaining.node}: {remaining.reason}"
    return None


def budget_of(model: onnx.ModelProto) -> int:
    """`sequence_op_budget` of a proto model, typed by ONNX shape inference first (generated
    programs declare no intermediate types, and a SequenceMap's extra inputs count by type)."""
    typed = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    return sequence_op_budget(ir.serde.deserialize_model(typed))


def check_properties(
    original: onnx.ModelProto, lowered: ir.Model, options: dict[str, Any] | None = None
) -> str | None:
    """Never more sequence ops (a SequenceMap counting as its ONNX expansion, see
    `sequence_op_budget`), idempotence and determinism (in this process)."""
    before = budget_of(original)
    after = sequence_op_total(lowered)
    if after > before:
        return f"more sequence ops after lowering ({before} -> {after})"
    first = model_to_bytes(lowered)
    options = options or {}
    again, report = seqlower.optimize(lowered, **options)
    if report.rules_fired:
        return f"not idempotent: lowering the output again fires {report.rules_fired}"
    if model_to_bytes(again) != first:
        return "not idempotent: lowering the output again changes its bytes"
    if model_to_bytes(seqlower.optimize(original, **options).model) != first:
        return "not deterministic: two lowerings of the same model differ"
    return None
