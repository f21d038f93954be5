"""The one way the command line prints: names from a model are untrusted text.

A node name, value name or doc string may hold control characters: ESC sequences that retitle
or clear a terminal, CR and LF that forge whole lines (`verified: equivalent ...`) in a CI log,
bidirectional overrides that show text reordered. Everything the commands print goes through
`echo` (one line: every such character shown escaped, `\\n`, `\\x1b`, `\\u202e`) or `echo_block`
(lines a formatter built, each escaped with `escape`: the line breaks are the formatter's own).
Log records get the same treatment from `EscapingFormatter`.

    escape("a\\x1b]0;owned\\x07") -> "a\\\\x1b]0;owned\\\\x07"
"""

from __future__ import annotations

__all__ = ["EscapingFormatter", "echo", "echo_block", "escape", "escape_lines"]

import logging

import typer

from seqlower.safe_text import escape, escape_lines


def echo(line: str, err: bool = False) -> None:
    """Print one line; a line break in it is shown as `\\n`, never taken."""
    typer.echo(escape(line), err=err)


def echo_block(text: str, err: bool = False) -> None:
    """Print text whose line breaks a formatter made (names in it already escaped with
    `escape`); any other control character is still shown escaped."""
    typer.echo(escape_lines(text.split("\n")), err=err)


class EscapingFormatter(logging.Formatter):
    """A log formatter whose records (messages that may quote names) print escaped, one
    record per line."""

    def format(self, record: logging.LogRecord) -> str:
        record = logging.makeLogRecord(record.__dict__)
        record.msg, record.args = escape(record.getMessage()), None
        return escape_lines(super().format(record).split("\n"))
