"""One trial's verdict: compare what the original and the candidate returned on the same inputs.

`compare_trial` turns two run outcomes (and, in reference mode, `onnx.reference`'s) into a
`TrialResult`: every output compared when both models ran, else the status says which failed
or crashed. An original killed at the time limit while the candidate did not crash is "original
timed out": nothing to compare with, so neither a difference nor an agreement (a candidate killed
at the limit where the original finished stays "candidate crashed": a slowdown).
"""

from __future__ import annotations

__all__ = ["compare_trial"]

import dataclasses

from seqlower.verification.compare import compare_values
from seqlower.verification.report import OutputResult, TrialResult, TrialStatus, Verdict
from seqlower.verification.runner import RunOutcome
from seqlower.verification.values import Feeds, describe_dtype, describe_shape, describe_value


def compare_trial(
    index: int,
    source: str,
    feeds: Feeds,
    names: list[str],
    original: RunOutcome,
    candidate: RunOutcome,
    reference: RunOutcome | None,
    rtol: float | None,
    atol: float | None,
    *,
    original_runtime: str = "onnxruntime",
) -> TrialResult:
    """The verdict of one trial; `original_runtime` is where `original` ran (named in the
    reference's notes)."""
    status: TrialStatus
    failed: Verdict
    if original.ok and candidate.ok:
        outputs = tuple(_compared(name, original, candidate, rtol, atol) for name in names)
        status = "ok" if all(output.ok for output in outputs) else "differ"
    else:
        if original.timed_out and not candidate.crashed:
            status = failed = "original timed out"
        elif original.crashed and candidate.crashed:
            status = failed = "both crashed"
        elif original.crashed:
            status = failed = "original crashed"
        elif candidate.crashed:
            status = failed = "candidate crashed"
        elif candidate.cannot_run:
            status = failed = "cannot run"
        elif original.ok:
            status = failed = "candidate failed"
        elif candidate.ok:
            status = failed = "original failed"
        else:
            status = failed = "both failed"
        outputs = tuple(_uncompared(name, original, candidate, failed) for name in names)
    if reference is not None:
        outputs = tuple(
            _with_reference(output, original, candidate, reference, rtol, atol, original_runtime)
            for output in outputs
        )
    return TrialResult(
        index=index,
        source=source,
        inputs={name: describe_value(value) for name, value in feeds.items()},
        status=status,
        outputs=outputs,
        original_error=original.error,
        candidate_error=candidate.error,
        reference_error=None if reference is None else reference.error,
    )


def _compared(
    name: str, original: RunOutcome, candidate: RunOutcome, rtol: float | None, atol: float | None
) -> OutputResult:
    expected = (original.outputs or {})[name]
    actual = (candidate.outputs or {}).get(name)
    shape, dtype = describe_shape(expected), describe_dtype(expected)
    if actual is None:
        return OutputResult(
            name, shape, dtype, None, None, "missing", "the candidate has no such output"
        )
    result = compare_values(expected, actual, rtol=rtol, atol=atol)
    return OutputResult(
        name,
        shape,
        dtype,
        result.max_abs_err,
        result.max_rel_err,
        result.verdict,
        result.detail,
        scale=result.scale,
    )


def _uncompared(
    name: str, original: RunOutcome, candidate: RunOutcome, verdict: Verdict
) -> OutputResult:
    value = (original.outputs or candidate.outputs or {}).get(name)
    shape = "-" if value is None else describe_shape(value)
    dtype = "-" if value is None else describe_dtype(value)
    blamed = candidate if verdict in ("candidate crashed", "cannot run") else original
    error = blamed.error if blamed.error is not None else candidate.error
    return OutputResult(name, shape, dtype, None, None, verdict, error or "")


def _with_reference(
    output: OutputResult,
    original: RunOutcome,
    candidate: RunOutcome,
    reference: RunOutcome,
    rtol: float | None,
    atol: float | None,
    runtime: str,
) -> OutputResult:
    note = _reference_note(output.name, original, candidate, reference, rtol, atol, runtime)
    return dataclasses.replace(output, reference=note)


def _reference_note(
    name: str,
    original: RunOutcome,
    candidate: RunOutcome,
    reference: RunOutcome,
    rtol: float | None,
    atol: float | None,
    runtime: str,
) -> str:
    if reference.outputs is None:
        return f"reference failed: {reference.error}"
    expected = reference.outputs.get(name)
    if expected is None:
        return "reference failed: it gave no such output"
    if original.outputs is not None:
        result = compare_values(expected, original.outputs[name], rtol=rtol, atol=atol)
        return "agrees" if result.ok else f"disagrees: {result.verdict}: {result.detail}"
    what = (
        f"the original did not finish in {runtime}"
        if original.timed_out
        else f"{runtime} failed on the original"
    )
    if candidate.outputs is not None and name in candidate.outputs:
        result = compare_values(expected, candidate.outputs[name], rtol=rtol, atol=atol)
        verdict = "agrees" if result.ok else "disagrees"
        return f"{what}; the candidate {verdict} with the reference"
    return what
