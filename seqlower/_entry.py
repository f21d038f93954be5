"""The `seqlower` console script: `seqlower --version` answers at once (before onnx and the
command line are imported); everything else runs the typer app (`seqlower.cli`)."""

from __future__ import annotations

__all__ = ["main"]

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from seqlower import __version__

        print(f"seqlower {__version__}")
        return
    from seqlower.cli import main as run

    run()
