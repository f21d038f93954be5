"""The optimize summary as text: op counts before -> after, rules fired, what remains and why."""

from __future__ import annotations

__all__ = ["format_size", "format_summary", "format_written", "plural"]

import textwrap
from pathlib import Path

from seqlower.report import Report

_WIDTH = 100  # lines that list many nodes wrap here


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 sweep`, `2 sweeps`, `0 sweeps`; `nouns` for an irregular plural."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def format_summary(
    report: Report, source: str, target: str | None, seconds: float, verbose: bool = False
) -> str:
    """A compact, human-readable summary of one lowering run; `verbose` lists, under each kept
    operator, every refusal the rules gave."""
    sweeps = plural(report.iterations, "sweep")
    lines = [
        f"{source} -> {target or '(not written)'}: sequence ops {report.total_before} -> "
        f"{report.total_after} ({_expansion_note(report)}{report.stop_reason}; "
        f"{sweeps}, {seconds:.2f} s)"
    ]
    op_types = sorted(set(report.sequence_ops_before) | set(report.sequence_ops_after))
    if op_types:
        width = max(len(op) for op in op_types)
        lines.append(f"  {'op'.ljust(width)}  before  after")
        for op in op_types:
            before = report.sequence_ops_before.get(op, 0)
            after = report.sequence_ops_after.get(op, 0)
            lines.append(f"  {op.ljust(width)}  {before:>6}  {after:>5}")
    if report.rules_fired:
        fired = ", ".join(f"{name} x{count}" for name, count in sorted(report.rules_fired.items()))
        lines.append(f"rules fired: {fired}")
    for region in report.kept_for_speed:
        lines.append(
            f"kept as given for speed: the region of {region.op_type} '{region.node}' in "
            f"{region.graph} ({plural(region.sequence_nodes, 'sequence node')}), an estimated "
            f"{region.as_given} operator launches per run as given, {region.lowered} lowered"
        )
    lines.extend(_kept_lines(report, verbose))
    return "\n".join(lines)


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
    source: Path, output: Path, weights: Path | None, report: Report, seconds: float
) -> str:
    """The last line: what was written (both files when the weights are apart), how large
    against the input, the node counts before and after, and the time in all."""
    written = f"{output} ({format_size(output.stat().st_size)})"
    if weights is not None:
        written += f" and its weights {weights} ({format_size(weights.stat().st_size)})"
    size = source.stat().st_size if source.is_file() else 0
    return (
        f"wrote {written}; input {format_size(size)}; nodes {report.nodes_before} -> "
        f"{report.nodes_after} ({seconds:.2f} s)"
    )


def _expansion_note(report: Report) -> str:
    """Why the count grew, when a SequenceMap became the Loop of its expansion."""
    if report.total_after <= report.total_before or report.expanded_before <= report.total_before:
        return ""
    return (
        f"{report.expanded_before} -> {report.total_after} counting each SequenceMap as the "
        "sequence ops of its expansion; "
    )


def _kept_lines(report: Report, verbose: bool) -> list[str]:
    """One line per kept operator and kept sequence input or output: the reason that matters;
    then what to try (each distinct hint once); every refusal under each line with `verbose`."""
    lines = []
    hints: list[str] = []
    as_given = [op for op in report.remaining if op.kept_for_speed]
    if as_given:  # one decision for them all, said once (the stop reason says why)
        names = ", ".join(op.described for op in as_given)
        text = f"kept as given, the original costing less: {names}"
        lines.extend(textwrap.wrap(text, _WIDTH, subsequent_indent="    ", break_on_hyphens=False))
    for op in report.remaining:
        if op.kept_for_speed:
            if verbose:
                lines.append(f"kept {op.described} in {op.graph}: {op.reason}")
                lines.extend(f"    {reason}" for reason in op.reasons)
            if op.hint and op.hint not in hints:
                hints.append(op.hint)
            continue
        lines.append(f"kept {op.described} in {op.graph}: {op.reason}")
        if verbose:
            lines.extend(f"    {reason}" for reason in op.reasons)
        if op.hint and op.hint not in hints:
            hints.append(op.hint)
    for value in report.kept_interface:
        lines.append(f"kept sequence {value.op_type} '{value.node}': {value.reason}")
        if value.hint and value.hint not in hints:
            hints.append(value.hint)
    flags = _merged_flags(hints)
    if flags:
        lines.append(f"  try {flags}")
    if report.remaining and not verbose:
        lines.append("  (-v lists every rule's refusal; `seqlower inspect` shows every node)")
    return lines


def _merged_flags(hints: list[str]) -> str:
    """The options of every hint (`--flag value (why)`), each once, as one command line."""
    words: list[str] = []
    for hint in hints:
        tokens = hint.split(" (", 1)[0].split()
        for index, token in enumerate(tokens):
            if not token.startswith("--"):
                continue
            takes_value = index + 1 < len(tokens) and not tokens[index + 1].startswith("--")
            word = f"{token} {tokens[index + 1]}" if takes_value else token
            if word not in words:
                words.append(word)
    return " ".join(words)
