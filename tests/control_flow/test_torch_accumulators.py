"""Real TorchScript exports of loops that grow a tensor with `torch.cat`, no Python list
(tests/fixtures/torch_accumulators, made by tools/export_torch_accumulator_fixtures.py): no
sequence operator, yet `loop-concat-to-scan` makes each accumulator a scan output. Each lowered
model passes the checker and matches what PyTorch computed on every stored input set, under
onnxruntime and, for the portability targets, under OpenVINO too."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import onnx
import pytest
from support import assert_same_outputs, export_cases, lower, op_counts, run_ort, stored_data_sets

from seqlower.verification.runtimes import run_in_runtime

ROOT = pathlib.Path(__file__).parent.parent / "fixtures" / "torch_accumulators"
CASES = export_cases(ROOT)
RULE = "loop-concat-to-scan"

# what takes each accumulator: loop-concat-to-scan makes it a scan output (then loop-batch
# batches the loop where its iterations are independent), or loop-batch takes the loop whole,
# the accumulator with it (`cat_pairs`; `growing` appends x[: i + 1], ragged pieces)
FIRED = {
    "cat_columns": {RULE: 1, "loop-batch": 1},
    "cat_pairs": {"loop-batch": 1},
    "cond_grow": {RULE: 1, "loop-batch": 1},  # its branch reads x[i], which the body reads anyway
    "growing": {"loop-batch": 1},
    "keypoints": {RULE: 2},
    "paste_masks": {RULE: 1},
    "prepend": {RULE: 1, "loop-batch": 1},
}
HAS_OPENVINO = importlib.util.find_spec("openvino") is not None


def _assert_matches(got: list[np.ndarray], want: list[np.ndarray], where: str) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{where} output {i}: {g.shape}, expected {w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=f"{where} output {i}")


def test_the_fixtures_are_there():
    assert (
        sorted(
            [
                "cat_columns",
                "cat_pairs",
                "cond_grow",
                "growing",
                "keypoints",
                "paste_masks",
                "prepend",
            ]
        )
        == CASES
    )


@pytest.mark.parametrize("target", ["generic", "openvino"])
@pytest.mark.parametrize("case", CASES)
def test_a_real_export_lowers_and_matches_pytorch(case, target):
    model = onnx.load(ROOT / case / "model.onnx")
    assert op_counts(model)["Loop"] == 1
    lowered, report = lower(model, target=target)
    loops = {name: n for name, n in report.rules_fired.items() if name in (RULE, "loop-batch")}
    assert loops == FIRED[case]
    for name, feeds, want in stored_data_sets(ROOT / case, model):
        _assert_matches(run_ort(lowered, feeds), want, f"{case} {name}")


@pytest.mark.skipif(not HAS_OPENVINO, reason="OpenVINO is not installed")
@pytest.mark.parametrize("case", CASES)
def test_openvino_runs_the_lowered_export(case):
    model = onnx.load(ROOT / case / "model.onnx")
    lowered, _ = lower(model, target="openvino")
    for name, feeds, want in stored_data_sets(ROOT / case, model):
        _assert_matches(run_in_runtime("openvino", lowered, feeds), want, f"{case} {name}")


def _no_detections(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Inputs with 0 detections: every dim named N is 0, the others as declared."""
    feeds = {}
    for value in model.graph.input:
        dims = [0 if d.dim_param else d.dim_value for d in value.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        feeds[value.name] = np.zeros(dims, dtype)
    return feeds


@pytest.mark.parametrize("case", ["paste_masks", "keypoints"])
def test_no_detections_give_empty_results_of_the_right_shape(case):
    model = onnx.load(ROOT / case / "model.onnx")
    lowered, _ = lower(model, target="openvino")
    feeds = _no_detections(model)
    outputs = assert_same_outputs(model, lowered, feeds)
    assert all(output.shape[0] == 0 for output in outputs)
    if HAS_OPENVINO:
        for got, want in zip(run_in_runtime("openvino", lowered, feeds), outputs):
            assert got.shape == want.shape


def test_inspect_names_the_rewrite_of_a_model_with_no_sequence_site():
    from typer.testing import CliRunner

    from seqlower.cli import app

    result = CliRunner().invoke(app, ["inspect", str(ROOT / "keypoints" / "model.onnx")])
    assert result.exit_code == 0, result.output
    assert "0 sequence sites (none)" in result.output
    assert f"other rewrites: {RULE} x2" in result.output
