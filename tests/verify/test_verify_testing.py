"""`seqlower.testing.assert_equivalent`: passes quietly, fails with a message worth reading."""

from __future__ import annotations

import onnx
import pytest

from seqlower.testing import assert_equivalent

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'
ADD = onnx.parser.parse_model(
    HEADER + "g (float[3] x, float[3] y) => (float[3] z) { z = Add(x, y) }"
)
SUB = onnx.parser.parse_model(
    HEADER + "g (float[3] x, float[3] y) => (float[3] z) { z = Sub(x, y) }"
)
# valid as written (the checker cannot see the Reshape's sizes), fails when run
BROKEN = onnx.parser.parse_model(
    HEADER
    + """g (float[3] x, float[3] y) => (float[3] z) {
    given = Constant<value = int32[2] {2, 2}>()
    shape = Cast<to = 7>(given)
    r = Reshape(x, shape)
    z = Add(r, y)
}"""
)


def test_equivalent_models_pass_and_return_the_report():
    report = assert_equivalent(ADD, ADD, trials=2, seed=3)
    assert report.equivalent and len(report.trials) == 3  # 2 generated, 1 edge case (x == y)
    assert report.trials[2].plan == "edge case: 'y' equal to 'x'"


def test_message_names_output_trial_and_errors():
    with pytest.raises(AssertionError) as caught:
        assert_equivalent(ADD, SUB, trials=2)
    message = str(caught.value)
    assert message.startswith("the candidate is not equivalent to the original:\n")
    assert "  - trial 0 (typical values), output 'z': values differ (max abs err " in message
    assert "max rel err " in message
    assert "trial 1 (typical values), output 'z'" in message


def test_message_names_the_exception():
    with pytest.raises(
        AssertionError,
        match=r"trial 0 \(typical values\): only the candidate failed: .*ONNXRuntimeError.*",
    ):
        assert_equivalent(ADD, BROKEN, trials=1, edges=False)


def test_runtimes_are_passed_through():
    pytest.importorskip("tract", reason="the test extra installs tract")
    report = assert_equivalent(ADD, ADD, trials=1, runtimes=["tract"], edges=False)
    assert [trial.runtime for trial in report.trials] == ["tract"]
    with pytest.raises(
        AssertionError, match=r"trial 0 \(typical values; tract\), output 'z': values differ"
    ):
        assert_equivalent(ADD, SUB, trials=1, runtimes=["tract"], edges=False)


ONLY_SIX = onnx.parser.parse_model(
    HEADER
    + """g (float[N] x) => (float[2, 3] y) {
    shape = Constant<value = int64[2] {2, 3}>()
    y = Reshape(x, shape)
}"""
)


def test_too_few_compared_trials_fail_as_inconclusive():
    with pytest.raises(AssertionError, match=r"^inconclusive: too few trials ran both models:\n"):
        assert_equivalent(ONLY_SIX, ONLY_SIX)
    report = assert_equivalent(ONLY_SIX, ONLY_SIX, dims={"N": 6}, time_budget=None, edges=False)
    assert report.compared == 16


def test_strict_coverage_and_time_budget_are_passed_through():
    with pytest.raises(ValueError, match="time budget"):
        assert_equivalent(ADD, ADD, time_budget=-1)
    report = assert_equivalent(ADD, ADD, strict_coverage=True, time_budget=0)
    assert len(report.trials) == 1 and report.settings["strict_coverage"] is True
