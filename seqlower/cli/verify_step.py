"""`optimize --verify`: verify the lowered model before anything is written.

It takes the options of `seqlower verify` (`seqlower.cli.verify_options`), runs the candidate in
the target's runtime when the target names one (openvino, tract; else onnxruntime), prints one
line for an equivalent model (with the trials compared and skipped, and what the candidate was
compared with) and the warnings, and exits 1 (a difference) or 2 (inconclusive, bad input) with
nothing written otherwise. The report it returns goes into `--report` (`verification`).
"""

from __future__ import annotations

__all__ = ["verification_record", "verify_lowered", "with_verification"]

import json
from pathlib import Path
from typing import Any

import onnx_ir as ir
import typer

from seqlower.cli.command import EXIT_BAD_INPUT, EXIT_REFUSED, error_exit
from seqlower.cli.summary import plural
from seqlower.cli.terminal import echo
from seqlower.cli.verify_options import VerifyChoices, save_failing
from seqlower.errors import SeqlowerError
from seqlower.options import Options
from seqlower.verification import VerifyReport


def verify_lowered(
    source: Path,
    lowered: ir.Model,
    options: Options,
    choices: VerifyChoices,
    *,
    quiet: bool,
    target: str,
) -> tuple[VerifyReport, typer.Exit | None]:
    """Verify `lowered` against `source`: the report, and the exit to raise (after its `error:`
    line, printed here) when it is not shown equivalent, once the caller wrote its --report.
    Bad input (`--inputs` that do not fit, say) raises that exit at once."""
    from seqlower.verification import verify
    from seqlower.verification.runtimes import RUNTIMES

    runtime = target if target in RUNTIMES else "onnxruntime"
    try:
        result = verify(
            source, lowered, dims=options.dims, runtimes=[runtime], **choices.arguments()
        )
        saved = save_failing(result, choices.save_inputs)
    except SeqlowerError as error:
        raise error_exit(f"--verify: {error}") from None
    if not result.equivalent:
        for line in result.failures():
            echo(f"  - {line}", err=True)
        if saved:
            echo(saved, err=True)
        if result.inconclusive and result.unloadable_original:
            return result, error_exit(
                "verification inconclusive: onnxruntime cannot load the input model, so nothing "
                "was compared; nothing written (without --verify the lowered model is written "
                "unverified)",
                EXIT_BAD_INPUT,
            )
        if result.inconclusive and result.timed_out():
            return result, error_exit(
                "verification inconclusive: the input model did not finish in time on too many "
                "inputs; nothing written (raise --timeout, or give inputs it finishes on with "
                "--inputs)",
                EXIT_BAD_INPUT,
            )
        if result.inconclusive:
            return result, error_exit(
                "verification inconclusive: both models failed on too many generated inputs; "
                "nothing written (give sizes the model accepts with --dim NAME=SIZE, or inputs "
                "it accepts with --inputs)",
                EXIT_BAD_INPUT,
            )
        hint = result.difference_hint()
        return result, error_exit(
            "verification failed: the lowered model differs; nothing written"
            + (f" ({hint})" if hint else ""),
            EXIT_REFUSED,
        )
    if not quiet:
        echo(_verified(result, runtime))
        for line in result.warnings():
            echo(f"warning: {line}", err=True)
    return result, None


def verification_record(result: VerifyReport) -> dict[str, Any]:
    """What `--report` records of the verification (see docs/report-schema.md)."""
    return {
        "verdict": result.verdict,
        "equivalent": result.equivalent,
        "trials_compared": result.compared,
        "trials_skipped": result.skipped,
        "seconds": round(result.seconds, 3),
        "runtimes": list(result.settings.get("runtimes", [])),
        "compared_with": dict(result.settings.get("compared_with", {})),
        "seed": result.settings.get("seed"),
        "inputs": result.settings.get("inputs"),
        "coverage": None if result.coverage is None else result.coverage.to_dict(),
        "failures": result.failures(),
        "warnings": result.warnings(),
        "notes": list(result.notes),
    }


def with_verification(report_json: str, result: VerifyReport) -> str:
    """The lowering report's JSON with a `verification` member."""
    data = json.loads(report_json)
    data["verification"] = verification_record(result)
    return json.dumps(data, indent=2)


def _verified(result: VerifyReport, runtime: str) -> str:
    """`verified: equivalent under openvino (14 trials compared, 2 skipped; dims 0..8),
    compared with the original in openvino`."""
    counts = f"{plural(result.compared, 'trial')} compared"
    if result.skipped:
        counts += f", {result.skipped} skipped"
    coverage = result.coverage.summary() if result.coverage is not None else ""
    line = f"verified: equivalent under {runtime} ({counts}"
    line += f"; {coverage})" if coverage else ")"
    against = result.settings.get("compared_with", {}).get(runtime, "")
    if runtime != "onnxruntime" and against:
        line += f", compared with {against}"
    return line
