"""List code transcribed from public model code no other set used, a sixth such set
(tests/fixtures/torch_holdout, made by tools/export_torch_holdout_fixtures.py), exported to measure
the forms on programs nobody tuned them for: k-means centres collected per iteration
(kmeans_pytorch), a multi-period discriminator's feature maps and the feature-matching loss over
them (HiFi-GAN), durations expanded per phoneme and padded (FastSpeech 2's length regulator),
codebooks interleaved with delays and read back (MusicGen's delay pattern), a video's memory bank
read at run-time frame positions (SAM 2), a selective scan's outputs appended per step (Mamba),
per-level flattening with running start indices and a decoder loop that breaks at its evaluation
layer (RT-DETR), an image pyramid whose scales a while loop picks (MTCNN), trackers popped while
walked from the end (SORT), a matching cascade over track ages (Deep SORT), prefix beam search
with lists for its dicts (CTC), and image features spliced between text pieces (LLaVA).

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
    CHECKER_REJECTS_EXPORT,
    SEQUENCE_OPS,
    assert_export_lowers_like_stored,
    assert_runs_like_stored,
    export_cases,
    op_counts,
)

import seqlower

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_holdout"
CASES = export_cases(ROOT)
# onnxruntime 1.20 (the oldest supported) fails to load this export as exported: it has no
# SplitToSequence kernel for the boolean attention mask the export splits into rows ("Could not
# find an implementation for SplitToSequence(11)"); 1.32 runs it, and both run its lowerings.
OLD_ORT_FAILS_EXPORT = {"llava_image_splice"}
OLD_ORT = tuple(int(v) for v in ort.__version__.split(".")[:2]) < (1, 21)


# The export of the prefix beam search declares its output `score` (a Loop's result) with no
# shape: the ONNX checker rejects the model as it comes from the exporter ("Field 'shape' of
# 'type' is required but missing"), onnxruntime runs it, and seqlower lowers it and declares the
# rank it proves (tests/support.py lists such exports once)
SHAPELESS = {case for folder, case in CHECKER_REJECTS_EXPORT if folder == "torch_holdout"}


def _as_exported(case: str) -> object:
    if case in OLD_ORT_FAILS_EXPORT:
        mark = pytest.mark.skipif(OLD_ORT, reason="onnxruntime 1.20 fails to run the export")
        return pytest.param(case, marks=mark)
    return case


def test_every_export_the_script_makes_is_here():
    assert (
        sorted(
            [
                "ctc_prefix_beam_search",
                "deepsort_matching_cascade",
                "fastspeech2_length_regulator",
                "hifigan_period_feature_loss",
                "kmeans_centres",
                "llava_image_splice",
                "mamba_selective_scan_ref",
                "mtcnn_pyramid",
                "musicgen_delay_pattern",
                "rtdetr_encoder_decoder",
                "sam2_memory_bank",
                "sort_update",
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
def test_holdout_export_lowers_and_matches_pytorch(case, target):
    assert_export_lowers_like_stored(ROOT / case, target)


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
@pytest.mark.parametrize("case", sorted(SHAPELESS))
def test_an_output_declared_without_shape_gets_the_rank_seqlower_proves(case, target):
    model = onnx.load(ROOT / case / "model.onnx")
    (score,) = [o for o in model.graph.output if o.name == "score"]
    assert not score.type.tensor_type.HasField("shape")
    with pytest.raises(onnx.checker.ValidationError, match="Field 'shape' of 'type'"):
        onnx.checker.check_model(model)
    lowered, _ = seqlower.optimize(model, target=target)
    onnx.checker.check_model(lowered, full_check=True)
    (score,) = [o for o in lowered.graph.output if o.name == "score"]
    assert score.type.tensor_type.HasField("shape")
    assert len(score.type.tensor_type.shape.dim) == 0  # a scalar, as PyTorch returns it
