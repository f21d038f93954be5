"""A trial where the original runs out of time is not compared: neither a difference nor an
agreement. A candidate that runs out of time where the original finished stays a failure.

The run time is set by the inputs: SLOW runs a Loop of `n` iterations (2**40 of them do not end
in seconds), FAST returns the same value without a loop. The trials are supplied inputs, so
each one's trip count is known."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
import typer
from onnx import numpy_helper
from typer.testing import CliRunner

from seqlower.cli.app import app as seqlower_app
from seqlower.cli.verify_command import verify_command
from seqlower.verification import verify
from seqlower.verification.runner import IsolatedRunner, RunOutcome
from seqlower.verification.session import original_to_compare
from seqlower.verification.trial import compare_trial

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'
SLOW = onnx.parser.parse_model(
    HEADER
    + """g (int64 n, float[2] x) => (float[2] y) {
    y = Loop(n, , x) <body = b (int64 i, bool c, float[2] v) => (bool c_out, float[2] w) {
        c_out = Identity(c)
        w = Identity(v)
    }>
}"""
)
FAST = onnx.parser.parse_model(
    HEADER + "g (int64 n, float[2] x) => (float[2] y) { y = Identity(x) }"
)
# Appends x n times and returns the first element: onnxruntime copies the sequence in every
# iteration (10**4 iterations took 1.4 s, 3 * 10**4 took 10 s), the lowered model (Expand,
# Gather) takes 0.1 s for 10**7.
APPENDS = onnx.parser.parse_model(
    HEADER
    + """g (int64 n, float[2] x) => (float[2] y) {
    e = SequenceEmpty<dtype = 1>()
    t = Loop(n, , e) <body = b (int64 i, bool c, seq(float[2]) v) => (bool c_out, seq(float[2]) w) {
        c_out = Identity(c)
        w = SequenceInsert(v, x)
    }>
    zero = Constant<value = int64 {0}>()
    y = SequenceAt(t, zero)
}"""
)
NEVER = 2**40  # iterations: far beyond any timeout here
TIMEOUT = 2.0
X = np.array([1.5, -2.0], np.float32)


def _inputs(folder, counts):
    """One ONNX test-data set per trip count (a negative one runs no iteration)."""
    for index, count in enumerate(counts):
        data = folder / f"test_data_set_{index}"
        data.mkdir(parents=True)
        for position, (name, value) in enumerate({"n": np.int64(count), "x": X}.items()):
            tensor = numpy_helper.from_array(np.asarray(value), name)
            (data / f"input_{position}.pb").write_bytes(tensor.SerializeToString())
    return folder


def _line(trials: str, who: str) -> str:
    return f"{trials}: {who} did not finish in 2 s in onnxruntime while running (killed)"


def test_a_run_killed_at_the_limit_says_it_timed_out():
    with IsolatedRunner("onnxruntime", SLOW.SerializeToString(), timeout=TIMEOUT) as runner:
        killed = runner.run({"n": np.array(NEVER), "x": X})
        done = runner.run({"n": np.array(3), "x": X})  # a fresh child after the kill
    assert killed.crashed and killed.timed_out and killed.outputs is None
    assert killed.error == "did not finish in 2 s in onnxruntime while running (killed)"
    assert done.ok and not done.timed_out and not done.crashed
    np.testing.assert_array_equal(done.outputs["y"], X)


@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_an_original_that_runs_out_of_time_is_not_compared(tmp_path, strict):
    inputs = _inputs(tmp_path, [NEVER, 3, -1])
    report = verify(
        SLOW,
        FAST,
        inputs=inputs,
        timeout=TIMEOUT,
        strict_errors=strict,
        strict_coverage=strict,
    )
    assert [trial.status for trial in report.trials] == ["original timed out", "ok", "ok"]
    timed_out = report.trials[0]
    assert timed_out.outputs[0].verdict == "original timed out"
    assert timed_out.outputs[0].max_abs_err is None
    assert timed_out.original_error == "did not finish in 2 s in onnxruntime while running (killed)"
    assert timed_out.candidate_error is None
    assert report.equivalent and bool(report) and report.verdict == "equivalent"
    assert report.failures() == []
    assert (report.compared, report.skipped) == (2, 1)
    assert _line("trial 0", "the original") + ": not compared" in report.warnings()
    data = json.loads(report.to_json())
    assert data["trials"][0]["status"] == "original timed out"
    assert data["warnings"] == report.warnings() and data["equivalent"] is True


def test_a_candidate_that_runs_out_of_time_where_the_original_finished_is_a_failure(tmp_path):
    report = verify(FAST, SLOW, inputs=_inputs(tmp_path, [NEVER, 3, -1]), timeout=TIMEOUT)
    assert [trial.status for trial in report.trials] == ["candidate crashed", "ok", "ok"]
    assert report.trials[0].outputs[0].verdict == "candidate crashed"
    assert not report.equivalent and not report.inconclusive
    assert report.failures() == [_line("trial 0", "candidate")]


def test_too_few_trials_left_after_the_timeouts_is_inconclusive_and_says_why(tmp_path):
    report = verify(SLOW, FAST, inputs=_inputs(tmp_path, [NEVER, NEVER, 2]), timeout=TIMEOUT)
    assert [trial.status for trial in report.trials] == [
        "original timed out",
        "original timed out",
        "ok",
    ]
    assert report.inconclusive and not report.equivalent
    assert report.failures() == [
        _line("trials 0-1", "the original") + ": not compared",
        "only 1 of 3 trials ran both models to completion (in the others both failed or the "
        "original did not finish): too few to show equivalence",
    ]
    assert not any("did not finish" in line for line in report.warnings())  # said once
    # nothing compared at all: inconclusive too, never "not equivalent"
    alone = verify(SLOW, FAST, inputs=_inputs(tmp_path / "one", [NEVER]), timeout=TIMEOUT)
    assert alone.inconclusive and alone.verdict == "inconclusive"
    assert alone.failures() == [
        _line("trial 0", "the original") + ": not compared",
        "no trial ran both models to completion: nothing was compared",
    ]


def _invoke(*args: str):
    app = typer.Typer()
    app.command("verify")(verify_command)
    app.command("other")(lambda: None)  # two commands: "verify" stays a subcommand
    return CliRunner().invoke(app, ["verify", *args])


@pytest.fixture
def models(tmp_path):
    paths = {}
    for name, model in {"slow": SLOW, "fast": FAST}.items():
        paths[name] = str(tmp_path / f"{name}.onnx")
        onnx.save(model, paths[name])
    return paths


def test_the_cli_exit_codes_and_report(models, tmp_path):
    inputs = str(_inputs(tmp_path / "three", [NEVER, 3, -1]))
    timeout = ["--timeout", "2", "--inputs", inputs]
    report = tmp_path / "r.json"
    skipped = _invoke(models["slow"], models["fast"], *timeout, "--report", str(report))
    assert skipped.exit_code == 0, skipped.output
    assert f"warning: {_line('trial 0', 'the original')}: not compared" in skipped.output
    assert "original timed out" in skipped.output  # the verdict in the table
    assert "equivalent (2 trials compared, 1 skipped)" in skipped.output
    data = json.loads(report.read_text())
    assert data["equivalent"] is True
    assert [trial["status"] for trial in data["trials"]] == ["original timed out", "ok", "ok"]
    slower = _invoke(models["fast"], models["slow"], *timeout)
    assert slower.exit_code == 1, slower.output
    assert f"  - {_line('trial 0', 'candidate')}" in slower.output
    alone = str(_inputs(tmp_path / "one", [NEVER]))
    nothing = _invoke(models["slow"], models["fast"], "--timeout", "2", "--inputs", alone)
    assert nothing.exit_code == 2, nothing.output
    assert f"  - {_line('trial 0', 'the original')}: not compared" in nothing.output
    assert "raise --timeout" in nothing.output


def test_optimize_verify_writes_the_model_and_warns(tmp_path):
    source = tmp_path / "appends.onnx"
    onnx.save(APPENDS, source)
    inputs = str(_inputs(tmp_path / "three", [10**7, 3, 1]))
    out = tmp_path / "out.onnx"
    args = ["--verify", "--timeout", "2", "--inputs", inputs]
    result = CliRunner().invoke(seqlower_app, ["optimize", str(source), str(out), *args])
    assert result.exit_code == 0, result.output
    assert "verified: equivalent under onnxruntime (2 trials compared, 1 skipped" in result.output
    assert f"warning: {_line('trial 0', 'the original')}: not compared" in result.output
    lowered = onnx.load(out)
    assert "Loop" not in {node.op_type for node in lowered.graph.node}
    # all of them out of time: inconclusive (exit 2), nothing written
    alone = str(_inputs(tmp_path / "one", [10**7]))
    none = tmp_path / "none.onnx"
    args = ["--verify", "--timeout", "2", "--inputs", alone]
    result = CliRunner().invoke(seqlower_app, ["optimize", str(source), str(none), *args])
    assert result.exit_code == 2, result.output
    assert f"  - {_line('trial 0', 'the original')}: not compared" in result.output
    assert "the input model did not finish in time on too many inputs" in result.output
    assert not none.exists()


# -- another runtime: an original out of time there still loads there -------------------------

OK = RunOutcome(outputs={"y": X})
OUT_OF_TIME = RunOutcome(
    error="did not finish in 2 s in openvino while running (killed)", crashed=True, timed_out=True
)
NOT_LOADING = RunOutcome(error="cannot load the model: unsupported op", crashed=False)
FEEDS = {"n": np.array(3), "x": X}


def test_an_original_out_of_time_in_another_runtime_is_not_read_as_not_loading():
    # onnxruntime ran it: compared with that run, and the runtime is not said to reject it
    assert original_to_compare(OUT_OF_TIME, OK, OK, FEEDS) == (OK, None)
    # NaN inputs are compared only like with like: not compared ("original timed out")
    nan = {"n": np.array(3), "x": np.array([np.nan, 1.0], np.float32)}
    assert original_to_compare(OUT_OF_TIME, OK, OK, nan) == (OUT_OF_TIME, None)
    # out of time in onnxruntime too: nothing to compare with
    assert original_to_compare(OUT_OF_TIME, OUT_OF_TIME, OK, FEEDS) == (OUT_OF_TIME, None)
    # an original that does not load there is said so, and compared with onnxruntime's run
    assert original_to_compare(NOT_LOADING, OK, OK, FEEDS) == (OK, NOT_LOADING.error)
    assert original_to_compare(NOT_LOADING, OK, OK, nan) == (None, NOT_LOADING.error)


def test_the_reference_note_names_the_runtime_and_the_time_limit():
    result = compare_trial(
        0, "supplied", FEEDS, ["y"], OUT_OF_TIME, OK, OK, None, None, original_runtime="openvino"
    )
    assert result.status == "original timed out"
    assert result.outputs[0].reference == (
        "the original did not finish in openvino; the candidate agrees with the reference"
    )
    failed = RunOutcome(error="[ONNXRuntimeError] bad input")
    plain = compare_trial(0, "supplied", FEEDS, ["y"], failed, OK, OK, None, None)
    assert plain.outputs[0].reference == (
        "onnxruntime failed on the original; the candidate agrees with the reference"
    )
