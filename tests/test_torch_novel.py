"""List code transcribed from public model code no other set used (tests/fixtures/torch_novel,
made by tools/export_torch_novel_fixtures.py), exported to measure the forms on programs nobody
tuned them for: a decoder's per-layer key/value cache assigned by layer (whisper), per-image
non-maximum suppression written into a list at a run-time position (yolov5), byte-pair merges in
a while loop (minbpe), graph pooling levels kept for the way back up (PyG's GraphUNet), padding
images of different sizes into one batch (detectron2), unpadding a batch into a packed list,
banned n-grams per hypothesis (fairseq/transformers), and stacked edge convolutions (DGCNN).

Every export runs under onnxruntime as exported and matches what PyTorch computed; each lowers
for the default target to no sequence operator at all, and for onnxruntime with a reason for
every sequence operator it keeps; the lowered models match the stored outputs on every data set
(the later ones are edge cases: one element, an empty list, a loop that runs once or never).
"""

from __future__ import annotations

import pathlib

import onnx
import pytest
from support import (
    SEQUENCE_OPS,
    assert_every_leftover_has_a_reason,
    assert_runs_like_stored,
    export_cases,
    lower,
    op_counts,
)

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_novel"
CASES = export_cases(ROOT)


def test_every_export_the_script_makes_is_here():
    assert (
        sorted(
            [
                "detectron2_image_list",
                "dgcnn_edge_convs",
                "graph_unet",
                "minbpe_merge",
                "no_repeat_ngram",
                "unpad_sequence",
                "whisper_kv_cache",
                "yolov5_nms_per_image",
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
    model = onnx.load(ROOT / case / "model.onnx")
    lowered, report = lower(model, target=target)
    if target == "generic":
        assert not SEQUENCE_OPS & set(op_counts(lowered)), report.remaining
    assert_every_leftover_has_a_reason(report)
    assert_runs_like_stored(model, ROOT / case, lowered)
