"""Chunks of a split read elementwise and concatenated back (`torch.cat([g - g.mean(0,
keepdim=True) for g in x.split(sizes)])`, GraphNorm's centring, a softmax over each segment)
held as the split tensor's own rows and the chunk of each row: a per-chunk value is one Gather at
the ids, the concatenation is the rows themselves, the reductions are segment reductions; no
padding, no mask, no Compress (`seqlower.batching.rows`). Checked: what it emits, which bodies
keep the padded form and why, and that it computes what the original does under onnxruntime
(empty chunks, one chunk, a chunk of one row, the empty list, a negative axis, float16, double,
int32 and int64) and fails where the split fails."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_both_fail, lower, lower_and_compare, op_counts, parse, run_ort

from seqlower import runtime_quirks
from seqlower.analysis import Facts
from seqlower.batching.rows import rows_of_chunk
from seqlower.options import Options
from seqlower.passes.normalize import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import loop_batching

RNG = np.random.default_rng(53)

# for g in x.split(sizes, AXIS): rows.append(Y); other.append(Z); cat(rows, AXIS), stack(other)
LOOP = """g ({dtype}[{shape}] x, int64[K] sizes) => ({dtype}[{out}] rows, {dtype}[?,{c}] other) {{
    t = Constant<value = bool {{1}}>()
    parts = SplitToSequence<axis = {axis}>(x, sizes)
    n = SequenceLength(parts)
    e1 = SequenceEmpty<dtype = {code}>()
    e2 = SequenceEmpty<dtype = {code}>()
    s1, s2 = Loop(n, t, e1, e2) <body = body (int64 i, bool c, seq({dtype}) a1, seq({dtype}) a2)
                                   => (bool c2, seq({dtype}) g1, seq({dtype}) g2) {{
        c2 = Identity(c)
        part = SequenceAt(parts, i)
        ax = Constant<value = int64[1] {{{axis}}}>()
        {body}
        g1 = SequenceInsert(a1, y)
        g2 = SequenceInsert(a2, z)
    }}>
    rows = ConcatFromSequence<axis = {axis}>(s1)
    other = ConcatFromSequence<axis = 0, new_axis = 1>(s2)
}}"""
CENTRED = """m = ReduceMean<axes = [{axis}], keepdims = 1>(part)
        y = Sub(part, m)
        z = ReduceSum<keepdims = 0>(part, ax)"""
# GraphNorm: centred, scaled by the deviation, with a constant per column
NORM = """m = ReduceMean<axes = [{axis}], keepdims = 1>(part)
        d = Sub(part, m)
        two = Constant<value = {dtype} {{2}}>()
        sq = Pow(d, two)
        v = ReduceMean<axes = [{axis}], keepdims = 1>(sq)
        eps = Constant<value = {dtype} {{1}}>()
        ve = Add(v, eps)
        sd = Sqrt(ve)
        y = Div(d, sd)
        z = ReduceSum<keepdims = 0>(sq, ax)"""
SOFTMAX = """top = ReduceMax(part, ax)
        d = Sub(part, top)
        e = Exp(d)
        total = ReduceSum(e, ax)
        y = Div(e, total)
        z = ReduceMax<keepdims = 0>(part, ax)"""
INT_CENTRED = """s = ReduceSum(part, ax)
        y = Sub(part, s)
        z = ReduceSum<keepdims = 0>(part, ax)"""
# pyg_unbatch's body: a maximum below opset 18 reads the padded chunk
WITH_MAX = """m = ReduceMean<axes = [{axis}], keepdims = 1>(part)
        y = Sub(part, m)
        z = ReduceMax<axes = [{axis}], keepdims = 0>(part)"""
# no value per chunk: the rows read no id, the split's check cuts them
SCALED = """two = Constant<value = {dtype} {{2}}>()
        y = Mul(part, two)
        z = ReduceSum<keepdims = 0>(part, ax)"""
CODES = {"float": 1, "double": 11, "int32": 6, "int64": 7, "float16": 10}
NUMPY = {"float": np.float32, "double": np.float64, "int32": np.int32, "int64": np.int64}
NUMPY["float16"] = np.float16
SIZES = [[2, 3, 4], [1], [5], [4, 0, 2], [0, 0, 5], [3, 0], [1, 1, 1]]


def _model(body: str, dtype: str = "float", axis: int = 0, opset: int = 17, width: int = 3):  # type: ignore[no-untyped-def]
    last = axis in (1, -1)
    shape = f"{width},N" if last else f"N,{width}"
    out = f"{width},?" if last else f"?,{width}"
    text = LOOP.format(
        dtype=dtype,
        code=CODES[dtype],
        shape=shape,
        out=out,
        c=width,
        axis=axis,
        body=body.format(axis=axis, dtype=dtype),
    )
    return parse(text, opset=opset)


def _feeds(sizes: list[int], dtype: str = "float", axis: int = 0, width: int = 3):  # type: ignore[no-untyped-def]
    rows = max(sum(sizes), 0)
    shape = (width, rows) if axis in (1, -1) else (rows, width)
    x = RNG.standard_normal(shape) * 4
    return {"x": x.astype(NUMPY[dtype]), "sizes": np.array(sizes, np.int64)}


def _held_as_rows(lowered) -> bool:  # type: ignore[no-untyped-def]
    """No loop, no padded chunks: nothing compares slots with the chunk bounds, nothing
    compresses a padded stack, and a Gather reads the chunk of each row."""
    counts = op_counts(lowered)
    padded = {"Loop", "GreaterOrEqual", "Compress"}
    made = {out: node for node in lowered.graph.node for out in node.output}
    at_ids = [
        node
        for node in lowered.graph.node
        if node.op_type == "Gather"
        and node.input[1] in made
        and made[node.input[1]].op_type == "Slice"
        and made[made[node.input[1]].input[0]].op_type == "CumSum"
    ]
    return not padded & set(counts) and bool(at_ids)


def _decision(model) -> set | str:  # type: ignore[no-untyped-def,type-arg]
    """What `rows_of_chunk` decides for the loop's chunk: the values held as rows, or why not."""
    graph_model = ir.from_proto(model)
    infer_shapes(graph_model)
    ctx = Context(Facts(graph_model), Rewriter(graph_model), Options())
    node = next(n for n in graph_model.graph if n.op_type == "Loop")
    plan = loop_batching._check(node, ctx)
    assert not isinstance(plan, Refusal), plan
    (read,) = plan.reads
    joins = dict(plan.joined)
    joined = {tensor: joins[k] for k, tensor in plan.appends if k in joins}
    opset = ctx.rewriter.opset(node.graph)
    chunk = read.node.outputs[0]
    return rows_of_chunk(plan.body, chunk, read.ragged.axis, joined, ctx.facts.values, opset)


def _split(x: np.ndarray, sizes: list[int], axis: int) -> list[np.ndarray]:
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


@pytest.mark.parametrize(
    ("body", "opset"),
    [(CENTRED, 17), (NORM, 17), (SOFTMAX, 18)],
    ids=["centred", "graph-norm", "softmax-18"],
)
def test_chunks_read_elementwise_are_held_as_rows(body, opset):
    model = _model(body, opset=opset)
    assert isinstance(_decision(model), set)
    for sizes in SIZES:
        if "ReduceMax" in body and 0 in sizes and runtime_quirks.holds("empty-reductions"):
            continue  # onnxruntime 1.20 fails the original's maximum of an empty chunk
        feeds = _feeds(sizes)
        lowered, report, (rows, _) = lower_and_compare(model, feeds)
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
        assert _held_as_rows(lowered), op_counts(lowered)
        assert rows.shape == feeds["x"].shape


def test_the_centred_rows_are_what_numpy_gives():
    model = _model(CENTRED)
    feeds = _feeds([2, 0, 1, 4])
    lowered, _ = lower(model)
    rows, sums = run_ort(lowered, feeds)
    pieces = _split(feeds["x"], [2, 0, 1, 4], 0)
    want = np.concatenate([p - p.mean(0, keepdims=True) for p in pieces if len(p)])
    np.testing.assert_allclose(rows, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sums, np.stack([p.sum(0) for p in pieces]), rtol=1e-5, atol=1e-5)
    counts = op_counts(lowered)
    # the ends marked and the means summed: two scatters; the means read at the rows: one Gather
    assert counts["ScatterElements"] == 3 and counts["CumSum"] == 2


def test_the_softmax_over_each_segment_is_what_numpy_gives():
    model = _model(SOFTMAX, opset=18)
    sizes = [3, 1, 0, 4]
    feeds = _feeds(sizes)
    lowered, _ = lower(model)
    rows, _ = run_ort(lowered, feeds)
    pieces = _split(feeds["x"], sizes, 0)
    want = np.concatenate(
        [np.exp(p - p.max(0)) / np.exp(p - p.max(0)).sum(0) for p in pieces if len(p)]
    )
    np.testing.assert_allclose(rows, want, rtol=1e-5, atol=1e-6)
    assert op_counts(lowered)["Exp"] == 1  # once over the rows, not over padded slots


@pytest.mark.parametrize("axis", [1, -1])
def test_chunks_along_the_last_axis(axis):
    # (the stacked means read axis 1 as written: onnxruntime 1.20 gives [3, 0] for a mean over
    # an empty axis written -1, where the specification and 1.32 give [3])
    model = _model(
        CENTRED.replace(
            "ReduceSum<keepdims = 0>(part, ax)", "ReduceMean<axes = [1], keepdims = 0>(part)"
        ),
        axis=axis,
    )
    for sizes in ([2, 3], [4], [1, 0, 3]):
        feeds = _feeds(sizes, axis=axis)
        lowered, report, (rows, _) = lower_and_compare(model, feeds)
        assert report.rules_fired.get("loop-batch") == 1
        assert _held_as_rows(lowered), op_counts(lowered)
        pieces = _split(feeds["x"], sizes, 1)
        want = np.concatenate([p - p.mean(1, keepdims=True) for p in pieces if p.size], axis=1)
        np.testing.assert_allclose(rows, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("dtype", "body"), [("double", NORM), ("int32", INT_CENTRED), ("int64", INT_CENTRED)]
)
def test_other_types(dtype, body):
    model = _model(body, dtype=dtype)
    for sizes in ([2, 3, 4], [1], [4, 0, 2]):
        lowered, _, (rows, _) = lower_and_compare(model, _feeds(sizes, dtype))
        assert _held_as_rows(lowered), op_counts(lowered)
        assert rows.dtype == NUMPY[dtype]


def test_the_empty_list_gives_no_row():
    """The original's concatenation of no chunk fails; the lowered model gives [0, 3], as every
    batched loop does for a list it holds as a tensor."""
    lowered, _ = lower(_model(CENTRED))
    rows, sums = run_ort(lowered, _feeds([]))
    assert rows.shape == (0, 3) and sums.shape == (0, 3)


@pytest.mark.parametrize("body", [CENTRED, SCALED], ids=["per-chunk-value", "no-per-chunk-value"])
@pytest.mark.parametrize(
    "sizes", [[2, 2], [4, 3, 1], [5, -1, 2]], ids=["short", "long", "negative"]
)
def test_sizes_that_do_not_split_the_tensor_fail_as_the_split_does(body, sizes):
    model = _model(body)
    lowered, _ = lower(model)
    assert "Compress" not in op_counts(lowered)
    feeds = {"x": RNG.standard_normal((6, 3)).astype(np.float32), "sizes": np.array(sizes)}
    assert_both_fail(model, lowered, feeds)


def test_rows_that_read_no_per_chunk_value_are_the_checked_rows():
    model = _model(SCALED)
    for sizes in ([2, 3], [0, 4], [1]):
        feeds = _feeds(sizes)
        lowered, _, (rows, _) = lower_and_compare(model, feeds)
        np.testing.assert_allclose(rows, feeds["x"] * 2)
        assert "Compress" not in op_counts(lowered)


DERIVED_MAX = """m = ReduceMean<axes = [{axis}], keepdims = 1>(part)
        y = Sub(part, m)
        p = Relu(y)
        z = ReduceMax<axes = [{axis}], keepdims = 0>(p)"""
NOT_JOINED = """m = ReduceMean<axes = [{axis}], keepdims = 1>(part)
        d = Sub(part, m)
        y = ReduceSum<keepdims = 1>(d, ax)
        z = ReduceSum<keepdims = 0>(part, ax)"""


@pytest.mark.parametrize(
    ("body", "dtype", "width", "why"),
    [
        (WITH_MAX, "float", 3, "ReduceMax reads a chunk otherwise than by a segment reduction"),
        (DERIVED_MAX, "float", 3, "ReduceMax reads a chunk otherwise than by a segment reduction"),
        (CENTRED, "float16", 3, "ReduceMean reads a chunk otherwise than by a segment reduction"),
        (CENTRED, "float", 16, "ReduceMean reads a chunk otherwise than by a segment reduction"),
        (NOT_JOINED, "float", 3, "no value computed from the chunk elementwise is concatenated"),
    ],
    ids=["max-below-opset-18", "max-of-a-derived-value", "float16", "rows-of-16", "not-joined"],
)
def test_other_readers_keep_the_padded_form(body, dtype, width, why):
    """Where a chunk or a value made from it is read otherwise than by a reduction with a
    segment form (a maximum below opset 18, float16, rows wider than the segment forms take,
    nothing concatenated back), the padded chunks serve every reader, as before."""
    model = _model(body, dtype=dtype, width=width)
    found = _decision(model)
    assert isinstance(found, str) and why in found, found
    for sizes in ([2, 3, 4], [1], [4, 1, 2]):
        lowered, report, _ = lower_and_compare(model, _feeds(sizes, dtype, width=width))
        assert report.rules_fired.get("loop-batch") == 1
        assert not _held_as_rows(lowered), op_counts(lowered)


def test_a_nan_makes_only_its_own_chunk_nan():
    """The segment sum of a chunk holding a NaN is NaN, so are its centred rows (as in the
    loop); the other chunks' rows are untouched (a NaN is not scattered beyond its chunk)."""
    model = _model(CENTRED)
    sizes = [2, 3, 1]
    feeds = _feeds(sizes)
    feeds["x"][3, 1] = np.nan
    lowered, _, (rows, sums) = lower_and_compare(model, feeds)
    assert _held_as_rows(lowered), op_counts(lowered)
    nan_at = np.argwhere(np.isnan(rows)).tolist()
    assert nan_at == [[2, 1], [3, 1], [4, 1]]  # column 1 of the second chunk (rows 2 to 4)
    assert np.isnan(sums).tolist() == [[False] * 3, [False, True, False], [False] * 3]
