"""The optimize summary as text: op counts before -> after, rules fired, what remains and why."""

from __future__ import annotations

__all__ = ["format_summary", "plural"]

from seqlower.report import Report


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
    lines.extend(f"warning: {warning}" for warning in report.warnings)
    return "\n".join(lines)


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
    for op in report.remaining:
        lines.append(f"kept {op.op_type} '{op.node}' in {op.graph}: {op.reason}")
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
