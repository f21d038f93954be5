"""Windows of one tensor read in a loop, original vs two seqlower versions (a script, not tests).

    PYTHONPATH=. python -m bench.windows BEFORE_SRC [--sizes 10,100,1000,10000] [--repeats 10]

The synthetic loop `for i in range(N): out.append(relu(x[i:i + 3])); cat(out)` (x [N, 3] float)
and the committed export tests/fixtures/torch_newcomer/sliding_windows (a maximum over windows
of 3 with a step of 2) are lowered by the seqlower found in BEFORE_SRC (a checkout's root) and by
this one, then timed under onnxruntime CPU with one thread, the three forms interleaved per
round (median milliseconds), outputs checked equal; the peak resident memory of one run of each
form is read in a fresh process (VmHWM of /proc/self/status, MB; Linux only).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

SYNTHETIC = """<ir_version: 10, opset_import: ["" : 18]>
g (float[N,3] x) => (float[?,3] y) {
    zero = Constant<value = int64 {0}>()
    shape = Shape(x)
    n = Gather(shape, zero)
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        axes = Constant<value = int64[1] {0}>()
        width = Constant<value = int64 {3}>()
        stop = Add(i, width)
        starts = Unsqueeze(i, axes)
        ends = Unsqueeze(stop, axes)
        row = Slice(x, starts, ends, axes)
        scaled = Relu(row)
        grown = SequenceInsert(acc, scaled)
    }>
    y = ConcatFromSequence<axis = 0>(s)
}"""
FIXTURE = pathlib.Path("tests/fixtures/torch_newcomer/sliding_windows/model.onnx")
LOWER = """import sys, onnx, onnx_ir as ir
sys.path.insert(0, sys.argv[1])
import seqlower
lowered, _ = seqlower.optimize(onnx.load(sys.argv[2]), target="portable")
onnx.save(lowered if isinstance(lowered, onnx.ModelProto) else ir.to_proto(lowered), sys.argv[3])
"""


def _x(rows: int) -> np.ndarray:
    return (np.arange(3 * rows, dtype=np.float32).reshape(rows, 3) % 7) - 3


def _session(path: str):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def _peak(path: str, rows: int) -> float:
    """Peak resident MB of a fresh process that runs `path` once on `rows` rows (VmHWM:
    ru_maxrss would carry the parent's peak over)."""
    code = (
        "from bench.windows import _session, _x; "
        f"_session({path!r}).run(None, {{'x': _x({rows})}}); "
        "print(open('/proc/self/status').read())"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    (line,) = [row for row in found.stdout.splitlines() if row.startswith("VmHWM:")]
    return int(line.split()[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="root of the seqlower checkout to compare with")
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    sizes = [int(v) for v in args.sizes.split(",")]
    folder = pathlib.Path(tempfile.mkdtemp(prefix="windows-"))
    synthetic = folder / "synthetic.onnx"
    onnx.save(onnx.parser.parse_model(SYNTHETIC), synthetic)
    for name, original in (("synthetic", synthetic), ("sliding_windows", FIXTURE)):
        forms = {"original": str(original)}
        for label, root in (("before", args.before), ("after", ".")):
            forms[label] = str(folder / f"{name}-{label}.onnx")
            command = [sys.executable, "-c", LOWER, root, str(original), forms[label]]
            subprocess.run(command, check=True)
        sessions = {label: _session(path) for label, path in forms.items()}
        for rows in sizes:
            feeds = {"x": _x(rows)}
            outputs = {label: s.run(None, feeds)[0] for label, s in sessions.items()}
            for label, output in outputs.items():
                np.testing.assert_array_equal(output, outputs["original"], err_msg=label)
            repeats = args.repeats if rows < 10000 else max(3, args.repeats // 3)
            times: dict[str, list[float]] = {label: [] for label in sessions}
            for _ in range(repeats):
                for label, session in sessions.items():
                    start = time.perf_counter()
                    session.run(None, feeds)
                    times[label].append(1000 * (time.perf_counter() - start))
            peaks = {label: _peak(path, rows) for label, path in forms.items()}
            cells = "  ".join(
                f"{label} {np.median(times[label]):.3f} ms {peaks[label]:.1f} MB" for label in forms
            )
            print(f"{name} N={rows} ({repeats} rounds): {cells}", flush=True)
    print("load average", " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
