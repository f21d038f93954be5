"""What the equivalence check found, as data: per trial, per output, and overall.

`VerifyReport.failures()` is the single source of truth for the verdict: `equivalent` is True
exactly when it is empty. The policy it encodes:

- an interface problem (missing, extra or reordered outputs, changed inputs) is a failure;
- a trial where an output differs, or where one model raises and the other does not, is a failure;
- a model that crashes its runtime (the runtime's process dies on a signal, or is killed after
  the timeout) is a failure: "candidate crashed onnxruntime: signal 11 (SIGSEGV) while loading
  the model" (said once when loading crashed, else per trial); so is a candidate that a runtime
  cannot run at all ("cannot run in tract: input 's' is a sequence", said once per runtime);
- a trial where both models raise ("both failed": they agree that the input is invalid, as with
  an empty sequence given to ConcatFromSequence) or both crash (a while loop that never ends on
  that input) is reported but is not a failure, unless `strict_errors` is set;
- at least one trial must run both models to completion, otherwise nothing was compared (and
  the errors of every trial are listed).

`to_dict()` gives the JSON form; infinite errors are written as the string "inf".
"""

from __future__ import annotations

__all__ = ["OutputResult", "TrialResult", "TrialStatus", "VerifyReport", "Verdict"]

import dataclasses
import json
import math
from typing import Any, Literal

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
    "cannot run",
]
"""The verdict on one output in one trial. "missing": the candidate lacks the output."""

TrialStatus = Literal[
    "ok",
    "differ",
    "original failed",
    "candidate failed",
    "both failed",
    "original crashed",
    "candidate crashed",
    "both crashed",
    "cannot run",
]


@dataclasses.dataclass(frozen=True)
class OutputResult:
    """One output in one trial. `shape` and `dtype` describe the original's value (or the
    candidate's when only it ran). `reference` is set in reference mode: whether onnxruntime and
    `onnx.reference` agree on the original model."""

    name: str
    shape: str
    dtype: str
    max_abs_err: float | None
    max_rel_err: float | None
    verdict: Verdict
    detail: str = ""
    reference: str | None = None

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
    runtime: str = "onnxruntime"
    loops: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """The result of `seqlower.verification.verify`."""

    trials: tuple[TrialResult, ...]
    problems: tuple[str, ...] = ()
    strict_errors: bool = False
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def equivalent(self) -> bool:
        """True when the candidate computed the same outputs as the original in every trial."""
        return not self.failures()

    def failures(self) -> list[str]:
        """One line per reason the models are not shown equivalent (empty when they are)."""
        lines = list(self.problems)
        nothing_ran = all(trial.status in ("both failed", "both crashed") for trial in self.trials)
        for trial in self.trials:
            lines.extend(_trial_failures(trial, self.strict_errors or nothing_ran))
        if self.trials and nothing_ran:
            lines.append("no trial ran both models to completion: nothing was compared")
        if not self.trials:
            lines.append("no trial was run")
        return list(dict.fromkeys(lines))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "equivalent": self.equivalent,
            "failures": self.failures(),
            "problems": list(self.problems),
            "settings": dict(self.settings),
            "trials": [_jsonable(dataclasses.asdict(trial)) for trial in self.trials],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _trial_failures(trial: TrialResult, strict_errors: bool) -> list[str]:
    head = f"trial {trial.index}"
    if trial.runtime != "onnxruntime":
        head += f" ({trial.runtime})"
    if trial.status == "cannot run":
        return [f"{trial.candidate_error}"]
    if trial.status == "both crashed" and not strict_errors:
        return []
    if trial.status.endswith("crashed"):
        crashed = [("original", trial.original_error), ("candidate", trial.candidate_error)]
        if trial.status != "both crashed":
            crashed = [item for item in crashed if trial.status.startswith(item[0])]
        # a crash while loading happens in every trial: say it once
        return [
            f"{'' if _while_loading(error) else head + ': '}{role} {error}"
            for role, error in crashed
        ]
    if trial.status == "original failed":
        return [f"{head}: only the original failed: {trial.original_error}"]
    if trial.status == "candidate failed":
        return [f"{head}: only the candidate failed: {trial.candidate_error}"]
    if trial.status == "both failed":
        if not strict_errors:
            return []
        return [
            f"{head}: both failed: original: {trial.original_error}; "
            f"candidate: {trial.candidate_error}"
        ]
    lines = []
    for output in trial.outputs:
        if output.ok:
            continue
        line = f"{head}, output '{output.name}': {output.verdict}"
        if output.verdict == "values differ":
            line += f" (max abs err {_number(output.max_abs_err)}, "
            line += f"max rel err {_number(output.max_rel_err)})"
        if output.detail:
            line += f": {output.detail}"
        lines.append(line)
    return lines


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
