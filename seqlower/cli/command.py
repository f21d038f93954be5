"""The click classes behind the `seqlower` app: how help and errors look.

- Help is click's plain layout (wrapped, never cut, no type placeholders on flags); flags that
  default to off do not show `[default: no-...]`; example command lines are not rewrapped; the
  usage line names arguments plainly (`SOURCE OUTPUT`: typer writes `{SOURCE}`, which reads as
  a choice).
- A usage error (an unknown option, a missing argument, a value out of range) is one line on
  stderr, `error: <problem>; see '<command> --help'`, exit code 2; rich's boxed panel is used
  only when stderr is a terminal.
- SIGTERM, like Ctrl-C, stops the command cleanly: no temporary file is left beside an
  output (one that was complete stays); `error: terminated`, exit code 143.
- An exception that escapes a command is a bug in seqlower: one line naming it as such, exit
  code 3 (the traceback is logged with `--verbose`).
"""

from __future__ import annotations

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_REFUSED",
    "SeqlowerCommand",
    "SeqlowerGroup",
    "error_exit",
    "keep_commands_unwrapped",
    "usage_error",
    "usage_error_line",
    "write_report",
]

import inspect
import logging
import re
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from seqlower.cli.terminal import echo, escape
from seqlower.errors import BUG_REPORT, SeqlowerError
from seqlower.io import write_text

try:  # typer 0.20+ carries its own copy of click
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer depends on click itself
    import click  # type: ignore[no-redef]

EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_TERMINATED = 128 + signal.SIGTERM  # what a shell reports for a process SIGTERM ended

logger = logging.getLogger("seqlower.cli")


class SeqlowerCommand(TyperCommand):
    """A typer command whose off-by-default flags show no `[default: ...]` in the help, and
    whose example command lines are never rewrapped."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.help:
            self.help = keep_commands_unwrapped(self.help)
        for param in self.params:
            if getattr(param, "is_flag", False) and not param.default:
                param.show_default = False

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        """The usage line's pieces, a required argument as `NAME`, not typer's `{NAME}`."""
        return [_REQUIRED.sub(r"\1", piece) for piece in super().collect_usage_pieces(ctx)]


_REQUIRED = re.compile(r"^\{([A-Z_][A-Z0-9_]*)\}")


class SeqlowerGroup(TyperGroup):
    """The app's group: runs a command and turns what escapes it into one line and an exit
    code (see the module docstring)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        _terminate_cleanly()
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except Terminated:
            click.utils.echo("error: terminated", err=True)
            sys.exit(EXIT_TERMINATED)
        except click.exceptions.ClickException as error:
            _exit_usage_error(error)
        except typer.Abort:
            click.utils.echo("error: aborted", err=True)
            sys.exit(EXIT_REFUSED)
        except Exception as error:  # typer itself exits 1 quietly on a closed pipe (EPIPE)
            _exit_internal(error)
        sys.exit(code if isinstance(code, int) else 0)


class Terminated(BaseException):
    """SIGTERM arrived: raised where the program is, so that every `finally` and cleanup
    runs (temporary files beside an output are removed), as for Ctrl-C."""


def _terminate_cleanly() -> None:
    """Turn SIGTERM into `Terminated` for the rest of this command (the main thread only:
    Python delivers signals there)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_terminated)


def _raise_terminated(signum: int, frame: object) -> NoReturn:
    raise Terminated


def _exit_internal(error: Exception) -> NoReturn:
    logger.debug("internal error", exc_info=True)
    message = " ".join(str(error).split()) or "no message"
    click.utils.echo(
        escape(f"error: internal error ({type(error).__name__}: {message}); {BUG_REPORT}"),
        err=True,
    )
    sys.exit(EXIT_INTERNAL)


def keep_commands_unwrapped(text: str) -> str:
    """Mark each help paragraph made only of `seqlower ...` command lines with click's `\\b`
    (no rewrapping), so that an example never breaks in the middle."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    for i, paragraph in enumerate(paragraphs):
        lines = paragraph.splitlines()
        if lines and all(line.strip().startswith("seqlower ") for line in lines):
            paragraphs[i] = "\b\n" + paragraph
    return "\n\n".join(paragraphs)


def error_exit(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print `error: <message>` (one line, on stderr) and return the exit to raise, with `code`
    (bad input by default)."""
    echo(f"error: {message}", err=True)
    return typer.Exit(code)


def write_report(path: Path, text: str) -> None:
    """Write a JSON report the user asked for (atomically); a failure raises the `error_exit`
    that says the report cannot be written, and why."""
    try:
        write_text(path, text)
    except SeqlowerError as error:
        raise error_exit(f"{path}: cannot write the report ({error})") from None
    except OSError as error:
        raise error_exit(f"{path}: cannot write the report ({error.strerror})") from None


def usage_error(message: str) -> click.exceptions.UsageError:
    """A usage error to raise from a command: shown as one `error:` line, exit code 2."""
    return click.exceptions.UsageError(message)


def _exit_usage_error(error: click.exceptions.ClickException) -> NoReturn:
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())
    if isinstance(error, no_args):
        error.show()  # the help itself
    elif sys.stderr.isatty() and _rich_available():
        from typer import rich_utils

        rich_utils.rich_format_error(error)
    else:
        click.utils.echo(escape(usage_error_line(error)), err=True)
    sys.exit(error.exit_code)


# options users bring from one command to another that has none: what does their job there
_OPTION_ELSEWHERE = {
    ("optimize", "--runtime"): (
        "optimize has no --runtime: with --verify the lowered model runs in the --target's "
        "runtime (--target openvino or --target tract; onnxruntime otherwise)"
    ),
}


def usage_error_line(error: click.exceptions.ClickException) -> str:
    """`error: <problem>; see '<command> --help'` on one line."""
    message = " ".join(error.format_message().split()).rstrip(".")
    ctx = getattr(error, "ctx", None)
    if isinstance(error, click.exceptions.NoSuchOption) and ctx is not None:
        option = (error.option_name or "").split("=")[0]
        message = _OPTION_ELSEWHERE.get((ctx.command.name, option), message)
    if message[:1].isupper() and message[1:2].islower():
        message = message[0].lower() + message[1:]
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        return f"error: {message}; see '{ctx.command_path} --help'"
    return f"error: {message}"


def _rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True
