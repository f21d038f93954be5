"""Text from a model, safe to print: names and doc strings are untrusted.

`escape` writes every control character (C0, DEL, C1) and every invisible character that
reorders or hides text (bidirectional overrides, zero-width marks, line and paragraph
separators) as a visible escape, so that a name can neither send terminal escape sequences nor
forge a line:

    escape("a\\x1b]0;t\\x07\\nverified") -> "a\\\\x1b]0;t\\\\x07\\\\nverified"

`escape_lines` is for formatters of multi-line text: each line escaped, the line breaks their
own. The command line prints through `seqlower.cli.terminal`, which uses both.
"""

from __future__ import annotations

__all__ = ["escape", "escape_lines"]

import re
from collections.abc import Iterable

# C0 and C1 controls, DEL, and the invisible characters that reorder or hide text
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """`text` with every control or invisible reordering character written as an escape."""
    return _UNSAFE.sub(_escaped, text)


def escape_lines(lines: Iterable[str]) -> str:
    """The lines, each escaped, joined by line breaks: for formatters of multi-line text."""
    return "\n".join(escape(line) for line in lines)
