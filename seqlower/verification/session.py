"""Run the trials of one verify call: choose each trial's inputs, run both models, compare, and
record what the original did, steering later trials towards what no trial covered yet.

The original runs as an instrumented copy (`seqlower.verification.coverage`) whose extra outputs
say which If branches it took and how often its Loops ran; they are stripped before comparing.
Should the copy fail where the candidate ran, or fail to load, the original itself is run instead
(in a child process of its own, started only then), so that instrumenting never makes a verdict.

Trials follow the schedule of `seqlower.verification.explore`. From trial `STEER_FROM` on, while
something is not covered (an If branch fewer than two trials took, a Loop that never ran 5 times,
an output empty in every trial, fewer than three trials that ran both models), the session first
tries `SEARCH_TRIES` input sets on the original alone (every tensor filled with each constant the
model compares with, and its neighbours; then with the size of the dims; then random plans) and
runs the trial on the inputs that cover most of it; when none does, it stops searching and goes on
with random plans. The session stops early when `deadline` passes (at least one trial always runs).

A trial whose outputs differ is run once more, each model in a fresh process: when the original
then gives other outputs on the same inputs (onnxruntime reads memory it never wrote for some
inputs a model does not accept, such as an empty tensor Concat takes with a mismatched dim), the
trial is "unstable" and proves nothing. When only the candidate changes, the difference holds:
a steady original and a candidate that changes from run to run are not equivalent. Once one
difference held, later ones are not checked again.

Exploring inputs can make a model loop for ever (a `while` loop over +Inf). A run from trial 3 on
may therefore take at most 50 times the slowest of trials 1 and 2 (at least `EXPLORING_TIMEOUT`
seconds, at most `timeout`) before it is killed; both models killed on an input is no difference,
and an original killed where the candidate did not crash is not compared ("original timed out").
"""

from __future__ import annotations

__all__ = ["SEARCH_TRIES", "STEER_FROM", "Session", "original_to_compare"]

import dataclasses
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from seqlower import runtime_quirks
from seqlower.verification.compare import compare_values
from seqlower.verification.coverage import Coverage, Probe
from seqlower.verification.edges import Edge
from seqlower.verification.explore import (
    PROFILE_WORDS,
    TrialPlan,
    neighbours,
    random_plan,
    scheduled_plan,
)
from seqlower.verification.flattened import Flattening
from seqlower.verification.generate import Pinned, generate_edge, generate_inputs
from seqlower.verification.loops import loop_iterations
from seqlower.verification.report import TrialResult, TrialStatus
from seqlower.verification.runner import IsolatedRunner, ReferenceRunner, RunOutcome
from seqlower.verification.runtimes import ModelData
from seqlower.verification.saved import Reproduction
from seqlower.verification.signature import InputSpec, feedable_inputs
from seqlower.verification.specification import SpecificationJudge
from seqlower.verification.trial import compare_trial
from seqlower.verification.values import Feeds, RuntimeValue, describe_value, has_nan

EXPLORING_TIMEOUT = 5.0
"""Seconds an exploring run may take at least before it is killed (see `Session`)."""

STEER_FROM = 13
"""The first trial that may be steered towards what earlier trials did not cover."""

WANTED_COMPARED = 3
"""Fewer trials than this that ran both models make the verifier search for inputs they accept
(a verdict of equivalence needs 2: `seqlower.verification.report.MIN_COMPARED`)."""

SEARCH_TRIES = 24
"""Random input sets run on the original alone when looking for uncovered behaviour."""


@dataclasses.dataclass
class Generation:
    """How to generate a trial's inputs."""

    model: ir.Model
    specs: list[InputSpec]
    seed: int
    dims: Mapping[str, int]
    pinned: Pinned
    lengths: Mapping[str, int]
    numbers: tuple[float, ...]

    def feeds(self, trial: int, plan: TrialPlan, attempt: int = 0) -> Feeds:
        return generate_inputs(
            self.model,
            trial=trial,
            seed=self.seed,
            dims=self.dims,
            lengths=self.lengths,
            plan=plan,
            pinned=self.pinned,
            numbers=self.numbers,
            attempt=attempt,
        )

    def edge_feeds(self, trial: int, edge: Edge) -> Feeds | None:
        return generate_edge(
            self.model,
            edge,
            trial=trial,
            seed=self.seed,
            dims=self.dims,
            lengths=self.lengths,
            pinned=self.pinned,
            numbers=self.numbers,
        )


class Session:
    """The trials of one verify call. `original` runs the instrumented copy (with `probes`) or
    the original itself (no probes); `plain` starts a runner of the original itself."""

    def __init__(
        self,
        *,
        model: ir.Model,
        names: list[str],
        flattening: Flattening,
        original: IsolatedRunner,
        probes: tuple[Probe, ...],
        plain: Callable[[], IsolatedRunner],
        sources: tuple[ModelData, ModelData],
        candidates: Sequence[IsolatedRunner],
        natives: Mapping[str, IsolatedRunner] | None = None,
        reference: ReferenceRunner | None,
        specification: SpecificationJudge | None = None,
        rtol: float | None,
        atol: float | None,
        deadline: float,
        timeout: float,
        memory_limit: int | None = None,
    ) -> None:
        self._model = model
        self._names = names
        self._flattening = flattening
        self._original = original
        self._probes = probes
        self._plain_factory = plain
        self._plain: IsolatedRunner | None = None
        self._sources = sources
        self._confirmed = False  # a difference held when both models ran again
        self._candidates = candidates
        self._natives = dict(natives or {})  # the original in each other runtime
        self._not_native: dict[str, str] = {}  # runtimes the original does not load in
        self._runtime_differs: dict[str, list[int]] = {}
        self._reference = reference
        self._specification = specification
        self._rtol, self._atol = rtol, atol
        self._deadline = deadline
        self._timeout = timeout
        self._memory = memory_limit
        self._typical = 0.0  # the slowest of trials 1 and 2, in seconds
        self.coverage = Coverage(probes)
        self.results: list[TrialResult] = []
        self.notes: list[str] = []
        self.reproduction: Reproduction | None = None  # the first trial that showed a difference
        self._nonempty: set[str] = set()
        self._hashes: dict[str, set[str]] = {name: set() for name in names}
        self._compared = 0
        self._searching = True
        # failing trials judged before the specification could be (`settle`): the position of
        # the result, its feeds and both outcomes and probes; and the reproduction of each of
        # them and of the first failing trial judged for good, by the position of its result
        self._undecided: list[tuple[int, Feeds, RunOutcome, RunOutcome, dict]] = []
        self._reproductions: dict[int, Reproduction] = {}
        self._failed_for_good = False

    # -- the trials ---------------------------------------------------------------------------

    def run_generated(self, generation: Generation, trials: int) -> None:
        """Run `trials` generated trials (fewer when the deadline passes)."""
        has_loops = bool(_fed_loops(self._model))
        for index in range(trials):
            if index and time.monotonic() > self._deadline:
                self.notes.append(
                    f"stopped after {index} of {trials} trials: the time budget ran out "
                    "(--time-budget gives more)"
                )
                break
            plan = scheduled_plan(index, generation.seed)
            feeds = None
            if index >= STEER_FROM and self._searching and self._uncovered():
                found = self._search(generation, index)
                if found is None:
                    self._searching = False
                else:
                    plan, feeds = found
            if feeds is None:
                feeds = generation.feeds(index, plan)
            source = f"generated (seed {generation.seed}, trial {index})"
            self._run(index, source, feeds, _describe(generation.specs, feeds, plan, has_loops))

    def run_edges(self, generation: Generation, edges: Sequence[Edge], first: int) -> None:
        """One trial per edge case (numbered from `first`), while the deadline allows; an
        edge that cannot apply to its trial is left out."""
        index = first
        for edge in edges:
            if time.monotonic() > self._deadline:
                self.notes.append(
                    f"stopped before the edge case {edge.label!r}: the time budget ran out "
                    "(--time-budget gives more)"
                )
                break
            try:
                feeds = generation.edge_feeds(index, edge)
            except Exception:  # an edge that does not fit this model's inputs: left out
                feeds = None
            if feeds is None:
                continue
            source = f"generated (seed {generation.seed}, trial {index}, edge case)"
            self._run(index, source, feeds, f"edge case: {edge.label}")
            index += 1

    def run_supplied(self, sets: Sequence[tuple[str, Feeds]]) -> None:
        """Run one trial per supplied input set."""
        for index, (source, feeds) in enumerate(sets):
            self._run(index, source, feeds, "")

    @property
    def empty_outputs(self) -> tuple[str, ...]:
        if not self._compared:
            return ()
        return tuple(name for name in self._names if name not in self._nonempty)

    @property
    def constant_outputs(self) -> tuple[str, ...]:
        if self._compared < 2:
            return ()
        return tuple(
            name for name in self._names if name in self._nonempty and len(self._hashes[name]) == 1
        )

    def settle(self) -> None:
        """Judge again, once the trials are run, each failing trial judged before the
        specification could be (its evaluator is trusted only after a trial both models ran
        alike, which may come later: trial 0 of an empty misfit that onnxruntime joins); the
        reproduction is then the first trial still failing."""
        judge = self._specification
        if not self._undecided or judge is None or judge.undecided:
            return
        for position, feeds, first, second, probes in self._undecided:
            before = self.results[position]
            after = self._judged(before, feeds, first, second, probes)
            if after.status not in _FAILING:
                self.results[position] = after
                self._reproductions.pop(position, None)
        self._undecided.clear()
        failing = sorted(self._reproductions)
        self.reproduction = self._reproductions[failing[0]] if failing else None

    # -- one trial ----------------------------------------------------------------------------

    def _limit(self, index: int) -> float | None:
        """The timeout of a run in trial `index` (None: the runner's own)."""
        if index < 3:
            return None
        return min(self._timeout, max(EXPLORING_TIMEOUT, 50 * self._typical))

    def _run(self, index: int, source: str, feeds: Feeds, plan: str) -> None:
        started = time.monotonic()
        limit = self._limit(index) if plan else None
        candidate_feeds = self._flattening.feeds(feeds)
        self._original.submit(feeds, timeout=limit)
        natives = [self._natives.get(runner.runtime) for runner in self._candidates]
        for native in natives:
            if native is not None:
                native.submit(feeds, timeout=limit)
        for runner in self._candidates:
            runner.submit(candidate_feeds, timeout=limit)
        third = self._reference.run(feeds) if self._reference is not None else None
        first = self._original.result()
        native_outcomes = [None if native is None else native.result() for native in natives]
        seconds = [_unflattened(runner.result(), self._flattening) for runner in self._candidates]
        ran = any(second.ok for second in seconds)
        first, probe_values = self._checked(first, feeds, ran, limit)
        if index in (1, 2):
            self._typical = max(self._typical, time.monotonic() - started)
        loops = loop_iterations(self._model, feeds)
        compared = False
        for runner, second, native in zip(self._candidates, seconds, native_outcomes, strict=True):
            against = self._against(runner.runtime, native, first, second, feeds)
            if against is None:  # not comparable in this runtime (said in the notes)
                self.results.append(
                    TrialResult(
                        index=index,
                        source=source,
                        inputs={name: describe_value(value) for name, value in feeds.items()},
                        status="not comparable",
                        outputs=(),
                        original_error=(
                            f"the original does not load in {runner.runtime}, and "
                            "onnxruntime's is compared only on inputs without NaN"
                        ),
                        runtime=runner.runtime,
                        loops=loops,
                        plan=plan,
                    )
                )
                continue
            original_runtime = "onnxruntime" if against is first else runner.runtime
            result = compare_trial(
                index,
                source,
                feeds,
                self._names,
                against,
                second,
                third,
                self._rtol,
                self._atol,
                original_runtime=original_runtime,
            )
            if result.status == "differ" and against is not first and first.ok:
                # the original itself runs differently in this runtime: the candidate may
                # still compute what the original computes in onnxruntime
                alternative = compare_trial(
                    index, source, feeds, self._names, first, second, third, self._rtol, self._atol
                )
                if alternative.status == "ok":
                    self._runtime_differs.setdefault(runner.runtime, []).append(index)
                    result = alternative
            if against is first:
                result = self._judged(result, feeds, first, second, probe_values)
            result = dataclasses.replace(result, runtime=runner.runtime, loops=loops, plan=plan)
            if result.status == "differ" and not self._stable(
                feeds, against, original_runtime, runner, candidate_feeds, second, limit
            ):
                result = _unstable(result)
            compared = compared or result.compared
            self.results.append(result)
            judge = self._specification
            undecided = against is first and judge is not None and judge.undecided
            if result.status in _FAILING and (undecided or not self._failed_for_good):
                position = len(self.results) - 1
                self._reproductions[position] = Reproduction(
                    index, dict(feeds), against.outputs, tuple(feedable_inputs(self._model))
                )
                self.reproduction = self.reproduction or self._reproductions[position]
                if undecided:
                    self._undecided.append((position, feeds, first, second, probe_values))
                else:
                    self._failed_for_good = True
        if compared and first.outputs is not None:
            self._compared += 1
            self.coverage.record(probe_values)
            self.coverage.record_sizes(*_sizes(self._model, feeds))
            self._track(first.outputs)

    def _against(
        self,
        runtime: str,
        native: RunOutcome | None,
        first: RunOutcome,
        candidate: RunOutcome,
        feeds: Feeds,
    ) -> RunOutcome | None:
        """What the candidate in `runtime` is compared with (`original_to_compare`); a runtime
        the original does not load in is remembered for the notes."""
        against, not_loading = original_to_compare(native, first, candidate, feeds)
        if not_loading is not None:
            self._not_native.setdefault(runtime, not_loading)
        return against

    @property
    def comparisons(self) -> dict[str, str]:
        """Per runtime the candidate ran in, what it was compared with."""
        result = {}
        for runner in self._candidates:
            runtime = runner.runtime
            if runtime not in self._natives:
                result[runtime] = "the original in onnxruntime"
            elif runtime in self._not_native:
                result[runtime] = (
                    f"the original in onnxruntime (it does not load in {runtime}), "
                    "on inputs without NaN"
                )
            else:
                result[runtime] = f"the original in {runtime}"
        return result

    def runtime_notes(self) -> list[str]:
        """What the notes say of the runtimes: what was compared with what, and why some
        trials were not compared."""
        notes = []
        for runtime, error in self._not_native.items():
            notes.append(
                f"{runtime}: the original does not load there ({error}); the candidate in "
                f"{runtime} was compared with the original in onnxruntime, on inputs without NaN "
                "(runtimes handle NaN differently)"
            )
        for runtime, indices in self._runtime_differs.items():
            notes.append(
                f"{runtime}: in {'trial' if len(indices) == 1 else 'trials'} "
                f"{', '.join(map(str, indices))} the original gave other values in {runtime} than "
                "in onnxruntime; the candidate agrees with onnxruntime (a difference of the "
                "runtimes, not of the rewrite)"
            )
        return notes

    def _stable(
        self,
        feeds: Feeds,
        first: RunOutcome,
        original_runtime: str,
        runner: IsolatedRunner,
        candidate_feeds: Feeds,
        second: RunOutcome,
        limit: float | None,
    ) -> bool:
        """Whether the difference holds: run again on the same inputs, each model in a fresh
        process (another history of memory), the original gives the same outputs, and the
        candidate either does too or is the one model that changes (a candidate that reads
        memory it never wrote differs from a steady original). Once one difference held, later
        ones are trusted: the verdict stands either way."""
        if self._confirmed:
            return True
        timeout = self._timeout if limit is None else limit
        with (
            IsolatedRunner(
                original_runtime, self._sources[0], timeout=timeout, memory_limit=self._memory
            ) as original,
            IsolatedRunner(
                runner.runtime, self._sources[1], timeout=timeout, memory_limit=self._memory
            ) as candidate,
        ):
            original.submit(feeds)
            candidate.submit(candidate_feeds)
            again = original.result()
            candidate_again = _unflattened(candidate.result(), self._flattening)
        original_same = self._same(first, again)
        if original_same and not self._same(second, candidate_again):
            return True  # the candidate alone changes: it cannot be relied on, the difference holds
        self._confirmed = original_same
        return self._confirmed

    def _judged(
        self,
        result: TrialResult,
        feeds: Feeds,
        original: RunOutcome,
        candidate: RunOutcome,
        probes: Mapping[str, np.ndarray],
    ) -> TrialResult:
        """`result`, or where `onnx.reference` sides with the candidate against onnxruntime's
        run of the original (see `seqlower.verification.specification`), the same trial as
        "outside the specification" (onnxruntime ran an input the specification rejects: only the
        candidate failed, and the reference fails on the original too; or the outputs differ, and
        the reference rejects a concatenation of the original there) or "specification sides with
        candidate" (the outputs differ, and the reference computes the candidate's). Where only
        the candidate failed and the original's probes show a split of a non-empty axis by an
        empty list of sizes (which onnx.reference splits into no chunk, onnxruntime into chunks
        of one), the trial is outside the specification without asking the reference."""
        if result.status == "candidate failed":
            split = self.coverage.empty_split(probes)
            if split is not None and runtime_quirks.holds("split-to-sequence-empty-split"):
                rejected = (
                    f"the original's {split} splits a non-empty axis by an empty list of sizes, "
                    "which the specification rejects and onnxruntime splits into chunks of one"
                )
                return _settled(result, "outside the specification", rejected_input=rejected)
        if self._specification is None:
            return result
        if result.status == "ok" and original.outputs is not None:
            self._specification.witness(feeds, original.outputs)
        if time.monotonic() > self._deadline:
            return result
        if result.status == "candidate failed":
            excuse = self._specification.excuse(feeds)
            if excuse is None:
                return result
            return _settled(result, "outside the specification", reference_error=excuse)
        if result.status != "differ":
            return result
        if candidate.outputs is not None and self._specification.sides_with(
            feeds, candidate.outputs
        ):
            return _settled(result, "specification sides with candidate")
        rejected = self._specification.rejects(feeds)
        if rejected is None:
            return result
        return _settled(result, "outside the specification", reference_error=rejected)

    def _same(self, outcome: RunOutcome, again: RunOutcome) -> bool:
        if outcome.outputs is None or again.outputs is None:
            return outcome.outputs is None and again.outputs is None
        return all(
            name in again.outputs
            and compare_values(
                outcome.outputs[name], again.outputs[name], rtol=self._rtol, atol=self._atol
            ).ok
            for name in self._names
            if name in outcome.outputs
        )

    def _checked(
        self, outcome: RunOutcome, feeds: Feeds, candidate_ran: bool, limit: float | None
    ) -> tuple[RunOutcome, dict[str, np.ndarray]]:
        """The original's outcome without the probes, and the probes' values. The original
        itself is run when the instrumented copy failed where it may not have."""
        if not self._probes:
            return outcome, {}
        if outcome.ok and outcome.outputs is not None:
            probes = {
                name: np.asarray(value)
                for name, value in outcome.outputs.items()
                if name not in self._names
            }
            kept = {name: value for name, value in outcome.outputs.items() if name in self._names}
            return dataclasses.replace(outcome, outputs=kept), probes
        error = outcome.error or ""
        if error.startswith("cannot load the model"):
            self._stop_instrumenting(error)
        elif not (candidate_ran or "seqlower_probe" in error):
            return outcome, {}
        plain = self._plain_runner()
        plain.submit(feeds, timeout=limit)
        return plain.result(), {}

    def _stop_instrumenting(self, error: str) -> None:
        self.coverage.note = f"If and Loop coverage not recorded: {error}"
        self._original = self._plain_runner()
        self._probes = ()
        self.coverage = Coverage(
            (), dims=self.coverage.dims, lengths=self.coverage.lengths, note=self.coverage.note
        )

    def _plain_runner(self) -> IsolatedRunner:
        if self._plain is None:
            self._plain = self._plain_factory()
        return self._plain

    def _track(self, outputs: Mapping[str, RuntimeValue]) -> None:
        for name in self._names:
            value = outputs.get(name)
            if value is None:
                continue
            if _size(value):
                self._nonempty.add(name)
            self._hashes[name].add(_digest(value))

    # -- steering -----------------------------------------------------------------------------

    def _uncovered(self) -> bool:
        return bool(
            self.coverage.rare()
            or self.coverage.short_loops()
            or self.empty_outputs
            or self._compared < WANTED_COMPARED
        )

    def _search(self, generation: Generation, index: int) -> tuple[TrialPlan, Feeds] | None:
        """Inputs on which the original covers most of what is still uncovered, or None."""
        if time.monotonic() > self._deadline:
            return None
        tries = []
        fills = neighbours(generation.numbers)[: SEARCH_TRIES // 2]
        for attempt in range(1, SEARCH_TRIES + 1):
            plan = random_plan(np.random.default_rng([generation.seed, index, attempt, 1]))
            if attempt <= len(fills):  # first every tensor filled with a compared constant
                plan = dataclasses.replace(plan, profile="constant", fill=fills[attempt - 1])
            elif attempt <= len(fills) + 4 and plan.size:  # then with the size of the dims
                plan = dataclasses.replace(
                    plan, profile="constant", fill=float(plan.size), mixed=False
                )
            feeds = generation.feeds(index, plan, attempt)
            self._original.submit(feeds, timeout=self._limit(index))
            tries.append((plan, feeds))
        best: tuple[int, TrialPlan, Feeds] | None = None
        empty = set(self.empty_outputs)
        for plan, feeds in tries:
            outcome = self._original.result()
            if not outcome.ok or outcome.outputs is None:
                continue
            score = 4 * len(self.coverage.new_branches(outcome.outputs))
            score += 2 * len(self.coverage.longer_loops(outcome.outputs))
            score += 2 * sum(
                1 for name in empty if name in outcome.outputs and _size(outcome.outputs[name])
            )
            if self._compared < WANTED_COMPARED and not _has_empty(feeds):
                score += 1
            if score:  # of two that cover as much, prefer one without empty inputs
                score = 2 * score + (0 if _has_empty(feeds) else 1)
            if score and (best is None or score > best[0]):
                best = (score, plan, feeds)
        return None if best is None else (best[1], best[2])


_FAILING = frozenset({"differ", "candidate failed", "candidate crashed"})


def original_to_compare(
    native: RunOutcome | None, first: RunOutcome, candidate: RunOutcome, feeds: Feeds
) -> tuple[RunOutcome | None, str | None]:
    """What a candidate run in another runtime is compared with, given the original's run
    there (`native`, None where it was not run) and in onnxruntime (`first`): the original in
    the same runtime where it loads there; else the original in onnxruntime, on inputs without
    NaN only (runtimes handle NaN differently: OpenVINO's Relu gives 0), None where not
    comparable. The second item is the error that shows the original does not load in that
    runtime, else None. An original killed at the time limit there still loads there: that
    trial is compared with onnxruntime's run where it is comparable, else not compared
    ("original timed out")."""
    if native is None or candidate.cannot_run:
        return first, None
    if native.timed_out:  # it loads there but ran out of time on these inputs
        if first.ok and candidate.ok and not has_nan(feeds):
            return first, None
        return native, None
    loading = native.cannot_run or (native.error or "").startswith("cannot load the model")
    if not loading and not native.crashed:
        if native.ok or not first.ok or not candidate.ok or has_nan(feeds):
            return native, None  # like with like: both failing in this runtime is no difference
        return first, None  # the original alone fails in this runtime (tract cannot plan it)
    if (candidate.error or "").startswith("cannot load the model"):
        return native, None  # neither loads there: like with like, no difference
    not_loading = native.error or "it cannot run the original"
    return (None if has_nan(feeds) else first), not_loading


def _settled(result: TrialResult, status: TrialStatus, **changes: str) -> TrialResult:
    """`result` with the specification's verdict `status` on the trial and on every output
    that was not ok (the detail of a difference is kept)."""
    outputs = tuple(
        output if output.ok else dataclasses.replace(output, verdict=status)
        for output in result.outputs
    )
    return dataclasses.replace(result, status=status, outputs=outputs, **changes)


def _has_empty(feeds: Feeds) -> bool:
    """True when some input is an empty tensor (or holds one): inputs that many models reject
    and on which onnxruntime sometimes returns what its memory held."""
    return any(
        any(np.size(element) == 0 for element in value)
        if isinstance(value, list)
        else np.size(value) == 0
        for value in feeds.values()
    )


def _unstable(result: TrialResult) -> TrialResult:
    """`result` with its differences marked as proving nothing (see `_stable`)."""
    outputs = tuple(
        output if output.ok else dataclasses.replace(output, verdict="unstable")
        for output in result.outputs
    )
    return dataclasses.replace(result, status="unstable", outputs=outputs)


def _fed_loops(model: ir.Model) -> list[ir.Node]:
    """The Loops of the main graph whose trip count or condition is a graph input (through
    Identity and Cast): those the trial's loop count drives."""
    fed = {value.name for value in model.graph.inputs if value.name not in model.graph.initializers}
    return [
        node
        for node in model.graph
        if node.op_type == "Loop" and any(_source(value) in fed for value in node.inputs[:2])
    ]


def _source(value: ir.Value | None) -> str | None:
    """The name of the value that `value` copies through Identity and Cast."""
    for _ in range(32):
        node = value.producer() if value is not None else None
        if node is None or node.op_type not in ("Identity", "Cast") or not node.inputs:
            break
        value = node.inputs[0]
    return None if value is None else value.name


def _describe(specs: list[InputSpec], feeds: Feeds, plan: TrialPlan, has_loops: bool) -> str:
    """`N=5, M=2, sequences of 5, loops 5, large magnitudes`: what applies to this model."""
    dims, lengths = _sizes_of(specs, feeds)
    parts = [f"{name}={size}" for name, size in dims.items()]
    if lengths:
        counts = sorted(set(lengths.values()))
        parts.append(f"sequences of {'/'.join(str(count) for count in counts)}")
    if has_loops:
        parts.append(f"loops {plan.iterations}")
    parts.append(PROFILE_WORDS[plan.profile])
    return ", ".join(parts)


def _sizes(model: ir.Model, feeds: Feeds) -> tuple[dict[str, int], dict[str, int]]:
    return _sizes_of(feedable_inputs(model), feeds)


def _sizes_of(specs: list[InputSpec], feeds: Feeds) -> tuple[dict[str, int], dict[str, int]]:
    """The size fed for every symbolic dim, and the length of every sequence input."""
    dims: dict[str, int] = {}
    lengths: dict[str, int] = {}
    for spec in specs:
        value = feeds.get(spec.name)
        if value is None:
            continue
        if isinstance(value, list):
            lengths[spec.name] = len(value)
            if not value:
                continue
            value = value[0]
        shape = np.shape(value)
        for axis, dim in enumerate(spec.shape or ()):
            if isinstance(dim, str) and dim and axis < len(shape):
                dims.setdefault(dim, int(shape[axis]))
    return dims, lengths


def _unflattened(outcome: RunOutcome, flattening: Flattening) -> RunOutcome:
    if outcome.outputs is None or not flattening:
        return outcome
    return dataclasses.replace(outcome, outputs=flattening.outputs_of(outcome.outputs))


def _size(value: RuntimeValue) -> int:
    if isinstance(value, list):
        return len(value)
    return int(np.size(value))


def _digest(value: RuntimeValue) -> str:
    digest = hashlib.sha256()
    for array in value if isinstance(value, list) else [value]:
        array = np.asarray(array)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(
            "\x00".join(map(str, array.reshape(-1))).encode()
            if array.dtype.kind in "UO"
            else np.ascontiguousarray(array).tobytes()
        )
    digest.update(f"len{len(value)}".encode() if isinstance(value, list) else b"t")
    return digest.hexdigest()
