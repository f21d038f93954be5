"""Peak memory of `seqlower optimize --external-data` on a model with gigabytes of weights.

    python bench/large_model.py --gigabytes 3 [--workdir /tmp/seqlower-large]

Builds (tensor by tensor, never holding the weights in memory) a model whose weights live in an
external data file: SplitToSequence -> SequenceMap -> ConcatFromSequence on a small input, plus a
chain that reads every large weight. Then runs the CLI in a child process and prints its peak
resident memory next to the size of the weights and of the graph. The target: peak
memory near the size of the graph plus the interpreter, not the size of the weights.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

CHUNK_FLOATS = 64 * 1024 * 1024  # 256 MiB of float32 per weight


def build(folder: Path, gigabytes: float) -> Path:
    count = max(1, round(gigabytes * 1024**3 / (CHUNK_FLOATS * 4)))
    data_path = folder / "big.onnx.data"
    weights, nodes, partial_sums = [], [], []
    block = np.full(1024 * 1024, 0.5, dtype=np.float32).tobytes()
    with data_path.open("wb") as data:
        for k in range(count):
            offset = data.tell()
            for _ in range(CHUNK_FLOATS // (1024 * 1024)):
                data.write(block)
            tensor = TensorProto(name=f"W{k}", data_type=TensorProto.FLOAT, dims=[CHUNK_FLOATS])
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (
                ("location", data_path.name),
                ("offset", str(offset)),
                ("length", str(CHUNK_FLOATS * 4)),
            ):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            weights.append(tensor)
            nodes.append(helper.make_node("ReduceMax", [f"W{k}"], [f"m{k}"], keepdims=0))
            partial_sums.append(f"m{k}")
    body = helper.make_graph(
        [helper.make_node("Relu", ["row"], ["out"])],
        "body",
        [helper.make_tensor_value_info("row", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 16])],
    )
    nodes += [
        helper.make_node("Sum", partial_sums, ["total"]),
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0),
        helper.make_node("SequenceMap", ["rows"], ["mapped"], body=body),
        helper.make_node("ConcatFromSequence", ["mapped"], ["z"], axis=0),
        helper.make_node("Add", ["z", "total"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "large",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = folder / "big.onnx"
    onnx.save(model, path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=3.0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    folder = args.workdir or Path(tempfile.mkdtemp(prefix="seqlower-large-"))
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "out"
    out.mkdir(exist_ok=True)
    try:
        started = time.perf_counter()
        source = build(folder, args.gigabytes)
        built = time.perf_counter() - started
        weights = (folder / "big.onnx.data").stat().st_size
        command = [sys.executable, "-m", "seqlower"]
        command += ["optimize", str(source), str(out / "big.onnx"), "--external-data"]
        started = time.perf_counter()
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        result = {
            "weights_bytes": weights,
            "graph_bytes": source.stat().st_size,
            "output_weights_bytes": (out / "big.onnx.data").stat().st_size
            if run.returncode == 0
            else None,
            "peak_rss_bytes": peak,
            "peak_over_weights": peak / weights,
            "optimize_seconds": seconds,
            "build_seconds": built,
            "exit_code": run.returncode,
        }
        print(run.stdout.strip())
        if run.returncode:
            print(run.stderr.strip(), file=sys.stderr)
        print(json.dumps(result, indent=2))
        return run.returncode
    finally:
        if args.workdir is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
