"""Differential fuzzing of `--target tract`: generated programs (tests/fuzz/generator.py),
lowered for tract, compute the same as the original under onnxruntime. The tract rules
(If -> Where, Loop -> Scan, unrolling) must preserve meaning like every other rule; seeds that
exercise them are counted so that the test cannot pass by never firing them."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import onnx

import seqlower
from seqlower import runtime_quirks

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fuzz"))
from generator import generate
from harness import compare_outputs, run_ort

SEEDS = range(250)


def test_programs_lowered_for_tract_compute_the_same():
    fired: collections.Counter[str] = collections.Counter()
    failures = []
    for seed in SEEDS:
        program = generate(seed)
        try:
            expected = run_ort(program.model, program.feeds)
        except Exception:
            continue  # onnxruntime rejects some originals (tests/fuzz covers them)
        lowered, report = seqlower.optimize(program.model, target="tract")
        fired.update(name for name in report.rules_fired if name.startswith("tract-"))
        proto = lowered
        try:
            onnx.checker.check_model(proto, full_check=not program.keepdims_corner)
            problem = compare_outputs(expected, run_ort(proto, program.feeds))
        except Exception as error:
            problem = f"{type(error).__name__}: {error}"
            if "FusedMatMul" in problem and runtime_quirks.holds("fused-matmul-double"):
                continue  # onnxruntime's own fault, probed (README quirk table)
        if problem:
            failures.append(f"seed {seed}: {problem}")
    assert not failures, "\n".join(failures)
    assert fired["tract-if-to-where"] >= 5 and fired["tract-loop-unroll"] >= 1, fired
