"""Running: errors in one or both models, models onnxruntime cannot run, and reference mode."""

from __future__ import annotations

import json

import onnx
import pytest

from seqlower.errors import ModelInputError
from seqlower.verification import verify

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'


def _model(text: str, header: str = HEADER) -> onnx.ModelProto:
    return onnx.parser.parse_model(header + text)


NEG = _model("g (float[4] x) => (float[4] y) { y = Neg(x) }")
NEG_BROKEN = _model("""g (float[4] x) => (float[4] y) {
    shape = Constant<value = int64[1] {7}>()
    r = Reshape(x, shape)
    y = Neg(r)
}""")
JOIN = _model("g (seq(float[2]) s) => (float[K] y) { y = ConcatFromSequence<axis = 0>(s) }")
JOIN_OTHER = _model("""g (seq(float[2]) s) => (float[K] y) {
    c = ConcatFromSequence<axis = 0>(s)
    y = Identity(c)
}""")


def test_an_error_in_one_model_is_a_difference():
    report = verify(NEG, NEG_BROKEN, trials=2)
    assert not report.equivalent
    trial = report.trials[0]
    assert trial.status == "candidate failed"
    assert "Reshape" in trial.candidate_error
    assert trial.outputs[0].verdict == "candidate failed"
    # the same error in both trials is said once
    assert report.failures()[0].startswith("trials 0-1: only the candidate failed: ")
    assert len(report.failures()) == 1
    assert verify(NEG_BROKEN, NEG, trials=1).trials[0].status == "original failed"


def test_both_failed_is_reported_and_tolerated_unless_strict():
    report = verify(JOIN, JOIN_OTHER, trials=3)  # trial 2 feeds an empty sequence: both raise
    assert [trial.status for trial in report.trials] == ["ok", "ok", "both failed"]
    assert report.trials[2].original_error and report.trials[2].candidate_error
    assert report.equivalent and not report.inconclusive
    assert report.compared == 2 and report.required == 2
    strict = verify(JOIN, JOIN_OTHER, trials=3, strict_errors=True)
    assert not strict.equivalent
    assert strict.failures()[0].startswith("trial 2 (sequences of 0, typical values): both failed")


def test_nothing_compared_is_not_equivalent():
    report = verify(JOIN, JOIN_OTHER, inputs={"s": []})
    assert not report.equivalent and not report
    assert report.inconclusive
    assert report.failures()[-1] == "no trial ran both models to completion: nothing was compared"


def test_a_model_onnxruntime_cannot_load_is_reported_not_crashed_on():
    custom = _model(
        "g (float[4] x) => (float[4] y) { y = custom.Foo(x) }",
        '<ir_version: 9, opset_import: ["": 18, "custom": 1]>\n',
    )
    report = verify(NEG, custom, trials=1)
    assert report.trials[0].status == "candidate failed"
    assert report.trials[0].candidate_error.startswith("cannot load the model: ")


def test_reference_mode_agrees_on_plain_models():
    report = verify(NEG, NEG, trials=2, reference=True)
    assert report.equivalent
    assert all(trial.outputs[0].reference == "agrees" for trial in report.trials)


def test_reference_mode_shows_a_disagreement_of_the_runtimes():
    # onnxruntime squeezes the axis for a scalar split of 1 with keepdims=0; the spec does not.
    unbind = _model("""g (float[3, 2] x) => (seq(float) s) {
        one = Constant<value = int64 {1}>()
        s = SplitToSequence<axis = 0, keepdims = 0>(x, one)
    }""")
    report = verify(unbind, unbind, trials=1, reference=True)
    assert report.equivalent  # the rewrite is not to blame
    note = report.trials[0].outputs[0].reference
    assert note.startswith("disagrees: shape differs: element 0: expected [1, 2], got [2]")


def test_reference_failure_is_reported():
    gelu = _model(
        "g (float[4] x) => (float[4] y) { y = com.microsoft.Gelu(x) }",
        '<ir_version: 9, opset_import: ["": 18, "com.microsoft": 1]>\n',
    )
    report = verify(gelu, gelu, trials=1, reference=True)
    assert report.equivalent
    assert report.trials[0].outputs[0].reference.startswith("reference failed: ")
    assert "Gelu" in report.trials[0].reference_error


def test_report_to_dict_is_json():
    report = verify(NEG, NEG_BROKEN, trials=1)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["equivalent"] is False
    assert data["settings"]["tolerances"]["float32"] == {"rtol": 1e-5, "atol": 1e-6}
    assert data["trials"][0]["status"] == "candidate failed"
    assert data["trials"][0]["inputs"] == {"x": "float32 [4]"}
    assert data["trials"][0]["outputs"][0]["name"] == "y"


def test_unreadable_models_raise_model_input_error(tmp_path):
    with pytest.raises(ModelInputError, match="no such file"):
        verify(NEG, tmp_path / "missing.onnx")
    with pytest.raises(ValueError, match="trials"):
        verify(NEG, NEG, trials=0)


RANDOM = _model("g (float[4] x) => (float[4] y) { y = RandomNormalLike(x) }")


def test_outputs_that_change_from_run_to_run_prove_nothing():
    # every run draws new numbers: each trial differs, and differs again when rerun
    report = verify(RANDOM, RANDOM, trials=4)
    assert {trial.status for trial in report.trials} == {"unstable"}
    assert {trial.outputs[0].verdict for trial in report.trials} == {"unstable"}
    assert report.warnings() == [
        "trials 0-3: a model gave other outputs when run again on the same inputs (the runtime "
        "read memory it never wrote?): not compared"
    ]
    assert report.inconclusive and not report.equivalent


STEADY = _model("g (float[4] x) => (float[4] y) { y = Neg(x) }")


def test_a_candidate_that_changes_from_run_to_run_differs_from_a_steady_original():
    """Only the candidate gives other outputs when run again (a runtime reading memory it never
    wrote, say): the difference holds, it is not put down to the runtime."""
    report = verify(STEADY, RANDOM, trials=3)
    assert not report.equivalent and not report.inconclusive
    assert "differ" in {trial.status for trial in report.trials}
    assert not report.warnings()
