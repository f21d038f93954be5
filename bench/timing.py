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
    models: Mapping[str, onnx.ModelProto],
    feeds: Mapping[str, np.ndarray],
    *,
    runs: int,
    min_seconds: float,
) -> dict[str, tuple[float, list[np.ndarray]]]:
    """Per model: the median wall time of one run (seconds) and the outputs. The models are
    timed in interleaved rounds (each round runs every model a few times), so that a change in
    machine load during the measurement affects all of them alike; each model gets at least
    `runs` runs and `min_seconds` of running (at most 100 * `runs` runs)."""
    feeds = dict(feeds)
    sessions = {name: session(model) for name, model in models.items()}
    outputs = {name: sess.run(None, feeds) for name, sess in sessions.items()}
    for sess in sessions.values():
        for _ in range(3):
            sess.run(None, feeds)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    spent = dict.fromkeys(sessions, 0.0)

    def needs_more(name: str) -> bool:
        done = len(times[name])
        return done < 100 * runs and (done < runs or spent[name] < min_seconds)

    pending = [name for name in sessions if needs_more(name)]
    while pending:
        for name in pending:
            # a short block per model and round, after one unrecorded run: each model is timed
            # with warm caches, not with the caches the previous model left
            sessions[name].run(None, feeds)
            for _ in range(5):
                start = time.perf_counter()
                sessions[name].run(None, feeds)
                elapsed = time.perf_counter() - start
                times[name].append(elapsed)
                spent[name] += elapsed
        pending = [name for name in pending if needs_more(name)]
    return {name: (statistics.median(times[name]), outputs[name]) for name in sessions}


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
