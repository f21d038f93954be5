"""The TorchScript loop forms of bench/fixtures/loop_forms (tools/export_loop_forms.py): each is
batched by loop-batch into the hand-batched floor's computation, with no Loop and no sequence op
left, and computes what the original and the floor compute."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import lower, op_counts, run_ort, sequence_op_count

from bench.loops import FORMS, LOOP_FORMS, random_feeds


@pytest.mark.parametrize("size", ["8", "dyn"])
@pytest.mark.parametrize("form", FORMS)
def test_loop_form_is_batched(form: str, size: str):
    original = onnx.load(LOOP_FORMS / f"{form}_{size}.onnx")
    floor = onnx.load(LOOP_FORMS / f"{form}_{size}_batched.onnx")
    lowered, report = lower(original)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert sequence_op_count(lowered) == 0 and "Loop" not in op_counts(lowered)
    for n in [8] if size == "8" else [1, 5]:
        inputs = random_feeds(original, n)
        (want,) = run_ort(original, inputs)
        (got,) = run_ort(lowered, inputs)
        (floor_out,) = run_ort(floor, inputs)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(floor_out, want, rtol=1e-4, atol=1e-5)
