"""The optimize summary as text: op counts before -> after, rules fired, what remains and why."""

from __future__ import annotations

__all__ = ["format_remaining", "format_summary", "plural"]

from seqlower.report import RemainingOp, Report


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 sweep`, `2 sweeps`, `0 sweeps`; `nouns` for an irregular plural."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def format_summary(report: Report, source: str, target: str | None, seconds: float) -> str:
    """A compact, human-readable summary of one lowering run."""
    sweeps = plural(report.iterations, "sweep")
    lines = [
        f"{source} -> {target or '(not written)'}: sequence ops {report.total_before} -> "
        f"{report.total_after} ({report.stop_reason}; {sweeps}, {seconds:.2f} s)"
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
    lines.extend(format_remaining(op) for op in report.remaining)
    lines.extend(f"warning: {warning}" for warning in report.warnings)
    return "\n".join(lines)


def format_remaining(op: RemainingOp) -> str:
    """The summary's line for one sequence op that remains (kept), with why."""
    return f"kept {op.op_type} '{op.node}' in {op.graph}: {op.reason}"
