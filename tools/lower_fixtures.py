"""Lower every committed model (tests/fixtures, bench/fixtures, examples) into OUTDIR, once per
target, to compare two versions of seqlower byte for byte: run it from each version's root
(with that version importable, e.g. `PYTHONPATH=.`), then `diff -rq OUTDIR_A OUTDIR_B`. A
model that fails to lower leaves a `.err` file with the error where the model would be.

    PYTHONPATH=. python tools/lower_fixtures.py OUTDIR [--target generic --target onnxruntime]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import seqlower
from seqlower.io import save_model

FOLDERS = ("tests/fixtures", "bench/fixtures", "examples")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/lower_fixtures.py",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("outdir", type=Path)
    parser.add_argument(
        "--target",
        action="append",
        help="a target to lower for (repeatable; default: generic and onnxruntime)",
    )
    args = parser.parse_args(argv)
    targets = args.target or ["generic", "onnxruntime"]
    root = Path.cwd()
    models = sorted(p for folder in FOLDERS for p in (root / folder).rglob("*.onnx"))
    print(f"seqlower from {os.path.dirname(seqlower.__file__)}; {len(models)} models", flush=True)
    for path in models:
        relative = path.relative_to(root)
        for target in targets:
            dest = args.outdir / target / relative
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                model, _ = seqlower.optimize(str(path), target=target)
                save_model(model, str(dest))
            except Exception as error:  # every failure is recorded, none stops the run
                dest.with_suffix(".err").write_text(f"{type(error).__name__}: {error}\n")
    print(f"{len(models) * len(targets)} lowerings in {args.outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
