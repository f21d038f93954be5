"""`seqlower inspect`: where a model's sequence values are and how each would be lowered.

A thin layer over `seqlower.inspect.inspect_model`: it parses options, prints a table (with rich
when it is installed and stdout is a terminal, as plain text otherwise) or the JSON report with
`--json`, and exits 0 when the model could be inspected, 2 on bad input (one `error:` line on
stderr). Register it with `app.command("inspect")(inspect_command)`.

`parse_sizes` reads the repeatable NAME=SIZE options (`--dim`, `--seq-len`) for other commands.
"""

from __future__ import annotations

__all__ = ["TARGETS", "inspect_command", "parse_sizes"]

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from seqlower.errors import SeqlowerError
from seqlower.inspect import InspectReport, format_inspect, format_inspect_footer, inspect_model
from seqlower.options import Options
from seqlower.targets import PROFILES

TARGETS = tuple(PROFILES)


def parse_sizes(items: list[str] | None, option: str) -> dict[str, int]:
    """`["N=8", "B=2"]` -> `{"N": 8, "B": 2}`; raises `SeqlowerError` naming `option` on a
    malformed item (no '=', empty name, a size that is not an integer >= 0)."""
    sizes: dict[str, int] = {}
    for item in items or []:
        name, sep, size = item.partition("=")
        if not sep or not name.strip() or not size.strip().isdigit():
            raise SeqlowerError(f"{option} expects NAME=SIZE with a size >= 0, got '{item}'")
        sizes[name.strip()] = int(size)
    return sizes


def check_target_name(target: str) -> str:
    """The target name, or `SeqlowerError` listing the valid ones."""
    if target not in PROFILES:
        raise SeqlowerError(f"--target must be one of {', '.join(TARGETS)}, not '{target}'")
    return target


def inspect_command(
    model: Annotated[Path, typer.Argument(help="The model to inspect (.onnx).")],
    dim: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=SIZE",
            help="Give a symbolic input dimension a size, as optimize would (repeatable).",
        ),
    ] = None,
    flatten_sequence_io: Annotated[
        bool,
        typer.Option(help="Show the result of flattening sequence inputs and outputs."),
    ] = False,
    seq_len: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME=N",
            help="Length of a sequence-typed input to flatten (repeatable).",
        ),
    ] = None,
    split_keepdims: Annotated[
        str,
        typer.Option(
            help="Reading of SplitToSequence(scalar split, keepdims=0): onnxruntime or spec."
        ),
    ] = "onnxruntime",
    target: Annotated[
        str, typer.Option(help=f"Also judge the result for a runtime: {', '.join(TARGETS)}.")
    ] = "generic",
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON (docs/report-schema.md).")
    ] = False,
) -> None:
    """Show where the sequence values of MODEL are, which tier would lower each (direct,
    batch, unroll, scan, loop) and, for what would be kept, why and what to try.

    Nothing is written; the model is not changed. Exit codes: 0 inspected (also when something
    would be kept or the target check finds errors: `optimize --target` enforces), 2 bad input.

    Examples:

      seqlower inspect model.onnx

      seqlower inspect model.onnx --dim N=8 --target tensorrt

      seqlower inspect model.onnx --flatten-sequence-io --seq-len states=4 --json
    """
    try:
        if split_keepdims not in ("onnxruntime", "spec"):
            raise SeqlowerError(
                f"--split-keepdims must be onnxruntime or spec, not '{split_keepdims}'"
            )
        options = Options(
            split_keepdims=split_keepdims,  # type: ignore[arg-type]
            dims=parse_sizes(dim, "--dim"),
            flatten_sequence_io=flatten_sequence_io,
            seq_lens=parse_sizes(seq_len, "--seq-len"),
        )
        report = inspect_model(model, options, target=check_target_name(target))
    except SeqlowerError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    elif not (sys.stdout.isatty() and _show_rich(report)):
        typer.echo(format_inspect(report))


def _show_rich(report: InspectReport) -> bool:
    """Print with rich when it is installed; False when it is not."""
    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        return False
    tiers = ", ".join(f"{count} {tier}" for tier, count in report.tiers.items()) or "none"
    table = Table(title=Text(f"{report.model}: {tiers}"))
    for column in ("graph", "node", "op", "tier", "rules / why kept"):
        table.add_column(column, overflow="fold")  # names and reasons are never cut
    for site in report.sites:
        detail = site.detail + "".join(f"\ntry {hint}" for hint in site.hints)
        style = "yellow" if site.tier == "kept" else None
        cells = (site.graph, site.label, site.op_type, site.tier, detail)
        table.add_row(*(Text(cell) for cell in cells), style=style)  # no markup in names
    console = Console()
    console.print(table)
    for line in format_inspect_footer(report):
        console.print(line, markup=False, highlight=False)
    return True
