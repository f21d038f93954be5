"""The `seqlower` console script: `seqlower --version` answers at once (before onnx and the
command line are imported); everything else runs the typer app (`seqlower.cli`).

When the command is done, every object left is frozen (`gc.freeze`): the process is about to
end, and the interpreter's last collection would otherwise walk (and free, one by one) the
models the command loaded and lowered, which onnx_ir builds of reference cycles (a node and its
graph, a value and its producer). That collection was a second of CPU time after a 10,000-If
model was written, half a second after a 30k-node chain, and frees nothing the operating
system does not take back when the process ends. Standard streams are still flushed and
`atexit` handlers still run; only the cyclic collector is told to leave those objects alone.
"""

from __future__ import annotations

__all__ = ["main"]

import gc
import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from seqlower import __version__

        print(f"seqlower {__version__}")
        return
    from seqlower.cli import main as run

    try:
        run()
    finally:  # typer ends by raising SystemExit: still the end of the process
        gc.freeze()
