"""The options of `seqlower verify`, shared with `seqlower optimize --verify`: one definition of
each (its name, help and default), and `VerifyChoices`, what they ask of
`seqlower.verification.verify`.

    def command(..., trials: TrialsOption = DEFAULT_TRIALS, seed: SeedOption = 0, ...):
        choices = VerifyChoices(trials=trials, seed=seed, ...)
        verify(a, b, **choices.arguments())
"""

from __future__ import annotations

__all__ = [
    "AtolOption",
    "InputsOption",
    "MemoryLimitOption",
    "ReferenceOption",
    "RtolOption",
    "SaveInputsOption",
    "SeedOption",
    "StrictCoverageOption",
    "StrictErrorsOption",
    "TimeBudgetOption",
    "TimeoutOption",
    "TrialsOption",
    "VerifyChoices",
    "save_failing",
]

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from seqlower.verification.check import DEFAULT_TIME_BUDGET, DEFAULT_TRIALS
from seqlower.verification.report import VerifyReport
from seqlower.verification.runner import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT
from seqlower.verification.saved import save_failing_trial

TrialsOption = Annotated[
    int,
    typer.Option(
        min=1,
        help="Sets of generated inputs to try: the first 3 typical, later ones exploring sizes "
        "0 to 8, loop counts, sequence lengths, zeros, large values, NaN and Inf; then up to as "
        "many edge cases of the model's own operators and inputs (at most 12).",
    ),
]
SeedOption = Annotated[int, typer.Option(help="Seed of the generated inputs.")]
InputsOption = Annotated[
    Path | None,
    typer.Option(help="Inputs to use: an ONNX test-data folder or an .npz file."),
]
RtolOption = Annotated[
    float | None, typer.Option(min=0.0, help="Relative tolerance for all float types.")
]
AtolOption = Annotated[
    float | None, typer.Option(min=0.0, help="Absolute tolerance for all float types.")
]
ReferenceOption = Annotated[
    bool,
    typer.Option("--reference", help="Also run the original under onnx.reference and compare."),
]
StrictErrorsOption = Annotated[
    bool,
    typer.Option(
        "--strict-errors",
        help="Count a trial where both models fail, or where only the original fails at run "
        "time, as a failure.",
    ),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        min=0.1, help="Seconds a model may take to load or to run once before it is killed."
    ),
]
TimeBudgetOption = Annotated[
    float,
    typer.Option(
        min=0.0,
        metavar="SECONDS",
        help="Start no new trial after this many seconds (at least one runs).",
    ),
]
StrictCoverageOption = Annotated[
    bool,
    typer.Option(
        "--strict-coverage",
        help="Fail (exit 1) when an If branch of the original was never taken or an output was "
        "empty in every trial.",
    ),
]
SaveInputsOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FOLDER",
        help="When a trial shows a difference, write its inputs there (input_0.pb..., the "
        "original's outputs as output_0.pb..., and inputs.npz); --inputs FOLDER runs it again.",
    ),
]
MemoryLimitOption = Annotated[
    int,
    typer.Option(
        min=0,
        metavar="MB",
        help="Memory (address space) each model's process may take, plus three times the "
        "model's size; 0 for no limit.",
    ),
]


@dataclasses.dataclass(frozen=True)
class VerifyChoices:
    """What the shared options ask for (their defaults are `verify`'s)."""

    trials: int = DEFAULT_TRIALS
    seed: int = 0
    inputs: Path | None = None
    rtol: float | None = None
    atol: float | None = None
    reference: bool = False
    strict_errors: bool = False
    timeout: float = DEFAULT_TIMEOUT
    time_budget: float = DEFAULT_TIME_BUDGET
    strict_coverage: bool = False
    save_inputs: Path | None = None
    memory_limit: int = DEFAULT_MEMORY_LIMIT

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of `seqlower.verification.verify` (all but `save_inputs`)."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name != "save_inputs"
        }

    def changed(self) -> list[str]:
        """The options given another value than their default, as `--time-budget`."""
        default = VerifyChoices()
        return [
            "--" + field.name.replace("_", "-")
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != getattr(default, field.name)
        ]


def save_failing(result: VerifyReport, folder: Path | None) -> str:
    """With `--save-inputs FOLDER` and a trial that showed a difference: write its inputs there
    and return the line that says so (else "")."""
    if folder is None or result.equivalent or result.reproduction is None:
        return ""
    written = save_failing_trial(result.reproduction, folder)
    names = ", ".join(path.name for path in written[:2]) + (", ..." if len(written) > 2 else "")
    return (
        f"wrote the inputs of trial {result.reproduction.trial} to {folder} ({names}): "
        f"--inputs {folder} runs it again"
    )
