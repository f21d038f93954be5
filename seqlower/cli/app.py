"""The typer application and its commands.

Exit codes, for every command: 0 success; 1 the result is refused (`--strict` with sequence ops
left, `--target` problems, `--verify` or `verify` found a difference); 2 bad input or a usage
error (one `error:` line; nothing written); 3 an internal error, a bug in seqlower (one `error:`
line that says so; nothing written).
"""

from __future__ import annotations

__all__ = ["app", "main"]

import dataclasses
import functools
import json
import logging
import os
import shutil
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import onnx
import onnx_ir as ir
import typer
from onnx_ir.passes.common import _c_api_utils

from seqlower import __version__
from seqlower.cli.command import (
    EXIT_INTERNAL,
    EXIT_REFUSED,
    SeqlowerCommand,
    SeqlowerGroup,
    error_exit,
    usage_error,
    write_report,
)
from seqlower.cli.inspect_command import inspect_command
from seqlower.cli.options import (
    DEFAULT_TARGET,
    DimOption,
    FlattenOption,
    SeqLenOption,
    SplitKeepdimsOption,
    TargetOption,
    lowering_options,
)
from seqlower.cli.progress import PassObserver
from seqlower.cli.summary import format_summary, format_written, plural, stored_size
from seqlower.cli.terminal import EscapingFormatter, echo, echo_block
from seqlower.cli.verify_command import verify_command
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
)
from seqlower.cli.verify_step import verify_lowered, with_verification
from seqlower.errors import BUG_REPORT, InternalError, InvalidModelError, SeqlowerError
from seqlower.input_check import errors_held
from seqlower.io import load_model, load_model_and_files, same_file, save_model
from seqlower.options import Options
from seqlower.pipeline import collector_relaxed, lower_in_place
from seqlower.report import Report
from seqlower.report.catalogue import PASS_REWRITES, PassRewrite
from seqlower.rule import Rule
from seqlower.rules import default_rules
from seqlower.run_shapes import failing_node, invalid_as_run
from seqlower.runtime_check import fails_in_onnxruntime
from seqlower.strict_inference import check_fully
from seqlower.subgraph_declarations import forget_subgraph_output_shapes
from seqlower.verification.check import DEFAULT_TIME_BUDGET, DEFAULT_TRIALS
from seqlower.verification.runner import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT

# `-h` as well as `--help`, for the app and every command
CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="seqlower",
    context_settings=CONTEXT,
    help="Lower ONNX sequence operators to plain tensor ONNX, and prove the result equivalent.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=SeqlowerGroup,
)
app.command(
    "verify",
    cls=SeqlowerCommand,
    context_settings=CONTEXT,
    short_help="Compare two models under onnxruntime on the same inputs.",
)(verify_command)
app.command(
    "inspect",
    cls=SeqlowerCommand,
    context_settings=CONTEXT,
    short_help="Show the sequence ops of a model and how each would be lowered.",
)(inspect_command)


def _version(show: bool) -> None:
    if show:
        echo(f"seqlower {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Lower ONNX sequence operators to plain tensor ONNX."""
    _configure_logging(verbose=False)  # every command: no library chatter before its errors


@app.command(
    "optimize",
    cls=SeqlowerCommand,
    context_settings=CONTEXT,
    short_help="Lower the sequence ops of a model and write the result.",
)
def optimize_command(
    source: Annotated[Path, typer.Argument(metavar="SOURCE", help="The model to lower (.onnx).")],
    output: Annotated[
        Path, typer.Argument(metavar="OUTPUT", help="Where to write the lowered model (.onnx).")
    ],
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Fail (exit 1, write nothing) if any sequence op, or sequence-typed input or "
            "output, would remain.",
        ),
    ] = False,
    report: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="Write the lowering report as JSON to this file."),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Verify as `seqlower verify` does (in the --target's runtime when it names "
            "one; it takes verify's options: --trials, --seed, --inputs, --rtol, --atol, ...); "
            "write nothing if the outputs differ.",
        ),
    ] = False,
    runtime: TargetOption = DEFAULT_TARGET,
    dim: DimOption = None,
    flatten_sequence_io: FlattenOption = False,
    seq_len: SeqLenOption = None,
    split_keepdims: SplitKeepdimsOption = "onnxruntime",
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Allow OUTPUT to be the same file as SOURCE.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write OUTPUT even when --target finds problems (they are printed as warnings).",
        ),
    ] = False,
    external_data: Annotated[
        bool,
        typer.Option(
            "--external-data",
            help="Write the weights of 1 kB or more to a file beside OUTPUT named after their "
            "content, OUTPUT.<digest>.data (for models over 2 GB). The model and its weights "
            "are replaced as a pair; the weights file of the model replaced is removed.",
        ),
    ] = False,
    dump_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="FOLDER",
            help="Write the model after each pass into this folder (created if missing).",
        ),
    ] = None,
    partial: Annotated[
        bool,
        typer.Option(
            "--partial",
            help="Lower a model that can only be partly lowered even when that grows it (by "
            "default the original is written then, and the summary says why).",
        ),
    ] = False,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            metavar="SECONDS",
            help="Stop rewriting after this many seconds and write the model as lowered so "
            "far (the summary says the limit was reached).",
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print nothing on success (not with -v).")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Log each rule as it is applied; list every refusal (not with -q).",
        ),
    ] = False,
    # the options of `seqlower verify`, for --verify (seqlower.cli.verify_options)
    trials: TrialsOption = DEFAULT_TRIALS,
    seed: SeedOption = 0,
    inputs: InputsOption = None,
    rtol: RtolOption = None,
    atol: AtolOption = None,
    reference: ReferenceOption = False,
    strict_errors: StrictErrorsOption = False,
    timeout: TimeoutOption = DEFAULT_TIMEOUT,
    time_budget: TimeBudgetOption = DEFAULT_TIME_BUDGET,
    strict_coverage: StrictCoverageOption = False,
    save_inputs: SaveInputsOption = None,
    memory_limit: MemoryLimitOption = DEFAULT_MEMORY_LIMIT,
) -> None:
    """Lower the sequence operators of SOURCE and write the result to OUTPUT.

    \b
    Examples:
      seqlower optimize model.onnx model.lowered.onnx --verify
      seqlower optimize model.onnx out.onnx --dim N=8 --target tensorrt
      seqlower optimize model.onnx out.onnx --report report.json

    \b
    Exit codes:
      0  written
      1  refused, nothing written: --strict with sequence ops left, --target
         problems (its profile, or its runtime cannot load or run the model),
         or --verify found a difference
      2  bad input or usage (one error line), nothing written
      3  internal error, a bug in seqlower (one error line), nothing written
    """
    if quiet and verbose:
        raise usage_error("--quiet and --verbose cannot be used together")
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
    if choices.changed() and not verify:
        raise usage_error(f"{choices.changed()[0]} is an option of --verify: add --verify")
    _configure_logging(verbose)
    started = time.perf_counter()
    try:
        options = lowering_options(
            split_keepdims, dim, flatten_sequence_io, seq_len, runtime, runtime_check=True
        )
        if time_limit is not None:
            if not time_limit > 0:  # nan too
                raise SeqlowerError(
                    f"--time-limit must be a number of seconds > 0, not {time_limit:g}"
                )
            options = dataclasses.replace(options, time_limit=time_limit)
        if partial:
            options = dataclasses.replace(options, partial=True)
        _check_paths(source, output, in_place, external_data, report, dump_dir)
    except SeqlowerError as error:
        raise error_exit(str(error)) from None  # names the option or the output path itself
    outputs = _Outputs(output, in_place, report, dump_dir)
    try:
        lowered, checked, summary, inputs, input_size = _optimize(
            source, outputs, options, quiet, verbose
        )
    except SeqlowerError as error:
        raise error_exit(_naming(source, str(error))) from None
    except InternalError as error:
        raise error_exit(f"{_naming(source, str(error))}; {BUG_REPORT}", EXIT_INTERNAL) from None
    confirmed = summary.target_confirmed and (
        f"--target {runtime}: {summary.target_confirmed} ({summary.runtime_check_seconds:.1f} s)"
    )
    if report is not None and not verify:
        write_report(report, summary.to_json() + "\n")
    if not quiet:
        for warning in [*summary.warnings, *summary.target_warnings]:
            echo(f"warning: {warning}", err=True)
        if confirmed:
            echo(confirmed, err=True)
    if not summary.fits_target:
        for error in summary.target_errors:
            echo(f"  - {error}", err=True)
        problems = plural(len(summary.target_errors), "problem")
        if not force:
            raise error_exit(f"{problems} for --target {runtime}; nothing written", EXIT_REFUSED)
        echo(f"warning: {problems} for --target {runtime}; written anyway (--force)", err=True)
    if strict and (summary.remaining or summary.kept_interface):
        # like --target tensorrt: a sequence-typed input or output counts as remaining
        ops = plural(len(summary.remaining), "sequence op")
        interface = plural(
            len(summary.kept_interface), "sequence input/output", "sequence inputs/outputs"
        )
        verb = "remains" if len(summary.remaining) + len(summary.kept_interface) == 1 else "remain"
        kept = summary.stop_reason.startswith("kept the original") or bool(summary.kept_for_speed)
        hint = "; the default target (no --target) lowers it even so" if kept else ""
        raise error_exit(
            f"{ops} and {interface} {verb} (--strict{', the original costs less' if kept else ''})"
            f"{hint}; nothing written",
            EXIT_REFUSED,
        )
    if verify:
        checked = None  # written as serialized after the verification, not before it
        verified, refusal = verify_lowered(
            source, lowered, options, choices, quiet=quiet, target=runtime
        )
        if report is not None:
            write_report(report, with_verification(summary.to_json(), verified) + "\n")
        if refusal is not None:
            raise refusal
    try:
        weights = save_model(
            lowered, output, external_data=external_data, protect=inputs, serialized=checked
        )
    except SeqlowerError as error:
        raise error_exit(f"{output}: cannot write ({error})") from None
    except OSError as error:  # strerror: the temporary file's name is no concern of the user
        raise error_exit(
            f"{output}: cannot write ({error.strerror or type(error).__name__})"
        ) from None
    if not quiet:
        seconds = time.perf_counter() - started
        echo(
            format_written(
                source,
                output,
                weights,
                summary,
                seconds,
                input_size=input_size,
                weights_asked=external_data,
            )
        )


def _naming(source: Path, message: str) -> str:
    return message if message.startswith(str(source)) else f"{source}: {message}"


def _check_paths(
    source: Path,
    output: Path,
    in_place: bool,
    external_data: bool,
    report: Path | None,
    dump_dir: Path | None,
) -> None:
    """Every output path is checked before any work; `--dump-dir` is created here."""
    if same_file(source, output) and not in_place:
        raise SeqlowerError(f"{output}: is the input file; pass --in-place to overwrite it")
    _check_output_file(output, "the lowered model")
    if report is not None:
        if same_file(report, source) or same_file(report, output):
            raise SeqlowerError(f"{report}: --report must not be the input or output model")
        _check_output_file(report, "--report")
    if dump_dir is not None:
        if dump_dir.exists() and not dump_dir.is_dir():
            raise SeqlowerError(f"{dump_dir}: --dump-dir is a file, not a folder")
        try:
            dump_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise SeqlowerError(
                f"{dump_dir}: cannot create the --dump-dir folder ({error.strerror})"
            ) from None
        if not os.access(dump_dir, os.W_OK):
            raise SeqlowerError(f"{dump_dir}: cannot write into the --dump-dir folder")


def _check_output_file(path: Path, what: str) -> None:
    if path.is_dir():
        raise SeqlowerError(f"{path}: is a directory; give a file name for {what}")
    folder = path.parent
    if not folder.is_dir():
        raise SeqlowerError(f"{path}: output folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SeqlowerError(f"{path}: cannot write into the folder {folder} (permission denied)")


@dataclasses.dataclass(frozen=True)
class _Outputs:
    """Every path `optimize` writes (the weights beside `model` are named when written)."""

    model: Path
    in_place: bool
    report: Path | None
    dump_dir: Path | None


def _refuse_inputs_as_outputs(inputs: list[Path], outputs: _Outputs) -> list[Path]:
    """Refuse (before any work) an output path that is a file the input reads: the model
    (unless --in-place) or one of its external data files. Returns the files to protect."""
    model_file, *data_files = inputs
    for data_file in data_files:
        for path, what in ((outputs.model, "OUTPUT"), (outputs.report, "--report")):
            if path is not None and same_file(path, data_file):
                raise SeqlowerError(
                    f"{path}: {what} is a weights file the input model reads; choose another path"
                )
    if outputs.report is not None and same_file(outputs.report, model_file):
        raise SeqlowerError(f"{outputs.report}: --report must not be the input or output model")
    return data_files if outputs.in_place else inputs


def _optimize(
    source: Path,
    outputs: _Outputs,
    options: Options,
    quiet: bool,
    verbose: bool = False,
) -> tuple[ir.Model, onnx.ModelProto | None, Report, list[Path], int]:
    """Load, check and lower `source`, print the summary; the lowered model, the serialized
    model the output check read when it is the whole model (`_check_output`), its report, the
    files the input reads (outputs must not replace them) and the bytes they take."""
    with (
        PassObserver(show_progress=not quiet, dump_dir=outputs.dump_dir) as observer,
        collector_relaxed(),
    ):
        model, files = load_model_and_files(source, split_keepdims=options.split_keepdims)
        inputs = _refuse_inputs_as_outputs(files, outputs)
        observer.protect = files
        input_size = stored_size(model, source)  # its external weights too
        started = time.perf_counter()
        # the file is read again only if the original is kept (docs/performance.md, "Never slower")
        original = functools.partial(load_model, source, split_keepdims=options.split_keepdims)
        lowered, summary = lower_in_place(model, options, after_pass=observer, original=original)
        # the runtime check (loading the model in the target's runtime) is not the lowering:
        # its line says its own time
        seconds = time.perf_counter() - started - summary.runtime_check_seconds
        observer.stage("checking the output")
        try:
            checked = _check_output(lowered)
        except InternalError as error:
            raise _blame(error, original, options) from None
    if not quiet:
        echo_block(format_summary(summary, str(source), str(outputs.model), seconds, verbose))
    return lowered, checked, summary, inputs, input_size


def _configure_logging(verbose: bool) -> None:
    """Library log records go to stderr only when asked for; onnx_ir's own chatter about
    malformed input is replaced by our one-line errors."""
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(EscapingFormatter("%(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
    logging.getLogger("seqlower").setLevel(logging.DEBUG if verbose else logging.ERROR)
    logging.getLogger("onnx_ir").setLevel(logging.WARNING if verbose else logging.CRITICAL)


def _one_line(error: BaseException, limit: int = 300) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_output(model: ir.Model) -> onnx.ModelProto | None:
    """The ONNX checker with its full check (`seqlower.strict_inference.check_fully`) on the
    lowered model; large weights (perhaps external) are left out of the serialized copy: they
    are read, not changed, by seqlower. Returns that copy when it is the model as saved (its
    main graph holds no initializer: none was made an input or left out), so that the save
    does not serialize the model again (100,000 graph outputs: a second or so); else None.
    Where the check fails only on what the input check tolerates (a declared shape inference
    contradicts), the shapes the subgraphs' outputs declare are dropped and the model checked
    again (`seqlower.subgraph_declarations`)."""
    try:
        return _checked(model)
    except Exception as error:
        if not errors_held(str(error)) and forget_subgraph_output_shapes(model):
            return _check_output(model)  # once: no subgraph output declares a shape now
        raise InternalError(
            f"internal error: the lowered model fails the ONNX checker ({_one_line(error)}); "
            "nothing written"
        ) from None


def _checked(model: ir.Model) -> onnx.ModelProto | None:
    if model.graph.initializers:
        _c_api_utils.call_onnx_api(check_fully, model)
        return None
    # what `call_onnx_api` checks when there is no initializer to move: the model as is
    proto = ir.to_proto(model)
    check_fully(proto)
    return proto


def _blame(
    error: InternalError, original: Callable[[], ir.Model], options: Options
) -> InternalError | InvalidModelError:
    """A lowered model that fails the checker is seqlower's fault unless the input model
    cannot run either (onnxruntime fails on each of a few inputs of its declared shapes): the
    checker then sees statically what the input does at run time (a dim the model reads
    that its declared shape lacks); or unless the input model, its values declared with the
    shapes they have when it runs, fails ONNX inference itself (`seqlower.run_shapes`: a node
    in a branch its runs do not take, a misfit onnxruntime joins); or unless onnxruntime,
    running the input model, fails at the very node the checker rejects (a Loop body's node,
    invalid wherever the body runs: `seqlower.run_shapes.failing_node`)."""
    model = original()
    found = str(error).removeprefix("internal error: ").removesuffix("; nothing written")
    failure = fails_in_onnxruntime(model, dims=options.dims)
    if failure is not None:
        return InvalidModelError(
            f"the input model cannot run on inputs of its declared shapes: onnxruntime fails "
            f"({_one_line(failure, 200)}), and {found}; nothing written"
        )
    problem = invalid_as_run(model, dims=options.dims)
    if problem is None:
        failing = failing_node(model, found, dims=options.dims)
        if failing is None:
            return error
        node, failure = failing
        return InvalidModelError(
            f"the input model itself is invalid at {node}: onnxruntime fails there when it runs "
            f"the input model ({_one_line(failure, 300)}), and {found}; the input runs only "
            "where that node does not (a Loop of no iteration, an If branch not taken); nothing "
            "written"
        )
    return InvalidModelError(
        f"the input model itself is invalid: with the shapes its values have when it runs "
        f"(on inputs of its declared shapes), ONNX type and shape inference reject it: "
        f"{problem}; nothing written"
    )


@app.command(
    "rules",
    cls=SeqlowerCommand,
    context_settings=CONTEXT,
    short_help="List the rewrite rules, each with its before -> after.",
)
def rules_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print as a Markdown table (as in docs/rules.md).")
    ] = False,
) -> None:
    """List the rewrite rules in priority order, each with its before -> after, then the
    rewrites the passes make around them: every name the summary's "rules fired" counts.

    \b
    Examples:
      seqlower rules
      seqlower rules --json
      seqlower rules --markdown

    Exit code: 0.
    """
    if as_json:
        entries = [{"name": e.name, "op_type": e.op_type, "doc": e.doc} for e in _catalogue()]
        echo_block(json.dumps(entries, indent=2))
    elif markdown:
        echo_block(rule_catalogue())
    else:
        echo_block(rule_list(shutil.get_terminal_size().columns))


def _catalogue() -> list[Rule | PassRewrite]:
    """The rules in priority order, then the rewrites passes make (every name a report counts)."""
    return [*default_rules(), *PASS_REWRITES]


def rule_list(width: int) -> str:
    """The rules as text that fits `width` columns: each rule's name and operator, then its
    before -> after, indented."""
    width = max(width, 40)
    lines = []
    for rule in _catalogue():
        lines.append(f"{rule.name} ({rule.op_type})")
        doc = " ".join(rule.doc.split())
        lines.extend(textwrap.wrap(doc, width - 1, initial_indent="    ", subsequent_indent="    "))
    return "\n".join(lines)


def rule_catalogue() -> str:
    """The rule catalogue in Markdown, generated from the rules' docstrings."""
    lines = ["| rule | operator | before -> after |", "|---|---|---|"]
    for rule in _catalogue():
        doc = " ".join(rule.doc.split()).replace("|", "\\|")
        lines.append(f"| `{rule.name}` | {rule.op_type} | {doc} |")
    return "\n".join(lines)


def main() -> None:
    app()
