"""The optimize summary as the command line prints it: the report as text
(`seqlower.report.text`, the one renderer, which `str(report)` uses too) and the last line,
what was written.
"""

from __future__ import annotations

__all__ = [
    "WIDTH",
    "costlier_note",
    "format_size",
    "format_summary",
    "format_written",
    "plural",
    "shorten",
    "stored_size",
]

from pathlib import Path

import onnx_ir as ir

from seqlower.ops import iter_all_graphs
from seqlower.report import Report
from seqlower.report.text import WIDTH, costlier_note, format_summary, plural, shorten


def format_size(size: int) -> str:
    """`812 B`, `14.2 kB`, `3.1 MB`, `2.0 GB` (powers of 1000)."""
    if size < 1000:
        return f"{size} B"
    for unit in ("kB", "MB", "GB"):
        size /= 1000  # type: ignore[assignment]
        if size < 1000 or unit == "GB":
            return f"{size:.1f} {unit}"
    raise AssertionError  # pragma: no cover


def format_written(
    source: Path,
    output: Path,
    weights: Path | None,
    report: Report,
    seconds: float,
    *,
    input_size: int | None = None,
    weights_asked: bool = False,
) -> str:
    """The last line: what was written (both files when the weights are apart; with
    `weights_asked` and no weights file, why not), how large against the input (`input_size`,
    its external weights included; else the size of `source`), the node counts before and
    after, and the time in all."""
    written = f"{output} ({format_size(output.stat().st_size)})"
    if weights is not None:
        written += f" and its weights {weights} ({format_size(weights.stat().st_size)})"
    elif weights_asked:
        written += " and no weights file (no weight of 1 kB or more)"
    if input_size is None:
        input_size = source.stat().st_size if source.is_file() else 0
    return (  # one line, whatever the paths: scripts read it
        f"wrote {written}; input {format_size(input_size)}; nodes {report.nodes_before} -> "
        f"{report.nodes_after} ({seconds:.2f} s)"
    )


def stored_size(model: ir.Model, source: Path) -> int:
    """The bytes `model` takes where it was read from: the file `source` and every file its
    external weights are in (each counted once)."""
    size = source.stat().st_size if source.is_file() else 0
    files = {
        Path(value.const_value.path)
        for graph in iter_all_graphs(model)
        for value in graph.initializers.values()
        if isinstance(value.const_value, ir.ExternalTensor)
    }
    return size + sum(path.stat().st_size for path in files if path.is_file())
