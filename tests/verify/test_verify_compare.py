"""Comparison: exact for integers, bools and strings; NaN-aware tolerances for floats."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from seqlower.verification import DEFAULT_TOLERANCES, compare_values, generate_inputs, verify

NAN, INF = float("nan"), float("inf")


def _f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_nan_equals_nan_at_the_same_position_only():
    assert compare_values(_f32(1, NAN), _f32(1, NAN)).ok
    result = compare_values(_f32(1, NAN), _f32(NAN, 1))
    assert result.verdict == "values differ"
    assert result.max_abs_err == INF
    assert result.detail.startswith("2 of 2 elements differ, first at [0]")


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [((INF, -INF), (INF, -INF), True), ((INF,), (-INF,), False), ((INF,), (3e38,), False)],
)
def test_infinities_must_match_exactly(expected, actual, ok):
    assert compare_values(_f32(*expected), _f32(*actual)).ok is ok


def test_default_float_tolerances():
    assert DEFAULT_TOLERANCES[np.dtype(np.float32)].rtol == 1e-5
    assert compare_values(_f32(1.0), _f32(1.0 + 1e-6)).ok
    result = compare_values(_f32(1.0), _f32(1.001))
    assert not result.ok
    assert result.max_abs_err == pytest.approx(1e-3, rel=1e-3)
    assert result.max_rel_err == pytest.approx(1e-3, rel=1e-3)
    assert compare_values(np.float16([1.0]), np.float16([1.0009765625])).ok  # one fp16 step
    assert not compare_values(np.float64([1.0]), np.float64([1.0 + 1e-8])).ok


def test_tolerances_can_be_overridden():
    assert compare_values(_f32(1.0), _f32(1.001), rtol=1e-2).ok
    assert not compare_values(_f32(0.0), _f32(1e-6), atol=0.0).ok
    assert compare_values(_f32(0.0), _f32(1e-6)).ok


def test_integers_bools_and_strings_are_exact():
    result = compare_values(np.array([1, 5], np.int64), np.array([1, 4], np.int64))
    assert (result.verdict, result.max_abs_err) == ("values differ", 1.0)
    assert compare_values(np.array([True]), np.array([True])).ok
    assert not compare_values(np.array([True]), np.array([False])).ok
    words = np.array(["a", "b"], dtype=object)
    assert compare_values(words, np.array(["a", "b"])).ok
    result = compare_values(words, np.array(["a", "c"], dtype=object))
    assert result.verdict == "values differ" and result.max_abs_err is None
    assert "expected 'b', got 'c'" in result.detail


def test_shape_dtype_kind_and_length_must_match():
    x = np.zeros((2, 3), np.float32)
    assert compare_values(x, x.reshape(3, 2)).verdict == "shape differs"
    assert compare_values(x, x.astype(np.float64)).verdict == "dtype differs"
    assert compare_values(x, [x]).verdict == "kind differs"
    assert compare_values([x, x], [x]).verdict == "length differs"
    assert compare_values([], []).ok


def test_sequence_difference_names_the_element():
    x = np.zeros(2, np.int32)
    result = compare_values([x, x], [x, x + 3])
    assert result.verdict == "values differ"
    assert result.detail.startswith("element 1: 2 of 2 elements differ")
    assert result.max_abs_err == 3.0


SQRT = onnx.parser.parse_model(
    '<ir_version: 9, opset_import: ["": 18]> g (float[8] x) => (float[8] y) { y = Sqrt(x) }'
)
SQRT_ABS = onnx.parser.parse_model(
    '<ir_version: 9, opset_import: ["": 18]> g (float[8] x) => (float[8] y) {'
    " a = Abs(x) y = Sqrt(a) }"
)


def test_nan_outputs_through_verify():
    x = generate_inputs(ir.serde.deserialize_model(SQRT))["x"]
    assert (x < 0).any()  # so some outputs are NaN, in both models
    report = verify(SQRT, SQRT)
    assert report.equivalent
    report = verify(SQRT, SQRT_ABS, trials=1)
    assert not report.equivalent
    assert report.trials[0].outputs[0].max_abs_err == INF
