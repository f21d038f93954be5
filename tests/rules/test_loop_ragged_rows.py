"""loop-ragged-rows: a Loop over the elements of a list held as flat rows and a sizes table
(what the list tier leaves) whose body is row-wise runs once on the flat rows, the iteration
number of each row its segment id."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, lower_and_compare, op_counts, parse, rule_check, run_ort

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes.dead_code import remove_dead_nodes
from seqlower.passes.normalize import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import loop_ragged_rows

RNG = np.random.default_rng(5)

# yolov5's `torch.cat([torch.cat([o, torch.full_like(o[:, :1], k)], 1) for k, o in
# enumerate(output)])` once `output` is rows x and sizes: element k is x[starts[k]:ends[k]]
ROWS = """g ({dtype}[T,3] x, int64[K] raw) => ({dtype}[?,4] y) {{
    zero = Constant<value = int64 {{0}}>()
    one = Constant<value = int64[1] {{1}}>()
    sizes = {sizes}
    ends = CumSum(sizes, zero)
    starts = Sub(ends, sizes)
    su = Unsqueeze(starts, one)
    eu = Unsqueeze(ends, one)
    n = Size(sizes)
    t = Constant<value = bool {{1}}>()
    shape0 = Constant<value = int64[2] {{0, 4}}>()
    acc0 = ConstantOfShape<value = {dtype}[1] {{0}}>(shape0)
    y = Loop(n, t, acc0) <body = b (int64 i, bool c, {dtype}[?,4] acc)
                              => (bool c2, {dtype}[?,4] grown) {{
        c2 = Identity(c)
        s = Gather(su, i)
        e = Gather(eu, i)
        el = Slice(x, s, e)
        {body}
        grown = Concat<axis = 0>(acc, r)
    }}>
}}"""

FULL_LIKE = """b0 = Constant<value = int64[1] {{0}}>()
        b1 = Constant<value = int64[1] {{1}}>()
        col = Slice(el, b0, b1, b1)
        sh = Shape(col)
        zs = ConstantOfShape<value = {dtype}[1] {{0}}>(sh)
        fi = Cast<to = {code}>(i)
        full = Add(zs, fi)
        r = Concat<axis = 1>(el, full)"""


def _rows(body=None, *, dtype="float", code=1, sizes="Abs(raw)"):
    body = body or FULL_LIKE.format(dtype=dtype, code=code)
    return parse(ROWS.format(dtype=dtype, body=body, sizes=sizes))


def _expected(x, sizes):
    ids = np.repeat(np.arange(len(sizes)), sizes).astype(x.dtype)
    total = int(np.sum(sizes))
    return np.concatenate([x[:total], ids[:, None]], 1)


@pytest.mark.parametrize(
    "sizes", [[2, 0, 3], [4], [0, 0], [], [1, 1, 1, 1, 1]], ids=["empty-element", "one",
                                                                   "all-empty", "no-element",
                                                                   "ones"]
)  # fmt: skip
@pytest.mark.parametrize("dtype,code,np_dtype", [("float", 1, np.float32), ("int32", 6, np.int32),
                                                 ("double", 11, np.float64)])  # fmt: skip
def test_full_like_of_each_element_is_the_segment_id_of_each_row(sizes, dtype, code, np_dtype):
    model = _rows(dtype=dtype, code=code)
    x = (RNG.standard_normal((sum(sizes) + 2, 3)) * 10).astype(np_dtype)  # rows past the last
    raw = -np.array(sizes, np.int64)  # Abs: never negative
    lowered, report, (y,) = lower_and_compare(model, {"x": x, "raw": raw})
    np.testing.assert_array_equal(y, _expected(x, sizes))
    assert y.dtype == np_dtype
    assert report.rules_fired["loop-ragged-rows"] == 1
    counts = op_counts(lowered)
    assert "Loop" not in counts
    assert counts["ScatterElements"] == 1 and counts["CumSum"] == 2  # the ends, the ids
    assert counts["Expand"] == 1 and counts["Add"] == 1  # full_like: the ids expanded (T + 1)


def test_the_lowering_is_deterministic():
    first, _ = lower(_rows())
    second, _ = lower(_rows())
    assert first.SerializeToString() == second.SerializeToString()


# DETR's `torch.cat([torch.full_like(s, i) for i, (s, _) in enumerate(zip(srcs, tgts))])`
# once the lists are tensors: only the sizes of srcs are read, the trip count is the zip's
ZIP = """g (int64[K] raw, int64[L] other) => (int64[?] y) {
    sizes = Abs(raw)
    big = Constant<value = int64[1] {9223372036854775807}>()
    zero = Constant<value = int64 {0}>()
    n1 = Size(sizes)
    n2 = Size(other)
    zero1 = Constant<value = int64[1] {0}>()
    u1 = Unsqueeze(n1, zero1)
    u2 = Unsqueeze(n2, zero1)
    all = Concat<axis = 0>(big, u1, u2)
    m = ReduceMin<keepdims = 0>(all)
    t = Constant<value = bool {1}>()
    shape0 = Constant<value = int64[1] {0}>()
    acc0 = ConstantOfShape<value = int64[1] {0}>(shape0)
    y = Loop(m, t, acc0) <body = b (int64 i, bool c, int64[?] acc) => (bool c2, int64[?] grown) {
        c2 = Identity(c)
        one_d = Constant<value = int64[1] {1}>()
        pos = Reshape(i, one_d)
        k = Gather(sizes, pos)
        z = ConstantOfShape<value = int64[1] {0}>(k)
        r = Add(z, i)
        grown = Concat<axis = 0>(acc, r)
    }>
}"""


@pytest.mark.parametrize(
    "sizes,other", [([3, 0, 3], 3), ([3, 1, 2], 2), ([2], 0), ([], 4), ([0, 5], 2)]
)
def test_a_zip_reads_the_sizes_table_up_to_the_shorter_list(sizes, other):
    model = parse(ZIP)
    feeds = {"raw": np.array(sizes, np.int64), "other": np.zeros(other, np.int64)}
    lowered, report, (y,) = lower_and_compare(model, feeds)
    count = min(len(sizes), other)
    np.testing.assert_array_equal(y, np.repeat(np.arange(count), sizes[:count]))
    assert report.rules_fired["loop-ragged-rows"] == 1
    counts = op_counts(lowered)
    assert "Loop" not in counts and "Expand" not in counts  # the ids are the result


def _refusal(model) -> str:
    found = rule_check(model, loop_ragged_rows._check, "Loop")
    assert isinstance(found, Refusal), found
    return found.reason


@pytest.mark.parametrize(
    "body,why",
    [
        ("b1 = Constant<value = int64[1] {0}>()\n        m = ReduceSum<keepdims = 1>(el, b1)\n"
         "        q = Sub(el, m)\n        a1 = Constant<value = int64[1] {1}>()\n"
         "        p = Slice(q, b1, a1, a1)\n"
         "        r = Concat<axis = 1>(el, p)", "ReduceSum is not known"),
        ("w = Gather(x, i)\n        z0 = Constant<value = int64[1] {0}>()\n"
         "        u = Unsqueeze(w, z0)\n        q = Add(el, u)\n"
         "        a0 = Constant<value = int64[1] {0}>()\n"
         "        a1 = Constant<value = int64[1] {1}>()\n        p = Slice(q, a0, a1, a1)\n"
         "        r = Concat<axis = 1>(el, p)", "Gather is not known"),
        ("b0 = Constant<value = int64[1] {0}>()\n        b1 = Constant<value = int64[1] {1}>()\n"
         "        p = Slice(el, b0, b1, b0)\n        s1 = Slice(el, b0, b1, b1)\n"
         "        q = Add(s1, p)\n        r = Concat<axis = 1>(el, q)", "a Slice along the rows"),
    ],
    ids=["reduction-across-rows", "another-element", "slice-of-rows"],
)  # fmt: skip
def test_a_body_that_is_not_row_wise_is_refused(body, why):
    model = _rows(body)
    assert why in _refusal(model)
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    _, report, _ = lower_and_compare(model, {"x": x, "raw": np.array([2, 0, 3], np.int64)})
    assert "loop-ragged-rows" not in report.rules_fired


def test_an_operand_that_broadcasts_along_the_rows_is_refused():
    """`el[:, :1] + w`, w of two rows: each element would broadcast against w (or fail)."""
    body = """w = Constant<value = float[2,1] {1, 2}>()
        a0 = Constant<value = int64[1] {0}>()
        a1 = Constant<value = int64[1] {1}>()
        sl = Slice(el, a0, a1, a1)
        q = Add(sl, w)
        r = Concat<axis = 1>(el, q)"""
    assert "broadcast" in _refusal(_rows(body))


def test_sizes_that_may_be_negative_are_refused_and_both_models_agree():
    model = _rows(sizes="Identity(raw)")
    assert "negative" in _refusal(model)
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    lowered, report = lower(model)
    assert "loop-ragged-rows" not in report.rules_fired
    feeds = {"x": x, "raw": np.array([3, -1, 2], np.int64)}
    np.testing.assert_array_equal(run_ort(model, feeds)[0], run_ort(lowered, feeds)[0])


def test_an_accumulator_read_otherwise_is_refused():
    body = FULL_LIKE.format(dtype="float", code=1)
    body = body.replace("r = Concat<axis = 1>(el, full)", "q = Concat<axis = 1>(el, full)\n"
                        "        k = Shape(acc)\n        kk = Cast<to = 1>(k)\n"
                        "        b2 = Constant<value = int64[1] {0}>()\n"
                        "        g0 = Gather(kk, b2)\n        r = Add(q, g0)")  # fmt: skip
    assert "more than its Concat" in _refusal(_rows(body))


# a list of tensors held flat (each element's values, then its shape in a table of shapes):
# what the list tier makes of `out.append(torch.cat([o, torch.full_like(o[:, :1], k)], 1))`
HELD_FLAT = """g (float[T,3] x, int64[K] raw) => (float[?] y, int64[?,1,2] shapes) {
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64[1] {1}>()
    sizes = Abs(raw)
    ends = CumSum(sizes, zero)
    starts = Sub(ends, sizes)
    su = Unsqueeze(starts, one)
    eu = Unsqueeze(ends, one)
    n = Size(sizes)
    t = Constant<value = bool {1}>()
    shape0 = Constant<value = int64[1] {0}>()
    acc0 = ConstantOfShape<value = float[1] {0}>(shape0)
    y, shapes = Loop(n, t, acc0) <body = b (int64 i, bool c, float[?] acc)
                                   => (bool c2, float[?] grown, int64[1,2] row) {
        c2 = Identity(c)
        s = Gather(su, i)
        e = Gather(eu, i)
        el = Slice(x, s, e)
        b0 = Constant<value = int64[1] {0}>()
        b1 = Constant<value = int64[1] {1}>()
        big = Constant<value = int64[1] {9223372036854775807}>()
        whole = Slice(el, b0, big, b0)
        col = Slice(whole, b0, b1, b1)
        sh = Shape(col)
        zs = ConstantOfShape<value = float[1] {0}>(sh)
        fi = Cast<to = 1>(i)
        full = Add(zs, fi)
        r = Concat<axis = 1>(el, full)
        flat = Constant<value = int64[1] {-1}>()
        values = Reshape(r, flat)
        grown = Concat<axis = 0>(acc, values)
        rs = Shape(r)
        as_row = Constant<value = int64[2] {1, -1}>()
        row = Reshape(rs, as_row)
    }>
}"""


@pytest.mark.parametrize("sizes", [[2, 0, 3], [], [0], [1, 4]])
def test_a_list_held_flat_and_its_table_of_shapes(sizes):
    """The values of every element end to end are the flat values of the rows; the table of
    shapes is each element's rows beside the other dims; a Slice over all the rows is row-wise."""
    model = parse(HELD_FLAT)
    x = RNG.standard_normal((sum(sizes) + 1, 3)).astype(np.float32)
    feeds = {"x": x, "raw": np.array(sizes, np.int64)}
    lowered, report, (y, shapes) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, _expected(x, sizes).reshape(-1))
    want = np.array([[k, 4] for k in sizes], np.int64).reshape(len(sizes), 1, 2)
    np.testing.assert_array_equal(shapes, want, strict=True)
    assert report.rules_fired["loop-ragged-rows"] == 1
    assert "Loop" not in op_counts(lowered)


def test_a_trip_count_not_bounded_by_the_table_is_refused_and_both_models_agree():
    """Loop(M, ..) with M given: past the table's end the element read fails in the loop."""
    model = parse(
        ZIP.replace("int64[L] other", "int64 m")
        .replace("    n2 = Size(other)\n", "")
        .replace("    u2 = Unsqueeze(n2, zero1)\n", "")
        .replace("    all = Concat<axis = 0>(big, u1, u2)\n", "")
        .replace("    m = ReduceMin<keepdims = 0>(all)\n", "")
    )
    assert "at most the sizes table's length" in _refusal(model)
    lowered, report = lower(model)
    assert "loop-ragged-rows" not in report.rules_fired
    feeds = {"raw": np.array([2, 1], np.int64), "m": np.array(2, np.int64)}
    np.testing.assert_array_equal(run_ort(lowered, feeds)[0], [0, 0, 1])


@pytest.mark.parametrize("model_text", [None, HELD_FLAT], ids=["rows", "held-flat"])
@pytest.mark.parametrize("rows", [0, 1, 3, 4])
def test_sizes_that_run_past_the_rows_read_what_each_slice_clamps_to(model_text, rows):
    """sizes [2, 0, 3] over x of fewer than 5 rows: each element's Slice clamps to x's end (the
    last elements hold fewer rows, or none), and so do the ids and the table of shapes."""
    model = _rows() if model_text is None else parse(model_text)
    x = RNG.standard_normal((rows, 3)).astype(np.float32)
    feeds = {"x": x, "raw": np.array([2, 0, 3], np.int64)}
    lowered, report, outputs = lower_and_compare(model, feeds)
    assert report.rules_fired["loop-ragged-rows"] == 1
    assert "Loop" not in op_counts(lowered)
    ids = np.repeat(np.arange(3), [2, 0, 3])[:rows].astype(np.float32)
    np.testing.assert_array_equal(outputs[0].reshape(rows, 4), np.concatenate([x, ids[:, None]], 1))


def test_sizes_past_the_rows_keep_the_clamp_when_unproved():
    """x and the sizes are the graph's inputs, not a list the list tier made: nothing proves
    Sum(sizes) == rows(x), so the ids are cut to rows(x[:T]) (a Shape of the cut rows) and the
    table of shapes takes each element's clamped rows (Min)."""
    lowered, report = lower(parse(HELD_FLAT))
    assert report.rules_fired["loop-ragged-rows"] == 1
    counts = op_counts(lowered)
    assert counts["Min"] == 2 and counts["Shape"] >= 1


# yolov5's per-image lists: a loop puts each image's kept rows in a list (a ragged list the list
# tier holds as rows and first dims; scaled by a running sum, so that no rule batches it), x
# appended after the loop (so that the loops do not fuse), a second loop joins them, each with
# its number in the list
BUILT = """g (float[N,3] x, int64[K] raw) => (float[?,4] y, int64[?,1,2] shapes) {
    t = Constant<value = bool {1}>()
    k = Size(raw)
    none = SequenceEmpty<dtype = 1>()
    w0 = Constant<value = float {1}>()
    w, xs = Loop(k, t, w0, none) <body = b1 (int64 i, bool c, float v, seq(float[?,3]) acc)
                                     => (bool c1, float v1, seq(float[?,3]) out) {
        c1 = Identity(c)
        z1 = Constant<value = int64[1] {0}>()
        i1 = Unsqueeze(i, z1)
        n1 = Gather(raw, i1)
        na = Abs(n1)
        rows = Slice(x, z1, na, z1)
        kept = Mul(rows, v)
        total = ReduceSum<keepdims = 0>(kept)
        v1 = Add(v, total)
        out = SequenceInsert(acc, kept)
    }>
    ys = SequenceInsert(xs, x)
    n = SequenceLength(ys)
    shape0 = Constant<value = int64[2] {0, 4}>()
    acc0 = ConstantOfShape<value = float[1] {0}>(shape0)
    y, shapes = Loop(n, t, acc0) <body = b2 (int64 j, bool c, float[?,4] acc)
                                      => (bool c2, float[?,4] grown, int64[1,2] sh) {
        c2 = Identity(c)
        el = SequenceAt(ys, j)
        b0 = Constant<value = int64[1] {0}>()
        b1 = Constant<value = int64[1] {1}>()
        col = Slice(el, b0, b1, b1)
        cs = Shape(col)
        zs = ConstantOfShape<value = float[1] {0}>(cs)
        fj = Cast<to = 1>(j)
        full = Add(zs, fj)
        r = Concat<axis = 1>(el, full)
        rs = Shape(r)
        one2 = Constant<value = int64[2] {1, -1}>()
        sh = Reshape(rs, one2)
        grown = Concat<axis = 0>(acc, r)
    }>
}"""


@pytest.mark.parametrize(
    "raw",
    [[2, 0, 3], [4], [0], [], [-1, -5, 2]],
    ids=["three", "one", "one-empty", "none", "negated"],
)  # fmt: skip
def test_a_list_the_list_tier_made_needs_no_clamp(raw):
    """The list tier made the rows and the first dims as one list (Sum(firsts) == rows): the
    batch reads the rows whole, the ids are [:T] and the table of shapes is the first dims (no
    Slice of the rows, no Shape of it, no Min)."""
    model = parse(BUILT)
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    feeds = {"x": x, "raw": np.array(raw, np.int64)}
    lowered, report, (y, shapes) = lower_and_compare(model, feeds)
    assert report.rules_fired["loop-ragged-rows"] == 1
    counts = op_counts(lowered)
    assert "Loop" in counts and counts["Loop"] == 1  # the building loop only
    assert "Min" not in counts
    sizes = [min(abs(v), 5) for v in raw] + [5]
    pieces, scale = [], np.float32(1)
    for k, size in enumerate(sizes):
        kept = x[:size] * scale if k < len(raw) else x
        scale = scale + kept.sum(dtype=np.float32) if k < len(raw) else scale
        pieces.append(np.concatenate([kept, np.full((size, 1), k, np.float32)], 1))
    np.testing.assert_allclose(y, np.concatenate(pieces), rtol=1e-5)
    np.testing.assert_array_equal(y[:, 3], np.repeat(np.arange(len(sizes)), sizes))
    np.testing.assert_array_equal(shapes.reshape(-1, 2), [[s, 4] for s in sizes])


def _applied(model, recorded: tuple[str, ...]):
    """The rule applied to `model`'s Loop with the pairs (each of `recorded`, sizes) recorded
    as the list tier records a ragged list's rows and first dims."""
    graph_model = ir.from_proto(model)
    infer_shapes(graph_model)
    rewriter = Rewriter(graph_model)
    values = {v.name: v for n in graph_model.graph for v in n.outputs}
    values.update({v.name: v for v in graph_model.graph.inputs})
    for name in recorded:
        rewriter.record_row_table(values[name], values["sizes"])
    context = Context(Facts(graph_model), rewriter, Options())
    node = next(n for n in graph_model.graph if n.op_type == "Loop")
    plan = loop_ragged_rows._check(node, context)
    assert not isinstance(plan, Refusal), plan
    loop_ragged_rows._rows(node, plan, context)
    remove_dead_nodes(graph_model)
    return ir.to_proto(graph_model)


@pytest.mark.parametrize(
    "recorded,clamped",
    [(("x",), False), ((), True), (("sizes",), True), (("sizes", "x"), False)],
    ids=["rows-of-the-table", "nothing-recorded", "recorded-with-other-data", "two-lists"],
)
def test_the_clamp_goes_only_for_the_rows_recorded_with_the_table(recorded, clamped):
    """With x and the sizes recorded as one list's (Sum(sizes) == rows(x), as the list tier
    guarantees), x is read whole: no Slice of it, no Shape of the cut, no Min; with nothing
    recorded, or the table recorded with other data only, the clamp stays (one table may be
    recorded with the data of several lists)."""
    model = parse(HELD_FLAT)
    lowered = _applied(model, recorded)  # the rule alone: the pipeline's tests check the rest
    counts = op_counts(lowered)
    assert "Loop" not in counts
    assert ("Min" in counts) == clamped
    sizes = [2, 0, 3]
    x = RNG.standard_normal((5, 3)).astype(np.float32)  # rows == Sum(sizes): both agree
    feeds = {"x": x, "raw": np.array(sizes, np.int64)}
    for want, got in zip(run_ort(model, feeds), run_ort(lowered, feeds), strict=True):
        np.testing.assert_array_equal(got, want, strict=True)
