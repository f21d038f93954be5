"""insert-at-runtime-position / erase-at-runtime-position: emitted form, refusals, and equality
with the original under onnxruntime for every position, including the ones that must fail."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import parser

import seqlower
from seqlower.ops import SEQUENCE_OPS

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2] a, float[2] b, float[2] c, float[2] t, int64 p, int32 q)
    => (float[4,2] y, float[2,2] z) {
  s = SequenceConstruct(a, b, c)
  inserted = SequenceInsert(s, t, p)
  erased = SequenceErase(inserted, q)
  y = ConcatFromSequence<axis=0, new_axis=1>(inserted)
  twice = SequenceErase(erased, q)
  z = ConcatFromSequence<axis=0, new_axis=1>(twice)
}"""


def _run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray] | None:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        return session.run(None, feeds)
    except Exception:  # the spec makes an out-of-range position a run-time error
        return None


@pytest.fixture(scope="module")
def models() -> tuple[onnx.ModelProto, onnx.ModelProto, seqlower.Report]:
    original = parser.parse_model(MODEL)
    lowered, report = seqlower.optimize(original)
    proto = ir.to_proto(lowered)
    onnx.checker.check_model(proto, full_check=True)
    return original, proto, report


def test_emits_where_selects_and_no_sequence_ops(models) -> None:
    _, lowered, report = models
    ops = [node.op_type for node in lowered.graph.node]
    assert not SEQUENCE_OPS & set(ops)
    assert "Where" in ops and "Gather" in ops
    assert report.rules_fired["insert-at-runtime-position"] == 1
    assert report.rules_fired["erase-at-runtime-position"] == 2


@pytest.mark.parametrize("p", range(-5, 6))
def test_same_results_and_same_failures_for_every_position(models, p: int) -> None:
    original, lowered, _ = models
    rng = np.random.default_rng(p + 10)
    feeds = {k: rng.standard_normal(2).astype(np.float32) for k in "abct"}
    for q in range(-5, 5):
        feeds.update(p=np.array(p, np.int64), q=np.array(q, np.int32))
        expected, actual = _run(original, feeds), _run(lowered, feeds)
        assert (expected is None) == (actual is None), (p, q)
        if expected is not None:
            for want, got in zip(expected, actual, strict=True):
                np.testing.assert_array_equal(got, want)


def test_refuses_elements_of_different_shapes() -> None:
    model = parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] a, float[3] b, int64 p) => (float[?] y) {
      s = SequenceConstruct(a, b)
      e = SequenceErase(s, p)
      y = ConcatFromSequence<axis=0>(e)
    }""")
    _, report = seqlower.optimize(model)
    reasons = " ".join(
        r for op in report.remaining if op.op_type == "SequenceErase" for r in op.reasons
    )
    assert "do not share one static shape" in reasons


def test_refuses_an_erase_whose_result_is_empty() -> None:
    model = parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] a, int64 p) => (seq(float[2]) e) {
      s = SequenceConstruct(a)
      e = SequenceErase(s, p)
    }""")
    lowered, report = seqlower.optimize(model)
    reasons = " ".join(
        r for op in report.remaining if op.op_type == "SequenceErase" for r in op.reasons
    )
    assert "nothing would check the position" in reasons
    proto = ir.to_proto(lowered)
    assert _run(proto, {"a": np.ones(2, np.float32), "p": np.array(3)}) is None
    assert _run(proto, {"a": np.ones(2, np.float32), "p": np.array(-1)}) == [[]]
