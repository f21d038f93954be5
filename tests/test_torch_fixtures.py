"""Real PyTorch (TorchScript exporter) models with sequence ops, from tests/fixtures/torch (see its
README for what each one does and what is surprising in the exports).

Every fixture lowers, passes the ONNX checker (full_check), loads in onnxruntime and matches the
outputs PyTorch computed on every stored input set. It ends with no sequence op, except where
KEEPS_SEQUENCE_OPS says what stays and why; the report must give a reason for each one left.
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
    sequence_op_counts,
)

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch"
CASES = export_cases(ROOT)

# Sequence ops expected after lowering, and why they stay. Every other fixture ends with none.
KEEPS_SEQUENCE_OPS: dict[str, tuple[dict[str, int], str]] = {
    # `[t + 1 for t in x.split(2, 0)]` returned as a list: the model output is a sequence (its
    # interface is kept). The Loop maps each chunk elementwise, so it is the split of x + 1
    # (loop-batch-chunks); that split stays, feeding the output, its count known at run time only.
    "return_list": (
        {"SplitToSequence": 1},
        "the split count depends on the size of dim 0",
    ),
}


def test_every_fixture_is_collected():
    assert len(CASES) == 22


@pytest.mark.parametrize("case", CASES)
def test_fixture_lowers_and_matches_pytorch(case):
    model = onnx.load(ROOT / case / "model.onnx")
    lowered, report = lower(model)  # checked with full_check and loaded in onnxruntime

    assert_runs_like_stored(model, ROOT / case, lowered, min_sets=1)

    kept, why = KEEPS_SEQUENCE_OPS.get(case, ({}, ""))
    assert sequence_op_counts(lowered) == kept
    assert report.sequence_ops_after == kept
    assert_every_leftover_has_a_reason(report)
    if kept:
        assert any(why in "; ".join(op.reasons) for op in report.remaining), report.to_json()
