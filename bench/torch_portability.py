"""Every PyTorch fixture, lowered for OpenVINO and for tract, run there on each stored data set.

    python -m bench.torch_portability              # print the table (Markdown)
    python -m bench.torch_portability --only half  # only fixtures whose name contains "half"

Where `python -m bench.portability` runs a chosen few fixture sets (with the originals and
onnxruntime beside them), this runs every export under tests/fixtures/torch*/ (each folder with a
model.onnx and its test_data_set_* folders; the dynamo exports with bench.portability's bags and
onnxruntime's outputs on the original), lowered with `--target openvino` and `--target tract`,
and counts per runtime the data sets that run and those that match PyTorch's stored outputs
(`bench.portability`'s comparison: floats within rtol 1e-4 and atol 1e-5; float16 outputs, and
the outputs of a model that casts to float16, within rtol 1e-3: OpenVINO's CPU plugin computes
float16 values in float32). A fixture that fails says how, in the runtime's own words cut to one
line: the lowering refused (a sequence-typed output openvino or tract cannot give), the model
fails to load or compile (tract has no Loop: most lowered loops fail so), or a data set fails
to run or differs.

Each (fixture, runtime) pair runs in a child process, so a crash is a "crashed" cell. The suite's
tests/targets/test_runtimes.py runs the sets bench.portability names; this script's ~80 fixtures
are a bench run, not tests: record what it prints in docs/portability.md.
"""

from __future__ import annotations

__all__ = ["FixtureOutcome", "fixtures", "evaluate_sets", "main"]

import argparse
import concurrent.futures
import dataclasses
import re
import sys
from collections.abc import Sequence

import onnx

from bench.portability import (
    ROOT,
    Case,
    LoadError,
    _close,
    _graphs,
    _one_line,
    _stored_sets,
    dynamo_cases,
    lower_flattened,
    lower_for,
    run_model,
    runtime_versions,
    why_not_runnable,
)

RUNTIMES = ("openvino", "tract")


@dataclasses.dataclass(frozen=True)
class FixtureOutcome:
    """One fixture in one runtime: `sets` data sets, `ran` of them ran, `matched` of those
    matched; `failure` is the first failure ("load: ...", "run: ...", "wrong: ...", "lowering
    fails: ...", "skipped: ..."), empty when every set matched."""

    sets: int
    ran: int = 0
    matched: int = 0
    failure: str = ""


def fixtures() -> list[Case]:
    """Every export under tests/fixtures/torch*/, named `set/fixture`, with its stored data."""
    cases = []
    for folder in sorted((ROOT / "tests" / "fixtures").glob("torch*/*/")):
        if (folder / "model.onnx").is_file():
            model = onnx.load(folder / "model.onnx")
            data = _stored_sets(folder, model, list(model.graph.input))
            name = f"{folder.parent.name}/{folder.name}"
            rtol = 1e-3 if _rounds_to_float16(model) else 1e-4
            cases.append(Case(name, "torch", model, data, rtol=rtol))
    for case in dynamo_cases():
        cases.append(dataclasses.replace(case, name=f"torch_dynamo/{case.name}"))
    return cases


def _rounds_to_float16(model: onnx.ModelProto) -> bool:
    """Whether `model` casts to float16 anywhere: OpenVINO's CPU plugin computes such a value in
    float32 (a Cast to float16 and back does not round), so its outputs may differ from the
    stored ones by half a float16 step (a relative 2**-11)."""
    return any(
        node.op_type == "Cast"
        and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16 for a in node.attribute)
        for graph in _graphs(model.graph)
        for node in graph.node
    )


def evaluate_sets(case: Case, runtime: str) -> FixtureOutcome:
    """`case` lowered for `runtime` (its sequence interface flattened when the data fixes its
    lengths), then each data set run on its own."""
    try:
        lowered, flat_case = lower_for(case.model, runtime), case
        reason = why_not_runnable(lowered, runtime)
        if reason and reason.startswith("sequence-typed"):
            flat = lower_flattened(case, runtime)
            if flat is None or why_not_runnable(flat[0], runtime):  # lengths the data leaves open
                return FixtureOutcome(len(case.data_sets), failure=f"skipped: {reason}")
            lowered, flat_case = flat
        elif reason:
            return FixtureOutcome(len(case.data_sets), failure=f"skipped: {reason}")
    except Exception as error:
        return FixtureOutcome(len(case.data_sets), failure=f"lowering fails: {_reason(error)}")
    ran = matched = 0
    failure = ""
    for inputs, expected in flat_case.data_sets:
        try:
            actual = run_model(runtime, lowered, inputs)
        except LoadError as error:
            return FixtureOutcome(len(case.data_sets), failure=f"load: {_reason(error)}")
        except Exception as error:
            failure = failure or f"run: {_reason(error)}"
            continue
        ran += 1
        problems = [_close(g, w, case.rtol, case.atol) for g, w in zip(actual, expected)]
        if len(actual) != len(expected):
            problems.append(f"{len(actual)} outputs, expected {len(expected)}")
        problem = next((p for p in problems if p), None)
        matched += problem is None
        failure = failure or (f"wrong: {problem}" if problem else "")
    return FixtureOutcome(len(case.data_sets), ran, matched, failure)


def _reason(error: BaseException, limit: int = 160) -> str:
    """The runtime's message on one line, without the source locations OpenVINO prefixes it
    with ("Exception from src/...cpp:224:"), cut to `limit` characters."""
    text = re.sub(r"Exception from \S+:\d+:\s*", "", _one_line(error, limit=10_000))
    text = re.sub(r"Check '[^']*' failed at \S+:\d+:\s*", "", text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _isolated(case: Case) -> dict[str, FixtureOutcome]:
    """`evaluate_sets` per runtime, each in a child process; a crash is a "crashed" outcome."""
    row = {}
    for runtime in RUNTIMES:
        with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
            try:
                row[runtime] = pool.submit(evaluate_sets, case, runtime).result()
            except concurrent.futures.process.BrokenProcessPool:
                crashed = "crashed: the runtime killed the process"
                row[runtime] = FixtureOutcome(len(case.data_sets), failure=crashed)
    return row


def _cell(outcome: FixtureOutcome) -> str:
    counts = f"{outcome.ran}/{outcome.sets} run, {outcome.matched} match"
    if not outcome.failure:
        return counts
    return f"{counts}; {outcome.failure.replace('|', '/')}"


def table(rows: dict[str, dict[str, FixtureOutcome]]) -> str:
    """Markdown: per runtime the fixtures whose every set matches, those that load but fail
    some set, and those that do not load or lower; then one line per fixture."""
    lines = [
        "| runtime | fixtures | every set matches | loads, some set fails or differs "
        "| fails to load | not lowered or interface skipped |",
        "|---|---|---|---|---|---|",
    ]
    for runtime in RUNTIMES:
        outcomes = [row[runtime] for row in rows.values()]
        good = sum(not o.failure for o in outcomes)
        load = sum(o.failure.startswith(("load:", "crashed:")) for o in outcomes)
        refused = sum(o.failure.startswith(("lowering fails:", "skipped:")) for o in outcomes)
        lines.append(
            f"| {runtime} | {len(outcomes)} | {good} | {len(outcomes) - good - load - refused} "
            f"| {load} | {refused} |"
        )
    lines += ["", "| fixture | " + " | ".join(RUNTIMES) + " |", "|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | " + " | ".join(_cell(row[r]) for r in RUNTIMES) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.torch_portability", description=__doc__)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--only", default="", help="run only fixtures whose name contains this")
    args = parser.parse_args(argv)
    cases = [case for case in fixtures() if args.only in case.name]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as threads:
        rows = dict(zip((c.name for c in cases), threads.map(_isolated, cases)))
    versions = runtime_versions()
    header = ", ".join(
        f"{name} {version}" for name, version in versions.items() if name != "onnxruntime"
    )
    print(f"Measured with {header} (CPU, f32).\n\n{table(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
