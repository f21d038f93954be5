"""The equivalence check: run the original and the candidate on the same inputs and compare.

`verify` reads both models, checks that their interfaces match (same output names at the same
positions, same inputs; a candidate made by `--flatten-sequence-io` is matched through the
mapping in its metadata, see `flattened`), builds the inputs of every trial (generated, or
supplied by the user), runs the original under onnxruntime and the candidate in each runtime
asked for (onnxruntime by default; openvino, tract), each model in its own child process, and
compares every output. A runtime that crashes is a verdict, not the end of the verifier. With
`reference=True` it also runs the original under `onnx.reference` and notes, per output, whether
the two agree on it, so that a disagreement of the runtimes is not blamed on the rewrite. It
never mutates a model.
"""

from __future__ import annotations

__all__ = ["InputSource", "verify"]

import contextlib
import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.errors import SeqlowerError
from seqlower.io import ModelSource, load_model, model_to_bytes
from seqlower.verification.compare import compare_values, tolerance_for
from seqlower.verification.flattened import Flattening
from seqlower.verification.generate import generate_inputs
from seqlower.verification.loops import loop_iterations
from seqlower.verification.report import (
    OutputResult,
    TrialResult,
    TrialStatus,
    Verdict,
    VerifyReport,
)
from seqlower.verification.runner import (
    DEFAULT_TIMEOUT,
    IsolatedRunner,
    ReferenceRunner,
    RunOutcome,
)
from seqlower.verification.runtimes import RUNTIMES, RuntimeUnavailableError, check_available
from seqlower.verification.signature import InputSpec, feedable_inputs, output_names
from seqlower.verification.supplied import check_feeds, load_supplied
from seqlower.verification.values import (
    Feeds,
    RuntimeValue,
    describe_dtype,
    describe_shape,
    describe_value,
)

InputSource = (
    str | os.PathLike[str] | Mapping[str, RuntimeValue] | Sequence[Mapping[str, RuntimeValue]]
)
"""Supplied inputs: a test-data folder or `.npz` path, one mapping (one trial) or a list of them."""


def verify(
    original: ModelSource,
    candidate: ModelSource,
    *,
    trials: int = 3,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    inputs: InputSource | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    reference: bool = False,
    strict_errors: bool = False,
    runtimes: Sequence[str] = ("onnxruntime",),
    timeout: float = DEFAULT_TIMEOUT,
) -> VerifyReport:
    """Check that `candidate` computes the same outputs as `original`.

    Args:
        original, candidate: a path, an `onnx.ModelProto` or an `onnx_ir.Model`.
        trials: how many sets of random inputs to try (ignored when `inputs` is given).
        seed: the seed of the random inputs; the same seed gives the same inputs.
        dims: sizes of symbolic dimensions of the inputs, by name.
        inputs: inputs to use instead of random ones (see `InputSource`); each set is a trial.
        rtol, atol: tolerances for every float type, replacing the defaults of
            `seqlower.verification.compare`.
        reference: also run the original under `onnx.reference` and say whether it agrees.
        strict_errors: count a trial where both models raise as a failure.
        runtimes: the runtimes to run the candidate in ("onnxruntime", "openvino", "tract");
            the original always runs under onnxruntime. Each trial is compared once per runtime.
        timeout: seconds one model may take to load or to run once before it is killed (and
            reported as crashed).

    Raises:
        ModelInputError: a model or a supplied input cannot be read, or an input cannot be
            generated (its type is not supported, or `dims` names an unknown dimension).
        SeqlowerError: a runtime is unknown or not installed (the message names the extra).
        ValueError: `trials` is below 1 or a tolerance is negative.
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if (rtol is not None and rtol < 0) or (atol is not None and atol < 0):
        raise ValueError("tolerances must not be negative")
    candidate_runtimes = _checked_runtimes(runtimes)
    original_ir = load_model(original)
    candidate_ir = load_model(candidate)
    flattening = Flattening.of(original_ir, candidate_ir)
    specs = feedable_inputs(original_ir)
    problems = _interface_problems(original_ir, candidate_ir, flattening)
    if inputs is None:
        trial_inputs = [
            (
                f"generated (seed {seed}, trial {index})",
                generate_inputs(
                    original_ir, trial=index, seed=seed, dims=dims, lengths=flattening.lengths
                ),
            )
            for index in range(trials)
        ]
    else:
        trial_inputs = _supplied(inputs, specs)
    candidate_feeds = [flattening.feeds(feeds) for _, feeds in trial_inputs]
    names = output_names(original_ir)
    results = []
    with contextlib.ExitStack() as stack:
        original_runner = stack.enter_context(
            IsolatedRunner("onnxruntime", _source(original, original_ir), timeout=timeout)
        )
        candidate_source = _source(candidate, candidate_ir)
        candidate_runners = [
            stack.enter_context(IsolatedRunner(runtime, candidate_source, timeout=timeout))
            for runtime in candidate_runtimes
        ]
        reference_runner = _reference_runner(original, original_ir) if reference else None
        for index, (source, feeds) in enumerate(trial_inputs):
            original_runner.submit(feeds)
            for runner in candidate_runners:
                runner.submit(candidate_feeds[index])
            third = reference_runner.run(feeds) if reference_runner else None
            first = original_runner.result()
            loops = loop_iterations(original_ir, feeds)
            for runner in candidate_runners:
                second = _unflattened(runner.result(), flattening)
                result = _trial(index, source, feeds, names, first, second, third, rtol, atol)
                results.append(dataclasses.replace(result, runtime=runner.runtime, loops=loops))
    settings: dict[str, Any] = {
        "trials": len(trial_inputs),
        "seed": seed,
        "dims": dict(dims or {}),
        "inputs": None if inputs is None else _source_name(inputs),
        "rtol": rtol,
        "atol": atol,
        "tolerances": {
            name: vars(tolerance_for(np.dtype(name), rtol, atol))
            for name in ("float16", "float32", "float64")
        },
        "reference": reference,
        "strict_errors": strict_errors,
        "runtimes": list(candidate_runtimes),
        "timeout": timeout,
        "flattened": {"inputs": dict(flattening.inputs), "outputs": dict(flattening.outputs)}
        if flattening
        else None,
    }
    return VerifyReport(
        trials=tuple(results),
        problems=tuple(problems),
        strict_errors=strict_errors,
        settings=settings,
    )


def _checked_runtimes(runtimes: Sequence[str]) -> list[str]:
    if isinstance(runtimes, str):
        runtimes = [runtimes]
    chosen = list(dict.fromkeys(runtimes))
    if not chosen:
        raise SeqlowerError(f"no runtime to run the candidate in: choose {', '.join(RUNTIMES)}")
    for runtime in chosen:
        try:
            check_available(runtime)
        except (ValueError, RuntimeUnavailableError) as error:
            raise SeqlowerError(str(error)) from None
    return chosen


def _unflattened(outcome: RunOutcome, flattening: Flattening) -> RunOutcome:
    if outcome.outputs is None or not flattening:
        return outcome
    return dataclasses.replace(outcome, outputs=flattening.outputs_of(outcome.outputs))


def _interface_problems(
    original: ir.Model, candidate: ir.Model, flattening: Flattening
) -> list[str]:
    problems = []
    first = flattening.output_names(output_names(original))
    second = output_names(candidate)
    for position, name in enumerate(first):
        if name not in second:
            problems.append(f"the candidate has no output '{name}'")
        elif second.index(name) != position:
            problems.append(
                f"output '{name}' is output {second.index(name)} of the candidate, "
                f"output {position} of the original"
            )
    problems.extend(
        f"the candidate has an extra output '{name}'" for name in second if name not in first
    )
    needed = flattening.input_names([spec.name for spec in feedable_inputs(original)])
    declared = {value.name for value in candidate.graph.inputs}
    problems.extend(
        f"the candidate has no input '{name}'" for name in needed if name not in declared
    )
    problems.extend(
        f"the candidate needs an input '{value.name}' that the original does not have"
        for value in candidate.graph.inputs
        if value.name not in candidate.graph.initializers and value.name not in needed
    )
    return problems


def _supplied(inputs: InputSource, specs: list[InputSpec]) -> list[tuple[str, Feeds]]:
    if isinstance(inputs, (str, os.PathLike)):
        sets = load_supplied(inputs, specs)
        if len(sets) == 1:
            return [(str(inputs), sets[0])]
        return [(f"{inputs} (set {index})", feeds) for index, feeds in enumerate(sets)]
    if isinstance(inputs, Mapping):
        return [("supplied", check_feeds(inputs, specs, "supplied inputs"))]
    return [
        (f"supplied set {index}", check_feeds(feeds, specs, f"supplied input set {index}"))
        for index, feeds in enumerate(inputs)
    ]


def _source_name(inputs: InputSource) -> str:
    if isinstance(inputs, (str, os.PathLike)):
        return str(inputs)
    return "supplied in Python"


def _source(source: ModelSource, model: ir.Model) -> str | bytes:
    """A path is given to the runtime as is (external data stays beside it); else bytes."""
    if isinstance(source, (str, os.PathLike)):
        return str(os.fspath(source))
    if isinstance(source, onnx.ModelProto):
        return bytes(source.SerializeToString())
    return model_to_bytes(model)


def _reference_runner(source: ModelSource, model: ir.Model) -> ReferenceRunner:
    if isinstance(source, onnx.ModelProto):
        return ReferenceRunner(source)
    if isinstance(source, (str, os.PathLike)):
        return ReferenceRunner(os.fspath(source))
    return ReferenceRunner(ir.to_proto(model))


def _trial(
    index: int,
    source: str,
    feeds: Feeds,
    names: list[str],
    original: RunOutcome,
    candidate: RunOutcome,
    reference: RunOutcome | None,
    rtol: float | None,
    atol: float | None,
) -> TrialResult:
    status: TrialStatus
    failed: Verdict
    if original.ok and candidate.ok:
        outputs = tuple(_compared(name, original, candidate, rtol, atol) for name in names)
        status = "ok" if all(output.ok for output in outputs) else "differ"
    else:
        if original.crashed and candidate.crashed:
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
            _with_reference(output, original, candidate, reference, rtol, atol)
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
        name, shape, dtype, result.max_abs_err, result.max_rel_err, result.verdict, result.detail
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
) -> OutputResult:
    note = _reference_note(output.name, original, candidate, reference, rtol, atol)
    return dataclasses.replace(output, reference=note)


def _reference_note(
    name: str,
    original: RunOutcome,
    candidate: RunOutcome,
    reference: RunOutcome,
    rtol: float | None,
    atol: float | None,
) -> str:
    if reference.outputs is None:
        return f"reference failed: {reference.error}"
    expected = reference.outputs.get(name)
    if expected is None:
        return "reference failed: it gave no such output"
    if original.outputs is not None:
        result = compare_values(expected, original.outputs[name], rtol=rtol, atol=atol)
        return "agrees" if result.ok else f"disagrees: {result.verdict}: {result.detail}"
    if candidate.outputs is not None and name in candidate.outputs:
        result = compare_values(expected, candidate.outputs[name], rtol=rtol, atol=atol)
        verdict = "agrees" if result.ok else "disagrees"
        return f"onnxruntime failed on the original; the candidate {verdict} with the reference"
    return "onnxruntime failed on the original"
