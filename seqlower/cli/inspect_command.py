"""`seqlower inspect`: where a model's sequence values are and how each would be lowered.

A thin layer over `seqlower.inspect.inspect_model`: it parses options, prints a table (with rich
when it is installed and stdout is a terminal, as plain text otherwise) or the JSON report with
`--json`, and exits 0 when the model could be inspected, 2 on bad input (one `error:` line on
stderr). Register it with `app.command("inspect")(inspect_command)`.
"""

from __future__ import annotations

__all__ = ["format_inspect", "format_inspect_footer", "inspect_command"]

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from seqlower.cli.command import error_exit
from seqlower.cli.options import (
    DEFAULT_TARGET,
    FlattenOption,
    InspectDimOption,
    InspectTargetOption,
    SeqLenOption,
    SplitKeepdimsOption,
    lowering_options,
)
from seqlower.cli.summary import costlier_note, plural
from seqlower.cli.terminal import echo_block, escape, escape_lines
from seqlower.errors import SeqlowerError
from seqlower.inspect import InspectReport, inspect_model
from seqlower.report import NodeOutcome
from seqlower.runtime_check import RUNTIME_TARGETS


def inspect_command(
    model: Annotated[Path, typer.Argument(metavar="MODEL", help="The model to inspect (.onnx).")],
    dim: InspectDimOption = None,
    flatten_sequence_io: FlattenOption = False,
    seq_len: SeqLenOption = None,
    split_keepdims: SplitKeepdimsOption = "onnxruntime",
    target: InspectTargetOption = DEFAULT_TARGET,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the report as JSON (docs/report-schema.md).")
    ] = False,
) -> None:
    """Show where the sequence values of MODEL are, which tier would lower each and, for what
    would be kept, why and what to try. A dry run of `seqlower optimize` with the same options:
    it lowers a copy and shows the report, so the two never disagree.

    Tiers, cheapest first: direct (tensor operators on the whole data), batch (a map's body
    applied once to all elements), unroll (a copy per element), scan (a Loop collecting its
    results as tensors); a list as tensors: stacked (elements of one shape in one tensor),
    ragged (elements concatenated on their first dim, plus those dims), flat (elements
    flattened into one buffer, plus a table of their shapes), unranked (the same for elements
    whose rank is known only at run time: their shapes one after the other, plus a table of
    sizes and ranks); loop (a Loop carrying a sequence), kept (still a sequence, with the
    reason), flattened (a sequence input or output turned into tensors on request).

    Nothing is written; the model is not changed.

    \b
    Exit codes:
      0  inspected, also when something would be kept or the target check
         lists errors (`seqlower optimize --target` refuses those)
      2  bad input or usage (one error line)

    Examples:

      seqlower inspect model.onnx

      seqlower inspect model.onnx --dim N=8 --target tensorrt

      seqlower inspect model.onnx --flatten-sequence-io --seq-len states=4 --json
    """
    try:
        options = lowering_options(split_keepdims, dim, flatten_sequence_io, seq_len, target)
        report = inspect_model(model, options, target=options.target)
    except SeqlowerError as error:
        raise error_exit(str(error)) from None
    if json_out:
        echo_block(json.dumps(report.to_dict(), indent=2))
    elif not (sys.stdout.isatty() and _show_rich(report)):
        echo_block(format_inspect(report))


def _show_rich(report: InspectReport) -> bool:
    """Print with rich when it is installed; False when it is not."""
    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        return False
    tiers = ", ".join(f"{count} {tier}" for tier, count in report.tiers.items()) or "none"
    table = Table(title=Text(escape(f"{report.model}: {tiers}")))
    for column in ("graph", "node", "op", "tier", "rules / why kept"):
        table.add_column(column, overflow="fold")  # names and reasons are never cut
    for site in report.sites:
        detail = _detail(site) + (f"\ntry {site.hint}" if site.hint else "")
        style = "yellow" if site.tier == "kept" else None
        cells = (site.graph, _node_cell(site), site.op_type, site.tier, detail)
        table.add_row(*(Text(escape(cell)) for cell in cells), style=style)  # no markup, no codes
    console = Console()
    console.print(table)
    for line in format_inspect_footer(report):
        console.print(escape(line), markup=False, highlight=False)
    return True


def format_inspect(report: InspectReport) -> str:
    """The inspect report as a compact plain-text table, one line per site, hints below."""
    tiers = ", ".join(f"{count} {tier}" for tier, count in report.tiers.items()) or "none"
    lines = [f"{report.model}: {len(report.sites)} sequence sites ({tiers})"]
    if report.sites:
        rows = [("graph", "node", "op", "tier", "rules / why kept")]
        for site in report.sites:
            rows.append((site.graph, _node_cell(site), site.op_type, site.tier, _detail(site)))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        for index, row in enumerate(rows):
            cells = [cell.ljust(width) for cell, width in zip(row, widths)]
            lines.append("  ".join([*cells, row[4]]).rstrip())
            hint = report.sites[index - 1].hint if index else ""
            if hint:
                lines.append(f"    try {hint}")
    return escape_lines(lines + format_inspect_footer(report))  # names: no lines of their own


def format_inspect_footer(report: InspectReport) -> list[str]:
    """The lines under the table: interface changes, warnings, the target's verdict."""
    lines = [f"interface: {_describe_change(c)}" for c in report.lowering.interface_changes]
    # rewrites of nodes that are no sequence site (a Loop that grows a tensor, say)
    named = {rule for site in report.sites for rule in site.rules}
    others = [f"{r} x{n}" for r, n in report.lowering.rules_fired.items() if r not in named]
    if others:
        lines.append(f"other rewrites: {', '.join(others)}")
    lines.extend(f"warning: {warning}" for warning in report.lowering.warnings)
    lines.extend(costlier_note(report.lowering))
    target = report.target.target
    if target != "generic":
        verdict = "ok" if report.target.ok else plural(len(report.target.errors), "error")
        if target in RUNTIME_TARGETS:  # optimize also loads the model in the runtime
            verdict += (
                f" (operators only; `seqlower optimize --target {target}` also loads the "
                f"model in {target} and runs it once, when {target} is installed)"
            )
        lines.append(f"target {target}: {verdict}")
        lines.extend(f"  error: {error}" for error in report.target.errors)
        lines.extend(f"  warning: {warning}" for warning in report.target.warnings)
    return lines


def _node_cell(site: NodeOutcome) -> str:
    """The node's label; for one the lowering made, the node of the model it came from."""
    return f"made from '{site.created_by}'" if site.created_by else site.node


def _detail(site: NodeOutcome) -> str:
    """One cell: the rules that rewrote the node, or why it is kept."""
    if site.tier == "kept":
        return site.reason
    if site.rules:
        return ", ".join(site.rules)
    if site.op_type in ("input", "output"):
        return ""
    return "removed along with the nodes around it"


def _describe_change(change: dict[str, Any]) -> str:
    kind = change.get("kind")
    if kind == "bind_dim":
        inputs = ", ".join(change.get("inputs", []))
        return f"dim {change['dim']} fixed to {change['size']} (inputs {inputs})"
    if kind in ("flatten_input", "flatten_output"):
        side = "input" if kind == "flatten_input" else "output"
        names = ", ".join(change.get("new_names", [])) or "nothing (empty)"
        return f"sequence {side} '{change['name']}' -> tensors {names}"
    return str(change)
