"""The optimize summary as text: op counts before -> after, rules fired, what remains and why.

Every line fits `WIDTH` columns: long lists wrap with an indent, operators kept for one reason
are listed under it once, and a label too long for its line is cut in the middle
(`'/encoder/lay...er.3/Loop'`).
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

import re
import textwrap
from pathlib import Path

import onnx_ir as ir

from seqlower.ops import iter_all_graphs
from seqlower.report import RemainingOp, Report

WIDTH = 100  # no line of the summary is longer
_ELLIPSIS = "..."
_QUOTED_LONG = re.compile(r"'([^'\n]{41,})'")  # a label in a reason, too long to repeat whole


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 sweep`, `2 sweeps`, `0 sweeps`; `nouns` for an irregular plural."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def format_summary(
    report: Report, source: str, target: str | None, seconds: float, verbose: bool = False
) -> str:
    """A compact, human-readable summary of one lowering run; `verbose` lists, under each kept
    operator, every refusal the rules gave."""
    sweeps = plural(report.iterations, "sweep")
    files = f"{source} -> {target or '(not written)'}"
    counts = (
        f"sequence ops {report.total_before} -> {report.total_after} "
        f"({_expansion_note(report)}{report.stop_reason}; {sweeps}, {seconds:.2f} s)"
    )
    if len(files) + 2 + len(counts) <= WIDTH:
        lines = [f"{files}: {counts}"]
    else:  # long paths: the files on a line of their own
        lines = [f"{files}:", *_wrap(counts, first="  ")]
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
        lines.extend(_wrap(f"rules fired: {fired}"))
    for region in report.kept_for_speed:
        lines.extend(
            _wrap(
                f"kept as given for speed: the region of {region.op_type} "
                f"'{shorten(region.node, 40)}' in {shorten(region.graph, 30)} "
                f"({plural(region.sequence_nodes, 'sequence node')}), an estimated "
                f"{region.as_given} operator launches per run as given, {region.lowered} lowered"
            )
        )
    lines.extend(costlier_note(report))
    lines.extend(_kept_lines(report, verbose))
    return "\n".join(lines)


def costlier_note(report: Report) -> list[str]:
    """The regions the default target lowered although their tensor form costs more (the
    cost model's estimate), with the option that keeps them as given: wrapped lines, or none."""
    regions = report.costlier_lowered
    if not regions:
        return []
    lowered = sum(region.lowered for region in regions)
    as_given = sum(region.as_given for region in regions)
    if len(regions) == 1:
        (region,) = regions
        what = f"the region of {region.op_type} '{shorten(region.node, 40)}' costs"
        them = "it"
    else:
        what = f"{len(regions)} regions cost"
        them = "them"
    return _wrap(
        f"note: {what} more as tensors ({lowered} vs {as_given} operator launches per run, "
        f"estimated); --target onnxruntime keeps {them} as given"
    )


def shorten(text: str, width: int) -> str:
    """`text`, or when longer than `width`, its start and end around an ellipsis."""
    if len(text) <= width:
        return text
    keep = max(width - len(_ELLIPSIS), 2)
    head = (keep + 1) // 2
    return text[:head] + _ELLIPSIS + text[len(text) - (keep - head) :]


def _wrap(text: str, first: str = "", indent: str = "    ") -> list[str]:
    """`text` in lines of at most WIDTH columns, continued with `indent`."""
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=first,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=True,
    )


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


def _expansion_note(report: Report) -> str:
    """Why the count grew, when a SequenceMap became the Loop of its expansion."""
    if report.total_after <= report.total_before or report.expanded_before <= report.total_before:
        return ""
    return (
        f"{report.expanded_before} -> {report.total_after} counting each SequenceMap as the "
        "sequence ops of its expansion; "
    )


def _kept_lines(report: Report, verbose: bool) -> list[str]:
    """The kept operators, grouped by the reason that matters (said once, each operator on a
    line of its own under it; one alone on the reason's line), and the kept sequence inputs and
    outputs; then what to try (each distinct option once); every refusal under each operator
    with `verbose`."""
    lines = []
    hints: list[str] = []
    as_given = [op for op in report.remaining if op.kept_for_speed]
    if as_given:  # one decision for them all, said once (the stop reason says why)
        names = ", ".join(shorten(op.described, 60) for op in as_given)
        lines.extend(_wrap(f"kept as given, the original costing less: {names}"))
    groups: dict[str, list[RemainingOp]] = {}
    for op in report.remaining:
        if op.hint and op.hint not in hints:
            hints.append(op.hint)
        if op.kept_for_speed and not verbose:
            continue
        groups.setdefault(op.reason, []).append(op)
    for cause, ops in groups.items():
        reason = _QUOTED_LONG.sub(lambda found: f"'{shorten(found.group(1), 40)}'", cause)
        if len(ops) == 1:
            (op,) = ops
            lines.extend(_wrap(f"kept {_where(op)}: {reason}"))
            if verbose:
                lines.extend(_refusals(op))
            continue
        lines.extend(_wrap(f"kept {len(ops)} sequence ops: {reason}"))
        for op in ops:
            lines.append(shorten(f"  {_where(op)}", WIDTH))
            if verbose:
                lines.extend(_refusals(op))
    for value in report.kept_interface:
        lines.extend(
            _wrap(f"kept sequence {value.op_type} '{shorten(value.node, 40)}': {value.reason}")
        )
        if value.hint and value.hint not in hints:
            hints.append(value.hint)
    flags = _merged_flags(hints)
    if flags:
        lines.extend(_wrap(f"try {flags}", first="  ", indent="      "))
    if report.remaining and not verbose:
        lines.append("  (-v lists every rule's refusal; `seqlower inspect` shows every node)")
    return lines


def _where(op: RemainingOp) -> str:
    """`SequenceAt '/decoder/SequenceAt' in main//Loop:body`, each part cut to fit."""
    label = f"'{shorten(op.created_by, 40)}'" if op.created_by else f"'{shorten(op.node, 40)}'"
    made = "made from " if op.created_by else ""
    return f"{op.op_type} {made}{label} in {shorten(op.graph, 36)}"


def _refusals(op: RemainingOp) -> list[str]:
    lines = []
    for reason in op.reasons:
        lines.extend(_wrap(reason, first="    ", indent="      "))
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
