"""List code transcribed from public model code that no other fixture set used, exported after the
list forms were frozen (tests/fixtures/torch_wild, made by tools/export_torch_wild_fixtures.py;
`python -m bench.wild` prints their table): torchvision's anchor generator, MultiScaleRoIAlign's
per-image boxes and RetinaNet's per-level top-k, a child-sum Tree-LSTM, beam hypotheses sorted,
RNN-T greedy decoding, PointNet++ grouping, torch_geometric's unbatch, packing sequences, Swin
windows as lists, Res2Net's splits, AllenNLP's ScalarMix, a mixture of experts' dispatch, list
edits at positions from the end, lengths kept as a list of ints, and detections returned per
image (a sequence-typed output).

Each lowers for the default target to no sequence operator at all (but the list a sequence-typed
output is made of: the interface is kept), and for onnxruntime; both pass
the ONNX checker (full_check), load in onnxruntime and match the outputs PyTorch computed on every
stored data set (the later ones are edge cases: one element, an image without boxes, a level that
keeps nothing, no frame at all); every sequence operator the onnxruntime target keeps has a reason.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from support import (
    assert_export_lowers_like_stored,
    export_cases,
    lower,
    run_ort,
)

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_wild"
CASES = export_cases(ROOT)


def test_the_set_holds_at_least_fifteen_exports():
    assert len(CASES) >= 15


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
@pytest.mark.parametrize("case", CASES)
def test_wild_export_lowers_and_matches_pytorch(case, target):
    assert_export_lowers_like_stored(ROOT / case, target)


def test_sizes_that_do_not_cut_the_tensor_fail_loudly_when_lowered():
    # unbatch with no graph (every batch id negative): the split sizes are empty on 4 nodes, which
    # PyTorch and the specification refuse; onnxruntime reads the empty split as pieces of 1 and
    # runs the original, the lowered model stops with an error instead of a made-up result (the
    # counted sizes are checked by a Split of x, which fails where they do not add up)
    model = onnx.load(ROOT / "pyg_unbatch" / "model.onnx")
    lowered, _ = lower(model, target="portable")
    feeds = {"x": np.ones((4, 3), np.float32), "batch": np.full(4, -1, np.int64)}
    centred, readout = run_ort(model, feeds)
    assert centred.shape == readout.shape == (4, 3)  # four graphs of one node
    with pytest.raises(Exception, match="Cannot split using values in 'split'"):
        run_ort(lowered, feeds)
