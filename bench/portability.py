"""Portability: does each model load, run and compute the right thing in onnxruntime, OpenVINO
and tract, before and after lowering?

    python -m bench.portability              # print the table (Markdown)
    python -m bench.portability --docs       # ... and replace the tables in docs/portability.md
    python -m bench.portability --probe      # one small model per operator: what each runtime
                                             # supports (the source of seqlower/targets.py)

Cases: every ONNX node conformance case that uses a sequence (as tests/conformance selects them,
onnx's `test_sequence_model*` included), every PyTorch fixture in tests/fixtures/torch,
tests/fixtures/torch_accumulators (loops that grow a tensor, no sequence operator),
tests/fixtures/torch_loops (scripted loops that build lists, `while` loops among them),
tests/fixtures/torch_while (TorchScript `while` loops, a `break`), tests/fixtures/torch_idioms
(list idioms from model code) and tests/fixtures/torch_dynamo
(EmbeddingBag, a `while` loop), and the models in examples/.
Expected outputs come from ONNX's test data and from PyTorch; an example model or a dynamo
export has none stored, so onnxruntime's result on the original stands in for it. Each original
is run as it is; each lowered model is lowered with the `--target` of the runtime that runs it
(`generic` for onnxruntime, `openvino`, `tract`).

The runners here are deliberately small and private to this script and tests/targets; once
`seqlower.verification.runtimes` (the runtime adapters of `seqlower verify --runtime`) is
merged, the lead points `run_model` at it. OpenVINO compiles for CPU with
`INFERENCE_PRECISION_HINT=f32`; tract gets a concrete input fact (shape and type) per input from
the values fed, then `into_model().into_runnable().run(...)`. Each (model, runtime) pair runs in
a child process, so a crashing runtime is a "crashed" cell, not a dead script.
"""

from __future__ import annotations

__all__ = [
    "RUNTIMES",
    "lower_flattened",
    "Case",
    "Outcome",
    "all_cases",
    "dynamo_cases",
    "loop_cases",
    "evaluate",
    "evaluate_lowered",
    "lower_for",
    "main",
    "run_model",
    "runtime_versions",
    "why_not_runnable",
]

import argparse
import concurrent.futures
import dataclasses
import glob
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
RUNTIMES = ("onnxruntime", "openvino", "tract")
TARGET_FOR = {"onnxruntime": "generic", "openvino": "openvino", "tract": "tract"}
_TRACT_TYPES = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool": "bool",
}


@dataclasses.dataclass(frozen=True)
class Case:
    """A model with input sets and the outputs expected for each."""

    name: str
    source: str  # "onnx" (conformance), "torch" (fixture) or "example"
    model: onnx.ModelProto
    data_sets: tuple[tuple[dict[str, Any], list[Any]], ...]
    rtol: float = 1e-4
    atol: float = 1e-5


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one model fared in one runtime: `status` is "correct", "wrong", "load" (failed to
    load or compile), "run" (failed while running), "crashed" or "skipped"; `detail` says why."""

    status: str
    detail: str = ""
    flattened: bool = False  # run through --flatten-sequence-io (a sequence interface)


# -- cases ---------------------------------------------------------------------------------------


def _has_sequence_type(type_proto: onnx.TypeProto) -> bool:
    if type_proto.HasField("sequence_type"):
        return True
    if type_proto.HasField("optional_type"):
        return _has_sequence_type(type_proto.optional_type.elem_type)
    return False


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)


def _uses_sequences(model: onnx.ModelProto) -> bool:
    from seqlower.ops import SEQUENCE_OPS

    nodes = [n for g in _graphs(model.graph) for n in g.node]
    for function in model.functions:
        for node in function.node:
            nodes.append(node)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    nodes.extend(n for g in _graphs(attr.g) for n in g.node)
    if any(n.op_type in SEQUENCE_OPS and n.domain in ("", "ai.onnx") for n in nodes):
        return True
    values = [v for g in _graphs(model.graph) for v in (*g.input, *g.output, *g.value_info)]
    return any(_has_sequence_type(v.type) for v in values)


def _read_value(path: Path | str, type_proto: onnx.TypeProto) -> Any:
    data = Path(path).read_bytes()
    if type_proto.HasField("sequence_type"):
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(data)
        return [numpy_helper.to_array(t) for t in sequence.tensor_values]
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def conformance_cases() -> list[Case]:
    """ONNX's node test cases that use a sequence, and onnx's simple `test_sequence_model*`."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        testcases = collect_testcases(None)
    cases = []
    for testcase in testcases:
        if not _uses_sequences(testcase.model):
            continue
        ((inputs, outputs),) = testcase.data_sets
        names = [value.name for value in testcase.model.graph.input]
        data = ((dict(zip(names, inputs)), list(outputs)),)
        cases.append(
            Case(testcase.name, "onnx", testcase.model, data, testcase.rtol, testcase.atol)
        )
    simple = Path(onnx.__file__).parent / "backend" / "test" / "data" / "simple"
    for folder in sorted(simple.glob("test_sequence_model*")):
        model = onnx.load(folder / "model.onnx")
        initializers = {init.name for init in model.graph.initializer}
        fed = [v for v in model.graph.input if v.name not in initializers]
        cases.append(Case(folder.name, "onnx", model, _stored_sets(folder, model, fed)))
    return sorted(cases, key=lambda case: case.name)


def _stored_sets(
    folder: Path, model: onnx.ModelProto, fed: Sequence[onnx.ValueInfoProto]
) -> tuple[tuple[dict[str, Any], list[Any]], ...]:
    sets = []
    for data in sorted(glob.glob(str(folder / "test_data_set_*"))):
        inputs = {v.name: _read_value(f"{data}/input_{i}.pb", v.type) for i, v in enumerate(fed)}
        outputs = [
            _read_value(f"{data}/output_{i}.pb", v.type) for i, v in enumerate(model.graph.output)
        ]
        sets.append((inputs, outputs))
    return tuple(sets)


def fixture_cases() -> list[Case]:
    """The PyTorch exports in tests/fixtures/torch, with PyTorch's outputs."""
    cases = []
    for folder in sorted((ROOT / "tests" / "fixtures" / "torch").iterdir()):
        if (folder / "model.onnx").is_file():
            model = onnx.load(folder / "model.onnx")
            data = _stored_sets(folder, model, list(model.graph.input))
            cases.append(Case(folder.name, "torch", model, data))
    return cases


def accumulator_cases() -> list[Case]:
    """The PyTorch exports in tests/fixtures/torch_accumulators (loops that grow a tensor with
    `torch.cat`, no sequence operator), with PyTorch's outputs."""
    cases = []
    for folder in sorted((ROOT / "tests" / "fixtures" / "torch_accumulators").iterdir()):
        if (folder / "model.onnx").is_file():
            model = onnx.load(folder / "model.onnx")
            data = _stored_sets(folder, model, list(model.graph.input))
            cases.append(Case(folder.name, "accumulator", model, data))
    return cases


def loop_cases() -> list[Case]:
    """The PyTorch exports in tests/fixtures/torch_loops (scripted loops that build a list, some
    `while` loops), tests/fixtures/torch_while (TorchScript `while` loops, a `break`) and
    tests/fixtures/torch_idioms (list idioms from model code), with PyTorch's outputs."""
    cases = []
    for folder_name, source in (
        ("torch_loops", "loop"),
        ("torch_while", "while"),
        ("torch_idioms", "idiom"),
    ):
        for folder in sorted((ROOT / "tests" / "fixtures" / folder_name).iterdir()):
            if (folder / "model.onnx").is_file():
                model = onnx.load(folder / "model.onnx")
                data = _stored_sets(folder, model, list(model.graph.input))
                cases.append(Case(folder.name, source, model, data))
    return cases


# (indices, offsets) fed to the EmbeddingBag exports: an empty bag, one bag, one row per bag
_BAGS = (
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 4]),
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 3, 7]),
    ([7], [0]),
    ([3, 3, 3, 3, 3], [0, 1, 2, 3, 4]),
)


def dynamo_cases() -> list[Case]:
    """The exports of torch's default (dynamo) exporter in tests/fixtures/torch_dynamo
    (nn.EmbeddingBag: a `while` loop over the bags), with onnxruntime's outputs on the
    original as the expectation (no PyTorch outputs are stored)."""
    cases = []
    for path in sorted((ROOT / "tests" / "fixtures" / "torch_dynamo").glob("*.onnx")):
        model = onnx.load(path)
        sets = []
        for indices, offsets in _BAGS:
            feeds = {"indices": np.array(indices, np.int64), "offsets": np.array(offsets, np.int64)}
            sets.append((feeds, run_model("onnxruntime", model, feeds)))
        cases.append(Case(path.stem, "dynamo", model, tuple(sets)))
    return cases


def example_cases() -> list[Case]:
    """The models in examples/, with onnxruntime's outputs on the original as the expectation
    (seeded inputs)."""
    cases = []
    for path in sorted((ROOT / "examples").glob("*.onnx")):
        model = onnx.load(path)
        rng = np.random.default_rng(0)
        inputs = {}
        for value in model.graph.input:
            tensor = value.type.tensor_type
            shape = [d.dim_value or 2 for d in tensor.shape.dim]
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
            inputs[value.name] = rng.standard_normal(shape).astype(dtype)
        expected = run_model("onnxruntime", model, inputs)
        cases.append(Case(path.stem, "example", model, ((inputs, expected),)))
    return cases


def all_cases() -> list[Case]:
    return [
        *conformance_cases(),
        *fixture_cases(),
        *accumulator_cases(),
        *loop_cases(),
        *dynamo_cases(),
        *example_cases(),
    ]


# -- lowering and running ------------------------------------------------------------------------


def lower_for(model: onnx.ModelProto, runtime: str) -> onnx.ModelProto:
    """`model` lowered with the `--target` that matches `runtime`, checked (full_check)."""
    import seqlower

    lowered, _ = seqlower.optimize(model, target=TARGET_FOR[runtime])
    proto = lowered
    onnx.checker.check_model(proto, full_check=True)
    return proto


def lower_flattened(case: Case, runtime: str) -> tuple[onnx.ModelProto, Case] | None:
    """For a case whose interface has sequences: the model lowered for `runtime` with
    `--flatten-sequence-io` (each sequence input given the length it has in the first data set)
    and the case re-expressed for the flattened interface. None when the data sets differ in
    those lengths, or when a flattened output's length differs from the expected one."""
    import seqlower

    first, _ = case.data_sets[0]
    seq_lens = {name: len(value) for name, value in first.items() if isinstance(value, list)}
    lowered, report = seqlower.optimize(
        case.model, target=TARGET_FOR[runtime], flatten_sequence_io=True, seq_lens=seq_lens
    )
    proto = lowered
    onnx.checker.check_model(proto, full_check=True)
    changes = {c["name"]: c["new_names"] for c in report.interface_changes if "new_names" in c}
    sets = []
    for inputs, outputs in case.data_sets:
        fed: dict[str, Any] = {}
        for name, value in inputs.items():
            if name not in changes:
                fed[name] = value
            elif len(value) != seq_lens[name]:
                return None
            else:
                fed.update(zip(changes[name], value))
        expected: list[Any] = []
        for value_info, value in zip(case.model.graph.output, outputs):
            names = changes.get(value_info.name)
            if names is None:
                expected.append(value)
            elif len(names) != len(value):
                return None
            else:
                expected.extend(value)
        sets.append((fed, expected))
    return proto, dataclasses.replace(case, data_sets=tuple(sets))


def why_not_runnable(model: onnx.ModelProto, runtime: str) -> str | None:
    """Why `runtime` cannot even be fed or read this model's interface, or None: OpenVINO and
    tract take and give tensors only, and neither has a string type."""
    if runtime == "onnxruntime":
        return None
    for value in [*model.graph.input, *model.graph.output]:
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"{kind.replace('_type', '')}-typed interface ('{value.name}')"
        if value.type.tensor_type.elem_type == onnx.TensorProto.STRING:
            return f"string tensor in the interface ('{value.name}')"
    return None


def run_model(runtime: str, model: onnx.ModelProto, feeds: Mapping[str, Any]) -> list[Any]:
    """Run `model` on `feeds` (by input name) in `runtime`; outputs in graph order. Raises
    `LoadError` when the runtime refuses the model, anything else when running fails."""
    if runtime == "onnxruntime":
        return _run_onnxruntime(model, feeds)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save(model, path)
        if runtime == "openvino":
            return _run_openvino(path, model, feeds)
        if runtime == "tract":
            return _run_tract(path, model, feeds)
    raise ValueError(f"unknown runtime '{runtime}'")


class LoadError(Exception):
    """The runtime refused to load or compile the model."""


def _fed(model: onnx.ModelProto) -> list[str]:
    initializers = {init.name for init in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in initializers]


def _run_onnxruntime(model: onnx.ModelProto, feeds: Mapping[str, Any]) -> list[Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as error:
        raise LoadError(str(error)) from None
    return session.run(None, {name: feeds[name] for name in _fed(model)})


def _run_openvino(path: str, model: onnx.ModelProto, feeds: Mapping[str, Any]) -> list[Any]:
    import openvino

    try:
        core = openvino.Core()
        compiled = core.compile_model(
            core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
        )
    except Exception as error:
        raise LoadError(str(error)) from None
    fed = _fed(model)
    inputs = {}
    for index, port in enumerate(compiled.inputs):
        # a port has every name of its tensor (an input passed straight to an output has both)
        names = [name for name in fed if name in port.get_names()]
        # a copy: OpenVINO refuses a read-only array (as numpy_helper gives for a scalar)
        inputs[index] = np.array(feeds[names[0] if names else fed[index]])
    results = compiled(inputs)
    return [np.asarray(results[output]) for output in compiled.outputs]


def _run_tract(path: str, model: onnx.ModelProto, feeds: Mapping[str, Any]) -> list[Any]:
    """First with input facts that keep the model's symbolic dims (tract checks declared
    intermediate shapes against them; the symbols are then bound to the sizes fed), and if tract
    cannot type the model that way, with the concrete sizes fed."""
    declared = {v.name: v.type.tensor_type.shape.dim for v in model.graph.input}
    arrays, symbolic, concrete, symbols = [], [], [], {}
    for name in _fed(model):
        array = np.asarray(feeds[name])
        dtype = _TRACT_TYPES.get(array.dtype.name)
        if dtype is None:
            raise LoadError(f"no tract type for {array.dtype}")
        dims = []
        for size, dim in zip(array.shape, declared[name]):
            bound = dim.dim_param and symbols.setdefault(dim.dim_param, size) == size
            dims.append(dim.dim_param if bound else str(size))
        arrays.append(array)
        symbolic.append(",".join([*dims, dtype]))
        concrete.append(",".join([*map(str, array.shape), dtype]))
    try:
        runnable = _tract_runnable(path, symbolic, symbols)
    except LoadError:
        if symbolic == concrete:
            raise
        runnable = _tract_runnable(path, concrete, {})
    return [tensor.to_numpy() for tensor in runnable.run(arrays)]


def _tract_runnable(path: str, facts: list[str], symbols: dict[str, int]) -> Any:
    import tract

    try:
        inference = tract.onnx().load(path)
        for index, fact in enumerate(facts):
            inference.set_input_fact(index, fact)
        typed = inference.into_model()
        if symbols:
            typed.transform(tract.transform.SetSymbols(symbols))
        return typed.into_runnable()
    except Exception as error:
        raise LoadError(str(error)) from None


def _close(got: Any, want: Any, rtol: float, atol: float) -> str | None:
    """None when `got` matches `want` (shapes and dtypes exact, floats within tolerance), else
    what differs."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return "a sequence of another length"
        for g, w in zip(got, want):
            problem = _close(g, w, rtol, atol)
            if problem:
                return problem
        return None
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "OUS":
        return None if got.astype(str).tolist() == want.astype(str).tolist() else "strings"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind in "fc":
        tolerance = max(rtol, 1e-3) if want.dtype == np.float16 else rtol
        ok = np.allclose(got, want, rtol=tolerance, atol=atol, equal_nan=True)
    else:
        ok = np.array_equal(got, want)
    return None if ok else "values differ"


def evaluate(runtime: str, model: onnx.ModelProto, case: Case) -> Outcome:
    """Run `model` on every data set of `case` in `runtime` and compare (in this process)."""
    reason = why_not_runnable(model, runtime)
    if reason:
        return Outcome("skipped", reason)
    for inputs, expected in case.data_sets:
        try:
            actual = run_model(runtime, model, inputs)
        except LoadError as error:
            return Outcome("load", _one_line(error))
        except Exception as error:
            return Outcome("run", _one_line(error))
        if len(actual) != len(expected):
            return Outcome("wrong", f"{len(actual)} outputs, expected {len(expected)}")
        for got, want in zip(actual, expected):
            problem = _close(got, want, case.rtol, case.atol)
            if problem:
                return Outcome("wrong", problem)
    return Outcome("correct")


def _one_line(error: BaseException, limit: int = 160) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    text = re.sub(r"Stack backtrace:.*", "", text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def runtime_versions() -> dict[str, str]:
    import onnxruntime
    import openvino
    import tract

    return {
        "onnxruntime": onnxruntime.__version__,
        "openvino": openvino.get_version().split("-")[0],
        "tract": tract.version(),
    }


# -- probes --------------------------------------------------------------------------------------

_X = "float[4,3] x"
PROBES: dict[str, str] = {
    "SplitToSequence + SequenceAt": f"""({_X}) => (float[1,3] y) {{
        s = SplitToSequence(x) p = Constant<value = int64 {{2}}>() y = SequenceAt(s, p) }}""",
    "SplitToSequence (run-time sizes) + ConcatFromSequence": f"""({_X}, int64[2] sz)
        => (float[4,3] y) {{ s = SplitToSequence(x, sz) y = ConcatFromSequence<axis = 0>(s) }}""",
    "SequenceConstruct + ConcatFromSequence": f"""({_X}) => (float[8,3] y) {{
        s = SequenceConstruct(x, x) y = ConcatFromSequence<axis = 0>(s) }}""",
    "SequenceInsert + SequenceLength": f"""({_X}) => (int64 y) {{
        s = SequenceConstruct(x) t = SequenceInsert(s, x) y = SequenceLength(t) }}""",
    "SequenceEmpty + SequenceInsert": f"""({_X}) => (float[4,3] y) {{
        s = SequenceEmpty<dtype = 1>() t = SequenceInsert(s, x)
        y = ConcatFromSequence<axis = 0>(t) }}""",
    "SequenceErase": f"""({_X}) => (float[4,3] y) {{
        s = SequenceConstruct(x, x) t = SequenceErase(s) p = Constant<value = int64 {{0}}>()
        y = SequenceAt(t, p) }}""",
    "SequenceMap": f"""({_X}) => (float[4,3] y) {{
        s = SplitToSequence<keepdims = 0>(x)
        m = SequenceMap<body = b (float[3] e) => (float[3] f) {{ f = Relu(e) }}>(s)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(m) }}""",
    "Loop (static trip count)": f"""({_X}) => (float[4,3] y) {{
        m = Constant<value = int64 {{3}}>() c = Constant<value = bool {{1}}>()
        y = Loop(m, c, x) <body = b (int64 i, bool ci, float[4,3] v) => (bool co, float[4,3] w)
            {{ co = Identity(ci) w = Add(v, v) }}> }}""",
    "Loop carrying a sequence": f"""({_X}) => (float[?,3] y) {{
        m = Constant<value = int64 {{2}}>() c = Constant<value = bool {{1}}>()
        e = SequenceEmpty<dtype = 1>()
        s = Loop(m, c, e) <body = b (int64 i, bool ci, seq(float) a) => (bool co, seq(float) a2)
            {{ co = Identity(ci) a2 = SequenceInsert(a, x) }}>
        y = ConcatFromSequence<axis = 0>(s) }}""",
    "Loop carrying a constant of size 0": f"""({_X}) => (float[?,3] y) {{
        m = Constant<value = int64 {{2}}>() c = Constant<value = bool {{1}}>()
        e = Constant<value = float[0,3] {{}}>()
        y = Loop(m, c, e) <body = b (int64 i, bool ci, float[?,3] a) => (bool co, float[?,3] a2)
            {{ co = Identity(ci) a2 = Concat<axis = 0>(a, x) }}> }}""",
    "Scan": f"""({_X}) => (float[3] y, float[4,3] ys) {{
        z = Constant<value = float[3] {{0, 0, 0}}>()
        y, ys = Scan<num_scan_inputs = 1, body = b (float[3] acc, float[3] row)
            => (float[3] acc2, float[3] out) {{ acc2 = Add(acc, row) out = Identity(acc2) }}>(z, x)
        }}""",
    "If (run-time condition)": f"""({_X}, bool c) => (float[4,3] y) {{
        y = If(c) <then_branch = t () => (float[4,3] a) {{ a = Relu(x) }},
                   else_branch = e () => (float[4,3] b) {{ b = Neg(x) }}> }}""",
    "If (different constant per branch)": f"""({_X}, bool c) => (float[4,3] y) {{
        k = If(c) <then_branch = t () => (float a) {{ a = Constant<value = float {{1}}>() }},
                   else_branch = e () => (float b) {{ b = Constant<value = float {{2}}>() }}>
        y = Mul(x, k) }}""",
    "If (branches of different shapes)": f"""({_X}, bool c) => (float[?,3] y) {{
        y = If(c) <then_branch = t () => (float[4,3] a) {{ a = Relu(x) }},
                   else_branch = e () => (float[8,3] b) {{ b = Concat<axis = 0>(x, x) }}> }}""",
    "Where": f"""({_X}, bool c) => (float[4,3] y) {{ n = Neg(x) y = Where(c, x, n) }}""",
    # a rank known only at run time (seqlower.runtime_ranks): what a list of such elements needs
    "Reshape to a shape of run-time length": f"""({_X}, int64[K] shape) => (float[?] y) {{
        w = Reshape(x, shape) m = Constant<value = int64[1] {{-1}}>() y = Reshape(w, m) }}""",
    "A list of elements of run-time rank, as tensors": f"""({_X}, int64[K] shape)
        => (float[?] y) {{
        m = Constant<value = int64[1] {{-1}}>() data = Reshape(x, m)
        zero = Constant<value = int64[1] {{0}}>() size = Size(data) rank = Shape(shape)
        s1 = Reshape(size, m) row = Concat<axis = 0>(s1, rank) two = Constant<value = int64[2]
        {{1, 2}}>() table = Reshape(row, two) k = Constant<value = int64 {{0}}>()
        entry = Gather(table, k) one = Constant<value = int64[1] {{1}}>()
        end = Constant<value = int64[1] {{2}}>() n = Slice(entry, zero, one)
        r = Slice(entry, one, end)
        piece = Slice(data, zero, n) dims = Slice(shape, zero, r)
        w = Reshape<allowzero = 1>(piece, dims) y = Reshape(w, m) }}""",
}


def probe(runtime: str) -> dict[str, Outcome]:
    """Each probe model in `runtime`, compared with onnxruntime on the same inputs (the run-time
    condition both true and false, the sizes [1, 3])."""
    found = {}
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    for name, text in PROBES.items():
        model = onnx.parser.parse_model('<ir_version: 9, opset_import: ["" : 18]>\nprobe ' + text)
        sets = []
        for c in (True, False):
            feeds = {"x": x, "c": np.array(c), "sz": np.array([1, 3]), "shape": np.array([2, 3, 2])}
            feeds = {v.name: feeds[v.name] for v in model.graph.input}
            sets.append((feeds, run_model("onnxruntime", model, feeds)))
        found[name] = evaluate(runtime, model, Case(name, "probe", model, tuple(sets)))
    return found


def probe_text() -> str:
    versions = ", ".join(f"{n} {v}" for n, v in runtime_versions().items())
    return f"Probed with {versions} (CPU, f32).\n\n{probe_table()}"


def probe_table() -> str:
    results = {runtime: probe(runtime) for runtime in ("openvino", "tract")}
    lines = ["| probe | openvino | tract |", "|---|---|---|"]
    for name in PROBES:
        cells = [_SYMBOL.get(results[r][name].status, results[r][name].status) for r in results]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- the table -----------------------------------------------------------------------------------

_SYMBOL = {"correct": "yes", "wrong": "WRONG", "load": "load fails", "run": "run fails"}


def _row(case: Case) -> dict[str, tuple[Outcome, Outcome]]:
    """Per runtime: (original, lowered). Runs in a worker process."""
    row = {}
    for runtime in RUNTIMES:
        row[runtime] = (evaluate(runtime, case.model, case), evaluate_lowered(case, runtime))
    return row


def evaluate_lowered(case: Case, runtime: str) -> Outcome:
    """`case` lowered for `runtime` and run there. A sequence-typed interface that `runtime`
    cannot feed is flattened (`--flatten-sequence-io`) when its lengths allow; "lowering fails"
    when seqlower raises or emits a model that fails the checker."""
    try:
        outcome = evaluate(runtime, lower_for(case.model, runtime), case)
    except Exception as error:
        return Outcome("lowering fails", _one_line(error))
    if outcome.status != "skipped" or "sequence-typed" not in outcome.detail:
        return outcome
    try:
        flat = lower_flattened(case, runtime)
    except Exception as error:
        return Outcome("lowering fails", _one_line(error), flattened=True)
    if flat is None:
        return outcome
    flattened = evaluate(runtime, *flat)
    return (
        outcome if flattened.status == "skipped" else dataclasses.replace(flattened, flattened=True)
    )


def _cell(outcome: Outcome) -> str:
    if outcome.status == "skipped":
        return "skip: " + outcome.detail.split(" (")[0].replace("-typed interface", " io")
    cell = _SYMBOL.get(outcome.status, outcome.status)
    return f"{cell} (flattened io)" if outcome.flattened else cell


def _counts(outcomes: Sequence[Outcome]) -> str:
    loads = sum(o.status in ("correct", "wrong", "run") for o in outcomes)
    runs = sum(o.status in ("correct", "wrong") for o in outcomes)
    correct = sum(o.status == "correct" for o in outcomes)
    return f"{loads} / {runs} / {correct}"


def table(rows: Mapping[str, dict[str, tuple[Outcome, Outcome]]]) -> str:
    """Markdown: counts per runtime over the cases it can be fed (loads / runs / correct),
    then one line per case (in a collapsed block)."""
    lines = [
        "| runtime | cases | original: loads / runs / correct | lowered: loads / runs / correct "
        "| lowered with --flatten-sequence-io: cases, correct | skipped: interface |",
        "|---|---|---|---|---|---|",
    ]
    for runtime in RUNTIMES:
        pairs = [row[runtime] for row in rows.values() if row[runtime][1].status != "skipped"]
        flat = [lo for _, lo in pairs if lo.flattened]
        pairs = [(o, lo) for o, lo in pairs if not lo.flattened]
        skipped = len(rows) - len(pairs) - len(flat)
        originals, lowered = [o for o, _ in pairs], [lo for _, lo in pairs]
        flat_correct = sum(lo.status == "correct" for lo in flat)
        lines.append(
            f"| {runtime} | {len(pairs)} | {_counts(originals)} | {_counts(lowered)} "
            f"| {len(flat)}, {flat_correct} | {skipped} |"
        )
    lines += ["", "<details><summary>Per case</summary>", ""]
    lines.append("| case | " + " | ".join(f"{r} original | {r} lowered" for r in RUNTIMES) + " |")
    lines.append("|---|" + "---|" * (2 * len(RUNTIMES)))
    for name, row in rows.items():
        cells = [_cell(outcome) for runtime in RUNTIMES for outcome in row[runtime]]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "</details>"]
    return "\n".join(lines)


def _failures(rows: Mapping[str, dict[str, tuple[Outcome, Outcome]]]) -> list[str]:
    lines = []
    for name, row in rows.items():
        for runtime, (original, lowered) in row.items():
            for form, outcome in (("original", original), ("lowered", lowered)):
                if outcome.status not in ("correct", "skipped"):
                    lines.append(f"{name} [{runtime}, {form}]: {outcome.status}: {outcome.detail}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.portability", description=__doc__)
    parser.add_argument(
        "--docs", action="store_true", help="rewrite the tables in docs/portability.md"
    )
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--only", default="", help="run only cases whose name contains this")
    parser.add_argument("--probe", action="store_true", help="print the operator probes only")
    args = parser.parse_args(argv)
    if args.probe:
        print(probe_text())
        return 0

    cases = [case for case in all_cases() if args.only in case.name]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as threads:
        results = list(threads.map(_isolated, cases))
    rows = {f"{case.source}: {case.name}": row for case, row in zip(cases, results)}
    versions = runtime_versions()
    header = ", ".join(f"{name} {version}" for name, version in versions.items())
    text = f"Measured with {header} (CPU, f32).\n\n" + table(rows)
    print(text)
    for line in _failures(rows):
        print(line, file=sys.stderr)
    if args.docs:
        _write_docs(text, _BEGIN, _END)
        _write_docs(probe_text(), _PROBE_BEGIN, _PROBE_END)
    return 0


def _isolated(case: Case) -> dict[str, tuple[Outcome, Outcome]]:
    """`_row(case)` in a child process; a crash there becomes "crashed" outcomes."""
    with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
        try:
            return pool.submit(_row, case).result()
        except concurrent.futures.process.BrokenProcessPool:
            crashed = Outcome("crashed", "the runtime killed the process")
            return {runtime: (crashed, crashed) for runtime in RUNTIMES}


_BEGIN, _END = "<!-- portability:begin -->", "<!-- portability:end -->"
_PROBE_BEGIN, _PROBE_END = "<!-- probes:begin -->", "<!-- probes:end -->"


def _write_docs(text: str, begin: str, end_marker: str) -> None:
    path = ROOT / "docs" / "portability.md"
    readme = path.read_text(encoding="utf-8")
    start, end = readme.index(begin) + len(begin), readme.index(end_marker)
    path.write_text(readme[:start] + "\n" + text + "\n" + readme[end:], encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
