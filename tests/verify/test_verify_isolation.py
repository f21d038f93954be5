"""Each model runs in a child process: a runtime that crashes, hangs or refuses a model becomes a
verdict, never the end of the verifier (issue 13, item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
import typer
from typer.testing import CliRunner

from seqlower.cli.verify_command import verify_command
from seqlower.verification import verify
from seqlower.verification.runner import IsolatedRunner

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'

# README trap 7: onnxruntime (1.24 to at least 1.32, x86_64) segfaults creating a session for
# Transpose -> Cast -> MatMul; seqlower's RuntimeWorkaroundsPass is what keeps its own output
# clear of it, so this chain is built by hand, without that pass.
CRASHES = onnx.parser.parse_model(
    HEADER
    + """g (float[2, 3, 4] x, double[4, 3] w) => (double[3, 2, 3] y) {
    t = Transpose<perm = [1, 0, 2]>(x)
    c = Cast<to = 11>(t)
    y = MatMul(c, w)
}"""
)
SAFE = onnx.parser.parse_model(
    HEADER
    + """g (float[2, 3, 4] x, double[4, 3] w) => (double[3, 2, 3] y) {
    c = Cast<to = 11>(x)
    t = Transpose<perm = [1, 0, 2]>(c)
    y = MatMul(t, w)
}"""
)


def _crashes_onnxruntime() -> bool:
    """Probe (in a child process) whether this onnxruntime still crashes on the chain."""
    with IsolatedRunner("onnxruntime", CRASHES.SerializeToString()) as runner:
        outcome = runner.run({"x": np.zeros((2, 3, 4), np.float32), "w": np.zeros((4, 3))})
    return outcome.crashed


needs_the_crash = pytest.mark.skipif(
    not _crashes_onnxruntime(), reason="this onnxruntime no longer crashes on Transpose-Cast-MatMul"
)


@needs_the_crash
def test_a_crash_while_loading_is_a_verdict_said_once():
    report = verify(SAFE, CRASHES)
    assert not report.equivalent
    assert {trial.status for trial in report.trials} == {"candidate crashed"}
    assert report.failures() == [
        "candidate crashed onnxruntime: signal 11 (SIGSEGV) while loading the model"
    ]
    assert report.trials[0].outputs[0].verdict == "candidate crashed"
    both = verify(CRASHES, CRASHES, trials=1)
    assert both.trials[0].status == "both crashed"
    assert both.failures()[:2] == [
        "original crashed onnxruntime: signal 11 (SIGSEGV) while loading the model",
        "candidate crashed onnxruntime: signal 11 (SIGSEGV) while loading the model",
    ]


@needs_the_crash
def test_the_cli_exits_1_with_the_crash_verdict(tmp_path):
    onnx.save(SAFE, tmp_path / "safe.onnx")
    onnx.save(CRASHES, tmp_path / "crashes.onnx")
    app = typer.Typer()
    app.command("verify")(verify_command)
    app.command("other")(lambda: None)
    report_path = tmp_path / "r.json"
    args = ["verify", str(tmp_path / "safe.onnx"), str(tmp_path / "crashes.onnx")]
    result = CliRunner().invoke(app, [*args, "--report", str(report_path)])
    assert result.exit_code == 1, result.output
    assert "candidate crashed onnxruntime: signal 11 (SIGSEGV) while loading the model" in (
        result.output
    )
    data = json.loads(report_path.read_text())
    assert data["equivalent"] is False
    assert data["trials"][0]["status"] == "candidate crashed"


# A while loop whose condition never turns false: onnxruntime runs it forever.
FOREVER = onnx.parser.parse_model(
    HEADER
    + """g (float[2] x) => (float[2] y) {
    go = Constant<value = bool {1}>()
    y = Loop(, go, x) <body = b (int64 i, bool c, float[2] v) => (bool c_out, float[2] w) {
        c_out = Identity(c)
        w = Identity(v)
    }>
}"""
)
ONCE = onnx.parser.parse_model(HEADER + "g (float[2] x) => (float[2] y) { y = Identity(x) }")


def test_a_run_that_never_ends_is_killed_after_the_timeout():
    started = time.perf_counter()
    report = verify(ONCE, FOREVER, trials=1, timeout=3.0)
    assert time.perf_counter() - started < 30
    assert [trial.status for trial in report.trials] == ["candidate crashed"]
    assert report.failures() == [
        "trial 0 (typical values): candidate did not finish in 3 s in onnxruntime while running "
        "(killed)"
    ]


def test_a_runner_starts_afresh_after_a_crash_while_running():
    with IsolatedRunner("onnxruntime", FOREVER.SerializeToString(), timeout=3.0) as runner:
        first = runner.run({"x": np.ones(2, np.float32)})
        second = runner.run({"x": np.ones(2, np.float32)})
    assert first.crashed and second.crashed
    assert "while running" in second.error  # loaded again in a fresh child, then killed again
    with IsolatedRunner("onnxruntime", ONCE.SerializeToString()) as runner:
        outcomes = [runner.run({"x": np.full(2, k, np.float32)}) for k in range(3)]
    assert [float(outcome.outputs["y"][0]) for outcome in outcomes] == [0.0, 1.0, 2.0]


def test_a_model_the_runtime_rejects_is_a_load_error_in_every_trial():
    broken = ONCE.SerializeToString()[:-3]
    with IsolatedRunner("onnxruntime", broken) as runner:
        outcomes = [runner.run({"x": np.ones(2, np.float32)}) for _ in range(2)]
    assert all(not outcome.ok and not outcome.crashed for outcome in outcomes)
    assert outcomes[0].error.startswith("cannot load the model: ")
    assert outcomes[1] == outcomes[0]


# A while loop that ends only when its input says so: with `go` true it never ends.
UNTIL = """g (bool go, float[2] x) => (float[2] y) {
    y = Loop(, go, x) <body = b (int64 i, bool c, float[2] v) => (bool c_out, float[2] w) {
        c_out = Identity(c)
        w = OP(v, v)
    }>
}"""


def test_both_models_timing_out_on_an_input_is_not_a_difference_unless_strict():
    original = onnx.parser.parse_model(HEADER + UNTIL.replace("OP", "Add"))
    same = onnx.parser.parse_model(HEADER + UNTIL.replace("OP", "Add"))
    # trials 0 and 1 loop forever in both (go is true); trial 2 (go false) compares
    report = verify(original, same, trials=3, timeout=3.0, edges=False)
    assert [trial.status for trial in report.trials] == ["both crashed", "both crashed", "ok"]
    # not a difference, but one trial of three is too few to show equivalence
    assert report.inconclusive and not report.equivalent
    assert report.failures() == [
        "only 1 of 3 trials ran both models to completion (both failed in the others): too few "
        "to show equivalence"
    ]
    strict = verify(original, same, trials=1, timeout=3.0, strict_errors=True, edges=False)
    assert not strict.equivalent
    assert strict.failures()[0] == (
        "trial 0 (loops 3, typical values): original did not finish in 3 s in onnxruntime "
        "while running (killed)"
    )
    assert strict.failures()[-1] == "no trial ran both models to completion: nothing was compared"


def test_a_child_that_cannot_be_started_is_a_failure_not_a_traceback(monkeypatch):
    monkeypatch.setattr("sys.executable", "/nonexistent/python")
    with IsolatedRunner("onnxruntime", ONCE.SerializeToString()) as runner:
        outcome = runner.run({"x": np.ones(2, np.float32)})
    assert not outcome.ok and not outcome.crashed
    assert outcome.error.startswith("cannot start a process for onnxruntime: ")


def test_the_worker_starts_without_importing_seqlower():
    """The child loads runtimes.py by path: importing the seqlower package (onnx_ir, sympy)
    would cost each child process most of a second."""
    from pathlib import Path

    import seqlower.verification.worker as worker

    script = (
        "import runpy, sys\n"
        f"namespace = runpy.run_path({str(Path(worker.__file__))!r}, run_name='probe')\n"
        "runtimes = namespace['_runtimes_module']()\n"
        "print(sorted(runtimes.RUNTIMES), any(m.startswith('seqlower') for m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd="/"
    )
    assert done.stdout.split("\n")[0] == "['onnxruntime', 'openvino', 'tract'] False"


# A while loop that never ends when x holds an infinity: exploring trials feed some.
UNTIL_FINITE = """g (float[N] x) => (float[N] y) {
    inf = IsInf(x)
    any = Cast<to = 1>(inf)
    top = ReduceMax<keepdims = 0>(any)
    half = Constant<value = float {0.5}>()
    go = Greater(top, half)
    y = Loop(, go, x) <body = b (int64 i, bool c, float[N] v) => (bool c_out, float[N] w) {
        c_out = Identity(c)
        w = Identity(v)
    }>
}"""


def test_an_exploring_input_that_never_ends_costs_seconds_not_the_full_timeout():
    model = onnx.parser.parse_model(HEADER + UNTIL_FINITE)
    started = time.perf_counter()
    report = verify(model, model, trials=10)  # trial 9 feeds NaN, Inf and denormals
    assert time.perf_counter() - started < 60  # the run is killed after 5 s, not 120 s
    assert report.trials[9].status == "both crashed"
    # onnxruntime allocates in each iteration: on an idle machine the loop reaches the memory
    # limit before the 5 s are up, on a loaded one it does not
    error = report.trials[9].original_error
    assert error.startswith("did not finish in 5 s") or "at the memory limit" in error, error
    assert report.equivalent


IDENTITY = onnx.parser.parse_model(HEADER + "g (float[N] x) => (float[N] y) { y = Identity(x) }")


def test_runs_sent_before_any_reply_is_read_do_not_wait_on_each_other():
    # Each input and each output is 4 MB, far beyond a pipe's buffer: the child must read the
    # next request while it cannot yet send the reply before it (the verifier's search sends
    # several runs before it reads a result).
    import threading

    sizes = [1 << 20, (1 << 20) + 1, (1 << 20) + 2, (1 << 20) + 3]
    outcomes = []

    def submit_all_then_read() -> None:
        with IsolatedRunner("onnxruntime", IDENTITY.SerializeToString()) as runner:
            for size in sizes:
                runner.submit({"x": np.full(size, size, np.float32)})
            outcomes.extend(runner.result() for _ in sizes)

    worker = threading.Thread(target=submit_all_then_read, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the runner and its child waited on each other"
    assert [outcome.outputs["y"].shape[0] for outcome in outcomes] == sizes
    assert all(float(outcome.outputs["y"][-1]) == size for outcome, size in zip(outcomes, sizes))
