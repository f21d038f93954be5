"""Windows of one tensor read in a loop, original vs two seqlower versions (a script, not tests).

    PYTHONPATH=. python -m bench.windows BEFORE_SRC [--sizes 10,100,1000,10000] [--repeats 10]

The synthetic loop `for i in range(N): out.append(relu(x[i:i + 3])); cat(out)` (x [N, 3] float)
and the committed export tests/fixtures/torch_newcomer/sliding_windows (a maximum over windows
of 3 with a step of 2) are lowered by the seqlower found in BEFORE_SRC (a checkout's root) and by
this one, then timed under onnxruntime CPU with one thread, the three forms interleaved per
round (median milliseconds), outputs checked equal; the peak resident memory of one run of each
form is read in a fresh process (VmHWM of /proc/self/status, MB; Linux only).

Windows with no constant bound on their length (`--ragged`): `for i in range(len(off) - 1):
w = x[off[i]:off[i + 1]]; a.append(relu(w)); b.append(w.sum(0, keepdim=True))`, both
concatenated ("offsets"), and `x[start[i]:start[i] + count[i]]` with start = cumsum(count) -
count read the same way ("counts"); N // 4 windows of 0 to 8 rows (mean 4, seed 5).
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
# windows between consecutive offsets: the trip count len(off) - 1
OFFSETS = """<ir_version: 10, opset_import: ["" : 18]>
g (float[N,3] x, int64[K] off) => (float[?,3] y, float[?,3] z) {
    t = Constant<value = bool {1}>()
    one = Constant<value = int64 {1}>()
    axes = Constant<value = int64[1] {0}>()
    k = Size(off)
    m = Sub(k, one)
    e1 = SequenceEmpty<dtype = 1>()
    e2 = SequenceEmpty<dtype = 1>()
    s1, s2 = Loop(m, t, e1, e2) <body = body (int64 i, bool c, seq(float) a1, seq(float) a2)
                                             => (bool c2, seq(float) g1, seq(float) g2) {
        c2 = Identity(c)
        j = Add(i, one)
        first = Gather(off, i)
        last = Gather(off, j)
        starts = Unsqueeze(first, axes)
        ends = Unsqueeze(last, axes)
        w = Slice(x, starts, ends, axes)
        r = Relu(w)
        total = ReduceSum<keepdims = 1>(w, axes)
        g1 = SequenceInsert(a1, r)
        g2 = SequenceInsert(a2, total)
    }>
    y = ConcatFromSequence<axis = 0>(s1)
    z = ConcatFromSequence<axis = 0>(s2)
}"""
# windows at a start and a count each: the trip count len(count)
COUNTS = """<ir_version: 10, opset_import: ["" : 18]>
g (float[N,3] x, int64[K] count) => (float[?,3] y, float[?,3] z) {
    t = Constant<value = bool {1}>()
    axes = Constant<value = int64[1] {0}>()
    zero = Constant<value = int64 {0}>()
    ends = CumSum(count, zero)
    start = Sub(ends, count)
    k = Size(count)
    e1 = SequenceEmpty<dtype = 1>()
    e2 = SequenceEmpty<dtype = 1>()
    s1, s2 = Loop(k, t, e1, e2) <body = body (int64 i, bool c, seq(float) a1, seq(float) a2)
                                             => (bool c2, seq(float) g1, seq(float) g2) {
        c2 = Identity(c)
        first = Gather(start, i)
        size = Gather(count, i)
        last = Add(first, size)
        lo = Unsqueeze(first, axes)
        hi = Unsqueeze(last, axes)
        w = Slice(x, lo, hi, axes)
        r = Relu(w)
        total = ReduceSum<keepdims = 1>(w, axes)
        g1 = SequenceInsert(a1, r)
        g2 = SequenceInsert(a2, total)
    }>
    y = ConcatFromSequence<axis = 0>(s1)
    z = ConcatFromSequence<axis = 0>(s2)
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


def _ragged(name: str, rows: int) -> dict[str, np.ndarray]:
    """x [rows, 3] and N // 4 windows of 0 to 8 rows (seed 5): offsets or counts."""
    sizes = np.random.default_rng(5).integers(0, 9, size=rows // 4)
    x = _x(rows)  # the last windows may end past N: Slice cuts them
    if name == "offsets":
        return {"x": x, "off": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)}
    return {"x": x, "count": sizes.astype(np.int64)}


def _feeds(name: str, rows: int) -> dict[str, np.ndarray]:
    return _ragged(name, rows) if name in ("offsets", "counts") else {"x": _x(rows)}


def _session(path: str):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def _peak(path: str, name: str, rows: int) -> float:
    """Peak resident MB of a fresh process that runs `path` once on `rows` rows (VmHWM:
    ru_maxrss would carry the parent's peak over)."""
    code = (
        "from bench.windows import _session, _feeds; "
        f"_session({path!r}).run(None, _feeds({name!r}, {rows})); "
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
    parser.add_argument(
        "--ragged", action="store_true", help="windows with no constant bound on their length"
    )
    args = parser.parse_args()
    sizes = [int(v) for v in args.sizes.split(",")]
    folder = pathlib.Path(tempfile.mkdtemp(prefix="windows-"))
    cases = []
    texts = {"offsets": OFFSETS, "counts": COUNTS} if args.ragged else {"synthetic": SYNTHETIC}
    for name, text in texts.items():
        cases.append((name, folder / f"{name}.onnx"))
        onnx.save(onnx.parser.parse_model(text), cases[-1][1])
    if not args.ragged:
        cases.append(("sliding_windows", FIXTURE))
    for name, original in cases:
        forms = {"original": str(original)}
        for label, root in (("before", args.before), ("after", ".")):
            forms[label] = str(folder / f"{name}-{label}.onnx")
            command = [sys.executable, "-c", LOWER, root, str(original), forms[label]]
            subprocess.run(command, check=True)
        sessions = {label: _session(path) for label, path in forms.items()}
        for rows in sizes:
            feeds = _feeds(name, rows)
            outputs = {label: s.run(None, feeds) for label, s in sessions.items()}
            for label, output in outputs.items():
                for got, want in zip(output, outputs["original"]):
                    if args.ragged:  # sums: the scatter adds in another order
                        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=label)
                    else:
                        np.testing.assert_array_equal(got, want, err_msg=label)
            repeats = args.repeats if rows < 10000 else max(3, args.repeats // 3)
            times: dict[str, list[float]] = {label: [] for label in sessions}
            for _ in range(repeats):
                for label, session in sessions.items():
                    start = time.perf_counter()
                    session.run(None, feeds)
                    times[label].append(1000 * (time.perf_counter() - start))
            peaks = {label: _peak(path, name, rows) for label, path in forms.items()}
            cells = "  ".join(
                f"{label} {np.median(times[label]):.3f} ms {peaks[label]:.1f} MB" for label in forms
            )
            print(f"{name} N={rows} ({repeats} rounds): {cells}", flush=True)
    print("load average", " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
