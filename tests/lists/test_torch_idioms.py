"""List idioms transcribed from popular model code, exported with PyTorch's TorchScript exporter
(tests/fixtures/torch_idioms, made by tools/export_torch_idiom_fixtures.py): SSD's multibox
head, per-image detection post-processing, padding a packed batch of variable-length
sequences, mean pooling over each sequence's real tokens, a greedy decoder loop, CTC greedy
decoding. Each lowers
to no sequence operator and computes what PyTorch computed on every stored input set, in
onnxruntime and, where installed, in the runtimes the README says run it."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from support import export_cases, lower, reasons, run_ort, sequence_op_counts, stored_data_sets

ROOT = pathlib.Path(__file__).parent.parent / "fixtures" / "torch_idioms"
CASES = export_cases(ROOT)


def _assert_matches(got: list[np.ndarray], want: list[np.ndarray], where: str) -> None:
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, f"{where} output {i}: {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{where} output {i}")


def test_the_fixtures_are_there():
    assert CASES == [
        "ctc_greedy_collapse",
        "detection_postprocess",
        "greedy_decode",
        "masked_mean_pool",
        "pad_batch",
        "ssd_multibox",
    ]


@pytest.mark.parametrize("case", CASES)
def test_an_idiom_lowers_to_tensors_and_matches_pytorch(case):
    model = onnx.load(ROOT / case / "model.onnx")
    assert sum(sequence_op_counts(model).values()) > 0
    lowered, report = lower(model)
    assert sequence_op_counts(lowered) == {}, reasons(report)
    onnx.checker.check_model(lowered, full_check=True)
    for name, feeds, want in stored_data_sets(ROOT / case, model):
        _assert_matches(run_ort(lowered, feeds), want, f"{case} {name}")


def test_the_decoder_loop_keeps_its_shapes_and_its_tokens_are_one_stacked_tensor():
    """`h = tanh(cell(embed(tokens[-1])) + h)`; `tokens.append(argmax)`: assumed and checked,
    h keeps [1, 5] and every token is [1] in every iteration, so the body declares h's shape
    (OpenVINO cannot convert the ArgMax over axis -1 of a tensor of unknown rank) and the
    tokens are one stacked tensor, read with a Gather (OpenVINO fails on the ragged form's
    read in this loop: tests/targets/test_runtimes.py)."""
    model = onnx.load(ROOT / "greedy_decode" / "model.onnx")
    lowered, _ = lower(model)
    (loop,) = [n for n in lowered.graph.node if n.op_type == "Loop"]
    body = loop.attribute[0].g
    hidden = body.input[2]
    assert [d.dim_value for d in hidden.type.tensor_type.shape.dim] == [1, 5]
    assert "CumSum" not in {n.op_type for n in body.node}  # no table of sizes
    assert len(loop.input) == 2 + 3  # h, the counter, the tokens: no second tensor for them


@pytest.mark.parametrize(
    ("case", "runtime"),
    [
        ("ctc_greedy_collapse", "openvino"),
        ("detection_postprocess", "openvino"),
        ("greedy_decode", "openvino"),
        ("masked_mean_pool", "openvino"),
        ("pad_batch", "openvino"),
        ("ssd_multibox", "openvino"),
        ("ssd_multibox", "tract"),
    ],
)
def test_an_idiom_lowered_for_a_runtime_runs_there(case, runtime):
    pytest.importorskip(runtime, reason=f"pip install {runtime}")
    from seqlower.verification.runtimes import run_in_runtime

    model = onnx.load(ROOT / case / "model.onnx")
    lowered, report = lower(model, target=runtime)
    assert sequence_op_counts(lowered) == {}, reasons(report)
    for name, feeds, want in stored_data_sets(ROOT / case, model):
        _assert_matches(run_in_runtime(runtime, lowered, feeds), want, f"{case} {name}")
