"""List code transcribed from public model code no other set used (tests/fixtures/torch_novel,
made by tools/export_torch_novel_fixtures.py), exported to measure the forms on programs nobody
tuned them for: a decoder's per-layer key/value cache assigned by layer (whisper), per-image
non-maximum suppression written into a list at a run-time position (yolov5), byte-pair merges in
a while loop (minbpe), graph pooling levels kept for the way back up (PyG's GraphUNet), padding
images of different sizes into one batch (detectron2), unpadding a batch into a packed list,
banned n-grams per hypothesis (fairseq/transformers), stacked edge convolutions (DGCNN), beam
search's finalized hypotheses counted per sentence (fairseq), a U-Net decoder's reversed
features (segmentation_models.pytorch), per-image detection post-processing (detectron2's
fast_rcnn_inference), targets regrouped per level (mmdetection), per-level grids (YOLOX) and
reference points (Deformable DETR), matched pairs joined by image (DETR), pieces cut from a
flat batch and left-padded (fairseq's collate_tokens), rays rendered chunk by chunk (NeRF), and
two lists returned as sequence-typed outputs: a backbone's chosen stages (timm's
forward_intermediates) and one mask per image at its own size (segment-anything).

Every export runs under onnxruntime as exported and matches what PyTorch computed; each lowers
for the default target to no sequence operator at all (but the list a sequence-typed output
returns, the interface), and for onnxruntime with a reason for every sequence operator it
keeps; the lowered models match the stored outputs on every data set (the later ones are edge
cases: one element, an empty list, a loop that runs once or never).
"""

from __future__ import annotations

import pathlib

import onnx
import pytest
from support import (
    SEQUENCE_OPS,
    assert_export_lowers_like_stored,
    assert_runs_like_stored,
    export_cases,
    op_counts,
)

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_novel"
CASES = export_cases(ROOT)


def test_every_export_the_script_makes_is_here():
    assert (
        sorted(
            [
                "collate_left_pad",
                "deformable_reference_points",
                "detectron2_image_list",
                "detr_permutation_idx",
                "dgcnn_edge_convs",
                "fairseq_finalized",
                "fast_rcnn_inference",
                "graph_unet",
                "images_to_levels",
                "nerf_batchify_rays",
                "minbpe_merge",
                "no_repeat_ngram",
                "sam_postprocess_masks",
                "smp_unet_decoder",
                "timm_forward_intermediates",
                "unpad_sequence",
                "whisper_kv_cache",
                "yolov5_nms_per_image",
                "yolox_decode",
            ]
        )
        == CASES
    )


@pytest.mark.parametrize("case", CASES)
def test_the_export_keeps_sequence_operators_and_runs_as_exported(case):
    model = onnx.load(ROOT / case / "model.onnx")
    assert SEQUENCE_OPS & set(op_counts(model)), case
    assert_runs_like_stored(model, ROOT / case, model)


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
@pytest.mark.parametrize("case", CASES)
def test_novel_export_lowers_and_matches_pytorch(case, target):
    assert_export_lowers_like_stored(ROOT / case, target)
