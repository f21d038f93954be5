"""The `seqlower` command line: a thin layer over the Python API (typer).

Exit codes: 0 success; 1 the result is refused (`--strict` with sequence ops left, `--verify`
found a difference, `verify` found the models not equivalent); 2 bad input (one `error:` line).
"""

from seqlower.cli.app import app, main

__all__ = ["app", "main"]
