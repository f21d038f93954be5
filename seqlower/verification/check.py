"""The equivalence check: run the original and the candidate on the same inputs and compare.

`verify` reads both models, checks that their interfaces match (same output names at the same
positions, same inputs; a candidate made by `--flatten-sequence-io` is matched through the
mapping in its metadata, see `flattened`), builds the inputs of every trial (generated, or
supplied by the user), runs the original under onnxruntime and the candidate in each runtime
asked for (onnxruntime by default; openvino, tract), each model in its own child process, and
compares every output: in another runtime, with the original run there too where it loads. A
runtime that crashes is a verdict, not the end of the verifier. With
`reference=True` it also runs the original under `onnx.reference` and notes, per output, whether
the two agree on it, so that a disagreement of the runtimes is not blamed on the rewrite. It
never mutates a model.
"""

from __future__ import annotations

__all__ = ["DEFAULT_TIME_BUDGET", "DEFAULT_TRIALS", "InputSource", "verify"]

import contextlib
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.errors import ModelInputError, SeqlowerError
from seqlower.io import ModelSource, load_model, model_to_bytes
from seqlower.ops import iter_all_graphs
from seqlower.verification.compare import tolerance_for
from seqlower.verification.coverage import Probe, instrument
from seqlower.verification.edges import Edge, edge_cases
from seqlower.verification.explore import compared_numbers, scheduled_plan
from seqlower.verification.flattened import Flattening
from seqlower.verification.report import VerifyReport
from seqlower.verification.runner import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_TIMEOUT,
    IsolatedRunner,
    ReferenceRunner,
)
from seqlower.verification.runtimes import RUNTIMES, RuntimeUnavailableError, check_available
from seqlower.verification.session import Generation, Session
from seqlower.verification.signature import (
    InputSpec,
    feedable_inputs,
    input_spec,
    output_names,
)
from seqlower.verification.specification import SpecificationJudge, splits_as_onnxruntime
from seqlower.verification.supplied import check_feeds, load_supplied
from seqlower.verification.values import Feeds, RuntimeValue

DEFAULT_TRIALS = 16
"""Trials of generated inputs by default: 3 typical, 10 exploring, 3 exploring or steered."""

DEFAULT_TIME_BUDGET = 10.0
"""Seconds after which no new trial starts, by default."""

InputSource = (
    str | os.PathLike[str] | Mapping[str, RuntimeValue] | Sequence[Mapping[str, RuntimeValue]]
)
"""Supplied inputs: a test-data folder or `.npz` path, one mapping (one trial) or a list of them."""


def verify(
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
    """Check that `candidate` computes the same outputs as `original`.

    Args:
        original, candidate: a path, an `onnx.ModelProto` or an `onnx_ir.Model`.
        trials: how many sets of generated inputs to try (ignored when `inputs` is given):
            trials 0-2 typical, later ones exploring sizes 0 to 8, loop counts, sequence
            lengths and edge values (see `seqlower.verification.explore`), the last ones
            steered towards If branches no trial took yet.
        seed: the seed of the generated inputs; the same seed gives the same inputs.
        dims: sizes of symbolic dimensions of the inputs, by name (fixed in every trial). A dim
            the candidate fixes (a candidate made with `--dim N=10`) is bound to its size.
        inputs: inputs to use instead of random ones (see `InputSource`); each set is a trial.
        rtol, atol: tolerances for every float type, replacing the defaults of
            `seqlower.verification.compare`.
        reference: also run the original under `onnx.reference` and say whether it agrees.
        strict_errors: count a trial where both models raise as a failure.
        runtimes: the runtimes to run the candidate in ("onnxruntime", "openvino", "tract").
            In another runtime than onnxruntime the candidate is compared with the original
            run in that same runtime where the original loads there (a difference between
            runtimes is not one made by the rewrite); where it does not, with the original in
            onnxruntime, on inputs without NaN only (the notes and `settings["compared_with"]`
            say which). Each trial is compared once per runtime.
        timeout: seconds one model may take to load or to run once before it is killed (and
            reported as crashed).
        time_budget: seconds after which no new trial starts (at least one runs); None for no
            limit. The report's `notes` say when it cut the run short.
        edges: after the generated trials, run one trial per edge case of the original's
            operators and inputs (at most `trials` of them; see
            `seqlower.verification.edges`).
        memory_limit: megabytes of address space each model's child process may take (plus
            three times the model's size); an allocation beyond it fails, and the error says
            so. None or 0: no limit.
        strict_coverage: count an If branch no trial took, and an output empty in every
            trial, as failures (they are `warnings()` otherwise).

    Raises:
        ModelInputError: the two models take different inputs (names, kinds, element types or
            ranks; said before any trial), a model or a supplied input cannot be read, or an
            input cannot be generated (its type is not supported, or `dims` names an unknown
            dimension).
        SeqlowerError: a runtime is unknown or not installed (the message names the extra).
        ValueError: `trials` is below 1, a tolerance or the time budget is negative.
    """
    started = time.monotonic()
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if time_budget is not None and time_budget < 0:
        raise ValueError(f"the time budget must not be negative, got {time_budget}")
    if (rtol is not None and rtol < 0) or (atol is not None and atol < 0):
        raise ValueError("tolerances must not be negative")
    candidate_runtimes = _checked_runtimes(runtimes)
    original_ir = load_model(original)
    candidate_ir = load_model(candidate)
    flattening = Flattening.of(original_ir, candidate_ir)
    specs = feedable_inputs(original_ir)
    problems = _interface_problems(original_ir, candidate_ir, flattening)
    mismatch = _input_mismatch(original_ir, candidate_ir, flattening)
    if mismatch:
        raise ModelInputError(
            f"the models take different inputs, so they cannot be compared: {'; '.join(mismatch)}"
        )
    given = dict(dims or {})
    named, pinned, notes = _fixed_by_candidate(specs, candidate_ir, given)
    generation = Generation(
        model=original_ir,
        specs=specs,
        seed=seed,
        dims={**named, **given},
        pinned=pinned,
        lengths=flattening.lengths,
        numbers=compared_numbers(original_ir),
    )
    supplied = None
    if inputs is None:
        generation.feeds(0, scheduled_plan(0, seed))  # bad input fails here, before any run
    else:
        supplied = _supplied(inputs, specs)
    names = output_names(original_ir)
    instrumented, probes = _instrumented(original, original_ir)
    with contextlib.ExitStack() as stack:
        original_source = _source(original, original_ir)
        original_runner = stack.enter_context(
            IsolatedRunner(
                "onnxruntime",
                instrumented if instrumented is not None else original_source,
                timeout=timeout,
                memory_limit=memory_limit,
            )
        )
        candidate_source = _source(candidate, candidate_ir)
        candidate_runners = [
            stack.enter_context(
                IsolatedRunner(
                    runtime, candidate_source, timeout=timeout, memory_limit=memory_limit
                )
            )
            for runtime in candidate_runtimes
        ]

        natives = {
            runtime: stack.enter_context(
                IsolatedRunner(runtime, original_source, timeout=timeout, memory_limit=memory_limit)
            )
            for runtime in candidate_runtimes
            if runtime != "onnxruntime"
        }

        def plain() -> IsolatedRunner:
            return stack.enter_context(
                IsolatedRunner(
                    "onnxruntime", original_source, timeout=timeout, memory_limit=memory_limit
                )
            )

        session = Session(
            model=original_ir,
            names=names,
            flattening=flattening,
            original=original_runner,
            probes=probes,
            plain=plain,
            sources=(original_source, candidate_source),
            candidates=candidate_runners,
            natives=natives,
            reference=_reference_runner(original, original_ir) if reference else None,
            specification=SpecificationJudge(
                lambda: _reference_runner(original, original_ir, splits_as_onnxruntime()),
                ops={node.op_type for graph in iter_all_graphs(original_ir) for node in graph},
                rtol=rtol,
                atol=atol,
            ),
            rtol=rtol,
            atol=atol,
            deadline=time.monotonic() + (math.inf if time_budget is None else time_budget),
            timeout=timeout,
            memory_limit=memory_limit,
        )
        if supplied is None:
            session.run_generated(generation, trials)
            if edges:
                session.run_edges(
                    generation, _edges(original_ir, specs, generation)[:trials], trials
                )
        else:
            session.run_supplied(supplied)
        session.settle()
    settings: dict[str, Any] = {
        "trials": len({trial.index for trial in session.results}),
        "seed": seed,
        "dims": given,
        "pinned": named,
        "symbolic_dims": sorted(
            {dim for spec in specs for dim in spec.shape or () if isinstance(dim, str) and dim}
        ),
        "inputs": None if inputs is None else _source_name(inputs),
        "rtol": rtol,
        "atol": atol,
        "tolerances": {
            name: vars(tolerance_for(np.dtype(name), rtol, atol))
            for name in ("float16", "float32", "float64")
        },
        "reference": reference,
        "strict_errors": strict_errors,
        "strict_coverage": strict_coverage,
        "time_budget": time_budget,
        "runtimes": list(candidate_runtimes),
        "compared_with": session.comparisons,
        "timeout": timeout,
        "memory_limit": memory_limit or None,
        "flattened": {"inputs": dict(flattening.inputs), "outputs": dict(flattening.outputs)}
        if flattening
        else None,
    }
    return VerifyReport(
        trials=tuple(session.results),
        problems=tuple(problems),
        strict_errors=strict_errors,
        settings=settings,
        coverage=session.coverage,
        strict_coverage=strict_coverage,
        notes=tuple([*notes, *session.notes, *session.runtime_notes()]),
        empty_outputs=session.empty_outputs,
        constant_outputs=session.constant_outputs,
        seconds=time.monotonic() - started,
        reproduction=session.reproduction,
    )


def _edges(model: ir.Model, specs: list[InputSpec], generation: Generation) -> list[Edge]:
    """The edge cases of the original; none when reading them fails (they are a bonus: never
    let them stop a verification)."""
    try:
        return edge_cases(model, specs, generation.dims)
    except Exception:  # an unusual graph the providers do not expect
        return []


def _fixed_by_candidate(
    specs: list[InputSpec], candidate: ir.Model, given: Mapping[str, int]
) -> tuple[dict[str, int], dict[tuple[str, int], int], list[str]]:
    """The dims the original leaves open and the candidate fixes (a candidate made with
    `--dim N=10`): by name, and by (input, axis) for unnamed dims; with a note for each name."""
    declared = {value.name: value for value in candidate.graph.inputs}
    named: dict[str, int] = {}
    pinned: dict[tuple[str, int], int] = {}
    where: dict[str, str] = {}
    conflicts: dict[str, str] = {}
    for spec in specs:
        value = declared.get(spec.name)
        if value is None or value.shape is None or spec.shape is None or spec.is_sequence:
            continue
        if len(value.shape) != len(spec.shape):
            continue
        for axis, (mine, theirs) in enumerate(zip(spec.shape, value.shape.dims, strict=True)):
            if isinstance(mine, int) or not isinstance(theirs, int):
                continue
            if mine and mine in given and given[mine] != theirs and mine not in conflicts:
                conflicts[mine] = (
                    f"--dim {mine}={given[mine]}: the candidate's input '{spec.name}' fixes "
                    f"{mine} to {theirs}, so it fails on any other size (--dim {mine}={theirs} "
                    "matches it)"
                )
            elif mine and mine not in given:
                if mine not in named:
                    named[mine], where[mine] = theirs, spec.name
            elif not mine:
                pinned[(spec.name, axis)] = theirs
    notes = [
        f"{name} is {size} in every trial: the candidate's input '{where[name]}' fixes it"
        for name, size in named.items()
    ]
    return named, pinned, [*notes, *conflicts.values()]


def _instrumented(source: ModelSource, model: ir.Model) -> tuple[bytes | None, tuple[Probe, ...]]:
    """The original with its If conditions and Loop counts as extra outputs (see `coverage`),
    or None when it has neither or cannot be copied in memory (its weights are external)."""
    try:
        if isinstance(source, onnx.ModelProto):
            proto = source
        elif isinstance(source, (str, os.PathLike)):
            proto = onnx.load(os.fspath(source), load_external_data=False)
        else:
            proto = ir.to_proto(model)
        if any(_is_external(tensor) for tensor in proto.graph.initializer):
            return None, ()
        copy, probes = instrument(proto)
        if not probes:
            return None, ()
        return copy.SerializeToString(), probes
    except Exception:  # coverage is a bonus: never let it stop a verification
        return None, ()


def _is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


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
    return problems


def _input_mismatch(original: ir.Model, candidate: ir.Model, flattening: Flattening) -> list[str]:
    """How the inputs of the two models differ: names, kinds, element types and ranks (a
    symbolic dim the candidate fixes is no difference)."""
    specs = feedable_inputs(original)
    needed = flattening.input_names([spec.name for spec in specs])
    declared = {value.name: value for value in candidate.graph.inputs}
    problems = [f"the candidate has no input '{name}'" for name in needed if name not in declared]
    problems.extend(
        f"the candidate needs an input '{value.name}' that the original does not have"
        for value in candidate.graph.inputs
        if value.name not in candidate.graph.initializers and value.name not in needed
    )
    for spec in specs:
        value = declared.get(spec.name)
        if value is None or value.name in candidate.graph.initializers:
            continue
        theirs = _describe_input(value)
        mine = _describe_spec(spec)
        if theirs is not None and mine != theirs and _comparable(mine, theirs):
            problems.append(
                f"input '{spec.name}': {_words(mine)}, in the original; "
                f"{_words(theirs)}, in the candidate"
            )
    return problems


_Kind = tuple[bool, str, int | None]  # (is a sequence, element type, rank or None)


def _describe_spec(spec: InputSpec) -> _Kind:
    return (
        spec.is_sequence,
        spec.dtype.name.lower(),
        None if spec.shape is None else len(spec.shape),
    )


def _describe_input(value: ir.Value) -> _Kind | None:
    try:
        return _describe_spec(input_spec(value))
    except ModelInputError:  # neither a tensor nor a sequence of tensors
        return None


def _comparable(mine: _Kind, theirs: _Kind) -> bool:
    """Differs in kind or type, or in rank where both declare one."""
    if mine[:2] != theirs[:2]:
        return True
    return mine[2] is not None and theirs[2] is not None and mine[2] != theirs[2]


def _words(kind: _Kind) -> str:
    """`tensor of float, rank 2`, `sequence of int64 tensors, rank 1`."""
    is_sequence, dtype, rank = kind
    ranked = "" if rank is None else f", rank {rank}"
    return f"sequence of {dtype} tensors{ranked}" if is_sequence else f"tensor of {dtype}{ranked}"


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


def _reference_runner(
    source: ModelSource, model: ir.Model, new_ops: tuple[type, ...] = ()
) -> ReferenceRunner:
    if isinstance(source, onnx.ModelProto):
        return ReferenceRunner(source, new_ops)
    if isinstance(source, (str, os.PathLike)):
        return ReferenceRunner(os.fspath(source), new_ops)
    return ReferenceRunner(ir.to_proto(model), new_ops)
