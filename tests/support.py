"""Shared helpers for the lowering tests: build, lower, run and compare small models.

    model = parse('agraph (float[2,6] x) => (float[2,2] y) { ... }', opset=18)
    lowered, report = lower(model)                  # checked (full_check) and loaded in onnxruntime
    assert sequence_op_count(lowered) == 0
    assert_same_outputs(model, lowered, {"x": x})    # onnxruntime on both, exact for ints

A sequence value (input or output) is a Python list of numpy arrays.
"""

from __future__ import annotations

import collections
import pathlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator

import seqlower
from seqlower import runtime_quirks
from seqlower.ops import SEQUENCE_OPS
from seqlower.passes.workarounds import RuntimeWorkaroundsPass
from seqlower.report import Report
from seqlower.rule import RuleSet

__all__ = [
    "torch_pad_nodes",
    "MAX_ORT_IR_VERSION",
    "NEWEST_ORT_OPSET",
    "SEQUENCE_OPS",
    "assert_both_fail",
    "assert_close_to_stored",
    "assert_outputs_equal",
    "assert_same_or_both_fail",
    "assert_same_outputs",
    "declared_shape_mismatches",
    "lower",
    "lower_and_compare",
    "lower_tensor_form",
    "reasons",
    "rule_check",
    "rules_without",
    "op_counts",
    "ort_session",
    "parse",
    "read_stored",
    "read_tensor",
    "run_ort",
    "run_reference",
    "sequence_op_count",
    "sequence_op_counts",
    "stored_data_sets",
    "to_proto",
]

# The newest IR version and opset the installed onnxruntime loads (and onnx can check), probed
# once per run: 1.20.0 loads IR 10 and opset 21, 1.31.1 IR 13 and opset 26, 1.32.0 IR 14, opset 28.
MAX_ORT_IR_VERSION = runtime_quirks.limits().max_ir_version
NEWEST_ORT_OPSET = runtime_quirks.limits().newest_opset

Model = onnx.ModelProto | ir.Model
Feeds = Mapping[str, Any] | Sequence[Any]


def parse(
    graph_text: str,
    opset: int = 18,
    ir_version: int = 10,
    functions: str = "",
    domains: Mapping[str, int] | None = None,
) -> onnx.ModelProto:
    """A model from ONNX text syntax: the graph (and optional functions, of the `domains`)
    without the header."""
    imports = ", ".join(f'"{d}" : {v}' for d, v in {"": opset, **(domains or {})}.items())
    header = f"<ir_version: {ir_version}, opset_import: [{imports}]>\n"
    return onnx.parser.parse_model(header + graph_text + "\n" + functions)


def to_proto(model: Model) -> onnx.ModelProto:
    return ir.to_proto(model) if isinstance(model, ir.Model) else model


# -- lowering ----------------------------------------------------------------------------------


def lower(model: Model, *, load_ort: bool = True, **options: Any) -> tuple[onnx.ModelProto, Report]:
    """`seqlower.optimize`, then the ONNX checker (full_check) and, unless told not to,
    loading the result in onnxruntime. Returns the lowered ModelProto and the report.

    The target is "portable" unless given (any sequence op left is then an error the report
    names); `--target onnxruntime`'s choice of what to keep is tested in tests/test_speed_first.py
    and tests/test_never_slower.py."""
    __tracebackhide__ = True
    options.setdefault("target", "portable")
    lowered, report = seqlower.optimize(model, **options)
    proto = lowered if isinstance(lowered, onnx.ModelProto) else ir.to_proto(lowered)
    onnx.checker.check_model(proto, full_check=True)
    if load_ort:
        ort_session(proto)
    return proto, report


def lower_and_compare(
    model: Model, feeds: Feeds, **options: Any
) -> tuple[onnx.ModelProto, Report, list[Any]]:
    """`lower`, then `assert_same_outputs` under onnxruntime. Returns (lowered, report, outputs)."""
    __tracebackhide__ = True
    lowered, report = lower(model, **options)
    outputs = assert_same_outputs(model, lowered, feeds)
    return lowered, report, outputs


def lower_tensor_form(model: onnx.ModelProto) -> tuple[onnx.ModelProto, Report]:
    """Lowered with no pattern rule, so that every sequence operator takes its tensor form
    (target portable); the result passes the ONNX checker (full_check)."""
    lowered, report = seqlower.optimize(model, rules=RuleSet([]), target="portable")
    onnx.checker.check_model(lowered, full_check=True)
    return lowered, report


def reasons(report: Report, op_type: str | None = None) -> str:
    """Every reason the report gives for a remaining operator (of `op_type`), one per line: the
    headline, then every refusal."""
    return "\n".join(
        f"{op.op_type} '{op.node}': {op.reason}; {'; '.join(op.reasons)}"
        for op in report.remaining
        if op_type is None or op.op_type == op_type
    )


def rule_check(model: onnx.ModelProto, check: Any, op_type: str, **options: Any) -> Any:
    """What a rule's `check` gives for the first node of `op_type` in the main graph, once the
    model's shapes are inferred as the lowering infers them (a match, or a `Refusal`)."""
    from seqlower.analysis import Facts
    from seqlower.options import Options
    from seqlower.passes.normalize import infer_shapes
    from seqlower.rewriter import Rewriter
    from seqlower.rule import Context

    graph_model = ir.from_proto(model)
    infer_shapes(graph_model)
    context = Context(Facts(graph_model), Rewriter(graph_model), Options(**options))
    node = next(n for n in graph_model.graph if n.op_type == op_type)
    return check(node, context)


def rules_without(*names: str) -> RuleSet:
    """Every rule but the named ones: to test what a rule emits where a later rule (loop-batch,
    say) would take its result further."""
    from seqlower.rules import default_rules

    rules = default_rules()
    assert set(names) <= {rule.name for rule in rules}, names
    return RuleSet(rule for rule in rules if rule.name not in names)


# -- counting ----------------------------------------------------------------------------------


def proto_graphs(graph: onnx.GraphProto):
    """`graph` and every graph nested in it (protobuf form)."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from proto_graphs(attr.g)
            for subgraph in attr.graphs:
                yield from proto_graphs(subgraph)


def _all_nodes(model: onnx.ModelProto):
    for graph in proto_graphs(model.graph):
        yield from graph.node
    for function in model.functions:
        for node in function.node:
            yield node
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    for graph in proto_graphs(attr.g):
                        yield from graph.node


def op_counts(model: Model) -> collections.Counter[str]:
    """Operator histogram over every graph: main graph, subgraphs (nested) and functions.
    Default-domain operators by name, others as 'domain::name'."""
    return collections.Counter(
        n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
        for n in _all_nodes(to_proto(model))
    )


def sequence_op_counts(model: Model) -> dict[str, int]:
    return {op: count for op, count in op_counts(model).items() if op in SEQUENCE_OPS}


def sequence_op_count(model: Model) -> int:
    return sum(sequence_op_counts(model).values())


# -- running -----------------------------------------------------------------------------------


def ort_session(model: Model) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        to_proto(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _named_feeds(model: onnx.ModelProto, feeds: Feeds) -> dict[str, Any]:
    if isinstance(feeds, Mapping):
        return dict(feeds)
    names = [i.name for i in model.graph.input]
    assert len(names) == len(feeds), f"{len(names)} inputs expected, {len(feeds)} given"
    return dict(zip(names, feeds))


def run_ort(model: Model, feeds: Feeds) -> list[Any]:
    """Run under onnxruntime (CPU). Feeds by name or in input order; sequences are lists."""
    proto = to_proto(model)
    return ort_session(proto).run(None, _named_feeds(proto, feeds))


def run_reference(model: Model, feeds: Feeds) -> list[Any]:
    """Run under onnx.reference (a second opinion: see design.md trap 11 for its own bugs)."""
    proto = to_proto(model)
    return list(ReferenceEvaluator(proto).run(None, _named_feeds(proto, feeds)))


# -- comparing ---------------------------------------------------------------------------------


def assert_outputs_equal(
    expected: Sequence[Any], actual: Sequence[Any], rtol: float = 1e-6, atol: float = 1e-6
) -> None:
    """Outputs equal: same count, same kinds (tensor or sequence), same sequence lengths,
    shapes and dtypes; ints, bools and strings exactly, floats to a tight tolerance."""
    __tracebackhide__ = True
    assert len(expected) == len(actual), f"{len(expected)} outputs expected, got {len(actual)}"
    for index, (want, got) in enumerate(zip(expected, actual)):
        _assert_value_equal(want, got, f"output {index}", rtol, atol)


def _assert_value_equal(want: Any, got: Any, where: str, rtol: float, atol: float) -> None:
    __tracebackhide__ = True
    if isinstance(want, list):
        assert isinstance(got, list), f"{where}: a sequence expected, got {type(got).__name__}"
        assert len(want) == len(got), f"{where}: sequence length {len(got)}, expected {len(want)}"
        for k, (w, g) in enumerate(zip(want, got)):
            _assert_value_equal(w, g, f"{where}[{k}]", rtol, atol)
        return
    assert not isinstance(got, list), f"{where}: a tensor expected, got a sequence"
    want, got = np.asarray(want), np.asarray(got)
    assert want.shape == got.shape, f"{where}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "OUS" or got.dtype.kind in "OUS":
        assert want.astype(str).tolist() == got.astype(str).tolist(), where
        return
    assert want.dtype == got.dtype, f"{where}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind == "f":
        tolerance = 1e-3 if want.dtype == np.float16 else rtol
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=atol, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def assert_same_outputs(original: Model, lowered: Model, feeds: Feeds) -> list[Any]:
    """Both models under onnxruntime on the same feeds give equal outputs. Returns them."""
    __tracebackhide__ = True
    expected = run_ort(original, feeds)
    actual = run_ort(lowered, feeds)
    assert_outputs_equal(expected, actual)
    return actual


def assert_both_fail(original: Model, lowered: Model, feeds: Feeds) -> None:
    """Both models fail under onnxruntime on `feeds` (a position out of range, say)."""
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own error types
        run_ort(original, feeds)
    with pytest.raises(Exception):  # noqa: B017
        run_ort(lowered, feeds)


def assert_same_or_both_fail(original: Model, lowered: Model, feeds: Feeds) -> bool:
    """Where the original runs on `feeds`, the lowered model gives equal outputs; where it
    fails, the lowered model fails too. Returns whether the original ran."""
    __tracebackhide__ = True
    try:
        run_ort(original, feeds)
    except Exception:  # onnxruntime raises its own error types
        assert_both_fail(original, lowered, feeds)
        return False
    assert_same_outputs(original, lowered, feeds)
    return True


def declared_shape_mismatches(model: Model, feeds: Feeds) -> list[str]:
    """Each value of the main graph whose declared shape (`value_info`, or a graph output's)
    disagrees with what onnxruntime computes on `feeds`: another rank, or a static dim of
    another size. Every node output is made a model output for the run, with onnxruntime's
    graph optimizations off (it computes each value as the model writes it). Values in
    subgraphs are not seen; `onnx.shape_inference.infer_shapes(..., strict_mode=True)` checks
    what inference can prove there."""
    proto = onnx.ModelProto()
    proto.CopyFrom(to_proto(model))
    declared = {}
    for info in [*proto.graph.value_info, *proto.graph.output]:
        tensor = info.type.tensor_type
        if info.type.HasField("tensor_type") and tensor.HasField("shape"):
            declared[info.name] = [
                d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim
            ]
    outputs = {info.name for info in proto.graph.output}
    for node in proto.graph.node:
        for name in node.output:
            if name and name not in outputs:
                proto.graph.output.append(onnx.ValueInfoProto(name=name))
                outputs.add(name)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [output.name for output in session.get_outputs()]
    found = []
    for name, value in zip(names, session.run(None, _named_feeds(proto, feeds))):
        dims = declared.get(name)
        if dims is None or not isinstance(value, np.ndarray):
            continue
        wrong_rank = len(dims) != value.ndim
        if wrong_rank or any(d is not None and d != n for d, n in zip(dims, value.shape)):
            shown = ",".join("?" if d is None else str(d) for d in dims)
            found.append(f"'{name}': declared [{shown}], computed {list(value.shape)}")
    return found


def read_tensor(path: pathlib.Path) -> np.ndarray:
    """A TensorProto file (`input_0.pb`, `output_0.pb` of an ONNX test data set)."""
    proto = onnx.TensorProto()
    proto.ParseFromString(path.read_bytes())
    return onnx.numpy_helper.to_array(proto)


def read_stored(path: pathlib.Path, type_proto: onnx.TypeProto) -> np.ndarray | list[np.ndarray]:
    """A value of an ONNX test data set: a TensorProto, or a SequenceProto where `type_proto` (the
    model's input or output type) is a sequence (a SequenceProto parses as a TensorProto without
    error: the type decides)."""
    if not type_proto.HasField("sequence_type"):
        return read_tensor(path)
    sequence = onnx.SequenceProto()
    sequence.ParseFromString(path.read_bytes())
    return [onnx.numpy_helper.to_array(tensor) for tensor in sequence.tensor_values]


def stored_data_sets(
    folder: pathlib.Path, model: onnx.ModelProto
) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    """(name, feeds by input name, expected outputs) of each `test_data_set_*` in `folder`; a
    sequence input or output is a list of arrays."""
    for data in sorted(folder.glob("test_data_set_*")):
        feeds = {
            value.name: read_stored(data / f"input_{i}.pb", value.type)
            for i, value in enumerate(model.graph.input)
        }
        outputs = [
            read_stored(data / f"output_{i}.pb", value.type)
            for i, value in enumerate(model.graph.output)
        ]
        yield data.name, feeds, outputs


def assert_close_to_stored(got: Any, want: Any, where: str) -> None:
    """An output close to the one a test data set stored (PyTorch's): same shape, values to
    rtol 1e-4 and atol 1e-5; a sequence element by element, `where` naming the element."""
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close_to_stored(g, w, f"{where}[{k}]")
        return
    assert np.shape(got) == want.shape, f"{where}: shape {np.shape(got)}, expected {want.shape}"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=where)


def export_cases(root: pathlib.Path) -> list[str]:
    """The exports of a fixture set: the folders under `root` that hold a `model.onnx`."""
    return sorted(p.name for p in root.iterdir() if (p / "model.onnx").is_file())


def assert_runs_like_stored(
    model: onnx.ModelProto, folder: pathlib.Path, ran: onnx.ModelProto, *, min_sets: int = 2
) -> None:
    """`ran` (the export as given, or a lowering of it) computes under onnxruntime what each of
    the export's `min_sets` or more stored data sets holds (PyTorch's outputs)."""
    sets = list(stored_data_sets(folder, model))
    assert len(sets) >= min_sets, f"{folder.name}: {len(sets)} data sets"
    for data_set, inputs, expected in sets:
        actual = run_ort(ran, inputs)
        for value, got, want in zip(model.graph.output, actual, expected, strict=True):
            assert_close_to_stored(got, want, f"{folder.name}/{data_set}/{value.name}")


def assert_every_leftover_has_a_reason(report: Report) -> None:
    """Every sequence op a lowering kept says why, and the reason is not a missing rule."""
    for op in report.remaining:
        assert op.reason and op.reason != "no rule applies", op


def assert_export_lowers_like_stored(folder: pathlib.Path, target: str) -> None:
    """The export in `folder`, lowered for `target` (`lower`'s checks), computes what PyTorch
    stored on each data set, and every sequence op it keeps says why; for the default targets
    (generic, portable) none is kept but the list a sequence-typed output is made of."""
    model = onnx.load(folder / "model.onnx")
    lowered, report = lower(model, target=target)
    if target in ("generic", "portable"):  # none left, but where the list is a sequence output
        for op in report.remaining:
            assert any("(the interface is kept)" in r for r in (op.reason, *op.reasons)), op
        if not any(o.type.HasField("sequence_type") for o in model.graph.output):
            assert not SEQUENCE_OPS & set(op_counts(lowered)), report.remaining
    assert_every_leftover_has_a_reason(report)
    assert_runs_like_stored(model, folder, lowered)


def torch_pad_nodes(tensor: str, extra: str, result: str) -> str:
    """The nodes TorchScript exports for `result = F.pad(tensor, (0, 0, 0, extra))` with
    `extra` (a scalar value) known at run time only: the pads vector is built in torch's order,
    padded to twice the rank, cut into pairs, the pairs reversed and transposed into ONNX's."""
    return f"""axes0 = Constant <value = int64[1] {{0}}> ()
    z = Constant <value = int64[1] {{0}}> ()
    d = Unsqueeze ({extra}, axes0)
    torch_pads = Concat <axis = 0> (z, z, z, d)
    four = Constant <value = int64[1] {{4}}> ()
    have = Shape (torch_pads)
    missing = Sub (four, have)
    fill = ConstantOfShape <value = int64[1] {{0}}> (missing)
    padded_pads = Concat <axis = 0> (torch_pads, fill)
    pairs_shape = Constant <value = int64[2] {{-1, 2}}> ()
    pairs = Reshape (padded_pads, pairs_shape)
    start = Constant <value = int64[1] {{-1}}> ()
    stop = Constant <value = int64[1] {{-9223372036854775807}}> ()
    step = Constant <value = int64[1] {{-1}}> ()
    reversed = Slice (pairs, start, stop, axes0, step)
    onnx_order = Transpose <perm = [1, 0]> (reversed)
    flat = Constant <value = int64[1] {{-1}}> ()
    flattened = Reshape (onnx_order, flat)
    pads = Cast <to = 7> (flattened)
    {result} = Pad ({tensor}, pads)"""


# -- small Loops the runtime workarounds rewrite (tests/test_workarounds.py) and the runtime
# probes run (tests/targets/test_runtimes.py)

# the rows of x up to a run-time trip count m, one per iteration: a scan output of m rows
ROWS_OF_A_RUN_TIME_COUNT = """g (float[N, 3] x, int64 m) => (float[M, 3] rows) {
    c = Constant<value = bool {1}>()
    rows = Loop(m, c) <body = b (int64 i, bool ci) => (bool co, float[3] row) {
        co = Identity(ci)
        row = Gather<axis = 0>(x, i)
    }>
}"""

# x plus 1 for each of m iterations, m given at run time (negative: no iteration)
COUNTED_ADDS = """g (float[3] x, int64 m) => (float[3] acc) {
    t = Constant<value = bool {1}>()
    acc = Loop(m, t, x) <body = b (int64 i, bool c, float[3] a) => (bool c_out, float[3] a2) {
        c_out = Identity(c)
        one = Constant<value = float {1}>()
        a2 = Add(a, one)
    }>
}"""


def openvino_forms(text: str, opset: int = 18, **options) -> tuple[onnx.ModelProto, int]:
    """The model of `text` (its value shapes inferred, as the lowering has them) after the
    runtime workarounds (`--target openvino`'s unless told otherwise), checked; and how many it
    made."""
    model = ir.from_proto(onnx.shape_inference.infer_shapes(parse(text, opset=opset)))
    workaround = RuntimeWorkaroundsPass(**{"openvino_loops": True, **options})
    workaround(model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    return proto, workaround.remade


# committed exports the ONNX checker rejects as exported, for an output declared with no shape
# (seqlower lowers them and declares the rank it proves: tests/test_torch_holdout.py checks how)
CHECKER_REJECTS_EXPORT = frozenset({("torch_holdout", "ctc_prefix_beam_search")})
