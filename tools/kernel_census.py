"""Count the kernels onnxruntime runs for each committed export and its lowering, on the
export's smallest data set: what a lowering costs on small inputs, where launches dominate.

Lower first (`tools/lower_fixtures.py OUTDIR`), then, from the same checkout:

    python tools/kernel_census.py OUTDIR/generic [--json FILE]

For each `tests/fixtures/torch_*/*/model.onnx` with data sets and a lowering in OUTDIR, the
original and the lowering run twice in one onnxruntime CPU session (one thread, default graph
optimizations, profiling on), and the kernels of the second run are counted by operator (Loop
and If bodies included, once per time they run): what survives onnxruntime's own graph
optimizations, not the ONNX node count. Prints one line per export (original and lowered
kernels) and, summed over the exports, the kernels per operator that lowerings run beyond their
originals.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

import onnx
import onnxruntime as ort
from onnx import numpy_helper

FIXTURES = Path("tests/fixtures")


def smallest_data_set(case: Path) -> Path | None:
    """The data set of `case` with the fewest input bytes."""
    sets = sorted(case.glob("test_data_set_*"))
    if not sets:
        return None
    return min(sets, key=lambda s: sum(p.stat().st_size for p in s.glob("input_*.pb")))


def feeds_of(folder: Path, model: onnx.ModelProto) -> dict:
    feeds = {}
    for i, value in enumerate(model.graph.input):
        proto = onnx.TensorProto()
        proto.ParseFromString((folder / f"input_{i}.pb").read_bytes())
        feeds[value.name] = numpy_helper.to_array(proto)
    return feeds


def kernels_run(path: Path, feeds: dict) -> Counter[str] | None:
    """The kernels of the second run of `path` on `feeds`, by operator; None if it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "census")
        try:
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            session.run(None, feeds)
            session.run(None, feeds)
        except Exception:  # a model that fails on its data set is not counted
            return None
        events = json.loads(Path(session.end_profiling()).read_text())
    runs = [e["ts"] for e in events if e.get("name") == "model_run"]
    second = runs[-1] if runs else 0
    found: Counter[str] = Counter()
    for event in events:
        kernel = event.get("cat") == "Node" and event["name"].endswith("_kernel_time")
        if kernel and event["ts"] >= second:
            found[event["args"].get("op_name", "?")] += 1
    return found


def census(lowered_root: Path) -> dict[str, dict]:
    """Per export (its path under tests/fixtures): the data set, and the kernels by operator
    of the original and of the lowering (None where one fails)."""
    result: dict[str, dict] = {}
    for model_path in sorted(FIXTURES.glob("torch_*/*/model.onnx")):
        lowered = lowered_root / model_path
        data_set = smallest_data_set(model_path.parent)
        if data_set is None or not lowered.is_file():
            continue
        feeds = feeds_of(data_set, onnx.load(str(model_path), load_external_data=False))
        original, low = kernels_run(model_path, feeds), kernels_run(lowered, feeds)
        result[str(model_path.parent.relative_to(FIXTURES))] = {
            "data_set": data_set.name,
            "original": dict(original) if original is not None else None,
            "lowered": dict(low) if low is not None else None,
        }
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/kernel_census.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("lowered", type=Path, help="a target's folder of lower_fixtures.py")
    parser.add_argument("--json", type=Path, help="write the counts here")
    args = parser.parse_args(argv)
    found = census(args.lowered)
    extra: Counter[str] = Counter()
    for case, entry in found.items():
        original, lowered = entry["original"], entry["lowered"]
        total = sum(original.values()) if original is not None else "-"
        low = sum(lowered.values()) if lowered is not None else "-"
        print(f"{case} ({entry['data_set']}): original {total}, lowered {low}")
        if original is not None and lowered is not None:
            for op, count in lowered.items():
                extra[op] += max(count - original.get(op, 0), 0)
    print("kernels lowerings run beyond their originals, by operator:")
    for op, count in (+extra).most_common():  # those with any
        print(f"  {op} {count}")
    if args.json:
        args.json.write_text(json.dumps(found, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
