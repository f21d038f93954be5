"""Sequence-typed inputs: arrays of the declared element type and rank, never numpy scalars, and
no false alarm on rewrites that change nothing (issue 13, item 1)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

from seqlower.verification import generate_inputs, verify

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'

ELEMENT_TYPES = {
    "bool": np.bool_,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "float16": np.float16,
    "float": np.float32,
    "double": np.float64,
    "complex64": np.complex64,
    "complex128": np.complex128,
    "string": np.object_,
}
SHAPES = {0: "", 1: "[N]", 2: "[N, 2]", 3: "[2, N, 3]"}


def _model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model, full_check=True)
    return model


def _map_model(dtype: str, rank: int) -> onnx.ModelProto:
    """A sequence input whose elements go through a SequenceMap to a sequence output."""
    shape = SHAPES[rank]
    return _model(f"""g (seq({dtype}{shape}) s) => (seq({dtype}{shape}) t) {{
        t = SequenceMap<body = f ({dtype}{shape} e) => ({dtype}{shape} r) {{
            r = Identity(e)
        }}>(s)
    }}""")


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", list(ELEMENT_TYPES))
def test_sequence_elements_are_arrays_of_the_declared_type_and_rank(dtype, rank):
    model = ir.from_proto(_map_model(dtype, rank))
    for trial in range(3):
        elements = generate_inputs(model, trial=trial)["s"]
        assert len(elements) == (3, 1, 0)[trial]
        for element in elements:
            assert type(element) is np.ndarray  # not np.float32 & co.
            assert element.dtype == ELEMENT_TYPES[dtype]
            assert element.ndim == rank


@pytest.mark.parametrize(
    ("dtype", "rank"),
    [("bool", 0), ("int8", 1), ("uint64", 3), ("float16", 0), ("float", 0), ("string", 2)],
)
def test_a_sequence_map_over_a_sequence_input_is_equivalent_to_itself(dtype, rank):
    model = _map_model(dtype, rank)
    report = verify(model, model)
    assert {trial.status for trial in report.trials} == {"ok"}, report.failures()
    assert report.equivalent


SEQUENCE_MAP = _model("""g (seq(float) s, float[3] w) => (seq(float[3]) t, float n) {
    t = SequenceMap<body = f (float e, float[3] v) => (float[3] r) {
        r = Mul(e, v)
    }>(s, w)
    c = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    n = ReduceSum<keepdims = 0>(c)
}""")
WITH_IDENTITIES = _model("""g (seq(float) s, float[3] w) => (seq(float[3]) t, float n) {
    s2 = Identity(s)
    w2 = Identity(w)
    m = SequenceMap<body = f (float e, float[3] v) => (float[3] r) {
        e2 = Identity(e)
        r = Mul(e2, v)
    }>(s2, w2)
    t = Identity(m)
    c = ConcatFromSequence<axis = 0, new_axis = 1>(s2)
    n = ReduceSum<keepdims = 0>(c)
}""")
RELAXED_DIMS = _model("""g (seq(float) s, float[3] w) => (seq(float[?]) t, float n) {
    t = SequenceMap<body = f (float e, float[3] v) => (float[?] r) {
        r = Mul(e, v)
    }>(s, w)
    c = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    n = ReduceSum<keepdims = 0>(c)
}""")
WRONG = _model("""g (seq(float) s, float[3] w) => (seq(float[3]) t, float n) {
    t = SequenceMap<body = f (float e, float[3] v) => (float[3] r) {
        r = Add(e, v)
    }>(s, w)
    c = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    n = ReduceSum<keepdims = 0>(c)
}""")


def _basic_optimized(model: onnx.ModelProto, tmp_path) -> onnx.ModelProto:
    """The model after onnxruntime's own basic optimizations, saved as ONNX."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return onnx.load(tmp_path / "optimized.onnx")


def test_equivalent_rewrites_of_a_sequence_map_are_accepted(tmp_path):
    for candidate in (SEQUENCE_MAP, WITH_IDENTITIES, RELAXED_DIMS):
        report = verify(SEQUENCE_MAP, candidate)
        assert report.equivalent, report.failures()
        # an empty sequence fails ConcatFromSequence in both; the others compare
        for trial in report.trials:
            assert trial.status == ("both failed" if "sequences of 0" in trial.plan else "ok")
        assert report.trials[2].status == "both failed"
    optimized = _basic_optimized(SEQUENCE_MAP, tmp_path)
    report = verify(SEQUENCE_MAP, optimized, trials=5)
    assert report.equivalent, report.failures()


def test_a_changed_sequence_map_body_is_caught():
    report = verify(SEQUENCE_MAP, WRONG)
    assert not report.equivalent
    assert report.failures()[0].startswith("trial 0 (sequences of 3, typical values), output 't'")
    assert "values differ" in report.failures()[0]
