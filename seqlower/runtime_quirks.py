"""What seqlower knows about onnxruntime's departures from the ONNX specification, in one place.

Each `Quirk` is a fact with a version: what onnxruntime does, the releases it was seen on, what
seqlower does about it, and a probe that asks the installed onnxruntime whether it still holds.

    >>> from seqlower import runtime_quirks
    >>> runtime_quirks.holds("string-gather")        # probed once per process, then cached
    >>> runtime_quirks.limits()                      # Limits(max_ir_version=..., newest_opset=...)

Policy. A rewrite never depends on the installed onnxruntime: a lowered model is deployed to
runtimes and releases seqlower cannot see, so every workaround in the rules is one that computes
the same on every runtime (an If chain instead of a string Gather, a Cast before a Transpose),
and it stays unconditional even after a release fixes the bug. The probes serve the tests (a
tripwire test skips, naming the version, once a release fixes what it asserts), the verifier
(which must not blame a rewrite for a runtime's own failure) and the README's table. A probe
that can crash the process (a segfault at session creation) runs in a child process.
"""

from __future__ import annotations

__all__ = [
    "QUIRKS",
    "SPLIT_TO_SEQUENCE_TYPES",
    "WHERE_PORTABLE_TYPES",
    "Limits",
    "Quirk",
    "holds",
    "limits",
    "onnxruntime_version",
]

import dataclasses
import functools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable

import numpy as np
import onnx


@dataclasses.dataclass(frozen=True)
class Quirk:
    """One onnxruntime behaviour that differs from the specification or fails on valid input."""

    key: str
    behaviour: str  # what onnxruntime does
    seen_on: str  # the releases it was seen on, and the first one seen without it
    response: str  # what seqlower does about it
    probe: Callable[[], bool]  # True while the installed onnxruntime still behaves this way
    crashes: bool = False  # the probe may kill its process: run it in a child


@dataclasses.dataclass(frozen=True)
class Limits:
    """The newest IR version and default-domain opset that both onnxruntime loads and the
    installed onnx knows (a model past onnx's own limits cannot be checked)."""

    max_ir_version: int
    newest_opset: int


def onnxruntime_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


# -- running tiny models -------------------------------------------------------------------------


def _model(graph_text: str, *, opset: int = 18, ir_version: int = 8) -> onnx.ModelProto:
    header = f'<ir_version: {ir_version}, opset_import: ["" : {opset}]>\n'
    return onnx.parser.parse_model(header + graph_text)


def _session(model: onnx.ModelProto):  # type: ignore[no-untyped-def]
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # the probes fail on purpose: keep onnxruntime quiet
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _loads(model: onnx.ModelProto) -> bool:
    try:
        _session(model)
    except Exception:
        return False
    return True


def _runs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list | None:  # type: ignore[type-arg]
    """The outputs, or None when onnxruntime refuses the model or fails running it."""
    try:
        return _session(model).run(None, feeds)
    except Exception:
        return None


# -- the probes ----------------------------------------------------------------------------------


def _scalar_split_squeezes() -> bool:
    model = _model("""g (float[2,3] x) => (seq(float) s) {
        one = Constant<value = int64 {1}>()
        s = SplitToSequence<axis = 0, keepdims = 0>(x, one)
    }""")
    outputs = _runs(model, {"x": np.zeros((2, 3), np.float32)})
    # the specification's elements are [1, 3] (keepdims ignored when split is given)
    return outputs is not None and outputs[0][0].shape == (3,)


def _string_gather_miscopies() -> bool:
    model = _model("g (string[3,2] x, int64 i) => (string[2] y) { y = Gather<axis = 0>(x, i) }")
    x = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object)
    outputs = _runs(model, {"x": x, "i": np.array(1, np.int64)})
    return outputs is None or outputs[0].tolist() != ["c", "d"]


# Element types whose Where kernel every supported onnxruntime release has (1.20.0 to 1.32.0
# probed): a lowered model must run where its original ran, so rules emit Where only for these.
WHERE_PORTABLE_TYPES = frozenset(
    {"float", "double", "float16", "int32", "int64", "uint8", "string"}
)

# Element types every supported onnxruntime release (1.20 to 1.32) runs SplitToSequence for: a
# rule that rebuilds a list a model returns (or that may stay) by splitting a stacked tensor
# does so only for these (a list of int8 rebuilt that way would not load).
SPLIT_TO_SEQUENCE_TYPES = frozenset({"float", "double", "int32", "int64", "string"})

# The element types the sequence operators allow that Where may lack a kernel for.
_WHERE_PROBE_TYPES = ("bool", "int16", "uint16", "uint64", "int8", "uint8", "uint32", "float16")


@functools.cache
def missing_where_kernels() -> frozenset[str]:
    """Element types (ONNX text names) for which onnxruntime's CPU provider has no Where."""
    missing = set()
    for name in _WHERE_PROBE_TYPES:
        model = _model(
            f"g (bool c, {name}[2] a, {name}[2] b) => ({name}[2] y) {{ y = Where(c, a, b) }}"
        )
        if not _loads(model):
            missing.add(name)
    return frozenset(missing)


NESTED_SEQUENCE_MAP = """g (float[2,3,5] x) => (float[2,3,5] y) {
    s = SplitToSequence<axis = 0, keepdims = 0>(x)
    m = SequenceMap<body = outer (float[3,5] e) => (float[3,5] o) {
        t = SplitToSequence<axis = 0, keepdims = 0>(e)
        u = SequenceMap<body = inner (float[5] r) => (float[5] z) { z = Relu(r) }>(t)
        o = ConcatFromSequence<axis = 0, new_axis = 1>(u)
    }>(s)
    y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
}"""


def _nested_sequence_map_refused() -> bool:
    return not _loads(_model(NESTED_SEQUENCE_MAP))


TRANSPOSE_CAST_MATMUL = """g (float[2,3,4] x, double[4,3] w) => (double[3,2,3] y) {
    t = Transpose<perm = [1, 0, 2]>(x)
    c = Cast<to = 11>(t)
    y = MatMul(c, w)
}"""


def _child_dies(model: onnx.ModelProto, run: str = "") -> bool:
    """Whether a child process that creates a session for `model` (and, with `run`, executes
    that Python with the session as `s` and numpy as `np`) dies of a signal."""
    script = (
        "import sys, numpy as np, onnxruntime; "
        "s = onnxruntime.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
        "try:\n    " + (run or "pass") + "\nexcept Exception:\n    pass"
    )
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        onnx.save(model, path)
        done = subprocess.run(
            [sys.executable, "-c", script, path], capture_output=True, check=False, timeout=120
        )
    return done.returncode < 0


def _transpose_cast_matmul_crashes() -> bool:
    return _child_dies(_model(TRANSPOSE_CAST_MATMUL))


SPLIT_OF_A_PIECE = """g (float[2,3] x, int64[2] cut, int64[2] sizes) => (float[A,3] a, float[B,3] b)
{
    piece, rest = Split<axis = 0>(x, cut)
    a, b = Split<axis = 0>(piece, sizes)
}"""


def _split_by_negative_size_crashes() -> bool:
    """Splits the empty first piece of a Split into sizes [1, -1] (they add up to its 0 rows)."""
    feeds = (
        "{'x': np.zeros((2, 3), np.float32), 'cut': np.array([0, 2]), 'sizes': np.array([1, -1])}"
    )
    return _child_dies(_model(SPLIT_OF_A_PIECE), f"s.run(None, {feeds})")


TOPK_OF_NO_ROW = """g (float[B,4] x) => (float[B,2] v, int64[B,2] i) {
    two = Constant<value = int64[1] {2}>()
    v, i = TopK<axis = -1>(x, two)
}"""


def _topk_of_no_row_crashes() -> bool:
    return _child_dies(_model(TOPK_OF_NO_ROW), "s.run(None, {'x': np.zeros((0, 4), np.float32)})")


def _reduce_noop_fails() -> bool:
    model = _model(
        "g (float[4,3] e) => (float[4,3] o) { o = ReduceLogSumExp<noop_with_empty_axes = 1>(e) }"
    )
    return _runs(model, {"e": np.zeros((4, 3), np.float32)}) is None


TRANSPOSED_DOUBLE_MATMUL = """g (double[3,2] a, double[3,4] b) => (double[2,4] y) {
    t = Transpose<perm = [1, 0]>(a)
    y = MatMul(t, b)
}"""


def _transposed_double_matmul_refused() -> bool:
    return not _loads(_model(TRANSPOSED_DOUBLE_MATMUL))


SCAN_SHARED_OUTPUTS = """g (float[4,3] x, float[3] a0, float[3] b0) => (float[3] a, float[3] b,
                                                                 float[4,3] sums) {
    a, b, sums = Scan<num_scan_inputs = 1, body = body (float[3] a_in, float[3] b_in,
                                                         float[3] row)
                                                        => (float[3] a_in, float[3] b_out,
                                                            float[3] b_out) {
        b_out = Add(b_in, row)
    }>(a0, b0, x)
}"""


def _scan_shared_outputs_wrong() -> bool:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    a0, b0 = np.ones(3, np.float32), np.zeros(3, np.float32)
    outputs = _runs(_model(SCAN_SHARED_OUTPUTS), {"x": x, "a0": a0, "b0": b0})
    expected = [a0, x.sum(0), np.cumsum(x, 0)]
    return outputs is None or not all(np.array_equal(o, e) for o, e in zip(outputs, expected))


EMPTY_SCAN = """g (float[N,3] x) => (float[3] total) {
    zero = Constant<value = float[3] {0, 0, 0}>()
    total = Scan<num_scan_inputs = 1, body = body (float[3] acc, float[3] row) => (float[3] out) {
        out = Add(acc, row)
    }>(zero, x)
}"""


def _empty_scan_fails() -> bool:
    return _runs(_model(EMPTY_SCAN), {"x": np.zeros((0, 3), np.float32)}) is None


GATHER_NEGATIVE_RANGE = """g (float[4,3] x, int64 m) => (float[?,3] rows) {
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    numbers = Range(zero, m, one)
    rows = Gather<axis = 0>(x, numbers)
}"""


def _gather_of_negative_range_slices() -> bool:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    outputs = _runs(_model(GATHER_NEGATIVE_RANGE), {"x": x, "m": np.array(-1, np.int64)})
    return outputs is None or outputs[0].shape != (0, 3)


def _gather_of_long_range_slices() -> bool:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    # the specification's Gather fails: position 4 is past the 4 rows
    return _runs(_model(GATHER_NEGATIVE_RANGE), {"x": x, "m": np.array(6, np.int64)}) is not None


EMPTY_REDUCTIONS = """g (float[N,3] x, int64[N,3] k) => (float[3] top, int64[3] low) {
    axes = Constant<value = int64[1] {0}>()
    top = ReduceMax<keepdims = 0>(x, axes)
    low = ReduceMin<keepdims = 0>(k, axes)
}"""


def _empty_reductions_wrong() -> bool:
    outputs = _runs(
        _model(EMPTY_REDUCTIONS),
        {"x": np.zeros((0, 3), np.float32), "k": np.zeros((0, 3), np.int64)},
    )
    expected = [np.full(3, -np.inf, np.float32), np.full(3, np.iinfo(np.int64).max)]
    return outputs is None or not all(np.array_equal(o, e) for o, e in zip(outputs, expected))


NAN_ORDER = """g (float[2,1] x) => (float[1] top) {
    top = ReduceMax<axes = [0], keepdims = 0>(x)
}"""


def _nan_after_a_number_ignored() -> bool:
    outputs = _runs(_model(NAN_ORDER), {"x": np.array([[1.0], [np.nan]], np.float32)})
    return outputs is None or not np.isnan(outputs[0]).all()


EMPTY_ARGMAX = """g (float[N,4] x) => (int64[N] best) {
    best = ArgMax<axis = -1, keepdims = 0>(x)
}"""


def _empty_argmax_keeps_shape() -> bool:
    outputs = _runs(_model(EMPTY_ARGMAX), {"x": np.zeros((0, 4), np.float32)})
    return outputs is None or outputs[0].shape != (0,)


EMPTY_SPLIT = """g (float[3,2] x, int64[K] sizes) => (seq(float) s) {
    s = SplitToSequence<axis = 0>(x, sizes)
}"""


def _empty_split_gives_chunks_of_one() -> bool:
    feeds = {"x": np.zeros((3, 2), np.float32), "sizes": np.zeros(0, np.int64)}
    outputs = _runs(_model(EMPTY_SPLIT), feeds)
    return outputs is not None and len(outputs[0]) == 3


CONCAT_OF_AN_EMPTY_MISFIT = """g (float[1,?] a, float[1,?] b) => (float[?,?] y) {
    y = Concat<axis = 0>(a, b)
}"""


def _concat_skips_empty_inputs() -> bool:
    feeds = {"a": np.full((1, 1), 2.0, np.float32), "b": np.zeros((1, 0), np.float32)}
    return _runs(_model(CONCAT_OF_AN_EMPTY_MISFIT), feeds) is not None


CROP_AND_PAD = """g (float[N] x, int64[2] pads) => (float[M] y) {
    v = Constant<value = float {-9}>()
    y = Pad(x, pads, v)
}"""


def _crop_and_pad_wrong() -> bool:
    """A crop to nothing then a pad ([5] by (-1, 2)), and a pad then a crop past it ([1, 2]
    by (1, -3)): the specification gives [-9, -9] and []."""
    model = _model(CROP_AND_PAD)
    cases = (([5.0], [-1, 2], [-9.0, -9.0]), ([1.0, 2.0], [1, -3], []))
    for x, pads, want in cases:
        feeds = {"x": np.array(x, np.float32), "pads": np.array(pads, np.int64)}
        outputs = _runs(model, feeds)
        if outputs is None or not np.array_equal(outputs[0], np.array(want, np.float32)):
            return True
    return False


def _limits_below_onnx() -> bool:
    found = limits()
    return found.max_ir_version < onnx.IR_VERSION or found.newest_opset < _onnx_newest_opset()


QUIRKS: tuple[Quirk, ...] = (
    Quirk(
        "scalar-split-keepdims",
        "SplitToSequence with a scalar split of 1 and keepdims=0 squeezes the axis (the "
        "specification ignores keepdims when split is given); a larger scalar split fails",
        "1.20.0 to 1.32.0",
        "follows onnxruntime (and PyTorch's unbind, which relies on it) for a split of 1, "
        "without a warning; follows the specification where onnxruntime fails, with a warning "
        "naming the node; --split-keepdims spec selects the specification everywhere",
        _scalar_split_squeezes,
    ),
    Quirk(
        "string-gather",
        "Gather on string tensors copies only the first string of each inner block "
        "(`Gather<axis=0>(string[3,2], 1)` gives `['c', '']`, not `['c', 'd']`)",
        "1.20.0 to 1.32.0",
        "never gathers strings: run-time positions over strings use an If chain",
        _string_gather_miscopies,
    ),
    Quirk(
        "where-kernels",
        "no Where kernel for bool, int16, uint16 and uint64 elements (1.20.0 to 1.32.0), nor "
        "for int8 and uint32 (1.20.0; present in 1.32.0)",
        "1.20.0 to 1.32.0",
        "run-time insert/erase positions are lowered to Where only for the element types "
        "every supported release implements",
        lambda: bool(missing_where_kernels()),
    ),
    Quirk(
        "ir-opset-limits",
        "loads older IR versions and opsets than the installed onnx writes (1.31.1: IR 13, "
        "opset 26; 1.32.0: IR 14 and opset 28 load; 1.20.0: IR 10, opset 21)",
        "1.20.0 to 1.31.1",
        "keeps the input's IR version and opset: a model onnxruntime cannot load stays so",
        _limits_below_onnx,
    ),
    Quirk(
        "nested-sequence-map",
        "refuses to load a SequenceMap whose body holds another SequenceMap ('nodes in a "
        "graph must be topologically sorted', from its own inlining); the model is valid",
        "1.20.0 to 1.32.0",
        "batches both maps: the lowered model loads; verify reports 'original failed'",
        _nested_sequence_map_refused,
    ),
    Quirk(
        "transpose-cast-matmul-crash",
        "segmentation fault creating a session for Transpose -> Cast -> MatMul at the default "
        "optimization level (microsoft/onnxruntime#28392)",
        "1.20.0 to 1.32.0 (x86_64)",
        "the last pass (passes/workarounds.py) puts such a Cast before the Transpose",
        _transpose_cast_matmul_crashes,
        crashes=True,
    ),
    Quirk(
        "split-negative-size-crash",
        "segmentation fault running Split with run-time sizes that hold a negative number and "
        "add up to the dim, when its input is a piece of another Split (the specification "
        "requires sizes >= 0; later releases fail with an error)",
        "1.20.0; not on 1.32.0",
        "nothing: the tensor form of a list edit at a position cuts with such sizes only where "
        "the original fails too (an edit out of range, or a pop of an empty list), so there the "
        "lowered model crashes onnxruntime 1.20 where the original fails with an error",
        _split_by_negative_size_crashes,
        crashes=True,
    ),
    Quirk(
        "topk-empty-rows-crash",
        "floating-point exception (the process dies) running TopK along the last axis of a "
        "tensor with no row ([0, 4], k = 2); the result is [0, 2]",
        "1.20.0; not on 1.32.0",
        "nothing: such a TopK runs in the original as in the lowered model (PointNet++'s "
        "grouping of a batch of none); the tests run it on releases without the crash only",
        _topk_of_no_row_crashes,
        crashes=True,
    ),
    Quirk(
        "fused-matmul-double",
        "refuses to load MatMul(Transpose(x)) over double: its MatMul-Transpose fusion makes a "
        "com.microsoft FusedMatMul, which has a float kernel only",
        "1.20.0; not on 1.32.0",
        "nothing yet: batching a body that multiplies double matrices along a stacked axis "
        "emits that pair, so such a lowered model does not load in 1.20 (the original does)",
        _transposed_double_matmul_refused,
    ),
    Quirk(
        "reduce-noop-empty-axes",
        "ReduceLogSumExp with noop_with_empty_axes=1 and no axes fails at run time "
        "('Reduction on all axes, output size should be 1') instead of returning its input",
        "1.20.0; not on 1.32.0",
        "nothing: batching keeps the attribute, so the lowered model fails where the original does",
        _reduce_noop_fails,
    ),
    Quirk(
        "scan-shared-outputs",
        "a Scan whose body returns one of its inputs as an output, or one value as two "
        "outputs (a state and a scan output), returns wrong values: zeros for the first, a "
        "copy of the scanned input for the second",
        "1.20.0 to 1.32.0",
        "a Loop that becomes a Scan (--target onnxruntime) returns each such output as a copy",
        _scan_shared_outputs_wrong,
    ),
    Quirk(
        "empty-reductions",
        "ReduceMax over an axis of size 0 fails and ReduceMin of integers gives 0; the "
        "specification gives the lowest and the highest value of the type",
        "1.20.0; not on 1.32.0",
        "a running maximum reduces its initial value with its terms (never nothing); a "
        "maximum of a slice that may be empty, batched, gives the specification's value "
        "where the original fails",
        _empty_reductions_wrong,
    ),
    Quirk(
        "reduce-max-nan-order",
        "ReduceMax and ReduceMin keep their first operand against a NaN: a NaN first gives NaN, "
        "a NaN after a number is ignored (`ReduceMax` of [1, NaN] gives 1); the specification's "
        "maximum is numpy's, NaN wherever there is one (so PyTorch's, and onnx.reference's)",
        "1.20.0 to 1.32.0",
        "a maximum or minimum of slices of different bounds, batched with a mask, gives NaN "
        "wherever a slice holds one, as the specification does: where a NaN comes after a "
        "number, the original gives the number; `verify` runs the original under "
        "onnx.reference there and skips the trial when it gives the lowered model's NaN",
        _nan_after_a_number_ignored,
    ),
    Quirk(
        "empty-argmax",
        "ArgMax over an input with a dim of size 0 returns a tensor of the input's shape "
        "(`ArgMax<axis=-1, keepdims=0>` of [0, 4] gives [0, 4], not [0])",
        "1.20.0; not on 1.32.0",
        "nothing: a lowered model that combines such a result with another tensor fails there "
        "(`ctc_greedy_collapse` for no frame), where the original never read it",
        _empty_argmax_keeps_shape,
    ),
    Quirk(
        "empty-scan",
        "a Scan over an axis of size 0 fails ('Invalid dim0_offset of 0'); the specification "
        "runs its body zero times",
        "1.20.0 to 1.32.0",
        "a Loop becomes a Scan (--target onnxruntime) only when it runs at least once",
        _empty_scan_fails,
    ),
    Quirk(
        "gather-negative-range",
        "Gather(x, Range(0, m, 1)) with m < 0 returns rows of x (its optimizer reads it as "
        "Slice(x, 0, m), counting m from the end); the specification's Range is empty, and "
        "so is the Gather",
        "1.20.0 to 1.32.0",
        "a batched loop whose trip count may be negative runs Max(m, 0) times (a Loop runs "
        "no iteration then)",
        _gather_of_negative_range_slices,
    ),
    Quirk(
        "gather-range-past-end",
        "Gather(x, Range(0, m, 1)) with m past the rows of x returns every row (its optimizer's "
        "Slice(x, 0, m) stops at the end); the specification's Gather fails at the first "
        "position past the end",
        "1.20.0 to 1.32.0",
        "a batched loop that reads a tensor not proved to hold one entry per iteration cuts "
        "it to the trip count with a Slice, and checks the count with a Gather from a table "
        "of one zero, which fails where an iteration would read past the end",
        _gather_of_long_range_slices,
    ),
    Quirk(
        "split-to-sequence-empty-split",
        "SplitToSequence with an empty `split` vector over a non-empty axis returns chunks of "
        "one, as if `split` were absent; the specification requires the sizes to add up to "
        "the dim (onnx.reference returns no chunk)",
        "1.20.0 to 1.32.0",
        "follows the specification: the lowered model fails on such an input; `verify` runs "
        "the original under onnx.reference there and reports the trial as skipped, not a "
        "difference, when it fails too",
        _empty_split_gives_chunks_of_one,
    ),
    Quirk(
        "concat-empty-misfit",
        "Concat and ConcatFromSequence do not check the dims of an empty input: [[2]] and a "
        "[1, 0] tensor concatenated along axis 0 give a [2, 1] result whose second row is "
        "uninitialized memory; the specification requires every dim but the axis to match "
        "(onnx.reference fails)",
        "1.20.0 to 1.32.0",
        "nothing: where the original concatenates such elements, the lowered model does too "
        "or fails (a Loop's scan output checks its elements' shapes), and the specification "
        "rejects both; seqlower's fuzz tests do not compare their values there, and `verify` "
        "skips such a trial, saying why, where onnx.reference rejects the original",
        _concat_skips_empty_inputs,
    ),
    Quirk(
        "pad-crop-and-pad",
        "Pad with a negative and a positive pad on one axis: where the crop leaves nothing the "
        "padded positions hold 0, not the pad value (`Pad([5], (-1, 2), -9)` gives [0, 0]), "
        "and a pad then a crop past it fails ('Integer overflow'; `Pad([1, 2], (1, -3))`, "
        "whose result is empty)",
        "1.20.0; not on 1.32.0",
        "nothing: where such a Pad runs in a loop over a ragged list, `loop-ragged-pad`'s "
        "Gather gives the specification's values; its tests compare with numpy there",
        _crop_and_pad_wrong,
    ),
)

_BY_KEY = {quirk.key: quirk for quirk in QUIRKS}


@functools.cache
def holds(key: str) -> bool:
    """Whether the installed onnxruntime still behaves as quirk `key` says (probed once)."""
    return _BY_KEY[key].probe()


def _onnx_newest_opset() -> int:
    return onnx.defs.onnx_opset_version()


@functools.cache
def limits() -> Limits:
    """The newest IR version and opset that onnxruntime loads, capped at what onnx knows."""
    neg = "g (float[2] x) => (float[2] y) { y = Neg(x) }"
    ir_version = next(
        (v for v in range(onnx.IR_VERSION, 6, -1) if _loads(_model(neg, ir_version=v))), 7
    )
    opset = next(
        (
            o
            for o in range(_onnx_newest_opset(), 12, -1)
            if _loads(_model(neg, opset=o, ir_version=ir_version))
        ),
        13,
    )
    return Limits(ir_version, opset)
