"""bench.torch_portability on the fixtures whose OpenVINO runs a workaround or a tolerance made
good: every data set runs and matches PyTorch's stored outputs. (The bench runs every fixture;
the suite runs these few.)"""

from __future__ import annotations

import pytest

pytest.importorskip("openvino", reason="the OpenVINO oracle: pip install openvino")

import numpy as np
import onnx

from bench.portability import lower_for, run_model
from bench.torch_portability import ROOT, FixtureOutcome, evaluate_sets, fixtures

CASES = {case.name: case for case in fixtures()}


def test_every_fixture_set_is_collected():
    sets = {name.split("/")[0] for name in CASES}
    assert {"torch", "torch_fresh", "torch_newcomer", "torch_wild", "torch_dynamo"} <= sets
    assert all(case.data_sets for case in CASES.values())


@pytest.mark.parametrize(
    "name",
    [
        "torch_fresh/ddim_intermediates",  # zero steps: the kept rows counted from the mask
        "torch_newcomer/half_cache",  # float16 values, computed in float32 by OpenVINO
        "torch_novel/yolov5_nms_per_image",  # a product of dims multiplied, not ReduceProd
    ],
)
def test_the_fixture_runs_and_matches_in_openvino(name):
    case = CASES[name]
    outcome = evaluate_sets(case, "openvino")
    sets = len(case.data_sets)
    assert outcome == FixtureOutcome(sets, sets, sets), outcome


def test_a_float16_fixture_is_compared_with_a_float16_tolerance():
    assert CASES["torch_newcomer/half_cache"].rtol == 1e-3
    assert CASES["torch_fresh/ddim_intermediates"].rtol == 1e-4


def test_a_fault_is_reported_in_one_line_without_source_locations():
    outcome = evaluate_sets(CASES["torch_newcomer/bracket_stack"], "openvino")
    if not outcome.failure:
        pytest.skip("OpenVINO now runs bracket_stack: update docs/portability.md")
    assert outcome.failure.startswith("run: ") and "Exception from" not in outcome.failure
    assert "\n" not in outcome.failure and len(outcome.failure) <= 170
    assert outcome.ran < outcome.sets


def test_segments_of_negative_length_give_no_rows_in_openvino():
    """detr_permutation_idx gathers, per image, `counts[b]` positions from a running start
    (`torch.arange(start, start + counts[b])`); a negative count gives none. OpenVINO 2026.4.1
    runs such a Range backwards (tests/targets/test_runtimes.py); lowered for it, the Range's
    limit is clamped and the rows match onnxruntime's for the original."""
    path = ROOT / "tests/fixtures/torch_novel/detr_permutation_idx/model.onnx"
    model = onnx.load(path)
    rng = np.random.default_rng(0)
    feeds = {
        "logits": rng.standard_normal((5, 6, 5)).astype(np.float32),
        "src": np.array([0, 0, 0, 0, 1]),
        "tgt": np.array([0, 0, 0, 0, 0]),
        "counts": np.array([3, -1, 0, 3, 0]),
    }
    (want,) = run_model("onnxruntime", model, feeds)
    assert want.shape == (6,)  # 3 + 0 + 0 + 3 + 0 rows
    (got,) = run_model("openvino", lower_for(model, "openvino"), feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
