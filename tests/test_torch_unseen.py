"""List code transcribed from public model code the tensor forms were not tuned for
(tests/fixtures/torch_unseen, made by tools/export_torch_unseen_fixtures.py; the bench times
them as a set of their own).

Each lowers for the default target and for onnxruntime, passes the ONNX checker (full_check),
loads in onnxruntime and matches the outputs PyTorch computed on both stored input sets; every
sequence operator left has a reason in the report.
"""

from __future__ import annotations

import pathlib

import onnx
import pytest
from support import assert_close_to_stored, lower, run_ort, stored_data_sets

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_unseen"
CASES = sorted(p.name for p in ROOT.iterdir() if (p / "model.onnx").is_file())


# Exports that fail onnx's full check as written: an unbind (a scalar split of 1, keepdims=0) that
# the specification's reading types one rank higher than PyTorch and onnxruntime compute
FAILS_FULL_CHECK = {"kv_cache_steps": "Inferred shape and existing shape differ in rank"}


def test_the_set_holds_at_least_fifteen_exports():
    assert len(CASES) >= 15


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
@pytest.mark.parametrize("case", CASES)
def test_unseen_export_lowers_and_matches_pytorch(case, target):
    model = onnx.load(ROOT / case / "model.onnx")
    if case in FAILS_FULL_CHECK:
        with pytest.raises(onnx.shape_inference.InferenceError, match=FAILS_FULL_CHECK[case]):
            onnx.checker.check_model(model, full_check=True)
    # full_check, loads in onnxruntime: a model kept as given too (its unbind is written in
    # the form both readings agree on)
    lowered, report = lower(model, target=target)
    sets = list(stored_data_sets(ROOT / case, model))
    assert len(sets) == 2
    for data_set, inputs, expected in sets:
        actual = run_ort(lowered, inputs)
        for value, got, want in zip(model.graph.output, actual, expected, strict=True):
            assert_close_to_stored(got, want, f"{case}/{data_set}/{value.name}")
    for op in report.remaining:
        assert op.reason and op.reason != "no rule applies", op
