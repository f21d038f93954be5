"""`tools/kernel_census.py`: the kernels onnxruntime runs for an export and its lowering on the
export's smallest data set, a Loop body's counted once per iteration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from support import parse

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "kernel_census.py"

ORIGINAL = """
agraph (float[N] x, int64 trips) => (float[N] y) {
  t = Constant <value = bool {1}> ()
  y = Loop (trips, t, x) <body = body (int64 i, bool c, float[N] a) => (bool c2, float[N] b) {
    b = Add (a, a)
    c2 = Identity (c)
  }>
}"""

LOWERED = """
agraph (float[N] x, int64 trips) => (float[N] y) {
  f = Cast <to = 1> (trips)
  p = Pow (x, f)
  y = Mul (p, x)
}"""


def _write_data_set(folder: Path, x: np.ndarray, trips: int) -> None:
    folder.mkdir(parents=True)
    inputs = (x, np.array(trips, np.int64))
    for i, value in enumerate(inputs):
        (folder / f"input_{i}.pb").write_bytes(numpy_helper.from_array(value).SerializeToString())


def test_kernels_of_the_smallest_data_set_each_loop_iteration_counted(tmp_path):
    case = tmp_path / "tree" / "tests" / "fixtures" / "torch_demo" / "doubling"
    case.mkdir(parents=True)
    onnx.save(parse(ORIGINAL), str(case / "model.onnx"))
    _write_data_set(case / "test_data_set_0", np.ones(64, np.float32), 5)  # the larger
    _write_data_set(case / "test_data_set_1", np.ones(2, np.float32), 3)
    lowered = tmp_path / "low" / "tests" / "fixtures" / "torch_demo" / "doubling"
    lowered.mkdir(parents=True)
    onnx.save(parse(LOWERED), str(lowered / "model.onnx"))
    out = tmp_path / "census.json"
    run = subprocess.run(
        [sys.executable, str(TOOL), str(tmp_path / "low"), "--json", str(out)],
        cwd=tmp_path / "tree",
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    found = json.loads(out.read_text())
    entry = found["torch_demo/doubling"]
    assert entry["data_set"] == "test_data_set_1"
    # the Loop, and its body's Add once per iteration (3); the body's Identity may be elided
    assert entry["original"]["Loop"] == 1 and entry["original"]["Add"] == 3
    assert entry["lowered"] == {"Cast": 1, "Pow": 1, "Mul": 1}
    assert "torch_demo/doubling (test_data_set_1): original" in run.stdout
    assert "  Pow 1" in run.stdout and "  Loop" not in run.stdout
