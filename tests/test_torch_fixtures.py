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
    assert_close_to_stored,
    lower,
    run_ort,
    sequence_op_counts,
    stored_data_sets,
)

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch"
CASES = sorted(p.name for p in ROOT.iterdir() if (p / "model.onnx").is_file())

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

    for data_set, inputs, expected in stored_data_sets(ROOT / case, model):
        actual = run_ort(lowered, inputs)
        for value, got, want in zip(model.graph.output, actual, expected):
            assert_close_to_stored(got, want, f"{case}/{data_set}/{value.name}")

    kept, why = KEEPS_SEQUENCE_OPS.get(case, ({}, ""))
    assert sequence_op_counts(lowered) == kept
    assert report.sequence_ops_after == kept
    for op in report.remaining:
        assert op.reason and op.reason != "no rule applies", op
    if kept:
        assert any(why in "; ".join(op.reasons) for op in report.remaining), report.to_json()
