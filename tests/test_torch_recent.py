"""List code transcribed from public model code no other set used, a fifth such set
(tests/fixtures/torch_recent, made by tools/export_torch_recent_fixtures.py), exported to measure
the forms on programs nobody tuned them for: a residual vector quantizer's codes appended until a
run-time count (Encodec), timestamp rules reading a token list from its end (Whisper), beam
hypotheses deleted at the worst score's position (transformers' BeamHypotheses), two diffusion
schedulers' histories of model outputs (diffusers' PNDM and LMS), a tracker's lists of tracks
joined, subtracted and de-duplicated (ByteTrack), a draft accepted token by token until the first
mismatch (speculative decoding), two-stage proposals per level (DINO), a list of lists of per-level
maps regrouped per image (mmdetection's levels_to_images), keypoint peaks per part and limbs read
from them (OpenPose), per-layer hidden states and attentions with the first layer's relative bias
(T5), a backbone's selected stages returned as a list (ConvNeXt), relative lengths undone into a
returned list (SpeechBrain), and per-class greedy suppression (torchvision's batched NMS).

Every export runs under onnxruntime as exported and matches what PyTorch computed; each lowers
for the default target to no sequence operator (but the list a sequence-typed output is made of),
and for onnxruntime with a reason for every sequence operator it keeps; the lowered models match
the stored outputs on every data set (the later ones are edge cases: one element, an empty list,
a loop that runs once or never).
"""

from __future__ import annotations

import pathlib

import onnx
import onnxruntime as ort
import pytest
from support import (
    SEQUENCE_OPS,
    assert_export_lowers_like_stored,
    assert_runs_like_stored,
    export_cases,
    op_counts,
)

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_recent"
CASES = export_cases(ROOT)
# onnxruntime 1.20 (the oldest supported) fails to run this export as exported on its data set
# of one box (a GatherND of the empty rest of the NMS order: "last dimension of indices must not
# be larger than rank of input tensor"); 1.32 runs it, and both run its lowerings.
OLD_ORT_FAILS_EXPORT = {"torchvision_batched_nms_vanilla"}
OLD_ORT = tuple(int(v) for v in ort.__version__.split(".")[:2]) < (1, 21)


def _as_exported(case: str) -> object:
    if case in OLD_ORT_FAILS_EXPORT:
        mark = pytest.mark.skipif(OLD_ORT, reason="onnxruntime 1.20 fails to run the export")
        return pytest.param(case, marks=mark)
    return case


def test_every_export_the_script_makes_is_here():
    assert (
        sorted(
            [
                "bytetrack_stracks",
                "convnext_out_indices",
                "diffusers_lms_derivatives",
                "diffusers_pndm_plms",
                "dino_encoder_proposals",
                "encodec_residual_vq",
                "hf_beam_hypotheses_add",
                "mmdet_levels_to_images",
                "openpose_peaks",
                "speculative_greedy_accept",
                "speechbrain_undo_padding",
                "t5_relative_bias_layers",
                "torchvision_batched_nms_vanilla",
                "whisper_timestamp_rules",
            ]
        )
        == CASES
    )


@pytest.mark.parametrize("case", [_as_exported(c) for c in CASES])
def test_the_export_keeps_sequence_operators_and_runs_as_exported(case):
    model = onnx.load(ROOT / case / "model.onnx")
    assert SEQUENCE_OPS & set(op_counts(model)), case
    assert_runs_like_stored(model, ROOT / case, model)


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
@pytest.mark.parametrize("case", CASES)
def test_recent_export_lowers_and_matches_pytorch(case, target):
    assert_export_lowers_like_stored(ROOT / case, target)
