"""List code transcribed from public model code that no earlier fixture set used, exported to
measure the forms on code nobody tuned them for (tests/fixtures/torch_fresh, made by
tools/export_torch_fresh_fixtures.py; `python -m bench.run` times them as a set of their own):
YOLOv5's detection head and YOLOv3's Darknet routes, YOLOv8's C2f, mmdetection's FPN and PAFPN,
FCOS's head and locations, detectron2's top RPN proposals, Deformable DETR's refining decoder,
Mask2Former's levels, DINOv2's intermediate layers, PyTorch's own TorchScript LSTMs (stacked,
bidirectional with a reversed list), HF transformers' DynamicCache in a decoding loop, ESPnet's
beam search and intermediate CTC, deepspeech.pytorch's greedy decoder, Tacotron 2's decoder loop,
PyG's jumping knowledge and DDIM sampling's intermediates.

Each lowers for the default target and for the portable target (every tensor's rank known) to no
sequence operator at all, and for onnxruntime; all three pass
the ONNX checker (full_check), load in onnxruntime and match the outputs PyTorch computed on every
stored data set (the later ones are edge cases: one element, one step, a loop that stops early);
every sequence operator the onnxruntime target keeps has a reason.
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

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_fresh"
CASES = export_cases(ROOT)


def test_the_set_holds_at_least_fifteen_exports():
    assert len(CASES) >= 15


def test_every_export_keeps_sequence_operators():
    for case in CASES:
        model = onnx.load(ROOT / case / "model.onnx")
        assert SEQUENCE_OPS & set(op_counts(model)), case


# Tacotron 2 appends `mel_output.squeeze(0)`, an If on dim 0 == 1 (rank 1 or 2 by the branch):
# the portable target needs it folded, which needs the loop's carried shapes that onnx's inference
# settles from 1.23 on (1.18 leaves them unknown, and the portable target keeps the lists)
ONNX_SETTLES_TACOTRON = tuple(int(p) for p in onnx.__version__.split(".")[:2]) >= (1, 23)


@pytest.mark.parametrize("target", ["generic", "portable", "onnxruntime"])
@pytest.mark.parametrize("case", CASES)
def test_fresh_export_lowers_and_matches_pytorch(case, target):
    model = onnx.load(ROOT / case / "model.onnx")
    lowered, report = lower(model, target=target)
    if (target, case) == ("portable", "tacotron2_inference") and not ONNX_SETTLES_TACOTRON:
        assert all("made by If" in op.reason for op in report.remaining), report.remaining
    elif target != "onnxruntime":
        assert not SEQUENCE_OPS & set(op_counts(lowered)), report.remaining
    assert_runs_like_stored(model, ROOT / case, lowered)
    assert_every_leftover_has_a_reason(report)
