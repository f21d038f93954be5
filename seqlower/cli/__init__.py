"""The `seqlower` command line: a thin layer over the Python API (typer).

Exit codes: 0 success; 1 the result is refused (`--strict` with sequence ops left, `--target`
problems, `--verify` found a difference, `verify` found the models not equivalent); 2 bad input
or a usage error (one `error:` line); 3 an internal error, a bug in seqlower (one `error:` line
that says so).
"""

from seqlower.cli.app import app, main

__all__ = ["app", "main"]
