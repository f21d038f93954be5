"""The typer application and its commands."""

from __future__ import annotations

__all__ = ["app", "main"]

import json
import logging
import time
from pathlib import Path
from typing import Annotated

import onnx
import onnx_ir as ir
import typer
from onnx_ir.passes.common import _c_api_utils

from seqlower import __version__
from seqlower.cli.inspect_command import inspect_command
from seqlower.cli.options import (
    TARGETS,
    DimOption,
    FlattenOption,
    SeqLenOption,
    SplitKeepdimsOption,
    check_target_name,
    lowering_options,
)
from seqlower.cli.progress import PassObserver
from seqlower.cli.summary import format_summary
from seqlower.cli.verify_command import verify_command
from seqlower.errors import SeqlowerError
from seqlower.io import load_model, save_model
from seqlower.options import Options
from seqlower.pipeline import collector_relaxed, lower_in_place
from seqlower.report import Report
from seqlower.rules import default_rules
from seqlower.targets import check_target

app = typer.Typer(
    name="seqlower",
    help="Lower ONNX sequence operators to plain tensor ONNX, and prove the result equivalent.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)
app.command("verify")(verify_command)
app.command("inspect")(inspect_command)


def _version(show: bool) -> None:
    if show:
        typer.echo(f"seqlower {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Lower ONNX sequence operators to plain tensor ONNX."""


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


@app.command("optimize")
def optimize_command(
    source: Annotated[Path, typer.Argument(help="The model to lower (.onnx).")],
    target: Annotated[Path, typer.Argument(help="Where to write the lowered model.")],
    strict: Annotated[
        bool,
        typer.Option(
            help="Fail (exit 1, write nothing) if any sequence op, or sequence-typed input or "
            "output, would remain."
        ),
    ] = False,
    report: Annotated[
        Path | None, typer.Option(help="Write the lowering report as JSON to this file.")
    ] = None,
    verify: Annotated[
        bool, typer.Option(help="Verify under onnxruntime; write nothing if outputs differ.")
    ] = False,
    runtime: Annotated[
        str,
        typer.Option(
            "--target",
            help=f"Runtime profile, one of {', '.join(TARGETS)}: onnxruntime warns about "
            "leftover sequence ops, tensorrt fails (exit 1) on them and on dynamic scan lengths.",
        ),
    ] = "generic",
    dim: DimOption = None,
    flatten_sequence_io: FlattenOption = False,
    seq_len: SeqLenOption = None,
    split_keepdims: SplitKeepdimsOption = "onnxruntime",
    in_place: Annotated[
        bool, typer.Option(help="Allow TARGET to be the same file as SOURCE.")
    ] = False,
    external_data: Annotated[
        bool,
        typer.Option(help="Write the weights to TARGET.data beside TARGET (for models > 2 GB)."),
    ] = False,
    dump_dir: Annotated[
        Path | None, typer.Option(help="Write the model after each pass into this folder.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing on success.")] = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Log each rule as it is applied; list every refusal."),
    ] = False,
) -> None:
    """Lower the sequence operators of SOURCE and write the result to TARGET.

    Examples:

      seqlower optimize model.onnx model.lowered.onnx --verify

      seqlower optimize model.onnx out.onnx --dim N=8 --target tensorrt --report report.json
    """
    _configure_logging(verbose)
    try:
        options = lowering_options(split_keepdims, dim, flatten_sequence_io, seq_len)
        check_target_name(runtime)
        if verify and flatten_sequence_io:
            raise SeqlowerError(
                "--verify cannot compare models whose interfaces differ (--flatten-sequence-io)"
            )
        _check_paths(source, target, in_place, dump_dir)
        lowered, summary = _optimize(source, target, options, quiet, dump_dir, verbose)
    except SeqlowerError as error:
        message = str(error)
        raise _fail(
            message if message.startswith(str(source)) else f"{source}: {message}"
        ) from None
    if report is not None:
        _write_text(report, summary.to_json() + "\n")
    fit = check_target(lowered, summary, runtime)  # type: ignore[arg-type]
    if not quiet:
        for warning in fit.warnings:
            typer.echo(f"warning: {warning}", err=True)
    if not fit.ok:
        for error in fit.errors:
            typer.echo(f"  - {error}", err=True)
        raise _fail(f"{len(fit.errors)} problem(s) for --target {runtime}; nothing written", 1)
    if strict and (summary.remaining or summary.kept_interface):
        # like --target tensorrt: a sequence-typed input or output counts as remaining
        kept = f"{len(summary.remaining)} sequence ops and {len(summary.kept_interface)} "
        raise _fail(kept + "sequence inputs/outputs remain (--strict); nothing written", 1)
    if verify:
        _verify_or_exit(source, lowered, options, quiet)
    try:
        save_model(lowered, target, external_data=f"{target.name}.data" if external_data else None)
    except (SeqlowerError, OSError) as error:
        raise _fail(f"{target}: cannot write ({error})") from None


def _check_paths(source: Path, target: Path, in_place: bool, dump_dir: Path | None) -> None:
    if _same_file(source, target) and not in_place:
        raise SeqlowerError(f"{target}: is the input file; pass --in-place to overwrite it")
    if not target.parent.exists():
        raise SeqlowerError(f"{target}: output folder {target.parent} does not exist")
    if dump_dir is not None and not dump_dir.is_dir():
        raise SeqlowerError(f"{dump_dir}: --dump-dir must be an existing folder")


def _optimize(
    source: Path,
    target: Path,
    options: Options,
    quiet: bool,
    dump_dir: Path | None,
    verbose: bool = False,
) -> tuple[ir.Model, Report]:
    with PassObserver(show_progress=not quiet, dump_dir=dump_dir) as observer, collector_relaxed():
        model = load_model(source)
        observer.stage("checking the input")
        _check_input(model, source)
        started = time.perf_counter()
        lowered, summary = lower_in_place(model, options, after_pass=observer)
        seconds = time.perf_counter() - started
        observer.stage("checking the output")
        _check_output(lowered)
    if not quiet:
        typer.echo(format_summary(summary, str(source), str(target), seconds, verbose))
    return lowered, summary


def _configure_logging(verbose: bool) -> None:
    """Library log records go to stderr only when asked for; onnx_ir's own chatter about
    malformed input is replaced by our one-line errors."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("seqlower").setLevel(logging.DEBUG if verbose else logging.ERROR)
    logging.getLogger("onnx_ir").setLevel(logging.WARNING if verbose else logging.CRITICAL)


def _one_line(error: BaseException, limit: int = 300) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _checked(model: ir.Model, full_check: bool) -> None:
    """The ONNX checker on the graph; large weights (perhaps external) are left out of the
    serialized copy: they are read, not changed, by seqlower."""

    def check(proto: onnx.ModelProto) -> None:
        onnx.checker.check_model(proto, full_check=full_check)

    _c_api_utils.call_onnx_api(check, model)


def _check_input(model: ir.Model, source: Path) -> None:
    try:
        _checked(model, full_check=False)
    except (onnx.checker.ValidationError, ValueError) as error:
        raise SeqlowerError(f"{source}: fails the ONNX checker: {_one_line(error)}") from None


def _check_output(model: ir.Model) -> None:
    try:
        _checked(model, full_check=True)
    except Exception as error:
        raise SeqlowerError(
            f"internal error: the lowered model fails the ONNX checker ({_one_line(error)}); "
            "nothing written. Please report this as a seqlower bug"
        ) from None


def _verify_or_exit(source: Path, lowered: ir.Model, options: Options, quiet: bool) -> None:
    from seqlower.verification import verify

    result = verify(source, lowered, dims=options.dims)
    if not result.equivalent:
        for line in result.failures():
            typer.echo(f"  - {line}", err=True)
        raise _fail("verification failed: the lowered model differs; nothing written", 1)
    if not quiet:
        typer.echo(f"verified: equivalent under onnxruntime ({len(result.trials)} trials)")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise _fail(f"{path}: cannot write the report ({error.strerror})") from None


@app.command("rules")
def rules_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List the rewrite rules in priority order, each with its before -> after.

    Examples:

      seqlower rules

      seqlower rules --json
    """
    rules = list(default_rules())
    if as_json:
        entries = [{"name": r.name, "op_type": r.op_type, "doc": r.doc} for r in rules]
        typer.echo(json.dumps(entries, indent=2))
        return
    typer.echo(rule_catalogue())


def rule_catalogue() -> str:
    """The rule catalogue in Markdown, generated from the rules' docstrings."""
    lines = ["| rule | operator | before -> after |", "|---|---|---|"]
    for rule in default_rules():
        doc = " ".join(rule.doc.split()).replace("|", "\\|")
        lines.append(f"| `{rule.name}` | {rule.op_type} | {doc} |")
    return "\n".join(lines)


def main() -> None:
    app()
