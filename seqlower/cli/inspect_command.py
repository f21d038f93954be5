"""`seqlower inspect`: where a model's sequence values are and how each would be lowered.

A thin layer over `seqlower.inspect.inspect_model`: it parses options, prints a table (with rich
when it is installed and stdout is a terminal, as plain text otherwise) or the JSON report with
`--json`, and exits 0 when the model could be inspected, 2 on bad input (one `error:` line on
stderr). Register it with `app.command("inspect")(inspect_command)`.
"""

from __future__ import annotations

__all__ = ["inspect_command"]

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from seqlower.cli.options import (
    TARGETS,
    DimOption,
    FlattenOption,
    SeqLenOption,
    SplitKeepdimsOption,
    check_target_name,
    lowering_options,
)
from seqlower.errors import SeqlowerError
from seqlower.inspect import InspectReport, format_inspect, format_inspect_footer, inspect_model


def inspect_command(
    model: Annotated[Path, typer.Argument(help="The model to inspect (.onnx).")],
    dim: DimOption = None,
    flatten_sequence_io: FlattenOption = False,
    seq_len: SeqLenOption = None,
    split_keepdims: SplitKeepdimsOption = "onnxruntime",
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
        options = lowering_options(split_keepdims, dim, flatten_sequence_io, seq_len)
        options = dataclasses.replace(options, target=check_target_name(target))
        report = inspect_model(model, options, target=options.target)
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
