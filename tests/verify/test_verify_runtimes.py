"""OpenVINO and tract as oracles: `verify --runtime openvino|tract|onnxruntime` (issue 17), the
runtime adapters behind it, and their refusals (strings, sequences, a runtime not installed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
import typer
from typer.testing import CliRunner

import seqlower.targets
from seqlower.cli.app import app
from seqlower.cli.verify_command import verify_command
from seqlower.errors import SeqlowerError
from seqlower.verification import runtimes, verify
from seqlower.verification.runtimes import (
    CannotRunError,
    RuntimeUnavailableError,
    open_session,
    run_in_runtime,
)

pytest.importorskip("openvino", reason="the test extra installs openvino")
pytest.importorskip("tract", reason="the test extra installs tract")

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'


def _model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model, full_check=True)
    return model


MATH_TEXT = """g (float[N, 3] x, int64[N] k, bool[N] b)
    => (float[N, 3] y, int64[N] j, bool[N] c) {
    e = Exp(x)
    y = OP(e, x)
    j = Neg(k)
    c = Not(b)
}"""
MATH = _model(MATH_TEXT.replace("OP", "Add"))
MATH_WRONG = _model(MATH_TEXT.replace("OP", "Sub"))
SEQUENCE_IO = _model("g (seq(float[2]) s) => (float[K] y) { y = ConcatFromSequence<axis = 0>(s) }")
STRINGS = _model("g (string[2] s) => (string[2] y) { y = Identity(s) }")
LOOP = _model("""g (int64 n, float[2] x) => (float[2] y) {
    y = Loop(n, , x) <body = b (int64 i, bool c, float[2] v) => (bool c_out, float[2] w) {
        c_out = Identity(c)
        w = Add(v, v)
    }>
}""")
ALL = ["onnxruntime", "openvino", "tract"]


@pytest.mark.parametrize("runtime", ALL)
def test_every_runtime_gives_the_outputs_in_order(runtime):
    feeds = {
        "x": np.array([[0.0, 1.0, -2.0]], np.float32),
        "k": np.array([5]),
        "b": np.array([True]),
    }
    y, j, c = run_in_runtime(runtime, MATH.SerializeToString(), feeds)
    np.testing.assert_allclose(y, np.exp(feeds["x"]) + feeds["x"], rtol=1e-6)
    assert y.dtype == np.float32 and j.dtype == np.int64 and c.dtype == np.bool_
    assert j.tolist() == [-5] and c.tolist() == [False]
    session = open_session(runtime, MATH)  # a proto works too, and runs many times
    assert session.output_names == ["y", "j", "c"]
    for rows in (2, 5):  # a new shape each time (tract plans once per set of shapes)
        feeds = {
            "x": np.ones((rows, 3), np.float32),
            "k": np.arange(rows),
            "b": np.zeros(rows, bool),
        }
        assert session.run(feeds)[1].tolist() == [-k for k in range(rows)]


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
@pytest.mark.parametrize(
    ("model", "problem"),
    [(SEQUENCE_IO, "input 's' is a sequence"), (STRINGS, "input 's' is a string tensor")],
    ids=["sequence", "string"],
)
def test_strings_and_sequences_cannot_run_and_say_why(runtime, model, problem):
    with pytest.raises(CannotRunError, match=f"^cannot run in {runtime}: {problem}; "):
        open_session(runtime, model)
    report = verify(model, model, runtimes=[runtime])
    assert not report.equivalent
    assert {trial.status for trial in report.trials} == {"cannot run"}
    assert report.failures() == [
        f"cannot run in {runtime}: {problem}; {runtime} takes and gives numeric tensors only"
    ]


def test_verify_runs_the_candidate_in_each_runtime():
    report = verify(MATH, MATH, runtimes=ALL, trials=2, edges=False)
    assert report.equivalent, report.failures()
    assert [(trial.index, trial.runtime) for trial in report.trials] == [
        (0, "onnxruntime"),
        (0, "openvino"),
        (0, "tract"),
        (1, "onnxruntime"),
        (1, "openvino"),
        (1, "tract"),
    ]
    wrong = verify(MATH, MATH_WRONG, runtimes=["openvino", "tract"], trials=1, edges=False)
    assert [line.split(":")[0] for line in wrong.failures()] == [
        "trial 0 (N=2, typical values; openvino), output 'y'",
        "trial 0 (N=2, typical values; tract), output 'y'",
    ]


def test_a_model_a_runtime_rejects_is_compared_like_with_like():
    # tract cannot run a Loop: the original fails there as the candidate does, which is no
    # difference made by a rewrite (the model against itself is not "NOT equivalent")
    report = verify(LOOP, LOOP, runtimes=["openvino", "tract"], trials=1, edges=False)
    assert [(trial.runtime, trial.status) for trial in report.trials] == [
        ("openvino", "ok"),
        ("tract", "both failed"),
    ]
    assert report.equivalent, report.failures()
    error = report.trials[1].candidate_error
    # the whole message, without tract's stack backtrace
    assert "Unimplemented(Loop)" in error
    assert "Caused by: Operator can not be made a TypedOp." in error
    assert "backtrace" not in error
    # in tract alone, nothing was compared: inconclusive, and the hint says why
    alone = verify(LOOP, LOOP, runtimes=["tract"], trials=2, edges=False)
    assert alone.inconclusive and not alone.equivalent


def test_an_unknown_or_missing_runtime_is_a_one_line_error(monkeypatch):
    with pytest.raises(SeqlowerError, match=r"^unknown runtime 'tvm': choose one of onnxruntime"):
        verify(MATH, MATH, runtimes=["tvm"])
    monkeypatch.setattr(runtimes, "_installed", lambda module: module != "openvino")
    with pytest.raises(RuntimeUnavailableError, match=r"pip install 'openvino>="):
        run_in_runtime("openvino", MATH, {})
    with pytest.raises(SeqlowerError, match=r"^openvino is not installed: pip install 'openvino"):
        verify(MATH, MATH, runtimes=["tract", "openvino"])


def _invoke(*args: str):
    cli = typer.Typer()
    cli.command("verify")(verify_command)
    cli.command("other")(lambda: None)
    return CliRunner().invoke(cli, ["verify", *args])


@pytest.fixture
def paths(tmp_path):
    result = {}
    for name, model in {"math": MATH, "wrong": MATH_WRONG, "seq": SEQUENCE_IO}.items():
        result[name] = str(tmp_path / f"{name}.onnx")
        onnx.save(model, result[name])
    return result


def test_the_cli_takes_repeated_runtimes(paths, monkeypatch):
    both = ["--runtime", "openvino", "--runtime", "tract"]
    result = _invoke(paths["math"], paths["math"], *both, "--trials", "1")
    assert result.exit_code == 0, result.output
    assert "0 (openvino)" in result.output and "0 (tract)" in result.output
    result = _invoke(paths["math"], paths["wrong"], *both)
    assert result.exit_code == 1
    assert "(N=2, typical values; tract), output 'y': values differ" in result.output
    result = _invoke(paths["seq"], paths["seq"], "--runtime", "tract")
    assert result.exit_code == 1
    assert "cannot run in tract: input 's' is a sequence" in result.output
    monkeypatch.setattr(runtimes, "_installed", lambda module: module != "tract")
    result = _invoke(paths["math"], paths["math"], "--runtime", "tract")
    assert result.exit_code == 2
    # the requirement of seqlower's tract extra: what pip can install (seqlower itself comes
    # from a clone, so 'seqlower[tract]' would name nothing an index serves)
    assert result.output == f"error: tract is not installed: {runtimes.install_hint('tract')}\n"
    assert runtimes.install_hint("tract").startswith("pip install 'tract")


@pytest.mark.parametrize("target", ["openvino", "tract"])
def test_optimize_verify_uses_the_target_runtime(tmp_path, target, monkeypatch):
    if target not in seqlower.targets.PROFILES:  # until the profile exists, borrow generic's
        generic = dataclasses.replace(seqlower.targets.PROFILES["generic"], name=target)
        monkeypatch.setitem(seqlower.targets.PROFILES, target, generic)
    source = tmp_path / "model.onnx"
    onnx.save(MATH, source)
    command = ["optimize", str(source), str(tmp_path / "out.onnx"), "--target", target]
    result = CliRunner().invoke(app, [*command, "--verify"])
    assert result.exit_code == 0, result.output
    # 16 generated trials and one edge case: k at the limits of int64
    assert f"verified: equivalent under {target} (17 trials compared; dims 0..8)" in result.output


UNNAMED_DIM = _model("g (float[?, 3] x) => (float[?, 3] y) { y = Exp(x) }")
DECLARED_N = _model("""g (float[N, 3] x) => (float[N, 3] y) <float[N, 3] e> {
    e = Exp(x)
    y = Neg(e)
}""")


@pytest.mark.parametrize("model", [UNNAMED_DIM, DECLARED_N], ids=["unnamed-dim", "value-info"])
def test_tract_runs_unnamed_dims_and_declared_symbolic_shapes(model):
    """tract cannot plan an unnamed dim from the model alone (it gets facts from the feeds), and
    fails to analyse a value_info with N when given concrete facts (it plans with N instead)."""
    session = open_session("tract", model)
    for rows in (1, 4):
        x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
        (y,) = session.run({"x": x})
        expected = run_in_runtime("onnxruntime", model, {"x": x})[0]
        np.testing.assert_allclose(y, expected, rtol=1e-6)
