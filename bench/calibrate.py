"""Calibrate the cost model: does the estimate pick the faster form of each region?

For every region (`seqlower.regions`) of every committed model with sequence operators
(`tests/fixtures/torch`, `tests/fixtures/torch_loops`, `tests/fixtures/torch_idioms`,
`tests/fixtures/speed`, `examples`), time the model lowered everywhere against the same model
with only that region left as given (`seqlower.pipeline.region_forms`), in onnxruntime (CPU, 1
thread, interleaved medians), and compare with the choice the region's estimates make
(`seqlower.cost`: as given and lowered, each at 16 iterations and on small inputs, weighed as
`--target onnxruntime` weighs them; the summary also scores the estimate at 16 alone). A
case's forms are timed together, interleaved, in `--rounds` runs (the lowest median of each form
counts). A region whose two forms run within 10% of each other is listed but not scored. The
exports of `tests/fixtures/torch_unseen`, `tests/fixtures/torch_fresh` and
`tests/fixtures/torch_newcomer` (list code the cost model was not written for) are scored as sets
of their own, and so are `tests/fixtures/torch_wild` and the other committed exports
(`torch_ranks`, `torch_accumulators`, `torch_while`). Both forms are lowered for `--target
onnxruntime`, whose choice the estimate makes (`--target generic` times the default target's
forms instead). Prints one line per region and the agreement of each set:

    python -m bench.calibrate [--runs 200] [--min-seconds 0.3] [--rounds 2]
                              [--target onnxruntime] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir

from bench.timing import latency
from seqlower.cost import DYNAMIC_COUNT
from seqlower.options import Options
from seqlower.pipeline import region_forms
from seqlower.speed_first import RegionCost

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = [
    ROOT / "tests" / "fixtures" / name for name in ("torch", "torch_loops", "torch_idioms", "speed")
]
UNSEEN = [ROOT / "tests" / "fixtures" / "torch_unseen"]
FRESH = [ROOT / "tests" / "fixtures" / "torch_fresh"]
NEWCOMER = [ROOT / "tests" / "fixtures" / "torch_newcomer"]
WILD = [ROOT / "tests" / "fixtures" / "torch_wild"]
OTHERS = [
    ROOT / "tests" / "fixtures" / name
    for name in ("torch_ranks", "torch_accumulators", "torch_while")
]
EXAMPLES = ROOT / "examples"
MARGIN = 0.10  # forms closer than this are a tie: not scored
ROUNDS = 2  # interleaved runs of a case's forms; the lowest median of each counts


def cases(folders: list[Path] | None = None) -> list[tuple[str, Path, Path | None]]:
    """(name, model, folder of saved inputs or None) for every committed model of `folders`
    (the project's own fixtures and examples when None)."""
    found = []
    for folder in FOLDERS if folders is None else folders:
        for case in sorted(p for p in folder.iterdir() if (p / "model.onnx").exists()):
            found.append((f"{folder.name}/{case.name}", case / "model.onnx", case))
    if folders is None:
        for path in sorted(EXAMPLES.glob("*.onnx")):
            found.append((f"examples/{path.stem}", path, None))
    return found


def feeds_for(model: onnx.ModelProto, case: Path | None) -> dict[str, np.ndarray]:
    """The first saved input set, or random floats with every symbolic dim 8."""
    if case is not None:
        feeds = {}
        for path in sorted((case / "test_data_set_0").glob("input_*.pb")):
            tensor = onnx.load_tensor(str(path))
            feeds[tensor.name] = onnx.numpy_helper.to_array(tensor)
        return feeds
    rng = np.random.default_rng(0)
    return {
        value.name: rng.standard_normal(
            [
                d.dim_value if d.HasField("dim_value") else 8
                for d in value.type.tensor_type.shape.dim
            ]
        ).astype(np.float32)
        for value in model.graph.input
    }


def measure(
    runs: int,
    min_seconds: float,
    folders: list[Path] | None = None,
    target: str = "onnxruntime",
    rounds: int = ROUNDS,
) -> list[dict]:
    """One row per region. A case's forms (lowered everywhere, and each region kept as given
    alone) are timed together in one interleaved run, `rounds` times; each form's time is the
    lowest of its medians. Timed in pairs, one pair after another, the lowered form of one case
    measured 10.0, 16.3 and 9.9 us in three pairs under a changing load."""
    rows = []
    for name, path, case in cases(folders):
        lowered, forms = region_forms(path, Options(target=target))
        if not forms:
            continue
        feeds = feeds_for(onnx.load(path), case)
        models = {"lowered": ir.to_proto(lowered)}
        models.update({f"kept {i}": ir.to_proto(form.kept) for i, form in enumerate(forms)})
        timed = [latency(models, feeds, runs=runs, min_seconds=min_seconds) for _ in range(rounds)]
        seconds = {model: min(t[model][0] for t in timed) for model in models}
        for index, form in enumerate(forms):
            row = {
                "case": name,
                "region": index,
                "sites": list(form.sequence_nodes),
                "estimate_as_given": form.as_given,
                "estimate_lowered": form.lowered,
                "estimate_as_given_small": form.as_given_small,
                "estimate_lowered_small": form.lowered_small,
                "seconds_as_given": seconds[f"kept {index}"],
                "seconds_lowered": seconds["lowered"],
            }
            rows.append(row)
            print(line(row), flush=True)
    return rows


def line(row: dict) -> str:
    ratio = row["seconds_as_given"] / row["seconds_lowered"]
    pick = "lowered" if _picks_lowered(row) else "as given"
    verdict = "tie" if abs(ratio - 1) <= MARGIN else ("ok" if _agrees(row) else "WRONG")
    small = ""
    if row.get("estimate_lowered_small") is not None:
        small = (
            f" ({row['estimate_as_given_small']:.0f} / {row['estimate_lowered_small']:.0f} "
            "on small inputs)"
        )
    return (
        f"{row['case']:<36} region {row['region']} ({row['sites'][0]:.40}): estimate "
        f"{row['estimate_as_given']:.0f} as given, {row['estimate_lowered']:.0f} lowered{small} "
        f"-> {pick}; measured {row['seconds_as_given'] * 1e6:.1f} / "
        f"{row['seconds_lowered'] * 1e6:.1f} us (lowered {ratio:.2f}x) {verdict}"
    )


def _picks_lowered(row: dict, one_count: bool = False) -> bool:
    """The choice `--target onnxruntime` makes: lowered unless it costs more in whole launches,
    weighed as the target weighs it (`RegionCost.lowered_costs_more`: the product of the
    estimates with `DYNAMIC_COUNT` and `SMALL_COUNT` iterations where both were made).
    `one_count`: by the estimate with `DYNAMIC_COUNT` iterations alone (what this tool scored
    before it read the second estimate; the target's choice differs where a form saves at 16
    iterations and loses at 2)."""
    small = (row.get("estimate_as_given_small"), row.get("estimate_lowered_small"))
    cost = RegionCost(
        0,
        round(row["estimate_as_given"]),
        round(row["estimate_lowered"]),
        *(None, None) if one_count or None in small else (round(small[0]), round(small[1])),
    )
    return not cost.lowered_costs_more


def _agrees(row: dict, one_count: bool = False) -> bool:
    lowered_faster = row["seconds_lowered"] < row["seconds_as_given"]
    return lowered_faster == _picks_lowered(row, one_count)


def agreement(rows: list[dict], one_count: bool = False) -> tuple[int, int]:
    """(regions where the estimate picks the faster form, regions scored); `one_count`: see
    `_picks_lowered`."""
    scored = [r for r in rows if abs(r["seconds_as_given"] / r["seconds_lowered"] - 1) > MARGIN]
    return sum(_agrees(r, one_count) for r in scored), len(scored)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--min-seconds", type=float, default=0.3)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--target", choices=("onnxruntime", "generic"), default="onnxruntime")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    timing = (args.runs, args.min_seconds)
    rounds = args.rounds
    rows = measure(*timing, target=args.target, rounds=rounds)
    print("\nExports nobody tuned for (tests/fixtures/torch_unseen)")
    unseen = measure(*timing, UNSEEN, args.target, rounds)
    print("\nThe fresh set (tests/fixtures/torch_fresh)")
    fresh = measure(*timing, FRESH, args.target, rounds)
    print("\nList code as a newcomer writes it (tests/fixtures/torch_newcomer)")
    newcomer = measure(*timing, NEWCOMER, args.target, rounds)
    print("\nList code from the wild (tests/fixtures/torch_wild)")
    wild = measure(*timing, WILD, args.target, rounds)
    print("\nThe other committed exports (torch_ranks, torch_accumulators, torch_while)")
    others = measure(*timing, OTHERS, args.target, rounds)
    print()
    sets = (
        ("the project's models", rows),
        ("exports nobody tuned for", unseen),
        ("the fresh set", fresh),
        ("the newcomer set", newcomer),
        ("the wild set", wild),
        ("the other exports", others),
    )
    for label, found in sets:
        agree, scored = agreement(found)
        alone, _ = agreement(found, one_count=True)
        share = agree / scored if scored else 1.0
        print(
            f"{label}: the estimate picks the faster form in {agree} of {scored} regions whose "
            f"forms differ by more than {MARGIN:.0%} ({share:.0%}; goal 90%); "
            f"{len(found) - scored} ties; by the estimate at {DYNAMIC_COUNT} iterations alone, "
            f"{alone} of {scored}"
        )
    if args.json:
        found = {
            "project": rows,
            "unseen": unseen,
            "fresh": fresh,
            "newcomer": newcomer,
            "wild": wild,
            "others": others,
        }
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
