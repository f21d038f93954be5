"""Differential fuzzing of seqlower: random valid sequence programs, lowered and compared.

    python tools/fuzz.py --count 5000 --seed 0            # seeds 0..4999, properties included
    python tools/fuzz.py --seed 1234 --count 1 --show     # replay one seed, print the models
    python tools/fuzz.py --count 20000 --jobs 2 --out fuzz-failures
    python tools/fuzz.py --count 3000 --seed 1000000     # list programs (see below)

Each seed gives one program (tests/fuzz/generator.py), checked by tests/fuzz/harness.py: the
original and the lowered model run under onnxruntime on the same inputs (or the numpy oracle where
onnxruntime cannot run the original), the lowered model passes the ONNX checker, and with
--properties (the default) lowering is idempotent and deterministic and never adds sequence ops.
Progress goes to stderr, a summary (pass / skip / fail, by reason) to stdout. Every failing
program is written to OUT/seed_<n>/: original.onnx, lowered.onnx (when lowering finished),
feeds.npz (a sequence input `s` is stored as s.0, s.1, ...) and reason.txt. Exit code 1 when a
program failed.

Seeds from 1,000,000 on also generate list programs (tests/fuzz/list_shapes.py): lists built in
loops from tensors of changing shapes, passed between loops, returned from If branches, split
at run time and edited at run-time positions; the summary counts the passing programs that
needed the tensor form of lists (the last tier of the lowering).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from generator import generate  # noqa: E402
from harness import Outcome, check_program  # noqa: E402

from seqlower.report import LIST_TIER  # noqa: E402


def _check(seed: int, properties: bool) -> tuple[Outcome, list[str]]:
    try:
        program = generate(seed)
    except Exception as error:  # a generator bug: counted, not hidden
        return Outcome(seed, "fail", "generator: crashed", f"{type(error).__name__}: {error}"), []
    try:
        outcome = check_program(program, properties=properties)
    except Exception as error:  # a crash of the harness itself is a failure to look at
        outcome = Outcome(seed, "fail", "the check crashed", f"{type(error).__name__}: {error}")
    return outcome, program.features


def _save(out: Path, outcome: Outcome) -> Path:
    folder = out / f"seed_{outcome.seed}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reason.txt").write_text(f"seed {outcome.seed}: {outcome.reason}\n{outcome.detail}\n")
    try:
        program = generate(outcome.seed)
    except Exception:
        return folder
    onnx.save(program.model, folder / "original.onnx")
    if outcome.lowered is not None:
        onnx.save(outcome.lowered, folder / "lowered.onnx")
    arrays = {}
    for name, value in program.feeds.items():
        if isinstance(value, list):
            arrays.update({f"{name}.{k}": element for k, element in enumerate(value)})
        else:
            arrays[name] = value
    np.savez(folder / "feeds.npz", **arrays)
    (folder / "reason.txt").write_text(
        f"seed {outcome.seed}: {outcome.reason}\n{outcome.detail}\n"
        f"replay: python tools/fuzz.py --seed {outcome.seed} --count 1 --show\n"
    )
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="how many programs")
    parser.add_argument(
        "--seed", type=int, default=0, help="the first seed (from 1000000 on: list programs too)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"), help="failures go here")
    parser.add_argument(
        "--no-properties", action="store_true", help="skip idempotence/determinism/op-count"
    )
    parser.add_argument("--show", action="store_true", help="print each program and its result")
    args = parser.parse_args(argv)

    seeds = range(args.seed, args.seed + args.count)
    properties = not args.no_properties
    statuses: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[tuple[str, str]] = collections.Counter()
    features: collections.Counter[str] = collections.Counter()
    oracle = 0
    tensor_lists = fully_lowered = 0
    failures: list[tuple[Outcome, Path]] = []
    started = time.monotonic()

    def record(outcome: Outcome, used: list[str]) -> None:
        nonlocal oracle, tensor_lists, fully_lowered
        statuses[outcome.status] += 1
        tensor_lists += outcome.status == "pass" and LIST_TIER in outcome.rules_fired
        fully_lowered += outcome.status == "pass" and outcome.sequence_ops[1] == 0
        features.update(used)
        oracle += outcome.status == "pass" and outcome.oracle
        if outcome.status != "pass":
            reasons[(outcome.status, outcome.reason)] += 1
        if outcome.status == "fail":
            folder = _save(args.out, outcome)
            failures.append((outcome, folder))
            print(
                f"seed {outcome.seed}: FAIL {outcome.reason}: {outcome.detail} -> {folder}",
                file=sys.stderr,
            )
        if args.show and outcome.reason != "generator: crashed":
            program = generate(outcome.seed)
            print(onnx.printer.to_text(program.model))
            if outcome.lowered is not None:
                print(onnx.printer.to_text(outcome.lowered))
            print(f"seed {outcome.seed}: {outcome.status} {outcome.reason} {outcome.detail}")
        done = sum(statuses.values())
        if done % 500 == 0:
            rate = done / max(time.monotonic() - started, 1e-9)
            print(f"{done}/{len(seeds)} ({rate:.0f}/s) {dict(statuses)}", file=sys.stderr)

    if args.jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            for outcome, used in pool.map(_check, seeds, [properties] * len(seeds), chunksize=20):
                record(outcome, used)
    else:
        for seed in seeds:
            record(*_check(seed, properties))

    elapsed = time.monotonic() - started
    print(
        f"seeds {seeds.start}..{seeds.stop - 1}: {statuses['pass']} passed "
        f"({oracle} against the numpy oracle), {statuses['skip']} skipped, "
        f"{statuses['fail']} failed in {elapsed:.0f} s"
    )
    print(
        f"  of the passing programs, {fully_lowered} end with no sequence operator and "
        f"{tensor_lists} used the tensor form of lists (the last tier)"
    )
    for (status, reason), count in reasons.most_common():
        print(f"  {status:4} x{count}: {reason}")
    rare = sorted(features.items(), key=lambda item: item[1])[:8]
    print("least exercised features: " + ", ".join(f"{name} x{count}" for name, count in rare))
    if failures:
        print(f"failing programs written to {args.out}/")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
