"""Max and Min are folded as onnx.reference computes them (`StaticValues` computes them with
numpy, without building a reference evaluator for each node): the same content, dtype and
shape, and no answer where the reference fails."""

from __future__ import annotations

import warnings

import numpy as np
import onnx_ir as ir
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from seqlower.analysis.static_values import StaticValues

I64, I32, F32 = np.int64, np.int32, np.float32

CASES = [
    [np.array(3, I64), np.array(5, I64)],
    [np.array([1, 7, -2], I64), np.array([4, 0, -9], I64)],
    [np.array([[1], [8]], I64), np.array([2, 3, 5], I64)],  # broadcast
    [np.array([-1, 2], I32), np.array([0, 0], I32)],
    [np.array([1.5, np.nan], F32), np.array([np.nan, -2.0], F32)],
    [np.array([9, 2], I64)],  # one operand
    [np.array([1, 2], I64), np.array([5, -1], I64), np.array([3, 3], I64)],
    [np.array([1, 2], I64), np.array([2], I32), np.array([0, 4], I64)],  # numpy's promotion
    [np.array([1, 2], I64), np.array([1, 2], I32)],  # two dtypes: the reference refuses
    [np.array([1, 2, 3], I64), np.array([1, 2], I64)],  # shapes that do not broadcast
    [np.array([], I64), np.array([], I64)],
]


def _reference(op: str, arrays: list[np.ndarray]) -> np.ndarray | None:
    names = [f"a{k}" for k in range(len(arrays))]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node = helper.make_node(op, names, ["y"])
            (result,) = ReferenceEvaluator(node).run(None, dict(zip(names, arrays)))
    except Exception:
        return None
    return np.asarray(result)


def _folded(op: str, arrays: list[np.ndarray]) -> np.ndarray | None:
    """The content `StaticValues` gives `op` of `arrays`, each an initializer."""
    inputs = []
    for k, array in enumerate(arrays):
        value = ir.Value(name=f"a{k}", const_value=ir.tensor(array))
        inputs.append(value)
    graph = ir.Graph(inputs=[], outputs=[], nodes=[], opset_imports={"": 17})
    for value in inputs:
        graph.register_initializer(value)
    node = ir.node(op, inputs)
    graph.append(node)
    return StaticValues().get(node.outputs[0])


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_max_and_min_fold_as_the_reference_computes_them(op, case) -> None:
    arrays = CASES[case]
    expected = _reference(op, arrays)
    found = _folded(op, arrays)
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert found.dtype == expected.dtype and found.shape == expected.shape
    np.testing.assert_array_equal(found, expected)


def test_the_reference_is_not_built_for_max_and_min(monkeypatch) -> None:
    """The folds above do not go through onnx.reference (which the test would then compare
    with itself): an evaluator built for them fails the test."""
    import onnx.reference

    def refuse(*args, **kwargs):
        raise AssertionError("onnx.reference used")

    monkeypatch.setattr(onnx.reference, "ReferenceEvaluator", refuse)
    found = _folded("Max", [np.array([1, 7], I64), np.array([4, 0], I64)])
    np.testing.assert_array_equal(found, [4, 7])
    assert _folded("Min", [np.array([1.0, 2.0], F32)]).dtype == F32
