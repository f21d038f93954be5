"""The exports of tests/fixtures/torch_wild (list code nobody here had seen when the forms were
frozen), or of another set of scripted exports beside it (`--set torch_novel`), as one table:
sequence ops before and after each target, whether each data set matches what PyTorch computed
and what the original computes under onnxruntime, and the speed ratio (original / lowered,
onnxruntime CPU, 1 thread, medians of one interleaved run) on data set 0, and the lowest such
ratio over every data set both models run (a fixture's smaller data sets, one image or one
graph, are where a batched form's fixed cost shows); then per target the geomean, the worst
case, and the worst over every data set.

    python -m bench.wild            # every case, or: python -m bench.wild CASE...
    python -m bench.wild --set torch_novel [CASE...]    # tests/fixtures/torch_novel
"""

from __future__ import annotations

import argparse
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


def measure(case: str, target: str, root: Path = ROOT) -> dict:
    folder = root / case
    model = onnx.load(folder / "model.onnx")
    sets = data_sets(folder, model)
    row: dict = {"case": case, "target": target, "before": sequence_ops(model)}
    try:
        lowered, report = seqlower.optimize(model, target=target)
    except SeqlowerError as exc:
        row["error"] = str(exc).splitlines()[0][:120]
        return row
    except Exception as exc:  # a crash is what this table reports
        row["error"] = f"crash {type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
        return row
    lowered = lowered if isinstance(lowered, onnx.ModelProto) else onnx_ir.to_proto(lowered)
    row["after"] = sequence_ops(lowered)
    row["reasons"] = sorted({f"{op.op_type}: {op.reason}" for op in report.remaining})
    torch_ok, orig_ok = [], []
    for feeds, want in sets:
        got = _run(lowered, feeds)
        orig = _run(model, feeds)
        if isinstance(got, str):
            torch_ok.append(got)
            orig_ok.append(got)
            continue
        torch_ok.append("ok" if _close(got, want) else "DIFF")
        orig_ok.append(
            "orig fails" if isinstance(orig, str) else "ok" if _close(got, orig) else "DIFF"
        )
    row["vs_torch"], row["vs_orig"] = torch_ok, orig_ok
    try:
        timed = latency({"o": model, "l": lowered}, sets[0][0], runs=50, min_seconds=0.2)
        row["speed"] = timed["o"][0] / timed["l"][0]
    except Exception as exc:
        row["speed"] = float("nan")
        row["speed_error"] = str(exc).splitlines()[0][:80]
    row["worst_set"] = _worst_set(model, lowered, sets, row)
    return row


def _worst_set(model: onnx.ModelProto, lowered: onnx.ModelProto, sets: list, row: dict) -> str:
    """The lowest speed ratio over the data sets both models run, with its data set."""
    found = [(row["speed"], 0)] if row["speed"] == row["speed"] else []
    for i, (feeds, _) in enumerate(sets[1:], start=1):
        if row["vs_orig"][i] != "ok":  # either model fails on it: nothing to time
            continue
        try:
            timed = latency({"o": model, "l": lowered}, feeds, runs=50, min_seconds=0.2)
        except Exception:
            continue
        found.append((timed["o"][0] / timed["l"][0], i))
    if not found:
        return "-"
    speed, i = min(found)
    return f"{speed:.2f}x (set {i})"


def _parse(argv: list[str]) -> tuple[Path, list[str]]:
    """The fixture folder `--set NAME` names (torch_wild without it), and the cases named."""
    sets = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir() and p.name.startswith("torch"))
    parser = argparse.ArgumentParser(
        prog="python -m bench.wild",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--set", default="torch_wild", choices=sets, help="the fixture set")
    parser.add_argument("cases", nargs="*", help="cases of the set (default: every case)")
    args = parser.parse_args(argv)
    root = FIXTURES / args.set
    missing = [c for c in args.cases if not (root / c / "model.onnx").is_file()]
    if missing:
        parser.error(f"no case {missing[0]!r} in {root}")
    return root, args.cases


def main(argv: list[str]) -> int:
    root, names = _parse(argv)
    cases = names or sorted(p.name for p in root.iterdir() if (p / "model.onnx").is_file())
    print("| case | target | seq ops before -> after | vs PyTorch (per data set) |", end="")
    print(" vs original | speed | worst data set |")
    print("|---|---|---|---|---|---|---|")
    speeds: dict[str, list[float]] = {}
    worst: dict[str, list[tuple[str, str]]] = {}
    for case in cases:
        for target in ("portable", "onnxruntime"):
            row = measure(case, target, root)
            if "error" in row:
                print(f"| {case} | {target} | {row['before']} -> error | {row['error']} | | | |")
                continue
            speeds.setdefault(target, []).append(row["speed"])
            worst.setdefault(target, []).append((row["worst_set"], case))
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
            geo = math.exp(sum(math.log(s) for s in ok) / len(ok))
            print(f"{target}: geomean {geo:.2f}x over {len(ok)}, worst {min(ok):.2f}x", end="")
            below = sorted((float(w.split("x")[0]), case) for w, case in worst[target] if w != "-")
            if below:
                print(f"; over every data set worst {below[0][0]:.2f}x ({below[0][1]})", end="")
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
