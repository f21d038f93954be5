"""Benchmark: how fast the lowered models run, and how fast the optimizer runs.

    python -m bench.run --quick      # < 2 minutes: fewer repeats, models up to ~10k nodes
    python -m bench.run              # the full run: more repeats, models up to ~100k nodes

Part 1, latency: for each body and N in {8, 64, 512}, onnxruntime CPU with one thread (median of
many runs) of the original SequenceMap model, ONNX's own expansion of it, seqlower's output
without the batching rule (unrolled), seqlower's output, and a hand-written batched model (the
floor). Part 2, optimizer run time on chains of SequenceMap blocks of about 1k, 10k and 100k
nodes: seqlower (load, optimize, save), onnx_ir load + save of the same file, and onnxscript's
optimizer, each in a fresh process; onnxscript gets a time budget per size and is skipped above it.

Prints tables and the targets (met or not), and writes everything as JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

import seqlower
from bench.loops import (
    FRESH_EXPORTS,
    NEWCOMER_EXPORTS,
    UNSEEN_EXPORTS,
    loop_form_header,
    loop_targets,
    measure_loop_forms,
    measure_real_exports,
    real_export_header,
    real_export_table,
    set_targets,
)
from bench.models import BODIES, batched_model, expanded_model, large_model, original_model
from bench.timing import latency, run_tool
from seqlower.rule import RuleSet
from seqlower.rules import default_rules

RESULTS = Path(__file__).resolve().parent / "results"
FORMS = ("original", "onnx_expanded", "unrolled", "seqlower", "batched")
_VERDICTS = {True: "met", False: "NOT met", None: "not measured"}
FORM_TITLES = {
    "original": "original",
    "onnx_expanded": "onnx expand",
    "unrolled": "no batching",
    "seqlower": "seqlower",
    "batched": "hand batched",
}


def _without_batching() -> RuleSet:
    return RuleSet(rule for rule in default_rules() if rule.name != "sequence-map-batch")


def _lowered(model: onnx.ModelProto, rules: RuleSet | None = None) -> tuple[onnx.ModelProto, dict]:
    lowered, report = seqlower.optimize(model, rules=rules)  # a ModelProto, as given
    return lowered, report.to_dict()


def _op_count(model: onnx.ModelProto) -> int:
    return len(model.graph.node)


def measure_latency(lengths: list[int], runs: int, min_seconds: float) -> list[dict]:
    rows = []
    for name, make in BODIES.items():
        body = make()
        for n in lengths:
            original = original_model(body, n)
            ours, report = _lowered(original)
            unrolled, _ = _lowered(original, _without_batching())
            models = {
                "original": original,
                "onnx_expanded": expanded_model(original),
                "unrolled": unrolled,
                "seqlower": ours,
                "batched": batched_model(body, n),
            }
            feeds = body.feeds(n)
            row: dict = {"body": name, "n": n, "seconds": {}, "nodes": {}}
            reference = None
            measured = latency(models, feeds, runs=runs, min_seconds=min_seconds)
            for form, model in models.items():
                seconds, outputs = measured[form]
                row["seconds"][form] = seconds
                row["nodes"][form] = _op_count(model)
                if reference is None:
                    reference = outputs
                else:
                    np.testing.assert_allclose(
                        outputs[0], reference[0], rtol=1e-4, atol=1e-4, err_msg=f"{name} {form}"
                    )
            row["batched_rule_fired"] = report["rules_fired"].get("sequence-map-batch", 0) > 0
            row["vs_floor"] = row["seconds"]["seqlower"] / row["seconds"]["batched"]
            row["speedup_vs_original"] = row["seconds"]["original"] / row["seconds"]["seqlower"]
            rows.append(row)
            print(_latency_line(row), flush=True)
    return rows


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:10.1f}"


def _latency_header() -> str:
    titles = "".join(f"{FORM_TITLES[f]:>13}" for f in FORMS)
    return f"{'body':<12}{'N':>5}{titles}{'ours/floor':>12}{'orig/ours':>11}"


def _latency_line(row: dict) -> str:
    cells = "".join(f"{_us(row['seconds'][f]):>13}" for f in FORMS)
    return (
        f"{row['body']:<12}{row['n']:>5}{cells}"
        f"{row['vs_floor']:>11.2f}x{row['speedup_vs_original']:>10.1f}x"
    )


FAMILIES = {"dense": 1, "sparse": 14}  # family -> plain-op layers per SequenceMap block


def measure_optimizer(sizes: list[int], budget: float, repeats: int) -> list[dict]:
    """Both model families at about `sizes` nodes each."""
    rows = []
    for family, layers in FAMILIES.items():
        per_block = 6 + 14 * layers
        blocks = [max(1, round(size / per_block)) for size in sizes]
        rows += _measure_family(family, layers, blocks, budget, repeats)
    return rows


def _measure_family(
    family: str, layers: int, blocks: list[int], budget: float, repeats: int
) -> list[dict]:
    rows = []
    onnxscript_over = False
    onnxscript_last: tuple[int, float] | None = None  # (nodes, seconds) at the last size run
    with tempfile.TemporaryDirectory() as tmp:
        for count in blocks:
            model = large_model(count, layers)
            nodes = sum(1 for _ in ir.traversal.RecursiveGraphIterator(ir.from_proto(model).graph))
            path = Path(tmp) / f"large_{family}_{count}.onnx"
            onnx.save(model, path)
            row: dict = {"family": family, "blocks": count, "nodes": nodes, "subgraphs": count}
            for tool in ("io", "seqlower"):
                results = [
                    run_tool(tool, path, Path(tmp) / f"{tool}.onnx", budget=3600)
                    for _ in range(repeats)
                ]
                timed = [r for r in results if "seconds" in r]
                # the fastest run, whole: its phase times belong to its total
                row[tool] = (
                    min(timed, key=lambda r: r["seconds"])
                    if timed
                    else {**results[-1], "seconds": None}
                )
            # at least linear: a size predicted over the budget is not run
            predicted = onnxscript_last[1] * nodes / onnxscript_last[0] if onnxscript_last else 0
            if importlib.util.find_spec("onnxscript") is None:
                row["onnxscript"] = {"skipped": "not installed ([bench] extra)"}
            elif onnxscript_over:
                row["onnxscript"] = {"skipped": "over the budget at a smaller size"}
            elif predicted > budget:
                row["onnxscript"] = {
                    "skipped": f"predicted > {predicted:.0f} s (budget {budget:.0f})"
                }
            else:
                row["onnxscript"] = run_tool(
                    "onnxscript", path, Path(tmp) / "onnxscript.onnx", budget=budget
                )
                onnxscript_over = "skipped" in row["onnxscript"]
                if not onnxscript_over:
                    onnxscript_last = (nodes, row["onnxscript"]["seconds"])
            ours, io_time = row["seqlower"]["seconds"], row["io"]["seconds"]
            row["seqlower_vs_io"] = ours / io_time if ours and io_time else None
            script = row["onnxscript"].get("seconds")
            row["onnxscript_vs_seqlower"] = script / ours if script and ours else None
            rows.append(row)
            print(_optimizer_line(row), flush=True)
    return rows


def _optimizer_header() -> str:
    return (
        f"{'family':<8}{'nodes':>8}{'subgraphs':>10}{'io (s)':>9}{'seqlower (s)':>14}"
        f"{'onnxscript (s)':>34}{'ours/io':>9}{'onnxscript/ours':>17}"
    )


def _optimizer_line(row: dict) -> str:
    script = row["onnxscript"]
    script_cell = f"{script['seconds']:.2f}" if "seconds" in script else script["skipped"][:32]
    ratio = row["onnxscript_vs_seqlower"]
    ours = row["seqlower"]["seconds"]
    return (
        f"{row['family']:<8}{row['nodes']:>8}{row['subgraphs']:>10}{row['io']['seconds']:>9.2f}"
        f"{(f'{ours:.2f}' if ours else 'failed'):>14}  {script_cell:>32}"
        f"{(row['seqlower_vs_io'] or float('nan')):>8.2f}x"
        f"{(f'{ratio:.1f}x' if ratio else '-'):>17}"
    )


def targets(latency_rows: list[dict], optimizer_rows: list[dict]) -> list[dict]:
    """Each target on the SequenceMap latency and the optimizer, with the
    measured value and whether it is met."""
    found = []
    batched = [r for r in latency_rows if r["batched_rule_fired"]]
    if batched:
        worst = max(batched, key=lambda r: r["vs_floor"])
        found.append(
            {
                "target": "within 1.2x of the hand-written batched model whenever batching applies",
                "measured": f"worst {worst['vs_floor']:.2f}x ({worst['body']}, N={worst['n']})",
                "met": worst["vs_floor"] <= 1.2,
            }
        )
    mlp64 = [r for r in latency_rows if r["body"] == "mlp" and r["n"] == 64]
    if mlp64:
        speedup = mlp64[0]["speedup_vs_original"]
        found.append(
            {
                "target": ">= 15x faster than the original at N=64 for the MLP body",
                "measured": f"{speedup:.1f}x",
                "met": speedup >= 15,
            }
        )
    if latency_rows:
        slowest = min(latency_rows, key=lambda r: r["speedup_vs_original"])
        found.append(
            {
                "target": "never slower than the original",
                "measured": f"lowest speed-up {slowest['speedup_vs_original']:.2f}x "
                f"({slowest['body']}, N={slowest['n']})",
                "met": slowest["speedup_vs_original"] >= 1.0,
            }
        )
    for family in FAMILIES:
        timed = [r for r in optimizer_rows if r["family"] == family and r["seqlower"]["seconds"]]
        if len(timed) < 2:
            continue
        first, last = timed[0], timed[-1]
        exponent = math.log(last["seqlower"]["seconds"] / first["seqlower"]["seconds"]) / math.log(
            last["nodes"] / first["nodes"]
        )
        found.append(
            {
                "target": f"optimizer time grows linearly with model size ({family})",
                "measured": f"time ~ nodes^{exponent:.2f} from {first['nodes']} to "
                f"{last['nodes']} nodes",
                "met": exponent <= 1.15,
            }
        )
        large = last["nodes"] >= 90_000
        for limit in (3.0, 1.5):
            found.append(
                {
                    "target": f"optimizer within {limit:g}x of onnx_ir load + save at 100k nodes "
                    f"({family})",
                    "measured": f"{last['seqlower_vs_io']:.2f}x at {last['nodes']} nodes"
                    + ("" if large else " (the full run measures 100k nodes)"),
                    "met": last["seqlower_vs_io"] <= limit if large else None,
                }
            )
    return found


# (floor, geometric mean) for the default target, then for --target onnxruntime
UNSEEN_GOALS = ((0.85, 1.45), (0.97, 1.6))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller models")
    parser.add_argument("--out", type=Path, help="JSON results file (default: bench/results/)")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--no-optimizer", action="store_true")
    parser.add_argument("--no-loops", action="store_true", help="skip loop forms, real exports")
    parser.add_argument(
        "--onnxscript-budget", type=float, help="seconds per size for onnxscript's optimizer"
    )
    args = parser.parse_args(argv)

    lengths = [8, 64, 512]
    runs, min_seconds = (30, 0.1) if args.quick else (300, 1.0)
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    budget = args.onnxscript_budget or (10.0 if args.quick else 300.0)
    repeats = 1 if args.quick else 3
    started = time.time()
    print(
        f"seqlower {seqlower.__version__}, onnxruntime {ort.__version__}, onnx {onnx.__version__}"
    )

    latency_rows: list[dict] = []
    if not args.no_latency:
        print("\nLatency (microseconds, onnxruntime CPU, 1 thread, median)")
        print(_latency_header())
        latency_rows = measure_latency(lengths, runs, min_seconds)
    form_rows: list[dict] = []
    export_rows: list[dict] = []
    unseen_rows: list[dict] = []
    fresh_rows: list[dict] = []
    newcomer_rows: list[dict] = []
    if not args.no_loops:
        print("\nLoop forms (TorchScript exports; microseconds, onnxruntime CPU, 1 thread, median)")
        print(loop_form_header())
        form_rows = measure_loop_forms(lengths, runs, min_seconds)
        print("\nReal exports (tests/fixtures; us; sequence ops original/default/onnxruntime)")
        print(real_export_header())
        export_rows = measure_real_exports(runs, min_seconds)
        print("\nExports nobody tuned for (tests/fixtures/torch_unseen; same columns)")
        print(real_export_header())
        unseen_rows = measure_real_exports(runs, min_seconds, UNSEEN_EXPORTS)
        print("\nA fresh set nobody tuned for (tests/fixtures/torch_fresh; same columns)")
        print(real_export_header())
        fresh_rows = measure_real_exports(runs, min_seconds, FRESH_EXPORTS)
        print("\nList code as a newcomer writes it (tests/fixtures/torch_newcomer; same columns)")
        print(real_export_header())
        newcomer_rows = measure_real_exports(runs, min_seconds, NEWCOMER_EXPORTS)
    optimizer_rows: list[dict] = []
    if not args.no_optimizer:
        print(
            f"\nOptimizer run time (file to file, fresh process; onnxscript budget {budget:.0f} s)"
        )
        print(_optimizer_header())
        optimizer_rows = measure_optimizer(sizes, budget, repeats)

    if export_rows:
        print("\nReal exports, as the README's table (Markdown)")
        print(real_export_table(export_rows))
    if unseen_rows:
        print("\nExports nobody tuned for, as a table (Markdown)")
        print(real_export_table(unseen_rows))
    if fresh_rows:
        print("\nThe fresh set, as a table (Markdown)")
        print(real_export_table(fresh_rows))
    if newcomer_rows:
        print("\nThe newcomer set, as a table (Markdown)")
        print(real_export_table(newcomer_rows))
    print("\nTargets")
    found = targets(latency_rows, optimizer_rows) + loop_targets(form_rows, export_rows)
    if unseen_rows:
        found += set_targets(unseen_rows, "exports nobody tuned for", UNSEEN_GOALS)
    if fresh_rows:
        found += set_targets(fresh_rows, "the fresh set", UNSEEN_GOALS)
    if newcomer_rows:
        found += set_targets(newcomer_rows, "the newcomer set", UNSEEN_GOALS)
    for target in found:
        print(f"  [{_VERDICTS[target['met']]}] {target['target']}: {target['measured']}")

    results = {
        "mode": "quick" if args.quick else "full",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "seconds": time.time() - started,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": {"onnxruntime": ort.__version__, "onnx": onnx.__version__},
        "latency": latency_rows,
        "optimizer": optimizer_rows,
        "loop_forms": form_rows,
        "real_exports": export_rows,
        "unseen_exports": unseen_rows,
        "fresh_exports": fresh_rows,
        "newcomer_exports": newcomer_rows,
        "targets": found,
    }
    out = args.out or RESULTS / f"bench-{results['mode']}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out} ({results['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
