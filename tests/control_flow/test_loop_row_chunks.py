"""loop-batch-row-chunks: a Loop over consecutive row chunks of a tensor (`for i in range(0, n, k):
out.append(f(x[i:i + k]))`, then `torch.cat(out, 0)`, as nerf-pytorch's `batchify_rays`), whose
f keeps rows apart, becomes f applied once to the rows the loop reads.

Checked three ways: what it emits (no Loop left), what it refuses and why (an operator that
mixes rows, a step computed at run time, an operand that broadcasts along the rows, a tensor
whose shape is read from the rows' values), and onnxruntime outputs for row counts that fill the
chunks or not, none at all, and trip counts that read fewer rows than there are, more iterations
than rows, or a negative one.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, lower_and_compare, op_counts, parse, rules_without

from seqlower.options import Options
from seqlower.passes import NormalizePass
from seqlower.passes.lower import LowerSequencesPass

W = ", ".join(str(v) for v in np.linspace(-1, 1, 12).round(3))


def _chunks(f: str, dtype: str = "float", step: str = "int64 {3}", trip: str = "") -> str:
    """Two accumulators of f's row-wise results over chunks of 3 rows of x (T iterations: the
    given count, or ceil(n / 3) as TorchScript computes it)."""
    count = (
        """nf = Cast<to = 1>(n)
    three_f = Constant<value = float {3}>()
    q = Div(nf, three_f)
    up = Ceil(q)
    T = Cast<to = 7>(up)"""
        if not trip
        else "T = Identity(trip)"
    )
    head = f"{dtype}[N,4] x" + (", int64 trip" if trip else "")
    return f"""g ({head}) => ({dtype}[?,4] y, {dtype}[?] z) {{
    zero = Constant<value = int64 {{0}}>()
    shape = Shape(x)
    n = Gather(shape, zero)
    {count}
    t = Constant<value = bool {{1}}>()
    y0_shape = Constant<value = int64[2] {{0, 4}}>()
    y0 = ConstantOfShape<value = {dtype}[1] {{0}}>(y0_shape)
    z0_shape = Constant<value = int64[1] {{0}}>()
    z0 = ConstantOfShape<value = {dtype}[1] {{0}}>(z0_shape)
    y, z = Loop(T, t, y0, z0) <body = body (int64 i, bool c, {dtype}[?,4] ya, {dtype}[?] za)
                                       => (bool c2, {dtype}[?,4] yb, {dtype}[?] zb) {{
        c2 = Identity(c)
        k = Constant<value = {step}>()
        start = Mul(i, k)
        end = Add(start, k)
        ax = Constant<value = int64[1] {{0}}>()
        s1 = Unsqueeze(start, ax)
        e1 = Unsqueeze(end, ax)
        chunk = Slice(x, s1, e1, ax)
        {f}
        yb = Concat<axis = 0>(ya, out)
        zb = Concat<axis = 0>(za, row)
    }}>
}}"""


MLP = f"""w = Constant<value = float[4,4] {{{W}, 0.5, -0.5, 0.25, 1.5}}>()
        b = Constant<value = float[4] {{0.1, -0.2, 0.3, 0}}>()
        cols = Constant<value = int64[1] {{1}}>()
        m = MatMul(chunk, w)
        h = Add(m, b)
        out = Relu(h)
        whole = Constant<value = int64[1] {{0}}>()
        big = Constant<value = int64[1] {{9223372036854775807}}>()
        all_rows = Slice(out, whole, big, whole)
        cum = CumSum(all_rows, cols)
        e = Exp(cum)
        ones = Shape(e)
        like = ConstantOfShape<value = float[1] {{1}}>(ones)
        wide = Concat<axis = 1>(e, like)
        two = Constant<value = int64[1] {{2}}>()
        fin = Constant<value = int64[1] {{6}}>()
        mid = Slice(wide, two, fin, cols)
        row = ReduceSum<keepdims = 0>(mid, cols)"""

INTS = """cols = Constant<value = int64[1] {1}>()
        twice = Add(chunk, chunk)
        out = CumSum(twice, cols)
        idx = Constant<value = int64 {3}>()
        row = Gather<axis = 1>(out, idx)"""

X = (np.arange(28, dtype=np.float32).reshape(7, 4) - 13) / 7


def _reference(x: np.ndarray, count: int, floats: bool) -> tuple[np.ndarray, np.ndarray]:
    """What the loop computes, chunk by chunk."""
    ys, zs = [np.zeros((0, 4), x.dtype)], [np.zeros((0,), x.dtype)]
    w = np.array([*np.linspace(-1, 1, 12).round(3), 0.5, -0.5, 0.25, 1.5], np.float32)
    for i in range(max(count, 0)):
        chunk = x[3 * i : 3 * i + 3]
        if floats:
            out = np.maximum(chunk @ w.reshape(4, 4) + [0.1, -0.2, 0.3, 0], 0).astype(x.dtype)
            wide = np.concatenate([np.exp(np.cumsum(out, 1)), np.ones_like(out)], 1)
            ys.append(out)
            zs.append(wide[:, 2:6].sum(1))
        else:
            out = np.cumsum(chunk + chunk, 1)
            ys.append(out)
            zs.append(out[:, 3])
    return np.concatenate(ys), np.concatenate(zs)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 7])  # none, fewer than a chunk, one full, one more
def test_row_chunks_mapped_row_wise_become_one_map(n):
    model = parse(_chunks(MLP))
    lowered, report, (y, z) = lower_and_compare(model, {"x": X[:n]})
    want_y, want_z = _reference(X[:n], -(-n // 3), floats=True)
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    np.testing.assert_allclose(z, want_z, rtol=1e-5)
    assert report.rules_fired["loop-batch-row-chunks"] == 1
    assert op_counts(lowered)["Loop"] == 0 and op_counts(lowered)["MatMul"] == 1


@pytest.mark.parametrize("dtype,numpy_type", [("int64", np.int64), ("int32", np.int32)])
@pytest.mark.parametrize("trip", [-2, 0, 1, 2, 3, 100])  # negative, none, a part, all, past
@pytest.mark.parametrize("n", [0, 7])
def test_any_trip_count_reads_the_rows_the_loop_reads(dtype, numpy_type, trip, n):
    model = parse(_chunks(INTS, dtype, trip="given"))
    x = (np.arange(28, dtype=numpy_type).reshape(7, 4) - 9)[:n]
    lowered, report, (y, z) = lower_and_compare(model, {"x": x, "trip": np.array(trip)})
    want_y, want_z = _reference(x, trip, floats=False)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(z, want_z)
    assert report.rules_fired["loop-batch-row-chunks"] == 1 and op_counts(lowered)["Loop"] == 0


@pytest.mark.parametrize(
    "change,reason",
    [
        (("CumSum(twice, cols)", "CumSum(twice, ax)"), "body op CumSum works along the rows"),
        (
            (
                "row = Gather<axis = 1>(out, idx)",
                "row = ReduceSum<keepdims = 0>(out, cols)\n"
                "        rs = ReduceSum<keepdims = 0>(out, ax)\n        bad = Add(out, rs)",
            ),
            "body op ReduceSum reduces the rows",
        ),
        (
            (
                "twice = Add(chunk, chunk)",
                "three_rows = Constant<value = int64[3,1] {1, 2, 3}>()\n"
                "        twice = Add(chunk, three_rows)",
            ),
            "operand 'three_rows' may broadcast along the rows",
        ),
        (
            (
                "row = Gather<axis = 1>(out, idx)",
                "col = Gather<axis = 1>(out, idx)\n"
                "        three = Constant<value = int64 {3}>()\n"
                "        pos = Abs(col)\n        dims = Min(pos, three)\n"
                "        filled = ConstantOfShape<value = int64[1] {1}>(dims)\n"
                "        cells = Size(filled)\n        row = Add(col, cells)",
            ),
            "body op ConstantOfShape is not the shape of a value of the map",
        ),
    ],
    ids=["cumsum-rows", "reduce-rows", "broadcast-rows", "shape-from-data"],
)
def test_a_map_that_mixes_rows_is_refused(change, reason):
    text = _chunks(INTS, "int64").replace(*change)
    if "bad" in text:
        text = text.replace("yb = Concat<axis = 0>(ya, out)", "yb = Concat<axis = 0>(ya, bad)")
    model = parse(text)
    lowered, report = lower(model)
    assert f"loop-batch-row-chunks: {reason}" in _loop_reasons(lowered, report, model)
    x = np.arange(28, dtype=np.int64).reshape(7, 4) - 9
    for n in (0, 3, 6):  # whole chunks only: a shorter one fails to broadcast in the original
        lower_and_compare(model, {"x": x[:n]})


def test_a_step_computed_at_run_time_is_refused():
    text = _chunks(INTS, "int64").replace("k = Constant<value = int64 {3}>()", "k = Identity(T)")
    model = parse(text)
    lowered, report = lower(model)
    assert "loop-batch-row-chunks: the chunk step is not a positive constant" in _loop_reasons(
        lowered, report, model
    )
    x = np.arange(28, dtype=np.int64).reshape(7, 4) - 9
    for n in (1, 2, 7):
        lower_and_compare(model, {"x": x[:n]})


def _loop_reasons(lowered, report, model) -> str:  # type: ignore[no-untyped-def]
    """The rule's refusals of the Loop that stays, at the fixpoint (a Loop of tensors only is
    no sequence op left, so the report does not list it), without loop-concat-to-scan, which
    takes a loop whose pieces keep one shape after this rule refused it."""
    assert op_counts(lowered)["Loop"] == 1
    graph = ir.from_proto(model)
    NormalizePass(Options())(graph)
    lowering = LowerSequencesPass(rules_without("loop-concat-to-scan"), Options())
    lowering(graph)
    return "\n".join(r for rs in lowering.refusals.values() for r in rs)
