"""How long `seqlower verify` takes per pair of small models, as a user runs it.

    python -m bench.verify_time            # every PyTorch fixture against its lowered form
    python -m bench.verify_time --pairs 8  # the first 8 only

Each pair is verified by the command line in a fresh process (Python start, imports, the two
child processes, 16 trials), one after the other. It prints the time of each pair, the mean, and
the ratio of the mean to a budget of 300 s for 81 pairs (3.7 s a pair): below 1 is within it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

from seqlower import optimize

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
BUDGET_PER_PAIR = 300.0 / 81


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=None, help="verify only the first N pairs")
    args = parser.parse_args()
    models = sorted(FIXTURES.glob("torch*/*/model.onnx"))[: args.pairs]
    times = []
    with tempfile.TemporaryDirectory() as folder:
        for path in models:
            lowered = Path(folder) / f"{path.parent.name}.lowered.onnx"
            onnx.save(optimize(onnx.load(path)).model, lowered)
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "seqlower", "verify", str(path), str(lowered)],
                capture_output=True,
                text=True,
                check=False,
            )
            seconds = time.perf_counter() - started
            times.append(seconds)
            verdict = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "-"
            print(f"{seconds:6.2f} s  exit {done.returncode}  {path.parent.name}: {verdict}")
    mean = statistics.mean(times)
    print(f"mean {mean:.2f} s per pair over {len(times)} pairs; ", end="")
    print(f"81 pairs would take {81 * mean:.0f} s: {mean / BUDGET_PER_PAIR:.2f}x the 300 s budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
