"""Flattened interfaces: a sequence input or output of length n is compared with the n tensors
that replace it, using the mapping the flatten pass records in the model (issue 13, item 4)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from typer.testing import CliRunner

import seqlower
from seqlower.cli.app import app
from seqlower.errors import ModelInputError
from seqlower.passes.flatten_io import FLATTENED_IO_KEY
from seqlower.verification import verify

ORIGINAL = onnx.parser.parse_model("""<ir_version: 9, opset_import: ["": 18]>
g (seq(float[2]) s, float[3, 4] x) => (float[2] t, seq(float[1, 4]) y) {
    one = Constant<value = int64 {1}>()
    t = SequenceAt(s, one)
    n = Neg(x)
    y = SplitToSequence<axis = 0>(n)
}""")


def _flattened() -> ir.Model:
    model, _ = seqlower.optimize(
        ir.from_proto(ORIGINAL), flatten_sequence_io=True, seq_lens={"s": 3}
    )
    return model


def test_the_flatten_pass_records_its_mapping_in_the_metadata():
    mapping = json.loads(_flattened().metadata_props[FLATTENED_IO_KEY])
    assert mapping == {
        "inputs": {"s": ["s_0", "s_1", "s_2"]},
        "outputs": {"y": ["y_0", "y_1", "y_2"]},
    }


def test_a_flattened_model_is_equivalent_to_its_original():
    report = verify(ORIGINAL, _flattened())
    assert report.equivalent, report.failures()
    assert {trial.status for trial in report.trials} == {"ok"}
    # every trial feeds the flattened length, and compares the gathered output as a sequence
    assert {trial.inputs["s"] for trial in report.trials} == {"seq[3] of float32 [2]"}
    assert [output.shape for output in report.trials[0].outputs] == ["[2]", "seq[3] of [1, 4]"]
    assert report.settings["flattened"] == {
        "inputs": {"s": ("s_0", "s_1", "s_2")},
        "outputs": {"y": ("y_0", "y_1", "y_2")},
    }


def _swap_outputs(model: ir.Model, first: str, second: str) -> ir.Model:
    """The candidate with the values of two flattened outputs exchanged: a real bug."""
    outputs = model.graph.outputs
    names = [value.name for value in outputs]
    i, j = names.index(first), names.index(second)
    a, b = outputs[i], outputs[j]
    a.name, b.name = "tmp", first
    a.name = second
    outputs[i], outputs[j] = b, a
    return model


def test_a_wrong_element_in_a_flattened_output_is_caught():
    report = verify(ORIGINAL, _swap_outputs(_flattened(), "y_0", "y_2"))
    assert not report.equivalent
    assert report.failures()[0].startswith(
        "trial 0 (sequences of 3, typical values), output 'y': values differ"
    )
    assert "element 0" in report.failures()[0]


def test_without_the_mapping_the_interfaces_differ():
    model = _flattened()
    del model.metadata_props[FLATTENED_IO_KEY]
    with pytest.raises(ModelInputError, match="the candidate has no input 's'"):
        verify(ORIGINAL, model, trials=1)


def test_a_broken_mapping_is_bad_input():
    model = _flattened()
    model.metadata_props[FLATTENED_IO_KEY] = '{"inputs": {"s": 3}}'
    with pytest.raises(ModelInputError, match=r"metadata 'seqlower\.flattened_io' is not a valid"):
        verify(ORIGINAL, model)


def test_supplied_inputs_must_have_the_flattened_length():
    x = np.ones((3, 4), np.float32)
    for count in (2, 4):
        elements = [np.ones(2, np.float32)] * count
        with pytest.raises(ModelInputError, match=f"input 's' has {count} elements, but the"):
            verify(ORIGINAL, _flattened(), inputs={"s": elements, "x": x})
    report = verify(
        ORIGINAL,
        _flattened(),
        inputs={"s": [np.float32([k, -k]) for k in range(3)], "x": np.ones((3, 4), np.float32)},
    )
    assert report.equivalent


def test_the_cli_optimizes_flattens_and_verifies(tmp_path):
    source, target = tmp_path / "model.onnx", tmp_path / "flat.onnx"
    onnx.save(ORIGINAL, source)
    runner = CliRunner()
    flatten = ["--flatten-sequence-io", "--seq-len", "s=3"]
    result = runner.invoke(app, ["optimize", str(source), str(target), *flatten, "--verify"])
    assert result.exit_code == 0, result.output
    assert (
        "verified: equivalent under onnxruntime (16 trials compared; sequence lengths 3)"
        in result.output
    )
    result = runner.invoke(app, ["verify", str(source), str(target)])
    assert result.exit_code == 0, result.output
    assert "equivalent (16 trials compared); NaN counts as equal to NaN" in result.output
    saved = {entry.key: entry.value for entry in onnx.load(target).metadata_props}
    assert json.loads(saved[FLATTENED_IO_KEY])["inputs"] == {"s": ["s_0", "s_1", "s_2"]}
