"""Show that a rewritten model computes what the original computes.

`verify(original, candidate)` runs both models under onnxruntime on the same inputs (random ones,
reproducible from a seed, or supplied by the user) and compares every output; it returns a
`VerifyReport` and never prints. `seqlower.testing.assert_equivalent` wraps it for pytest, and
`seqlower verify` for the command line.

Modules, one job each: `signature` (what to feed), `generate` and `constraints` (random inputs
that stay valid), `supplied` (inputs from files), `runner` (onnxruntime and `onnx.reference`),
`compare` (tolerances and comparison), `report` (the result), `check` (the driver).
"""

from __future__ import annotations

from seqlower.verification.check import InputSource, verify
from seqlower.verification.compare import DEFAULT_TOLERANCES, Comparison, Tolerance, compare_values
from seqlower.verification.generate import LOOP_ITERATIONS, SEQUENCE_LENGTHS, generate_inputs
from seqlower.verification.report import OutputResult, TrialResult, VerifyReport
from seqlower.verification.supplied import load_supplied

__all__ = [
    "DEFAULT_TOLERANCES",
    "LOOP_ITERATIONS",
    "SEQUENCE_LENGTHS",
    "Comparison",
    "InputSource",
    "OutputResult",
    "Tolerance",
    "TrialResult",
    "VerifyReport",
    "compare_values",
    "generate_inputs",
    "load_supplied",
    "verify",
]
