"""A report as text: the summary `seqlower optimize` prints, and `str(report)`.

Op counts before -> after, rules fired, the regions kept or lowered at a cost, what remains
and why, and (for `str`) the target's verdict and the warnings. Every line fits `WIDTH`
columns: long lists wrap with an indent, operators kept for one reason are listed under it
once, and a label too long for its line is cut in the middle (`'/encoder/lay...er.3/Loop'`).
"""

from __future__ import annotations

__all__ = [
    "WIDTH",
    "costlier_note",
    "format_report",
    "format_summary",
    "plural",
    "shorten",
]

import re
import textwrap

from seqlower.report.data import RemainingOp, Report
from seqlower.safe_text import escape_lines

WIDTH = 100  # no line of the summary is longer
_ELLIPSIS = "..."
_QUOTED_LONG = re.compile(r"'([^'\n]{41,})'")  # a label in a reason, too long to repeat whole
_OPERATORS_ONLY = ("openvino", "tract")  # targets a runtime check could confirm


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 sweep`, `2 sweeps`, `0 sweeps`; `nouns` for an irregular plural."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def format_summary(
    report: Report,
    source: str | None,
    target: str | None,
    seconds: float | None,
    verbose: bool = False,
) -> str:
    """A compact, human-readable summary of one lowering run, headed by `source -> target`
    (none without a `source`) and the time taken (none without `seconds`); `verbose` lists,
    under each kept operator, every refusal the rules gave."""
    sweeps = plural(report.iterations, "sweep")
    time = f", {seconds:.2f} s" if seconds is not None else ""
    counts = (
        f"sequence ops {report.total_before} -> {report.total_after} "
        f"({_expansion_note(report)}{report.stop_reason}; {sweeps}{time})"
    )
    files = f"{source} -> {target or '(not written)'}" if source is not None else ""
    if not files:
        lines = _wrap(counts)
    elif len(files) + 2 + len(counts) <= WIDTH:
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
                f"{_on_small_inputs(region.as_given_small, region.lowered_small)}"
            )
        )
    lines.extend(costlier_note(report))
    lines.extend(_kept_lines(report, verbose))
    return escape_lines(lines)  # names from the model: no line of theirs, no control code


def costlier_note(report: Report) -> list[str]:
    """The regions the default target lowered although their tensor form costs more (the
    cost model's estimate), with the option that keeps them as given: wrapped lines, or none."""
    regions = report.costlier_lowered
    if not regions:
        return []
    lowered = sum(region.lowered for region in regions)
    as_given = sum(region.as_given for region in regions)
    small = ""
    if all(r.as_given_small is not None and r.lowered_small is not None for r in regions):
        small_lowered = sum(r.lowered_small or 0 for r in regions)
        small_given = sum(r.as_given_small or 0 for r in regions)
        small = f"; {small_lowered} vs {small_given} on small inputs"
    if len(regions) == 1:
        (region,) = regions
        what = f"the region of {region.op_type} '{shorten(region.node, 40)}' costs"
        them = "it"
    else:
        what = f"{len(regions)} regions cost"
        them = "them"
    return _wrap(
        f"note: {what} more as tensors ({lowered} vs {as_given} operator launches per run"
        f"{small}, estimated); --target onnxruntime keeps {them} as given"
    )


def _on_small_inputs(as_given: int | None, lowered: int | None) -> str:
    """The estimates on small inputs of a kept region, as a clause, or nothing."""
    if as_given is None or lowered is None:
        return ""
    return f" (on small inputs: {as_given} as given, {lowered} lowered)"


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


def format_report(report: Report) -> str:
    """`str(report)`: the summary without paths or time, then the target's verdict (and how it
    was reached) and the warnings, as the command line prints them."""
    summary = format_summary(report, None, None, None)  # escaped already
    lines = []
    if report.target != "generic":
        verdict = "ok" if report.fits_target else plural(len(report.target_errors), "problem")
        if report.target_check == "operators" and report.target in _OPERATORS_ONLY:
            verdict += " (operators only; runtime_check=True also loads it in the runtime)"
        lines.append(f"target {report.target}: {verdict}")
        lines.extend(f"  - {error}" for error in report.target_errors)
        if report.target_confirmed:
            lines.append(f"  {report.target_confirmed}")
    lines.extend(f"warning: {w}" for w in [*report.warnings, *report.target_warnings])
    return "\n".join([summary, escape_lines(lines)]) if lines else summary
