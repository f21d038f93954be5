"""`tools/lower_fixtures.py`, the byte comparison the docs cite: it writes one lowering per
committed model and target under OUTDIR, the same bytes on every run, and a `.err` file where a
model fails to lower."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "lower_fixtures.py"


def _run(cwd: Path, out: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    flags = [f"--target={t}" for t in targets]
    return subprocess.run(
        [sys.executable, str(TOOL), str(out), *flags], cwd=cwd, capture_output=True, text=True
    )


def test_every_model_lowered_once_per_target_the_same_bytes_each_run(tmp_path):
    tree = tmp_path / "tree"
    (tree / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "split_map_concat.onnx", tree / "examples")
    (tree / "examples" / "broken.onnx").write_bytes(b"not a model")
    first = _run(tree, tmp_path / "a", "generic", "onnxruntime")
    assert first.returncode == 0, first.stderr
    assert "4 lowerings" in first.stdout
    second = _run(tree, tmp_path / "b", "generic", "onnxruntime")
    assert second.returncode == 0, second.stderr
    for target in ("generic", "onnxruntime"):
        a = tmp_path / "a" / target / "examples"
        b = tmp_path / "b" / target / "examples"
        assert (a / "split_map_concat.onnx").read_bytes() == (
            b / "split_map_concat.onnx"
        ).read_bytes()
        assert (a / "broken.err").read_text().strip()
        assert not (a / "broken.onnx").exists()
