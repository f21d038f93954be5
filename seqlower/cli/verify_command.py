"""`seqlower verify`: show that a lowered model computes what the original computes.

A thin layer over `seqlower.verification.verify`: it parses options, prints a table (with rich when
it is installed and stdout is a terminal, as plain text otherwise), then what the trials covered,
and writes the JSON report. It exits 0 when the models are equivalent, 1 when they are not, 2 on
bad input (one `error:` line on stderr) and when too few trials ran both models to say (the inputs
tried were ones both models reject). Register it with `app.command("verify")(verify_command)`.
"""

from __future__ import annotations

__all__ = ["verify_command"]

import sys
from pathlib import Path
from typing import Annotated

import typer

from seqlower.cli.command import error_exit, write_report
from seqlower.cli.summary import plural
from seqlower.cli.terminal import echo, escape
from seqlower.cli.verify_options import (
    AtolOption,
    InputsOption,
    MemoryLimitOption,
    ReferenceOption,
    RtolOption,
    SaveInputsOption,
    SeedOption,
    StrictCoverageOption,
    StrictErrorsOption,
    TimeBudgetOption,
    TimeoutOption,
    TrialsOption,
    VerifyChoices,
    save_failing,
)
from seqlower.errors import SeqlowerError
from seqlower.io import files_read, same_file
from seqlower.verification import VerifyReport, verify
from seqlower.verification.check import DEFAULT_TIME_BUDGET, DEFAULT_TRIALS
from seqlower.verification.runner import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT
from seqlower.verification.runtimes import RUNTIMES
from seqlower.verification.saved import SAVED_FILE_NAMES

_COLUMNS = ("trial", "output", "shape", "dtype", "max abs err", "max rel err", "verdict")


def verify_command(
    original: Annotated[
        Path, typer.Argument(metavar="ORIGINAL", help="The original model (.onnx).")
    ],
    candidate: Annotated[
        Path, typer.Argument(metavar="CANDIDATE", help="The rewritten model to check (.onnx).")
    ],
    trials: TrialsOption = DEFAULT_TRIALS,
    seed: SeedOption = 0,
    dim: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=SIZE",
            help="Size of a symbolic input dimension in every trial (repeatable).",
        ),
    ] = None,
    inputs: InputsOption = None,
    rtol: RtolOption = None,
    atol: AtolOption = None,
    reference: ReferenceOption = False,
    strict_errors: StrictErrorsOption = False,
    report: Annotated[
        Path | None, typer.Option(help="Write the full report as JSON to this file.")
    ] = None,
    runtime: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME",
            help=f"Run the candidate in this runtime ({', '.join(RUNTIMES)}; repeatable; "
            "default onnxruntime). It is compared with the original run in the same runtime "
            "where the original loads there, else with onnxruntime's on inputs without NaN.",
        ),
    ] = None,
    timeout: TimeoutOption = DEFAULT_TIMEOUT,
    time_budget: TimeBudgetOption = DEFAULT_TIME_BUDGET,
    strict_coverage: StrictCoverageOption = False,
    save_inputs: SaveInputsOption = None,
    memory_limit: MemoryLimitOption = DEFAULT_MEMORY_LIMIT,
) -> None:
    """Run ORIGINAL and CANDIDATE on the same inputs and compare every output.

    Each model runs in a child process: a runtime that crashes (or runs past --timeout) is a
    verdict ("candidate crashed onnxruntime: signal 11 (SIGSEGV)"), not the end of the command.

    Inputs are generated from --seed: trials 0-2 typical, later trials explore sizes 0 to 8,
    loop trip counts, sequence lengths, exact zeros, large magnitudes, NaN, Inf and edge
    integers, and the last ones steer towards If branches no trial took. NaN counts as equal
    to NaN.

    Exit codes: 0 equivalent, 1 not equivalent (a difference, a crash, a runtime that cannot run
    the candidate; with --strict-coverage also an untaken If branch or an output empty in every
    trial), 2 bad input (also: a runtime that is not installed, too few trials that ran both
    models).

    Examples:

      seqlower verify model.onnx model.lowered.onnx

      seqlower verify model.onnx lowered.onnx --trials 10 --dim N=16

      seqlower verify model.onnx lowered.onnx --inputs test_data_set_0 --reference

      seqlower verify model.onnx lowered.onnx --runtime openvino --runtime tract

      seqlower verify model.onnx lowered.onnx --save-inputs failing
    """
    choices = VerifyChoices(
        trials=trials,
        seed=seed,
        inputs=inputs,
        rtol=rtol,
        atol=atol,
        reference=reference,
        strict_errors=strict_errors,
        timeout=timeout,
        time_budget=time_budget,
        strict_coverage=strict_coverage,
        save_inputs=save_inputs,
        memory_limit=memory_limit,
    )
    try:
        _refuse_inputs_as_outputs([original, candidate], report, save_inputs)
        result = verify(
            original,
            candidate,
            dims=_parse_dims(dim or []),
            runtimes=runtime or ["onnxruntime"],
            **choices.arguments(),
        )
        if report is not None:
            write_report(report, result.to_json() + "\n")
        saved = save_failing(result, save_inputs)
    except SeqlowerError as error:
        raise error_exit(str(error)) from None
    _show(result)
    if saved:
        echo(saved)
    if result.equivalent:
        raise typer.Exit(0)
    raise typer.Exit(2 if result.inconclusive else 1)


def _parse_dims(items: list[str]) -> dict[str, int]:
    dims = {}
    for item in items:
        name, sep, size = item.partition("=")
        if not sep or not name.strip() or not size.strip().isdigit():
            raise SeqlowerError(f"--dim expects name=size with a size >= 0, got '{item}'")
        dims[name.strip()] = int(size)
    return dims


def _refuse_inputs_as_outputs(
    models: list[Path], report: Path | None, save_inputs: Path | None
) -> None:
    """Refuse, before any trial, a --report path or a --save-inputs file that is a file one of
    the models reads (the model itself or its weights)."""
    if report is None and save_inputs is None:
        return
    for model in models:
        try:
            read = files_read(model)
        except SeqlowerError:
            continue  # the verification says what is wrong with it
        for path in read:
            if report is not None and same_file(report, path):
                raise SeqlowerError(f"{report}: --report is a file the model {model} reads")
            if (
                save_inputs is not None
                and same_file(path.parent, save_inputs)
                and SAVED_FILE_NAMES.fullmatch(path.name)
            ):
                raise SeqlowerError(
                    f"{save_inputs}: --save-inputs would overwrite {path}, which the model "
                    f"{model} reads; choose another folder"
                )


def _several_runtimes(result: VerifyReport) -> bool:
    return result.settings.get("runtimes", ["onnxruntime"]) != ["onnxruntime"]


def _rows(result: VerifyReport) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    several = _several_runtimes(result)
    for trial in result.trials:
        for output in trial.outputs:
            row: tuple[str, ...] = (
                f"{trial.index} ({trial.runtime})" if several else str(trial.index),
                output.name,
                output.shape,
                output.dtype,
                _number(output.max_abs_err),
                _number(output.max_rel_err),
                output.verdict,
            )
            if result.settings.get("reference"):
                row = (*row, _short(output.reference or ""))
            rows.append(row)
    return rows


def _short(note: str) -> str:
    """The head of a reference note: `agrees`, `disagrees`, `reference failed`..."""
    return note.split(":")[0].split(";")[0]


def _footer(result: VerifyReport) -> list[str]:
    failures = result.failures()
    lines = list(result.notes)
    lines.extend(_skipped(result))
    for trial in result.trials:
        if trial.status in ("outside the specification", "specification sides with candidate"):
            continue  # said among the skipped trials
        if trial.reference_error:
            lines.append(f"{trial.head}: reference failed: {trial.reference_error}")
            continue
        lines.extend(
            f"{trial.head}, output '{output.name}': reference {output.reference}"
            for output in trial.outputs
            if output.reference and output.reference != "agrees"
        )
    seed = result.settings.get("seed", 0)
    summary = result.coverage.summary() if result.coverage is not None else ""
    inputs = "supplied inputs" if result.settings.get("inputs") else f"seed {seed}"
    if not summary:
        summary = "nothing compared" if not result.compared else "no If, Loop or size to vary"
    lines.append(f"coverage ({inputs}): {summary}")
    if result.coverage is not None and result.coverage.note:
        lines.append(f"note: {result.coverage.note}")
    if not result.strict_coverage:
        lines.extend(f"warning: {line}" for line in result.warnings())
    if result.inconclusive:
        lines.append("inconclusive:")
        lines.extend(f"  - {line}" for line in failures)
        lines.append(f"  {_inconclusive_hint(result)}")
    elif failures:
        lines.append("NOT equivalent:")
        lines.extend(f"  - {line}" for line in failures)
        hint = result.difference_hint()
        if hint:
            lines.append(f"  {hint}")
    else:
        both = len({trial.index for trial in result.trials}) - result.compared
        extra = f", {both} skipped" if both else ""
        lines.append(
            f"equivalent ({plural(result.compared, 'trial')} compared{extra}); "
            "NaN counts as equal to NaN"
        )
    return lines


_SKIPPED = frozenset(
    {
        "both failed",
        "both crashed",
        "original failed",
        "not comparable",
        "outside the specification",
        "specification sides with candidate",
    }
)


def _skipped(result: VerifyReport) -> list[str]:
    """Trials where both models failed, grouped by the error: `trials 4, 14 (skipped): both
    models failed: <error>`."""
    if result.strict_errors or not result.compared:
        return []  # the failures list these trials
    groups: dict[tuple[str, str], list[str]] = {}
    for trial in result.trials:
        if trial.status not in _SKIPPED:
            continue
        error = trial.original_error or ""
        if trial.status == "not comparable":
            what = f"not comparable in {trial.runtime}"
        elif trial.status == "original failed":
            what = "only the original failed (the candidate gave a result)"
        elif trial.status == "outside the specification" and trial.rejected_input:
            what = "only the candidate failed, on an input the specification rejects"
            error = trial.rejected_input
        elif trial.status == "outside the specification" and not trial.candidate_error:
            what = (
                "the outputs differ, and onnx.reference (the specification) rejects a "
                "concatenation in the original: onnxruntime ran it into memory it never wrote"
            )
            error = trial.reference_error or ""
        elif trial.status == "outside the specification":
            what = (
                "only the candidate failed, and onnx.reference (the specification) fails on the "
                "original too: onnxruntime ran an input the specification rejects"
            )
            error = trial.reference_error or ""
        elif trial.status == "specification sides with candidate":
            what = (
                "the outputs differ, and onnx.reference (the specification) computes the "
                "candidate's from the original: onnxruntime departs from the specification"
            )
            error = "; ".join(
                f"output '{output.name}': {output.detail}"
                for output in trial.outputs
                if not output.ok
            )
        else:
            what = f"both models {trial.status.split()[1]}"
        groups.setdefault((what, error), []).append(str(trial.index))
    return [
        f"{'trial' if len(indices) == 1 else 'trials'} {', '.join(indices)} (skipped, not a "
        f"difference): {what}: {error}"
        for (what, error), indices in groups.items()
    ]


def _inconclusive_hint(result: VerifyReport) -> str:
    if result.unloadable_original:
        return "onnxruntime cannot load the original model: nothing can be compared with it"
    others = {trial.runtime for trial in result.trials} - {"onnxruntime"}
    if others and all(trial.status in ("both failed", "both crashed") for trial in result.trials):
        names = " and ".join(sorted(others))
        return (
            f"{names} fails on the original as on the candidate: it cannot run this model on "
            "these inputs; without --runtime they are compared in onnxruntime"
        )
    named = result.settings.get("symbolic_dims", [])
    if result.timed_out():
        dims = f"--dim {named[0]}=SIZE with smaller sizes, or " if named else ""
        return (
            "the original did not finish in time on some inputs: raise --timeout, or give "
            f"{dims}--inputs with inputs it finishes on (an ONNX test-data folder or .npz)"
        )
    dims = f"--dim {named[0]}=SIZE with a size both models accept, or " if named else ""
    return f"give {dims}--inputs with inputs they accept (an ONNX test-data folder or .npz)"


def _show(result: VerifyReport) -> None:
    columns = _COLUMNS + (("reference",) if result.settings.get("reference") else ())
    rows = _rows(result)
    if sys.stdout.isatty() and _show_rich(columns, rows, _footer(result)):
        return
    widths = [max(len(row[i]) for row in (columns, *rows)) for i in range(len(columns))]
    for row in (columns, *rows):
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        echo("  ".join(cells).rstrip())
    for line in _footer(result):
        echo(line)


def _show_rich(columns: tuple[str, ...], rows: list[tuple[str, ...]], footer: list[str]) -> bool:
    """Print with rich when it is installed; False when it is not."""
    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        return False
    table = Table(*columns)
    for row in rows:
        style = None if row[6] == "ok" else "red"
        table.add_row(*(Text(escape(cell)) for cell in row), style=style)  # no markup, no codes
    console = Console()
    console.print(table)
    for line in footer:
        console.print(escape(line), markup=False, highlight=False, soft_wrap=True)
    return True


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
