"""What `seqlower verify` writes never replaces a file the models read, and never writes
through a planted link (each test runs the command in a child process)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "split_map_concat.onnx"


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seqlower", "verify", *args, "--trials", "3"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def _refused(result: subprocess.CompletedProcess[str], phrase: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and phrase in line, line


def test_a_report_that_is_a_model_is_refused(tmp_path) -> None:
    model = shutil.copy(EXAMPLE, tmp_path / "m.onnx")
    before = Path(model).read_bytes()
    _refused(_verify(model, model, "--report", model), "--report is a file the model")
    assert Path(model).read_bytes() == before


def test_a_report_that_is_a_models_weights_file_is_refused(tmp_path) -> None:
    model = onnx.load(EXAMPLE)
    target = tmp_path / "m.onnx"
    onnx.save(model, target, save_as_external_data=True, location="m.bin", size_threshold=0)
    weights = tmp_path / "m.bin"
    before = weights.read_bytes()
    result = _verify(str(EXAMPLE), str(target), "--report", str(weights))
    _refused(result, "--report is a file the model")
    assert weights.read_bytes() == before


def test_saved_inputs_never_replace_a_model(tmp_path) -> None:
    model = shutil.copy(EXAMPLE, tmp_path / "input_0.pb")
    before = Path(model).read_bytes()
    result = _verify(str(EXAMPLE), model, "--save-inputs", str(tmp_path))
    _refused(result, "--save-inputs would overwrite")
    assert Path(model).read_bytes() == before


def test_a_planted_link_at_the_report_is_replaced_not_written_through(tmp_path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "r.json"
    link.symlink_to(victim)
    result = _verify(str(EXAMPLE), str(EXAMPLE), "--report", str(link))
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep me"
    assert not link.is_symlink() and '"equivalent": true' in link.read_text()
