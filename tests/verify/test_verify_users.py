"""What users ran, run as they ran it (`python -m seqlower ...` in a fresh process): other
runtimes compare like with like, `optimize --verify` takes verify's options, most trials
rejected is said with a hint that works, inputs that differ are named before any trial, a
failing trial is saved and runs again, `--report` records the verification, `--dim` with a
runtime target, and a memory limit on the models' processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "split_map_concat.onnx"
CHUNK_CAT = ROOT / "tests" / "fixtures" / "torch" / "chunk_cat" / "model.onnx"
HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'


def _run(*args: str | Path, check: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "seqlower", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if check is not None:
        assert done.returncode == check, done.stdout + done.stderr
    return done


def _save(tmp_path: Path, name: str, text: str) -> Path:
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return path


@pytest.fixture
def lowered(tmp_path):
    path = tmp_path / "lowered.onnx"
    _run("optimize", EXAMPLE, path, "--quiet", check=0)
    return path


def test_the_readme_example_verifies_under_openvino(tmp_path):
    pytest.importorskip("openvino")
    done = _run("optimize", EXAMPLE, tmp_path / "o.onnx", "--target", "openvino", "--verify")
    assert done.returncode == 0, done.stderr
    assert "verified: equivalent under openvino (14 trials compared, 2 skipped)" in done.stdout
    # the original does not load in OpenVINO: said, and NaN trials are not compared
    assert "compared with the original in onnxruntime (it does not load in openvino)" in (
        done.stdout
    )


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
def test_a_model_against_itself_is_equivalent_in_every_runtime_it_loads_in(lowered, runtime):
    pytest.importorskip(runtime)
    done = _run("verify", lowered, lowered, "--runtime", runtime, check=0)
    assert "equivalent (16 trials compared)" in done.stdout
    # the candidate in openvino against the original in openvino: NaN trials compare too
    report = _run("verify", EXAMPLE, lowered, "--runtime", runtime)
    assert report.returncode == 0, report.stdout


def test_optimize_verify_takes_the_options_of_verify(tmp_path):
    out = tmp_path / "o.onnx"
    done = _run(
        "optimize", EXAMPLE, out, "--verify", "--trials", "3", "--seed", "7", "--rtol", "1e-3"
    )
    assert done.returncode == 0, done.stderr
    assert "verified: equivalent under onnxruntime (3 trials compared)" in done.stdout
    # without --verify they are a usage error that says what to add
    refused = _run("optimize", EXAMPLE, out, "--seed", "7", check=2)
    assert "--seed is an option of --verify: add --verify" in refused.stderr
    # and both commands take the same options, with the same help
    for option in ("--trials", "--seed", "--inputs", "--rtol", "--atol", "--save-inputs"):
        assert option in _run("optimize", "--help").stdout
        assert option in _run("verify", "--help").stdout


MULTIPLE_OF_6 = """g (float[N] x) => (float[M, 6] y) {
    shape = Constant<value = int64[2] {-1, 6}>()
    y = Reshape(x, shape)
}"""


def test_most_trials_rejected_is_said_with_a_hint_that_works(tmp_path):
    path = _save(tmp_path, "sixes", MULTIPLE_OF_6)
    done = _run("verify", path, path, check=0)
    assert "warning: both models rejected" in done.stdout
    assert "give sizes they accept with --dim N=SIZE" in done.stdout
    followed = _run("verify", path, path, "--dim", "N=12", check=0)
    assert "skipped" not in followed.stdout.splitlines()[-1]
    assert "warning: both models rejected" not in followed.stdout
    # optimize --verify says the skipped trials too, and the warning
    optimized = _run("optimize", path, tmp_path / "o.onnx", "--verify", check=0)
    assert "skipped" in optimized.stdout and "both models rejected" in optimized.stderr


def test_models_whose_inputs_differ_are_named_before_any_trial(tmp_path):
    first = _save(tmp_path, "a", "g (float[N] x, float[N] y) => (float[N] z) { z = Add(x, y) }")
    second = _save(tmp_path, "b", "g (float[N] x, int64[N] y) => (float[N] z) { z = Identity(x) }")
    done = _run("verify", first, second, check=2)
    assert done.stdout == ""
    assert done.stderr == (
        "error: the models take different inputs, so they cannot be compared: input 'y': tensor "
        "of float, rank 1, in the original; tensor of int64, rank 1, in the candidate\n"
    )


def test_a_failing_trial_is_saved_and_runs_again(tmp_path):
    original = _save(tmp_path, "a", "g (int64[N] x) => (int64[N] z) { z = Neg(x) }")
    candidate = _save(
        tmp_path,
        "b",
        """g (int64[N] x) => (int64[N] z) {
            narrow = Cast<to = 6>(x)
            wide = Cast<to = 7>(narrow)
            z = Neg(wide)
        }""",
    )
    folder = tmp_path / "failing"
    done = _run("verify", original, candidate, "--save-inputs", folder, check=1)
    assert f"--inputs {folder} runs it again" in done.stdout
    assert sorted(path.name for path in folder.iterdir()) == [
        "input_0.pb",
        "inputs.npz",
        "output_0.pb",
    ]
    again = _run("verify", original, candidate, "--inputs", folder, check=1)
    assert "values differ" in again.stdout
    _run("verify", original, candidate, "--inputs", folder / "inputs.npz", check=1)
    _run("verify", original, original, "--inputs", folder, check=0)


def test_the_report_records_the_verification(tmp_path):
    report = tmp_path / "report.json"
    _run("optimize", EXAMPLE, tmp_path / "o.onnx", "--verify", "--report", report, check=0)
    recorded = json.loads(report.read_text())["verification"]
    assert recorded["verdict"] == "equivalent"
    assert recorded["trials_compared"] == 16 and recorded["trials_skipped"] == 0
    assert recorded["seconds"] > 0 and recorded["runtimes"] == ["onnxruntime"]
    assert "summary" in recorded["coverage"]
    alone = tmp_path / "verify.json"
    _run("verify", EXAMPLE, tmp_path / "o.onnx", "--report", alone, check=0)
    data = json.loads(alone.read_text())
    assert data["verdict"] == "equivalent" and data["trials_compared"] == 16
    assert data["seconds"] > 0


@pytest.mark.parametrize("target", ["openvino", "tract"])
def test_a_runtime_target_with_a_dim_is_checked_in_its_runtime(tmp_path, target):
    pytest.importorskip(target)
    out = tmp_path / "o.onnx"
    done = _run("optimize", CHUNK_CAT, out, "--target", target, "--dim", "W=4", check=0)
    assert "loaded the lowered model and ran it once" in done.stderr
    verified = _run("optimize", CHUNK_CAT, out, "--target", target, "--dim", "W=4", "--verify")
    assert verified.returncode == 0, verified.stderr


BOMB = """g (float[2] x) => (float[2] y) {
    shape = Constant<value = int64[1] {1500000000}>()
    big = ConstantOfShape<value = float[1] {1.0}>(shape)
    s = ReduceSum<keepdims = 1>(big)
    y = Add(x, s)
}"""


def test_a_model_that_takes_too_much_memory_hits_the_limit(tmp_path):
    path = _save(tmp_path, "bomb", BOMB)  # 6 GB for one tensor
    done = _run("verify", path, path, "--trials", "1", "--memory-limit", "1024", check=2)
    assert "out of memory: the model needs more than the memory limit of 1024 MB" in done.stdout
    assert "--memory-limit raises it" in done.stdout


LOOP = """g (int64 n, float[2] x) => (float[2] y) {
    y = Loop(n, , x) <body = b (int64 i, bool c, float[2] v) => (bool c_out, float[2] w) {
        c_out = Identity(c)
        w = Add(v, v)
    }>
}"""


def test_a_runtime_that_runs_neither_model_is_inconclusive_with_a_hint_that_works(tmp_path):
    pytest.importorskip("tract")
    path = _save(tmp_path, "loop", LOOP)  # tract has no Loop
    done = _run("verify", path, path, "--runtime", "tract", check=2)
    assert "tract fails on the original as on the candidate" in done.stdout
    assert "without --runtime they are compared in onnxruntime" in done.stdout
    _run("verify", path, path, check=0)


def test_a_model_openvino_cannot_load_is_not_called_different_from_itself():
    pytest.importorskip("openvino")
    done = _run("verify", EXAMPLE, EXAMPLE, "--runtime", "openvino", check=2)
    assert "NOT equivalent" not in done.stdout
    assert "openvino fails on the original as on the candidate" in done.stdout
