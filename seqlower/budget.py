"""How much one rewrite may write out, checked before it builds anything.

An expansion (a split into chunks, a map written out per element) makes nodes and values in
proportion to a count read from the model; a tiny file can declare a count of a million or a
trillion. Every expansion asks `over_budget` first and is refused, with the reason, above
`MAX_EXPANSION`: the node stays for the forms that need no expansion (a read at a run-time
position becomes one Gather, a map a Loop) or is reported as kept.
"""

from __future__ import annotations

__all__ = ["MAX_EXPANSION", "over_budget"]

MAX_EXPANSION = 100_000  # elements or nodes one rewrite may write out


def over_budget(count: int, what: str) -> str | None:
    """Why `count` `what` (e.g. "chunks") are too many to write out, or None when they fit."""
    if count <= MAX_EXPANSION:
        return None
    return f"{count} {what} are more than one rewrite writes out (at most {MAX_EXPANSION})"
