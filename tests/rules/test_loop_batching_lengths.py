"""loop-batch where the trip count is not written as the length of what the body reads.

Two ways to batch such a loop soundly, each tested three ways (what it emits, what it refuses
and why, the same outputs as the original under onnxruntime or a failure in both):

- proved: the loop analysis's symbolic shapes carry a dim through the ops where onnx shape
  inference loses it (`x[b][idx[b]]` for b in range(x.size(0)), idx made from x by a Slice over
  the whole axis, a reduction and TopK): the batch reads every row, with no check;
- checked: a tensor whose rows are not known to be the trip count M (a table of per-level
  constants, a trip count given as an input) is cut to M by a Slice whose end carries a check
  that fails where an iteration would read past the end; no failure at M <= 0, where the loop
  reads nothing, even from an empty tensor.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import lower, op_counts, parse, run_ort

from seqlower import runtime_quirks
from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes.normalize import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import loop_batching

RNG = np.random.default_rng(35)

# for b in range(x.size(0)): out.append(x[b][idx[b]]), idx = the 2 nearest points' positions
# (PointNet++'s grouping): onnx shape inference gives the whole-axis Slice's dim 0 a new name,
# so idx's rows are not written as x's
GROUPED = """g (float[B,N,3] x) => (float[S,2,3] y) {
    t = Constant<value = bool {1}>()
    zero1 = Constant<value = int64[1] {0}>()
    end = Constant<value = int64[1] {9223372036854775807}>()
    last = Constant<value = int64[1] {-1}>()
    two = Constant<value = int64[1] {2}>()
    zero = Constant<value = int64 {0}>()
    whole = Slice(x, zero1, end, zero1)
    d = ReduceSum<keepdims = 0>(whole, last)
    vals, found = TopK<axis = -1, largest = 0>(d, two)
    dims = Shape(x)
    n = Gather<axis = 0>(dims, zero)
    OFFSET
    y = Loop(n, t) <body = body (int64 b, bool c) => (bool c2, float[2,3] r) {
        c2 = Identity(c)
        e = Gather<axis = 0>(x, b)
        k = Gather<axis = 0>(idx, b)
        r = Gather<axis = 0>(e, k)
    }>
}"""
AS_FOUND = "idx = Identity(found)"
FROM_THE_END = "count = Gather<axis = 0>(dims, one)\n    idx = Sub(found, count)"  # -N..-1

# for i in range(m): out.append(x[i] * table[i]), m a model input, table a constant of 3 rows
# (the anchors of 3 levels read by a run-time level count)
TABLE = """g (int64 m, float[N,3] x) => (float[S,3] y) {
    t = Constant<value = bool {1}>()
    table = Constant<value = float[3,3] {1, 2, 3, 4, 5, 6, 7, 8, 9}>()
    y = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] r) {
        c2 = Identity(c)
        e = Gather<axis = 0>(x, i)
        w = Gather<axis = 0>(table, i)
        r = Mul(e, w)
    }>
}"""


# for i in range(m): out.append(x[i] * 2): nothing but the check tells m > rows apart (the
# batch of the rows there are has a shape the rest of the body accepts)
ROWS = """g (int64 m, float[N,3] x) => (float[S,3] y) {
    t = Constant<value = bool {1}>()
    two = Constant<value = float {2}>()
    y = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] r) {
        c2 = Identity(c)
        e = Gather<axis = 0>(x, i)
        r = Mul(e, two)
    }>
}"""


def grouped(offset: str = AS_FOUND) -> onnx.ModelProto:
    text = GROUPED.replace("OFFSET", offset)
    if offset != AS_FOUND:
        text = text.replace(
            "    zero = Constant", "    one = Constant<value = int64 {1}>()\n    zero = Constant"
        )
    return parse(text)


def outcome(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list | None:
    """The outputs under onnxruntime (all optimizations on), or None where the run fails."""
    try:
        return run_ort(model, feeds)
    except Exception:  # onnxruntime raises its own error types
        return None


def assert_same_or_both_fail(original, lowered, feeds) -> bool:
    """Equal outputs, or a failure in both; True where the original ran."""
    want, got = outcome(original, feeds), outcome(lowered, feeds)
    assert (want is None) == (got is None), f"original {'fails' if want is None else 'runs'}"
    if want is not None:
        for w, g in zip(want, got, strict=True):
            assert w.shape == g.shape and w.dtype == g.dtype
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)  # sums may round apart
    return want is not None


def batched(model: onnx.ModelProto, **options) -> onnx.ModelProto:
    lowered, report = lower(model, **options)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert "Loop" not in op_counts(lowered)
    return lowered


# -- proved: no check ---------------------------------------------------------------------------


def test_inference_does_not_name_the_rows_of_what_is_read():
    """The premise: the rows of idx are not written as x's (else the trip count would be
    matched as written, and this file would test nothing new)."""
    inferred = onnx.shape_inference.infer_shapes(grouped())
    (found,) = [v for v in inferred.graph.value_info if v.name == "found"]
    dim = found.type.tensor_type.shape.dim[0]
    assert dim.dim_param != "B"


@pytest.mark.parametrize("offset", [AS_FOUND, FROM_THE_END], ids=["positions", "from-the-end"])
@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_rows_proved_equal_through_slice_reduce_and_topk_are_read_whole(offset, target):
    model = grouped(offset)
    lowered = batched(model, target=target)
    counts = op_counts(lowered)
    assert "Max" not in counts and "Loop" not in counts  # no check: the rows are proved
    assert counts["GatherND"] == 1
    # no row: onnxruntime 1.20's TopK dies of it, in the original as in the lowered model
    empty = () if runtime_quirks.holds("topk-empty-rows-crash") else (0,)
    for rows in (3, 1, *empty):
        feeds = {"x": RNG.standard_normal((rows, 4, 3)).astype(np.float32)}
        assert assert_same_or_both_fail(model, lowered, feeds)


# -- checked: cut to the trip count, failing where the loop fails --------------------------------


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_a_table_read_by_a_trip_count_given_at_run_time_is_cut_and_checked(target):
    model = parse(TABLE)
    lowered = batched(model, target=target)
    counts = op_counts(lowered)
    assert counts["Slice"] == 2 and counts["Max"] >= 2  # each read cut, Max(m, 0) and checks
    ran = []
    for trips in (-2, 0, 1, 2, 3, 4):
        for rows in (0, 2, 3, 5):
            feeds = {"m": np.array(trips), "x": RNG.standard_normal((rows, 3)).astype(np.float32)}
            if assert_same_or_both_fail(model, lowered, feeds):
                ran.append((trips, rows))
    # the loop fails exactly where it reads past x (m > rows) or past the table (m > 3)
    assert set(ran) == {(m, n) for m in (-2, 0, 1, 2, 3, 4) for n in (0, 2, 3, 5) if m <= min(n, 3)}


def test_the_check_fails_under_onnxruntime_where_a_range_gather_would_not():
    """onnxruntime's optimizer reads Gather(x, Range(0, m)) as a Slice that stops at the end
    instead of failing (quirk gather-range-past-end); the check is a Gather of its own from a
    table of one zero, and fails one row past the end of x; not at m <= 0, even on no row."""
    model = parse(ROWS)
    lowered = batched(model)
    assert op_counts(lowered)["Gather"] == 1  # the check, from a table of one zero
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for trips in (2, 1, 0, -1):
        (y,) = outcome(lowered, {"m": np.array(trips), "x": x})
        np.testing.assert_array_equal(y, x[: max(trips, 0)] * 2)
    for trips in (0, -3):
        (y,) = outcome(lowered, {"m": np.array(trips), "x": np.zeros((0, 3), np.float32)})
        assert y.shape == (0, 3)
    for trips, rows in ((3, 2), (1, 0), (7, 5)):
        feeds = {"m": np.array(trips), "x": np.ones((rows, 3), np.float32)}
        assert outcome(model, feeds) is None
        assert outcome(lowered, feeds) is None


def test_a_table_beside_the_rows_the_trip_count_is_read_from():
    """`for i in range(x.size(0)): x[i] * table[i]`: x is read whole, the table is checked."""
    model = parse(
        TABLE.replace("(int64 m, float[N,3] x)", "(float[N,3] x)")
        .replace(
            "    y = Loop",
            "    m = Size(x)\n    three = Constant<value = int64 {3}>()\n"
            "    rows = Div(m, three)\n    y = Loop",
        )
        .replace("Loop(m, t)", "Loop(rows, t)")
    )
    lowered = batched(model)
    for rows in range(6):
        feeds = {"x": RNG.standard_normal((rows, 3)).astype(np.float32)}
        assert assert_same_or_both_fail(model, lowered, feeds) == (rows <= 3)


def test_a_read_along_a_negative_axis_is_cut_along_that_axis():
    """Gather(x, i, axis=-1): the columns; a trip count past them fails in both."""
    model = parse(
        TABLE.replace("float[N,3] x", "float[3,N] x").replace(
            "e = Gather<axis = 0>(x, i)", "e = Gather<axis = -1>(x, i)"
        )
    )
    lowered = batched(model)
    for trips, columns in ((2, 3), (3, 3), (0, 0), (3, 2), (-1, 0)):
        feeds = {"m": np.array(trips), "x": RNG.standard_normal((3, columns)).astype(np.float32)}
        assert assert_same_or_both_fail(model, lowered, feeds) == (trips <= columns)


# -- refused ------------------------------------------------------------------------------------


def test_refuses_a_list_whose_length_is_not_the_trip_count():
    model = parse(
        TABLE.replace("(int64 m, float[N,3] x)", "(int64 m, float[N,3] x, float[K,3] z)")
        .replace(
            "    y = Loop", "    zs = SplitToSequence<axis = 0, keepdims = 0>(z)\n    y = Loop"
        )
        .replace("w = Gather<axis = 0>(table, i)", "w = SequenceAt(zs, i)")
    )
    assert refusal(model) == "the trip count is not known to be the length of what the body reads"


def refusal(model: onnx.ModelProto, target: str = "generic") -> str:
    """Why loop-batch refuses the first Loop of the main graph (for `target`)."""
    graph_model = ir.from_proto(onnx.shape_inference.infer_shapes(model))
    infer_shapes(graph_model)
    loop = next(node for node in graph_model.graph if node.op_type == "Loop")
    options = Options(target=target)
    found = loop_batching._check(loop, Context(Facts(graph_model), Rewriter(graph_model), options))
    assert isinstance(found, Refusal), "loop-batch accepts the loop"
    return found.reason


# `x[starts[i]:ends[i]].sum(0)` (or its maximum) for i in range(m), m not the bounds' length
CHECKED_SLICES = """g (int64 m, float[N,3] x, int64[K,1] starts, int64[K,1] ends)
                      => (float[S,3] y) {
        t = Constant<value = bool {1}>()
        zero1 = Constant<value = int64[1] {0}>()
        y = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] r) {
            c2 = Identity(c)
            s = Gather<axis = 0>(starts, i)
            e = Gather<axis = 0>(ends, i)
            piece = Slice(x, s, e, zero1)
            r = REDUCE<keepdims = 0>(piece, zero1)
        }>
    }"""


@pytest.mark.parametrize(
    ("reduce", "target", "opset"),
    [("ReduceMax", "generic", 17), ("ReduceSum", "onnxruntime", 18)],
    ids=["maximum-opset-17", "onnxruntime-target"],
)
def test_refuses_a_checked_read_beside_slices_of_differing_sizes(reduce, target, opset):
    """The masked batch, cut and checked, costs more than the loop over a few chunks: refused
    where the slices stay padded (a maximum below opset 18 has no segment form) and by the
    onnxruntime target, which never batches such a loop."""
    text = CHECKED_SLICES.replace("REDUCE", reduce)
    if opset < 18:
        text = text.replace(
            "ReduceMax<keepdims = 0>(piece, zero1)", "ReduceMax<axes = [0], keepdims = 0>(piece)"
        )
    model = parse(text, opset=opset)
    assert "cuts slices whose bounds differ per element" in refusal(model, target)


def test_a_checked_read_beside_windows_held_flat():
    """The same sums, held flat (x's rows in the windows and a segment sum): batched, and
    reading past the bounds fails in both, as the loop's Gather does."""
    model = parse(CHECKED_SLICES.replace("REDUCE", "ReduceSum"))
    lowered, report = lower(model, target="generic")
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert "Loop" not in op_counts(lowered)
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    starts = np.array([[0], [4], [-2], [5], [3]], np.int64)
    ends = np.array([[2], [4], [9], [1], [-1]], np.int64)
    for trips in (5, 3, 0, 6, -1):
        feeds = {"m": np.array(trips), "x": x, "starts": starts, "ends": ends}
        assert assert_same_or_both_fail(model, lowered, feeds) == (trips <= 5)


# checked reads beside a running sum and a value carried one element late (`prev = t[i]`)
CARRIED = """g (int64 m, float[N,3] x, float[K,3] t, float[3] p0, float[3] a0)
              => (float[S,3] y, float[3] acc, float[3] last, float[S,3] prevs) {
    c = Constant<value = bool {1}>()
    acc, last, y, prevs = Loop(m, c, a0, p0) <body = body (int64 i, bool ci, float[3] a,
                                                          float[3] prev)
                                             => (bool co, float[3] a2, float[3] cur, float[3] r,
                                                 float[3] pv) {
        co = Identity(ci)
        e = Gather<axis = 0>(x, i)
        w = Gather<axis = 0>(t, i)
        r = Mul(e, w)
        a2 = Add(a, r)
        cur = Identity(w)
        pv = Identity(prev)
    }>
}"""


def test_checked_reads_beside_a_running_sum_and_a_value_read_late():
    model = parse(CARRIED)
    lowered = batched(model)
    for trips in (-1, 0, 2, 3, 5):
        for rows, table in ((0, 0), (0, 3), (2, 3), (5, 3), (5, 6), (3, 0)):
            feeds = {
                "m": np.array(trips),
                "x": RNG.standard_normal((rows, 3)).astype(np.float32),
                "t": RNG.standard_normal((table, 3)).astype(np.float32),
                "p0": RNG.standard_normal(3).astype(np.float32),
                "a0": RNG.standard_normal(3).astype(np.float32),
            }
            ran = assert_same_or_both_fail(model, lowered, feeds)
            assert ran == (trips <= min(rows, table))
