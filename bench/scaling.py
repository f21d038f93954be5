"""Benchmark: the optimizer's own cost, as ratios against onnx_ir load + save of the same model.

    python -m bench.scaling                          # chain, dense/sparse at 100k, hostile files
    python -m bench.scaling --quick                  # smaller sizes, no 100k models
    python -m bench.scaling --detectors /work/detectors   # also Mask R-CNN and Keypoint R-CNN

Every timing is one fresh process (`python -m bench.scaling --child ...`), seqlower's and
onnx_ir's alike, run back to back in one run of this script: on a loaded machine only the
ratios of one run mean something.

1. The sequence-heavy chain: K chains of SplitToSequence -> 4 SequenceAt -> Relu ->
   SequenceConstruct -> ConcatFromSequence (11 nodes each, every group lowered), from 4k to 60k
   nodes: the ratio at each size and the exponent of seqlower's time fitted over the sizes
   (log-log least squares; 1.0 is linear). Targets: 1.5x at 30k, exponent <= 1.05.
2. The dense and sparse SequenceMap chains of bench/run.py at about 100k nodes. Target: 1.5x.
3. With --detectors DIR: torchvision's Mask R-CNN and Keypoint R-CNN (ResNet-50 FPN, opset 17,
   TorchScript export). Produce them with the CPU torch (about 20 s each, 180 MB and 240 MB,
   never committed):
       python ../shared/torchvision_export.py --out DIR    (see that script's --help)
   `seqlower optimize --target openvino` is timed (target 3x), then the lowered model runs in
   OpenVINO (f32) on one image and its outputs are compared with onnxruntime's on the original.
4. The hostile files (each a few hundred bytes): the command line's wall time, peak memory and
   exit code. Targets: under 10 s, under 1 GB, exit 0 or 2.

Writes the numbers as JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
CHAIN_NODES = (4_000, 7_500, 15_000, 30_000, 60_000)
QUICK_CHAIN_NODES = (2_000, 4_000, 8_000)
LARGE_NODES = 100_000
DETECTORS = ("maskrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn")
TARGETS = {"chain": 1.5, "exponent": 1.05, "large": 1.5, "detector": 3.0}
HOSTILE_SECONDS, HOSTILE_BYTES = 10.0, 1024**3


# -- models -----------------------------------------------------------------------------------


def chain_model(nodes: int) -> onnx.ModelProto:
    """nodes // 11 chains of SplitToSequence -> 4 SequenceAt -> Relu -> SequenceConstruct ->
    ConcatFromSequence, each reading the previous one's result."""
    graph_nodes, h = [], "x"
    positions = [numpy_helper.from_array(np.array(i, np.int64), f"p{i}") for i in range(4)]
    for k in range(max(1, nodes // 11)):
        graph_nodes.append(helper.make_node("SplitToSequence", [h], [f"s{k}"], axis=0))
        for i in range(4):
            graph_nodes.append(helper.make_node("SequenceAt", [f"s{k}", f"p{i}"], [f"a{k}_{i}"]))
            graph_nodes.append(helper.make_node("Relu", [f"a{k}_{i}"], [f"r{k}_{i}"]))
        read = [f"r{k}_{i}" for i in range(4)]
        graph_nodes.append(helper.make_node("SequenceConstruct", read, [f"q{k}"]))
        graph_nodes.append(helper.make_node("ConcatFromSequence", [f"q{k}"], [f"c{k}"], axis=0))
        h = f"c{k}"
    graph = helper.make_graph(
        graph_nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info(h, TensorProto.FLOAT, [4, 8])],
        initializer=positions,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def hostile_models() -> dict[str, onnx.ModelProto]:
    """The tiny files that used to hang the optimizer or exhaust memory (tests/test_hostile_
    inputs.py builds the same ones and checks their outcome)."""
    sys.path.insert(0, str(ROOT))
    from tests.test_hostile_inputs import (
        chunks_at_runtime_position,
        every_position_read_and_rebuilt,
        identities_after_at,
        ifs_appending_in_a_row,
        inserts_in_a_row,
        loop_appending_a_long_sum,
        map_of_a_long_body,
        nested_loops_appending,
        nested_maps,
        one_condition_read_by_many_ifs,
        rounds_of_read_reshape_insert,
        split_by_a_long_vector,
        split_declaring_more_than_it_holds,
    )
    from tests.test_hostile_shapes import (
        chained_loops_in_a_loop,
        functions_calling_twice,
        inserts_at_the_front,
        lengths_as_outputs,
        loop_carrying_lists,
        loops_nested,
        one_function_called,
        one_value_listed,
    )

    return {
        "10^6 chunks read at a run-time position": chunks_at_runtime_position(10**6),
        "10k Identity after a SequenceAt": identities_after_at(10_000),
        "3,000 SequenceInserts in a row": inserts_in_a_row(3000),
        "a list read at 20k positions, rebuilt by one SequenceConstruct": (
            every_position_read_and_rebuilt(20_000)
        ),
        "2,000 Ifs in a row, each appending to a list": ifs_appending_in_a_row(2000),
        "SequenceMap whose body adds the element 2,000 times": map_of_a_long_body(2000),
        "split declaring 10^12 elements, 8 bytes": split_declaring_more_than_it_holds(),
        "18 nested Loops of two iterations carrying a list": nested_loops_appending(18),
        "a Loop body of 10k Adds on shared values, appended": loop_appending_a_long_sum(10_000),
        "one condition read by 10k Ifs, each reading a list": (
            one_condition_read_by_many_ifs(10_000)
        ),
        "split by 100k static sizes, read at a run-time position": (
            split_by_a_long_vector(100_000, "at")
        ),
        "split by 100k static sizes, concatenated on another axis": (
            split_by_a_long_vector(100_000, "concat")
        ),
        "split by 100k run-time sizes, read at a run-time position": (
            split_by_a_long_vector(100_000, "at", runtime_sizes=True)
        ),
        "4,000 rounds of SequenceAt, Unsqueeze, Squeeze, SequenceInsert on one list": (
            rounds_of_read_reshape_insert(4000)
        ),
        "30 SequenceMaps nested in SequenceMap bodies": nested_maps(30),
        "10k SequenceInserts at position 0": inserts_at_the_front(10_000),
        "10k graph outputs, each a SequenceLength": lengths_as_outputs(10_000),
        "100k graph outputs, each a SequenceLength": lengths_as_outputs(100_000),
        "a Loop carrying 1,000 lists, each appended to": loop_carrying_lists(1000),
        "a Loop carrying 1,000 lists, each read at -1 and appended to": (
            loop_carrying_lists(1000, "last")
        ),
        "a Loop carrying 1,000 lists of changing shapes, each concatenated": (
            loop_carrying_lists(1000, "ragged")
        ),
        "a Loop carrying 1,000 tensors, each grown by Concat": loop_carrying_lists(1000, "grown"),
        "functions calling the next twice, 40 deep (2**40 copies)": functions_calling_twice(40),
        "one function holding a list, called 10k times": one_function_called(10_000),
        "30 Loops of a run-time trip count nested, each carrying a list": loops_nested(30),
        "one value listed 200k times, read at a run-time position": one_value_listed(200_000),
        "2,000 Loops in a row in a Loop body, each growing a tensor": chained_loops_in_a_loop(2000),
        "2,000 Loops in a row in a Loop body, each doubling a tensor": (
            chained_loops_in_a_loop(2000, "double")
        ),
    }


# -- timing in fresh processes ------------------------------------------------------------------


def _child(tool: str, source: str, out: str, target: str) -> dict[str, object]:
    """The body of one timed process: onnx_ir load + save, or seqlower load, optimize, save."""
    import onnx_ir as ir

    if tool == "io":
        start = time.perf_counter()
        ir.save(ir.load(source), out)
        return {"seconds": time.perf_counter() - start}
    import seqlower
    from seqlower.io import save_model

    start = time.perf_counter()
    model, report = seqlower.optimize(source, target=target)
    save_model(model, out)
    return {
        "seconds": time.perf_counter() - start,
        "sequence_ops_after": report.total_after,
        "stop_reason": report.stop_reason,
    }


def timed(tool: str, source: Path, out: Path, target: str = "generic") -> dict[str, object]:
    command = [sys.executable, "-m", "bench.scaling", "--child", tool, str(source), str(out)]
    done = subprocess.run(
        [*command, target], cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"failed": tail[0][:300]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def ratio_of(source: Path, work: Path, target: str = "generic") -> dict[str, object]:
    io = timed("io", source, work / "io.onnx")
    lowered = timed("seqlower", source, work / "lowered.onnx", target)
    result = {"io_seconds": io.get("seconds"), "seqlower_seconds": lowered.get("seconds")}
    if "seconds" in io and "seconds" in lowered:
        result["ratio"] = lowered["seconds"] / io["seconds"]  # type: ignore[operator]
    result.update({k: v for k, v in lowered.items() if k != "seconds"})
    return result


def fitted_exponent(sizes: list[int], seconds: list[float]) -> float:
    """The slope of log(seconds) over log(nodes), least squares."""
    xs, ys = np.log(sizes), np.log(seconds)
    return float(np.polyfit(xs, ys, 1)[0])


def node_count(model: onnx.ModelProto) -> int:
    return len(model.graph.node)


# -- the parts --------------------------------------------------------------------------------


def measure_chain(sizes: tuple[int, ...], work: Path) -> dict[str, object]:
    rows = []
    for size in sizes:
        model = chain_model(size)
        source = work / f"chain_{size}.onnx"
        onnx.save(model, source)
        row = {"nodes": node_count(model), **ratio_of(source, work)}
        rows.append(row)
        print(f"  chain {row['nodes']:>6} nodes: {_ratio_text(row)}", flush=True)
    done = [r for r in rows if "ratio" in r]
    exponent = (
        fitted_exponent([r["nodes"] for r in done], [r["seqlower_seconds"] for r in done])
        if len(done) >= 2
        else None
    )
    io_exponent = (
        fitted_exponent([r["nodes"] for r in done], [r["io_seconds"] for r in done])
        if len(done) >= 2
        else None
    )
    return {"rows": rows, "exponent": exponent, "io_exponent": io_exponent}


def measure_large(work: Path) -> list[dict[str, object]]:
    from bench.models import large_model

    rows = []
    for family, layers in (("dense", 1), ("sparse", 14)):
        blocks = max(1, LARGE_NODES // (6 + 14 * layers))
        model = large_model(blocks, layers)
        source = work / f"{family}.onnx"
        onnx.save(model, source)
        row = {"family": family, "nodes": node_count(model), **ratio_of(source, work)}
        rows.append(row)
        print(f"  {family:<6} {row['nodes']:>6} nodes: {_ratio_text(row)}", flush=True)
    return rows


def measure_detectors(folder: Path, work: Path) -> list[dict[str, object]]:
    rows = []
    for name in DETECTORS:
        source = folder / f"{name}.onnx"
        if not source.exists():
            print(f"  {name}: not found in {folder} (see this script's docstring)", flush=True)
            continue
        out = work / f"{name}.lowered.onnx"
        io = timed("io", source, work / "io.onnx")
        lowered = timed("seqlower", source, out, "openvino")
        row: dict[str, object] = {"model": name, "io_seconds": io.get("seconds")}
        row["seqlower_seconds"] = lowered.get("seconds")
        if "seconds" in io and "seconds" in lowered:
            row["ratio"] = lowered["seconds"] / io["seconds"]  # type: ignore[operator]
            row["openvino"] = compare_in_openvino(source, out)
        else:
            row["failed"] = lowered.get("failed") or io.get("failed")
        rows.append(row)
        print(f"  {name}: {_ratio_text(row)}", flush=True)
        print(f"    {_openvino_text(row.get('openvino'))}", flush=True)
    return rows


def detector_image() -> np.ndarray:
    """One [3, 320, 320] image: gradients and a bright rectangle (something to detect)."""
    yy, xx = np.mgrid[0:320, 0:320] / 320.0
    image = np.stack([yy, xx, yy * xx]).astype(np.float32)
    image[:, 100:200, 80:220] = np.array([0.9, 0.7, 0.8], np.float32)[:, None, None]
    return image


def compare_in_openvino(original: Path, lowered: Path) -> dict[str, object]:
    """onnxruntime on the original, and on one image: onnxruntime on the lowered model (the
    lowering's own error: `onnxruntime_max_difference`) and OpenVINO (f32) on it. OpenVINO's
    detections are matched to onnxruntime's by their boxes first: two detections whose scores
    differ by 1e-7 may come out in the other order. Per output: the largest difference and the
    share of elements that differ by more than 1e-3 (a box edge a thousandth of a pixel away
    moves a whole column of a pasted mask)."""
    import onnxruntime as ort
    import openvino as ov

    image = {"image": detector_image()}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(original), options, providers=["CPUExecutionProvider"])
    want = session.run(None, image)
    mine = ort.InferenceSession(str(lowered), options, providers=["CPUExecutionProvider"])
    same = [_difference(w, g) for w, g in zip(want, mine.run(None, image))]
    core = ov.Core()
    try:
        compiled = core.compile_model(
            core.read_model(str(lowered)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
        )
        results = compiled(image)
    except Exception as error:  # a runtime's failure is a result here
        return {"loads": False, "error": str(error).splitlines()[0][:200]}
    got = [results[output] for output in compiled.outputs]
    order = _matching_rows(want[0], got[0]) if want and want[0].ndim == 2 else None
    outputs = {}
    for meta, w, g in zip(session.get_outputs(), want, got):
        entry: dict[str, object] = {"shape": list(w.shape), "same_shape": w.shape == g.shape}
        if order is not None and g.shape[:1] == (len(order),):
            g = g[order]
        if w.shape == g.shape and w.size:
            difference = np.abs(w.astype(np.float64) - g.astype(np.float64))
            entry["max_difference"] = float(difference.max())
            entry["share_over_1e-3"] = float((difference > 1e-3).mean())
        outputs[meta.name] = entry
    return {
        "loads": True,
        "onnxruntime_max_difference": max((d for d in same if d is not None), default=0.0),
        "outputs": outputs,
    }


def _difference(want: np.ndarray, got: np.ndarray) -> float | None:
    if want.shape != got.shape or not want.size:
        return None
    return float(np.abs(want.astype(np.float64) - got.astype(np.float64)).max())


def _matching_rows(want: np.ndarray, got: np.ndarray) -> np.ndarray | None:
    """For each row of `want` (boxes), the row of `got` nearest to it, each taken once; None
    when the counts differ."""
    if want.shape != got.shape:
        return None
    taken: set[int] = set()
    order = []
    for row in want:
        distances = np.abs(got - row).max(axis=1)
        for index in np.argsort(distances, kind="stable"):
            if int(index) not in taken:
                taken.add(int(index))
                order.append(int(index))
                break
    return np.array(order)


def measure_hostile(work: Path) -> list[dict[str, object]]:
    rows = []
    for name, model in hostile_models().items():
        source = work / "hostile.onnx"
        onnx.save(model, source)
        command = [sys.executable, "-m", "seqlower", "optimize", str(source), str(work / "h.onnx")]
        row = {"model": name, "bytes": source.stat().st_size, **_peak_run(command)}
        rows.append(row)
        print(
            f"  {name:<42} {row['bytes']:>7} B: {row['seconds']:6.2f} s, "
            f"{row['peak_mb']:6.0f} MB, exit {row['exit']}: {row['last_line'][:90]}",
            flush=True,
        )
    return rows


_PEAK = (
    "import json, resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=600)\n"
    "seconds = time.perf_counter() - start\n"
    "lines = (done.stderr.strip() or done.stdout.strip()).splitlines()\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
    "print(json.dumps([seconds, peak, done.returncode, lines[-1] if lines else '']))\n"
)


def _peak_run(command: list[str]) -> dict[str, object]:
    """Run `command` under a watcher process: wall time, the peak resident memory of the
    command alone, its exit code and its last line of output."""
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *command], capture_output=True, text=True, check=True
    )
    seconds, peak, code, line = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seconds": seconds, "peak_mb": peak / 1024**2, "exit": code, "last_line": line}


# -- report -----------------------------------------------------------------------------------


def _openvino_text(found: object) -> str:
    if not isinstance(found, dict):
        return "OpenVINO: not run"
    if not found.get("loads"):
        return f"OpenVINO: fails: {found.get('error')}"
    parts = [
        f"{name} {entry.get('max_difference', 0):.2g} max"
        + (f" ({entry['share_over_1e-3']:.4%} > 1e-3)" if entry.get("share_over_1e-3") else "")
        for name, entry in found["outputs"].items()
    ]
    return (
        f"onnxruntime on the lowered model: {found['onnxruntime_max_difference']:.2g} max "
        f"difference; OpenVINO against onnxruntime's original: {', '.join(parts)}"
    )


def _ratio_text(row: dict[str, object]) -> str:
    if "ratio" not in row:
        return f"failed: {row.get('failed')}"
    return (
        f"seqlower {row['seqlower_seconds']:.2f} s, load+save {row['io_seconds']:.2f} s, "
        f"ratio {row['ratio']:.2f}x"
    )


def verdicts(results: dict[str, object]) -> list[str]:
    lines = []
    chain = results["chain"]
    at_30k = [r for r in chain["rows"] if "ratio" in r and 25_000 <= r["nodes"] <= 35_000]
    if at_30k:
        ratio = at_30k[0]["ratio"]
        lines.append(_verdict(f"chain at 30k nodes: {ratio:.2f}x", ratio <= TARGETS["chain"]))
    if chain["exponent"] is not None:
        exponent = chain["exponent"]
        lines.append(
            _verdict(
                f"chain time exponent {exponent:.3f} (load+save: {chain['io_exponent']:.3f})",
                exponent <= TARGETS["exponent"],
            )
        )
    for row in results.get("large", []):
        if "ratio" in row:
            text = f"{row['family']} at {row['nodes']} nodes: {row['ratio']:.2f}x"
            lines.append(_verdict(text, row["ratio"] <= TARGETS["large"]))
    for row in results.get("detectors", []):
        if "ratio" in row:
            text = f"{row['model']} (--target openvino): {row['ratio']:.2f}x"
            lines.append(_verdict(text, row["ratio"] <= TARGETS["detector"]))
    for row in results.get("hostile", []):
        ok = (
            row["seconds"] < HOSTILE_SECONDS
            and row["peak_mb"] * 1024**2 < HOSTILE_BYTES
            and row["exit"] in (0, 2)
        )
        lines.append(_verdict(f"{row['model']}: {row['seconds']:.1f} s", ok))
    return lines


def _verdict(text: str, met: bool) -> str:
    return f"  [{'met' if met else 'NOT met'}] {text}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, no 100k models")
    parser.add_argument("--detectors", type=Path, help="folder with the exported detectors")
    parser.add_argument("--child", nargs=4, metavar=("TOOL", "SOURCE", "OUT", "TARGET"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    results: dict[str, object] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {_cores()} cores, load {_load()}",
    }
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        print("1. sequence-heavy chain (every group lowered)", flush=True)
        results["chain"] = measure_chain(QUICK_CHAIN_NODES if args.quick else CHAIN_NODES, work)
        if not args.quick:
            print("2. dense and sparse SequenceMap chains (bench/run.py)", flush=True)
            results["large"] = measure_large(work)
        if args.detectors:
            print("3. detectors, --target openvino", flush=True)
            results["detectors"] = measure_detectors(args.detectors, work)
        print("4. hostile files (the command line)", flush=True)
        results["hostile"] = measure_hostile(work)
    print("targets:")
    print("\n".join(verdicts(results)))
    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"scaling-{stamp}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


def _cores() -> int:
    import os

    return os.cpu_count() or 0


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in __import__("os").getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
