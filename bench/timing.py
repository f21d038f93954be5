"""Measurements: onnxruntime latency (one thread, median of many runs) and tool run times, each
tool in a fresh subprocess with a time budget."""

from __future__ import annotations

__all__ = ["latency", "run_tool", "session"]

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def latency(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], *, runs: int, min_seconds: float
) -> tuple[float, list[np.ndarray]]:
    """Median wall time of one run (seconds) over at least `runs` runs and `min_seconds`, after
    a warm-up; and the outputs."""
    sess = session(model)
    feeds = dict(feeds)
    outputs = sess.run(None, feeds)
    for _ in range(3):
        sess.run(None, feeds)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < runs or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
        if len(times) >= 100 * runs:
            break
    return statistics.median(times), outputs


def run_tool(tool: str, model_path: Path, out_path: Path, budget: float) -> dict[str, object]:
    """Run `python -m bench.tools <tool> <model> <out>` with a time budget. Returns its JSON
    ({"seconds": ...}), or {"skipped": reason} when it ran over the budget or failed."""
    command = [sys.executable, "-m", "bench.tools", tool, str(model_path), str(out_path)]
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=budget, check=False
        )
    except subprocess.TimeoutExpired:
        return {"skipped": f"over the {budget:.0f} s budget"}
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"skipped": f"failed: {tail[0][:200]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])
