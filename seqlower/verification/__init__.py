"""Show that a rewritten model computes what the original computes.

`verify(original, candidate)` runs both models on the same inputs (random ones, reproducible from a
seed, or supplied by the user), the original under onnxruntime and the candidate in each runtime
asked for (onnxruntime, openvino, tract), each in a child process, and compares every output; it
returns a `VerifyReport` and never prints. `seqlower.testing.assert_equivalent` wraps it for
pytest, and `seqlower verify` for the command line. `run_in_runtime(runtime, model, feeds)` runs a
model once in any of those runtimes, in this process.

Modules, one job each: `signature` (what to feed), `explore` (what each trial explores: sizes,
loop counts, lengths, kinds of values), `generate` and `constraints` (inputs that stay valid and
run loops), `supplied` (inputs from files), `flattened` (the mapping of a flattened interface),
`runtimes` (one adapter per runtime), `runner` and `worker` (a model in a child process, so that a
crash is a verdict; `onnx.reference`), `coverage` (the instrumented original: If branches taken,
Loop counts), `loops` (iterations per trial), `compare` (tolerances and comparison), `trial` (one
trial's verdict), `session` (the trials, steered towards what is not covered), `report` (the
result), `check` (the driver).
"""

from __future__ import annotations

from seqlower.verification.check import DEFAULT_TIME_BUDGET, DEFAULT_TRIALS, InputSource, verify
from seqlower.verification.compare import DEFAULT_TOLERANCES, Comparison, Tolerance, compare_values
from seqlower.verification.coverage import Coverage
from seqlower.verification.generate import LOOP_ITERATIONS, SEQUENCE_LENGTHS, generate_inputs
from seqlower.verification.report import OutputResult, TrialResult, VerifyReport
from seqlower.verification.runtimes import RUNTIMES, open_session, run_in_runtime
from seqlower.verification.supplied import load_supplied

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "DEFAULT_TOLERANCES",
    "DEFAULT_TRIALS",
    "LOOP_ITERATIONS",
    "SEQUENCE_LENGTHS",
    "Comparison",
    "Coverage",
    "InputSource",
    "OutputResult",
    "RUNTIMES",
    "Tolerance",
    "TrialResult",
    "VerifyReport",
    "compare_values",
    "generate_inputs",
    "load_supplied",
    "open_session",
    "run_in_runtime",
    "verify",
]
