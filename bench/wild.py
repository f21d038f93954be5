"""The exports of tests/fixtures/torch_wild (list code nobody here had seen when the forms were
frozen), or of another set of scripted exports beside it (`--set torch_novel`), as one table:
sequence ops before and after each target, whether each data set matches what PyTorch computed
and what the original computes under onnxruntime, and the speed ratio (original / lowered,
onnxruntime CPU, 1 thread) on data set 0, and the lowest such ratio over every data set both
models run (a fixture's smaller data sets, one image or one graph, are where a batched form's
fixed cost shows); then per target the geomean, the worst case, and the worst over every data
set, and the onnxruntime target against the default target. The original and both lowerings
are timed together on each data set, interleaved, in `--rounds` runs (each model's lowest
median counts): the two targets' ratios come from the same run.

    python -m bench.wild            # every case, or: python -m bench.wild CASE...
    python -m bench.wild --set torch_novel [CASE...]    # tests/fixtures/torch_novel
    python -m bench.wild --runs 1000 --min-seconds 2 --rounds 2    # longer, on a loaded machine
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir
from onnx import numpy_helper

import seqlower
from bench.loops import sequence_ops
from bench.timing import latency, session
from seqlower.errors import SeqlowerError

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
ROOT = FIXTURES / "torch_wild"
TARGETS = ("portable", "onnxruntime")  # the default target first: the others are compared with it


def data_sets(folder: Path, model: onnx.ModelProto) -> list[tuple[dict, list]]:
    found = []
    for ds in sorted(folder.glob("test_data_set_*")):
        feeds = {}
        for i, value in enumerate(model.graph.input):
            proto = onnx.TensorProto()
            proto.ParseFromString((ds / f"input_{i}.pb").read_bytes())
            feeds[value.name] = numpy_helper.to_array(proto)
        outs: list = []
        for i, value in enumerate(model.graph.output):
            data = (ds / f"output_{i}.pb").read_bytes()
            if value.type.HasField("sequence_type"):
                sequence = onnx.SequenceProto()
                sequence.ParseFromString(data)
                outs.append(numpy_helper.to_list(sequence))
            else:
                proto = onnx.TensorProto()
                proto.ParseFromString(data)
                outs.append(numpy_helper.to_array(proto))
        found.append((feeds, outs))
    return found


def _close(got: list, want: list) -> bool:
    for g, w in zip(got, want, strict=True):
        if isinstance(w, list):  # a sequence-typed output
            if not isinstance(g, list) or len(g) != len(w) or not _close(g, w):
                return False
            continue
        g = np.asarray(g)
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-4, atol=1e-5):
            return False
    return True


def _run(model: onnx.ModelProto, feeds: dict) -> list | str:
    try:
        return session(model).run(None, feeds)
    except Exception as exc:  # a run-time failure is a row of the table, not a crash
        return f"fails ({type(exc).__name__})"


@dataclasses.dataclass(frozen=True)
class Timing:
    """How long each data set is timed: `runs` and `min_seconds` per model and round
    (`bench.timing.latency`), `rounds` interleaved runs of which each model's lowest median
    counts."""

    runs: int = 200
    min_seconds: float = 0.5
    rounds: int = 2


def measure_case(case: str, root: Path = ROOT, timing: Timing = Timing()) -> list[dict]:
    """One row per target (`TARGETS`): the original and both lowerings of `case` are timed
    together, interleaved, on every data set (`_timed`): a change of the machine's load moves
    all three alike, so the targets' ratios are comparable with each other (timed one pair
    after the other, identical lowerings read 2.48x and 1.95x in one run at load 3)."""
    folder = root / case
    model = onnx.load(folder / "model.onnx")
    sets = data_sets(folder, model)
    rows, lowered = [], {}
    originals = [_run(model, feeds) for feeds, _ in sets]
    for target in TARGETS:
        row = _lowered(model, target, sets, originals)
        row["case"] = case
        rows.append(row)
        if "error" not in row:
            lowered[target] = row.pop("model")
    speeds = _timed(
        model, lowered, sets, {row["target"]: row.get("vs_orig", []) for row in rows}, timing
    )
    for row in rows:
        if "error" in row:
            continue
        ratios = speeds.get(row["target"], {})
        row["speed"] = ratios.get(0, float("nan"))
        row["worst_set"] = _worst(ratios)
        if row["target"] != TARGETS[0] and TARGETS[0] in lowered:  # against the default target
            mine, default = ratios, speeds.get(TARGETS[0], {})
            row["vs_default"] = {i: mine[i] / default[i] for i in mine if i in default}
    return rows


def _lowered(model: onnx.ModelProto, target: str, sets: list, originals: list) -> dict:
    """The row of one target before timing: its lowering (`model`), sequence ops, the reasons
    of what is left, and each data set's outputs against PyTorch's and the original's."""
    row: dict = {"target": target, "before": sequence_ops(model)}
    try:
        lowered, report = seqlower.optimize(model, target=target)
    except SeqlowerError as exc:
        row["error"] = str(exc).splitlines()[0][:120]
        return row
    except Exception as exc:  # a crash is what this table reports
        row["error"] = f"crash {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
        return row
    lowered = lowered if isinstance(lowered, onnx.ModelProto) else onnx_ir.to_proto(lowered)
    row["model"] = lowered
    row["after"] = sequence_ops(lowered)
    row["reasons"] = sorted({f"{op.op_type}: {op.reason}" for op in report.remaining})
    torch_ok, orig_ok = [], []
    for (feeds, want), orig in zip(sets, originals, strict=True):
        got = _run(lowered, feeds)
        if isinstance(got, str):
            torch_ok.append(got)
            orig_ok.append(got)
            continue
        torch_ok.append("ok" if _close(got, want) else "DIFF")
        orig_ok.append(
            "orig fails" if isinstance(orig, str) else "ok" if _close(got, orig) else "DIFF"
        )
    row["vs_torch"], row["vs_orig"] = torch_ok, orig_ok
    return row


def _timed(
    model: onnx.ModelProto,
    lowered: dict[str, onnx.ModelProto],
    sets: list,
    agree: dict[str, list[str]],
    timing: Timing,
) -> dict[str, dict[int, float]]:
    """Per target and data set, the speed ratio original / lowered, all models of a data set
    in one interleaved run per round (each model's lowest median over the rounds). A lowering
    is timed on the data sets where it computes what the original does (data set 0 always,
    where it runs: the table's speed column)."""
    ratios: dict[str, dict[int, float]] = {target: {} for target in lowered}
    for i, (feeds, _) in enumerate(sets):
        models = {"original": model}
        models.update(
            (target, low)
            for target, low in lowered.items()
            if agree[target][i] == "ok" or (i == 0 and agree[target][i] == "DIFF")
        )
        if len(models) == 1:
            continue
        best: dict[str, float] = {}
        try:
            for _ in range(timing.rounds):
                timed = latency(models, feeds, runs=timing.runs, min_seconds=timing.min_seconds)
                for name, (seconds, _) in timed.items():
                    best[name] = min(best.get(name, math.inf), seconds)
        except Exception:  # a model that fails here has its row's outputs column say so
            continue
        for target in lowered:
            if target in best:
                ratios[target][i] = best["original"] / best[target]
    return ratios


def _worst(ratios: dict[int, float]) -> str:
    """The lowest speed ratio over the data sets timed, with its data set."""
    if not ratios:
        return "-"
    speed, i = min((speed, i) for i, speed in ratios.items())
    return f"{speed:.2f}x (set {i})"


def _parse(argv: list[str]) -> tuple[Path, list[str], Timing]:
    """The fixture folder `--set NAME` names (torch_wild without it), the cases named, and how
    long each data set is timed."""
    sets = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name.startswith("torch"))
    parser = argparse.ArgumentParser(
        prog="python -m bench.wild",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--set", default="torch_wild", choices=sets, help="the fixture set")
    default = Timing()
    parser.add_argument(
        "--runs", type=int, default=default.runs, help="runs per model and round, at least"
    )
    parser.add_argument(
        "--min-seconds",
        type=float,
        default=default.min_seconds,
        help="seconds of running per model and round, at least",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=default.rounds,
        help="interleaved runs per data set; each model's lowest median counts",
    )
    parser.add_argument("cases", nargs="*", help="cases of the set (default: every case)")
    args = parser.parse_args(argv)
    root = FIXTURES / args.set
    missing = [c for c in args.cases if not (root / c / "model.onnx").is_file()]
    if missing:
        parser.error(f"no case {missing[0]!r} in {root}")
    if args.runs < 1 or args.rounds < 1 or args.min_seconds < 0:
        parser.error("--runs and --rounds must be at least 1, --min-seconds at least 0")
    return root, args.cases, Timing(args.runs, args.min_seconds, args.rounds)


def main(argv: list[str]) -> int:
    root, names, timing = _parse(argv)
    cases = names or sorted(p.name for p in root.iterdir() if (p / "model.onnx").is_file())
    print("| case | target | seq ops before -> after | vs PyTorch (per data set) |", end="")
    print(" vs original | speed | worst data set |")
    print("|---|---|---|---|---|---|---|")
    speeds: dict[str, list[float]] = {}
    worst: dict[str, list[tuple[str, str]]] = {}
    against: list[tuple[float, float, str]] = []  # (data set 0, worst data set, case)
    for case in cases:
        for row in measure_case(case, root, timing):
            target = row["target"]
            if "error" in row:
                print(f"| {case} | {target} | {row['before']} -> error | {row['error']} | | | |")
                continue
            speeds.setdefault(target, []).append(row["speed"])
            worst.setdefault(target, []).append((row["worst_set"], case))
            if row.get("vs_default"):
                ratios = row["vs_default"]
                against.append((ratios.get(0, math.nan), min(ratios.values()), case))
            print(
                f"| {case} | {target} | {row['before']} -> {row['after']} |"
                f" {' '.join(row['vs_torch'])} | {' '.join(row['vs_orig'])} |"
                f" {row['speed']:.2f}x | {row['worst_set']} |",
                flush=True,
            )
            for reason in row["reasons"]:
                print(f"|   | kept | {reason[:200]} | | | | |")
    for target, found in speeds.items():
        ok = [s for s in found if s == s and s > 0]
        if ok:
            print(
                f"{target}: geomean {_geomean(ok):.2f}x over {len(ok)}, worst {min(ok):.2f}x",
                end="",
            )
            below = sorted((float(w.split("x")[0]), case) for w, case in worst[target] if w != "-")
            if below:
                print(f"; over every data set worst {below[0][0]:.2f}x ({below[0][1]})", end="")
            print()
    first = [(speed, case) for speed, _, case in against if speed == speed]
    if first:
        low = min((speed, case) for _, speed, case in against)
        geo = _geomean([speed for speed, _ in first])
        print(
            f"{TARGETS[1]} against {TARGETS[0]} (same run): geomean {geo:.2f}x"
            f" over {len(first)}, worst {min(first)[0]:.2f}x ({min(first)[1]});"
            f" over every data set worst {low[0]:.2f}x ({low[1]})"
        )
    return 0


def _geomean(speeds: list[float]) -> float:
    return math.exp(sum(math.log(s) for s in speeds) / len(speeds))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
