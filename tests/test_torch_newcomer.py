"""List code written the way a newcomer writes it (tests/fixtures/torch_newcomer, made by
tools/export_torch_newcomer_fixtures.py), exported to measure the forms on programs nobody tuned
them for: list editing by position (insert at the front, assign, `del`, `pop`), `while len(out)
< n`, conditional appends, a parser's push/pop stack, greedy selection by `pop(i)`, zip over
lists of two sources, nested lists flattened, per-level pairs, an index list sorted by key, beam
bookkeeping, ragged padding, cumulative lists, a sliding token buffer, strided windows, a
feature pyramid, boolean and float16 lists, a list reversed by a loop, greedy CTC decoding per
utterance, an FPN flattened and concatenated, a decoder's key cache, per-class top-k,
attention by head group, top-p sampling, mean pooling per segment and a chunked encoder.

Every export runs under onnxruntime as exported and matches what PyTorch computed; each lowers
for the default target to no sequence operator at all, and for onnxruntime with a reason for
every sequence operator it keeps; the lowered models match the stored outputs on every data set
(the later ones are edge cases: one element, an empty list, a loop that runs once or never,
negative positions).
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

ROOT = pathlib.Path(__file__).parent / "fixtures" / "torch_newcomer"
CASES = export_cases(ROOT)


def test_the_set_holds_at_least_fifteen_exports():
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES)
def test_the_export_keeps_sequence_operators_and_runs_as_exported(case):
    model = onnx.load(ROOT / case / "model.onnx")
    assert SEQUENCE_OPS & set(op_counts(model)), case
    assert_runs_like_stored(model, ROOT / case, model)


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
@pytest.mark.parametrize("case", CASES)
def test_newcomer_export_lowers_and_matches_pytorch(case, target):
    model = onnx.load(ROOT / case / "model.onnx")
    lowered, report = lower(model, target=target)
    if target == "generic":
        assert not SEQUENCE_OPS & set(op_counts(lowered)), report.remaining
    assert_every_leftover_has_a_reason(report)
    assert_runs_like_stored(model, ROOT / case, lowered)
