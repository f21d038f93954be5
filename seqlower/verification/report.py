"""What the equivalence check found, as data: per trial, per output, and overall.

`VerifyReport.failures()` is the single source of truth for the verdict: `equivalent` is True
exactly when it is empty. The policy it encodes:

- an interface problem (missing, extra or reordered outputs, changed inputs) is a failure;
- a trial where an output differs, or where the candidate raises and the original does not, is a
  failure; so is an original that cannot be loaded while the candidate can;
- a trial where the original raises at run time and the candidate returns a result is reported
  but is not a failure, unless `strict_errors` is set: the input is one the original rejects,
  and a rewrite may define a result there (seqlower's lowering does, where it no longer computes
  the value that failed);
- a model that crashes its runtime (the runtime's process dies on a signal, or is killed after
  the timeout) is a failure: "candidate crashed onnxruntime: signal 11 (SIGSEGV) while loading
  the model" (said once when loading crashed, else per trial); so is a candidate that a runtime
  cannot run at all ("cannot run in tract: input 's' is a sequence", said once per runtime);
- except an original killed after the timeout where the candidate did not crash ("original
  timed out"): nothing is known of its outputs, so the trial is not compared, neither a
  difference nor an agreement, even with `strict_errors` or `strict_coverage` (the reason, "the
  original did not finish in 5 s", is one of the `warnings()`, or of the failures when too few
  trials compared anything). A candidate killed after the timeout where the original finished
  stays a failure: the rewrite made the model slower;
- a trial where both models raise ("both failed": they agree that the input is invalid, as with
  an empty sequence given to ConcatFromSequence) or both crash (a while loop that never ends on
  that input) is reported but is not a failure, unless `strict_errors` is set;
- enough trials must run both models to completion (`required`: 2, or 1 when fewer than 3
  ran): otherwise the check is *inconclusive* (`inconclusive`), a failure of its own that
  says how many trials compared anything (with no trial compared, the errors of every trial are
  listed);
- with `strict_coverage`, an If branch no trial took and an output that compared nothing (empty
  in every trial) are failures; otherwise they are `warnings()`.

A report is truthy exactly when the models were shown equivalent: `assert verify(a, b)` and
`if verify(a, b): deploy()` do what they read as.

`to_dict()` gives the JSON form; infinite errors are written as the string "inf".
"""

from __future__ import annotations

__all__ = ["OutputResult", "TrialResult", "TrialStatus", "VerifyReport", "Verdict"]

import dataclasses
import json
import math
from typing import Any, Literal

import numpy as np

from seqlower.verification.compare import tolerance_for
from seqlower.verification.coverage import Coverage
from seqlower.verification.saved import Reproduction

MIN_COMPARED = 2
"""Trials that must run both models to completion (1 when fewer than 3 ran)."""

Verdict = Literal[
    "ok",
    "values differ",
    "shape differs",
    "dtype differs",
    "length differs",
    "kind differs",
    "missing",
    "original failed",
    "candidate failed",
    "both failed",
    "original crashed",
    "candidate crashed",
    "both crashed",
    "original timed out",
    "cannot run",
    "unstable",
    "outside the specification",
    "specification sides with candidate",
]
"""The verdict on one output in one trial. "missing": the candidate lacks the output.
"original timed out": the original was killed at the time limit (the candidate did not
crash), so there is nothing to compare with. "unstable": the values differed, but a model gave
other values when run again on the same inputs (a runtime that reads memory it never wrote), so
the difference proves nothing.
"outside the specification": onnxruntime ran an input the specification rejects: only the
candidate failed, and `onnx.reference` fails on the original too, or the values differed where
`onnx.reference` rejects the original's concatenation of inputs whose other dims differ (which
onnxruntime fills with memory it never wrote). "specification sides with
candidate": the values differed, and `onnx.reference` computes the candidate's from the
original: onnxruntime departs from the specification there."""

TrialStatus = Literal[
    "ok",
    "differ",
    "original failed",
    "candidate failed",
    "both failed",
    "original crashed",
    "candidate crashed",
    "both crashed",
    "original timed out",
    "cannot run",
    "unstable",
    "not comparable",
    "outside the specification",
    "specification sides with candidate",
]


@dataclasses.dataclass(frozen=True)
class OutputResult:
    """One output in one trial. `shape` and `dtype` describe the original's value (or the
    candidate's when only it ran). `reference` is set in reference mode: whether onnxruntime and
    `onnx.reference` agree on the original model. `scale`: the largest finite magnitude of the
    original's value, for float values that were compared (else None)."""

    name: str
    shape: str
    dtype: str
    max_abs_err: float | None
    max_rel_err: float | None
    verdict: Verdict
    detail: str = ""
    reference: str | None = None
    scale: float | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


@dataclasses.dataclass(frozen=True)
class TrialResult:
    """One trial in one runtime: where its inputs came from, what they were, how the models
    fared, the runtime the candidate ran in, and how many times each Loop of the original ran
    where the inputs show it (`{"loop": "3 iterations"}`)."""

    index: int
    source: str
    inputs: dict[str, str]
    status: TrialStatus
    outputs: tuple[OutputResult, ...]
    original_error: str | None = None
    candidate_error: str | None = None
    reference_error: str | None = None
    # outside the specification, seen by a probe of the original rather than onnx.reference:
    # which of its operators got an input the specification rejects
    rejected_input: str | None = None
    runtime: str = "onnxruntime"
    loops: dict[str, str] = dataclasses.field(default_factory=dict)
    plan: str = ""

    @property
    def compared(self) -> bool:
        """Both models ran to completion, so the outputs were compared ("not comparable": the
        candidate ran in a runtime the original does not load in, on inputs whose handling
        differs between runtimes, such as NaN)."""
        return self.status in ("ok", "differ")

    @property
    def head(self) -> str:
        """`trial 3 (sizes 5, loops 5, lengths 5, typical values)`, with the runtime when it is
        not onnxruntime."""
        inside = [
            part
            for part in (self.plan, "" if self.runtime == "onnxruntime" else self.runtime)
            if part
        ]
        return f"trial {self.index}" + (f" ({'; '.join(inside)})" if inside else "")


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """The result of `seqlower.verification.verify`."""

    trials: tuple[TrialResult, ...]
    problems: tuple[str, ...] = ()
    strict_errors: bool = False
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    coverage: Coverage | None = None
    strict_coverage: bool = False
    notes: tuple[str, ...] = ()
    empty_outputs: tuple[str, ...] = ()
    constant_outputs: tuple[str, ...] = ()
    seconds: float = 0.0
    reproduction: Reproduction | None = dataclasses.field(default=None, repr=False, compare=False)
    """The inputs of the first trial that showed a difference (`save_failing_trial` writes
    them)."""

    def __bool__(self) -> bool:
        """True exactly when the models were shown equivalent (`equivalent`)."""
        return self.equivalent

    @property
    def equivalent(self) -> bool:
        """True when the candidate computed the same outputs as the original in every trial
        that ran both, and enough trials did."""
        return not self.failures()

    @property
    def compared(self) -> int:
        """How many trials ran both models to completion (in at least one runtime)."""
        return len({trial.index for trial in self.trials if trial.compared})

    @property
    def skipped(self) -> int:
        """How many trials ran no comparison: both models failed or crashed, only the original
        failed or it did not finish in time, only the candidate failed on an input the
        specification rejects, the values differed where the specification computes the
        candidate's, or a model gave other values when run again."""
        return len({trial.index for trial in self.trials}) - self.compared

    @property
    def verdict(self) -> str:
        """`equivalent`, `not equivalent` or `inconclusive`."""
        if self.equivalent:
            return "equivalent"
        return "inconclusive" if self.inconclusive else "not equivalent"

    def rejected_hint(self) -> str | None:
        """When both models rejected most trials (more than half, 4 trials or more), one line
        that says so, with the first error and how to give inputs they accept; else None."""
        total = len({trial.index for trial in self.trials})
        if total < 4 or 2 * self.skipped <= total or not self.compared:
            return None
        rejected = [t for t in self.trials if t.status in ("both failed", "both crashed")]
        if 2 * len({t.index for t in rejected}) <= total:
            return None
        error = rejected[0].original_error or ""
        error = error if len(error) <= 160 else error[:157] + "..."
        return (
            f"both models rejected {len({t.index for t in rejected})} of {total} trials "
            f"(first: {error}); only {self.compared} compared anything: {_hint(self.settings)}"
        )

    def difference_hint(self) -> str | None:
        """What to try when trials found a difference (None when none did): where every
        difference is of float values and within the float type's relative tolerance of its
        output's largest magnitude (the size rounding makes when a runtime sums in another
        order, as onnxruntime may in two graphs that compute the same), the `--atol` that
        accepts them; otherwise how to give sizes or inputs the model gets in use (trials explore
        sizes from 0 and large values, which a model may never get)."""
        if self.problems:
            return None
        failing = [t for t in self.trials if _trial_failures(t, self.strict_errors)]
        if not failing or any(t.status not in ("differ", "candidate failed") for t in failing):
            return None
        outputs = [output for trial in failing for output in trial.outputs if not output.ok]
        rtol = self.settings.get("rtol")
        rounding = all(t.status == "differ" for t in failing) and all(
            _rounding(output, rtol) for output in outputs
        )
        if not rounding:
            dims = " ".join(f"--dim {name}=SIZE" for name in _free_dims(self.settings))
            return (
                "if the trials that differ have sizes or values the model never gets, give "
                + (f"the sizes it gets with {dims}, or " if dims else "")
                + "your own inputs with --inputs (an ONNX test-data folder or .npz)"
            )
        largest = max(output.max_abs_err or 0.0 for output in outputs)
        ratio = max((output.max_abs_err or 0.0) / (output.scale or 1.0) for output in outputs)
        atol = 10.0 ** math.ceil(math.log10(largest))
        return (
            f"every difference is float rounding, at most {ratio:.1e} of its output's largest "
            f"value (as when a runtime sums in another order); if that is close enough, --atol "
            f"{atol:.0e} accepts it"
        )

    @property
    def unloadable_original(self) -> str | None:
        """onnxruntime's error when it could not load the original in any trial it ran (so
        nothing was compared: the verdict is inconclusive, not a difference), else None."""
        errors = [trial.original_error for trial in self.trials if trial.runtime == "onnxruntime"]
        if not errors or not all(_while_loading_failed(error) for error in errors):
            return None
        return errors[0]

    @property
    def required(self) -> int:
        """How many trials must run both models for a verdict of equivalence: 2, or 1 when
        fewer than 3 ran."""
        total = len({trial.index for trial in self.trials})
        return min(MIN_COMPARED, (total + 1) // 2)

    @property
    def inconclusive(self) -> bool:
        """True when nothing differed but too few trials ran both models to say more: the
        inputs tried were ones both models reject (give sizes or inputs they accept)."""
        if self.problems or any(_trial_failures(t, self.strict_errors) for t in self.trials):
            return False
        return not self.trials or self.compared < self.required

    def warnings(self) -> list[str]:
        """What the trials did not exercise: an If branch no trial took, an output that was
        empty in every trial or the same in every trial, a trial whose original did not finish
        in time (listed with the failures instead when too few trials compared anything)."""
        lines = list(self.coverage.warnings() if self.coverage is not None else [])
        if self.compared >= self.required:
            lines.extend(self.timed_out())
        unstable = sorted({trial.index for trial in self.trials if trial.status == "unstable"})
        if unstable:
            lines.append(
                f"{'trial' if len(unstable) == 1 else 'trials'} {_ranges(unstable)}: a model "
                "gave other outputs when run again on the same inputs (the runtime read memory "
                "it never wrote?): not compared"
            )
        rejected = self.rejected_hint()
        if rejected is not None:
            lines.append(rejected)
        lines.extend(
            f"output '{name}' was empty in every trial: nothing was compared in it"
            for name in self.empty_outputs
        )
        lines.extend(
            f"output '{name}' was the same in every trial: it did not depend on the inputs tried"
            for name in self.constant_outputs
        )
        return lines

    def failures(self) -> list[str]:
        """One line per reason the models are not shown equivalent (empty when they are). A
        reason met in several trials is said once: `trials 3, 6: only the candidate failed`."""
        lines = list(self.problems)
        nothing_ran = bool(self.trials) and self.compared == 0
        found: dict[tuple[str, str, str], list[TrialResult]] = {}
        for trial in self.trials:
            for separator, message in _trial_failures(trial, self.strict_errors or nothing_ran):
                found.setdefault((separator, message, trial.runtime), []).append(trial)
        for (separator, message, runtime), trials in found.items():
            if not separator:
                lines.append(message)
            elif len(trials) == 1:
                lines.append(f"{trials[0].head}{separator}{message}")
            else:
                where = "" if runtime == "onnxruntime" else f" ({runtime})"
                indices = _ranges([trial.index for trial in trials])
                lines.append(f"trials {indices}{where}{separator}{message}")
        differences = any(_trial_failures(trial, False) for trial in self.trials)
        if self.compared < self.required:  # why trials compared nothing, when too few did
            lines.extend(self.timed_out())
        if not self.trials:
            lines.append("no trial was run")
        elif nothing_ran and not differences:
            lines.append("no trial ran both models to completion: nothing was compared")
        elif self.compared < self.required and not differences:
            total = len({trial.index for trial in self.trials})
            others = "both failed in the others"
            if any(trial.status == "original timed out" for trial in self.trials):
                others = "in the others both failed or the original did not finish"
            lines.append(
                f"only {self.compared} of {total} trials ran both models to completion "
                f"({others}): too few to show equivalence"
            )
        if self.strict_coverage:
            timed_out = set(self.timed_out())
            lines.extend(
                f"{line} (--strict-coverage)"
                for line in self.warnings()
                if "the same in every trial" not in line and line not in timed_out
            )
        return list(dict.fromkeys(lines))

    def timed_out(self) -> list[str]:
        """One line per error of the trials where the original was killed at the time limit
        (not compared): `trials 6, 9: the original did not finish in 5 s in onnxruntime while
        running (killed): not compared`."""
        groups: dict[str, list[int]] = {}
        for trial in self.trials:
            if trial.status == "original timed out":
                groups.setdefault(trial.original_error or "", []).append(trial.index)
        return [
            f"{'trial' if len(indices) == 1 else 'trials'} {_ranges(sorted(set(indices)))}: the "
            f"original {error}: not compared"
            for error, indices in groups.items()
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "verdict": self.verdict,
            "equivalent": self.equivalent,
            "inconclusive": self.inconclusive,
            "trials_compared": self.compared,
            "trials_skipped": self.skipped,
            "seconds": round(self.seconds, 3),
            "failures": self.failures(),
            "warnings": self.warnings(),
            "notes": list(self.notes),
            "problems": list(self.problems),
            "coverage": None if self.coverage is None else self.coverage.to_dict(),
            "settings": dict(self.settings),
            "trials": [_jsonable(dataclasses.asdict(trial)) for trial in self.trials],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _trial_failures(trial: TrialResult, strict_errors: bool) -> list[tuple[str, str]]:
    """(separator, message) per failure of one trial: the line is the trial's head, the
    separator and the message; an empty separator means the message stands alone."""
    if trial.status == "cannot run":
        return [("", f"{trial.candidate_error}")]
    if trial.status in ("unstable", "not comparable"):
        return []  # said in warnings()
    if trial.status == "original timed out":
        return []  # nothing to compare with: said with the skipped trials (`timed_out`)
    if trial.status == "both crashed" and not strict_errors:
        return []
    if trial.status.endswith("crashed"):
        crashed = [("original", trial.original_error), ("candidate", trial.candidate_error)]
        if trial.status != "both crashed":
            crashed = [item for item in crashed if trial.status.startswith(item[0])]
        # a crash while loading happens in every trial: say it once
        return [
            ("" if _while_loading(error) else ": ", f"{role} {error}") for role, error in crashed
        ]
    if trial.status == "original failed":
        if not strict_errors:  # the candidate defines a result where the original raises, or
            return []  # onnxruntime cannot load the original: nothing to compare with
        return [(": ", f"only the original failed: {trial.original_error}")]
    if trial.status == "candidate failed":
        return [(": ", f"only the candidate failed: {trial.candidate_error}")]
    if trial.status == "specification sides with candidate":
        return []  # onnxruntime departs from the specification (said with the skipped trials)
    if trial.status == "outside the specification":
        if not strict_errors:
            return []  # onnxruntime ran an input the specification rejects
        if trial.rejected_input:
            return [
                (
                    ": ",
                    f"only the candidate failed: {trial.candidate_error} ({trial.rejected_input})",
                )
            ]
        if not trial.candidate_error:  # both ran: a concatenation of a misfit
            return [
                (
                    ": ",
                    "the values differ where the specification rejects the input (onnx.reference "
                    f"fails on the original: {trial.reference_error})",
                )
            ]
        return [
            (
                ": ",
                f"only the candidate failed: {trial.candidate_error} (onnx.reference fails on "
                f"the original too: {trial.reference_error})",
            )
        ]
    if trial.status == "both failed":
        if not strict_errors:
            return []
        if trial.original_error == trial.candidate_error:
            return [(": ", f"both failed: {trial.original_error}")]
        return [
            (
                ": ",
                f"both failed: original: {trial.original_error}; "
                f"candidate: {trial.candidate_error}",
            )
        ]
    lines = []
    for output in trial.outputs:
        if output.ok:
            continue
        line = f"output '{output.name}': {output.verdict}"
        if output.verdict == "values differ":
            line += f" (max abs err {_number(output.max_abs_err)}, "
            line += f"max rel err {_number(output.max_rel_err)})"
        if output.detail:
            line += f": {output.detail}"
        lines.append((", ", line))
    return lines


def _rounding(output: OutputResult, rtol: float | None) -> bool:
    """True when `output`'s values differ by no more than its float type's relative tolerance
    (or the `rtol` given) of the largest magnitude of the original's value."""
    if output.verdict != "values differ" or output.scale is None or not output.max_abs_err:
        return False
    name = output.dtype.removeprefix("seq(").removesuffix(")")  # seq(float32): its elements
    try:
        tolerance = tolerance_for(np.dtype(name), rtol)
    except TypeError:  # a type numpy does not name (bfloat16): no claim about its rounding
        return False
    if tolerance is None or not math.isfinite(output.max_abs_err):
        return False
    return output.max_abs_err <= tolerance.rtol * output.scale


def _hint(settings: dict[str, Any]) -> str:
    """How to give inputs both models accept: a size for a symbolic dim, or inputs."""
    named = _free_dims(settings)
    dims = f"give sizes they accept with --dim {named[0]}=SIZE, or " if named else "give "
    return f"{dims}inputs they accept with --inputs (an ONNX test-data folder or .npz)"


def _free_dims(settings: dict[str, Any]) -> list[str]:
    """The symbolic dims the trials chose sizes for (neither given with --dim nor pinned)."""
    fixed = {**dict(settings.get("dims") or {}), **dict(settings.get("pinned") or {})}
    return [name for name in settings.get("symbolic_dims") or [] if name not in fixed]


def _ranges(indices: list[int]) -> str:
    """`0-3, 7, 9-10` for [0, 1, 2, 3, 7, 9, 10]."""
    parts: list[str] = []
    start = previous = indices[0]
    for index in [*indices[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if index is not None:
            start = previous = index
    return ", ".join(parts)


def _while_loading_failed(error: str | None) -> bool:
    return error is not None and error.startswith("cannot load the model")


def _while_loading(error: str | None) -> bool:
    return error is not None and error.endswith("while loading the model")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return value
