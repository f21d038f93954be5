"""Helpers for users' test suites: assert that a rewritten model is equivalent to its original.

from seqlower.testing import assert_equivalent

def test_lowering(tmp_path):
    assert_equivalent("model.onnx", lowered_model, dims={"batch": 2})

def test_lowering_in_openvino():  # pip install openvino
    assert_equivalent("model.onnx", lowered_model, runtimes=["openvino"])
"""

from __future__ import annotations

__all__ = ["assert_equivalent"]

from collections.abc import Mapping, Sequence

from seqlower.io import ModelSource
from seqlower.verification import InputSource, VerifyReport, verify
from seqlower.verification.check import DEFAULT_TIME_BUDGET, DEFAULT_TRIALS
from seqlower.verification.runner import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT


def assert_equivalent(
    original: ModelSource,
    candidate: ModelSource,
    *,
    trials: int = DEFAULT_TRIALS,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    inputs: InputSource | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    reference: bool = False,
    strict_errors: bool = False,
    runtimes: Sequence[str] = ("onnxruntime",),
    timeout: float = DEFAULT_TIMEOUT,
    time_budget: float | None = DEFAULT_TIME_BUDGET,
    strict_coverage: bool = False,
    edges: bool = True,
    memory_limit: int | None = DEFAULT_MEMORY_LIMIT,
) -> VerifyReport:
    """Run `seqlower.verification.verify` with the same arguments and return its report.

    Raises:
        AssertionError: the models are not shown equivalent (they differ, or too few trials ran
            both to say). The message has one line per failure, naming the trial, the output and
            the error (the maximal absolute and relative errors, the exception a model raised, or
            the signal that crashed its runtime).
    """
    __tracebackhide__ = True  # pytest: show the caller's line, not this one
    report = verify(
        original,
        candidate,
        trials=trials,
        seed=seed,
        dims=dims,
        inputs=inputs,
        rtol=rtol,
        atol=atol,
        reference=reference,
        strict_errors=strict_errors,
        runtimes=runtimes,
        timeout=timeout,
        time_budget=time_budget,
        strict_coverage=strict_coverage,
        edges=edges,
        memory_limit=memory_limit,
    )
    failures = report.failures()
    if failures:
        head = (
            "inconclusive: too few trials ran both models"
            if report.inconclusive
            else "the candidate is not equivalent to the original"
        )
        raise AssertionError(f"{head}:\n" + "\n".join(f"  - {line}" for line in failures))
    return report
