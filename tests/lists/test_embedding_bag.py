"""nn.EmbeddingBag exported by torch's default exporter (dynamo): a `while` loop over the bags
appends each bag's reduced row to a sequence. Every appended row has one shape (a reduction of a
slice whose length varies), so the loop takes the scan-output form, not the tensor form of lists.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import pytest
from support import assert_outputs_equal, lower, run_ort, sequence_op_count

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "torch_dynamo"
BAGS = [
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 4]),
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 3, 7]),  # an empty bag
    ([7], [0]),
    ([3, 3, 3, 3, 3], [0, 1, 2, 3, 4]),
]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_loop_becomes_a_scan_output(mode):
    model = onnx.load(FIXTURES / f"embedding_bag_{mode}.onnx")
    lowered, report = lower(model, target="generic")
    assert sequence_op_count(lowered) == 0
    assert "loop-append-to-scan" in report.rules_fired
    assert "tensor-list" not in report.rules_fired
    weight = next(
        onnx.numpy_helper.to_array(t) for t in model.graph.initializer if "weight" in t.name
    )
    for indices, offsets in BAGS:
        feeds = {"indices": np.array(indices, np.int64), "offsets": np.array(offsets, np.int64)}
        want = run_ort(model, feeds)
        got = run_ort(lowered, feeds)
        assert_outputs_equal(want, got)
        ends = [*offsets[1:], len(indices)]
        for row, start, end in zip(got[0], offsets, ends):
            rows = weight[indices[start:end]]
            if not len(rows):
                expected = np.zeros(weight.shape[1], np.float32)
            else:
                expected = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
            np.testing.assert_allclose(row, expected, rtol=1e-6, atol=1e-6)
