"""`loop-concat-to-scan` on the onnxruntime target: tensors that one If grows under one mask
are compressed by it after the loop, and each is reshaped to the count the mask keeps; the
count is read once, from the first Compress (`Shape(.., 0, 1)`), and the negation of a mask
that grows in its else branch is made once:

    Reshape(Compress(p, m), Concat(Shape(Compress(p, m))[:1], ..)),
    Reshape(Compress(q, m), Concat(Shape(Compress(q, m))[:1], ..))
        -> k = Shape(Compress(p, m), 0, 1); Reshape(Compress(p, m), Concat(k, ..)),
           Reshape(Compress(q, m), Concat(k, ..))          (one Shape and one Concat fewer)

Each scan output of a Loop has one row per iteration, so one mask keeps as many rows of each.
The other targets count from the mask as before. Three ways: what is emitted (one Shape of a
Compress, one Not), what `_reader` does not take (a Compress along another axis, of a value
the Loop does not make, in another graph), and the outputs under onnxruntime at trip counts
0, 1, 2 and 5 with no, some and every row kept, for rows of a dim not known statically.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower_and_compare, op_counts, parse, rules_without

from seqlower.rules.loop_accumulators import _reader

WITHOUT_BATCHING = rules_without("loop-batch")

GROW = "Concat<axis = 0>(acc, u)"


def _model(negate: bool) -> str:
    """for i < m: if sum(x[i]) > 0 (or <= 0, `negate`): a.append(2 * x[i]); b.append(3 * x[i])
    over rows of D, a dim not known statically: each stack is reshaped after the loop."""
    grow_a, keep_a = "a1 = Concat<axis = 0>(acc, ua)", "a1 = Identity(acc)"
    grow_b, keep_b = "b1 = Concat<axis = 0>(accb, ub)", "b1 = Identity(accb)"
    then = (keep_a, keep_b) if negate else (grow_a, grow_b)
    other = (grow_a, grow_b) if negate else (keep_a, keep_b)
    return f"""g (float[N,D] x, float[?,D] a0, float[?,D] b0, int64 m) => (float[?,D] ya,
                                                                      float[?,D] yb) {{
    t = Constant<value = bool {{1}}>()
    ya, yb = Loop(m, t, a0, b0) <body = body (int64 i, bool c, float[?,D] acc, float[?,D] accb)
                                  => (bool c2, float[?,D] ga, float[?,D] gb) {{
        c2 = Identity(c)
        row = Gather<axis = 0>(x, i)
        s = ReduceSum<keepdims = 0>(row)
        zero = Constant<value = float {{0}}>()
        keep = Greater(s, zero)
        ax = Constant<value = int64[1] {{0}}>()
        two = Constant<value = float {{2}}>()
        three = Constant<value = float {{3}}>()
        ra = Mul(row, two)
        rb = Mul(row, three)
        ua = Unsqueeze(ra, ax)
        ub = Unsqueeze(rb, ax)
        ga, gb = If(keep) <then_branch = then_graph () => (float[?,D] a1, float[?,D] b1) {{
            {then[0]}
            {then[1]}
        }}, else_branch = else_graph () => (float[?,D] a1, float[?,D] b1) {{
            {other[0]}
            {other[1]}
        }}>
    }}>
}}"""


X = np.array([[1, -2, 3, 0], [-2, 0, -4, 1], [1, 1, 1, 1], [0, 0, -1, 0], [5, 0, 0, 0]], np.float32)


def _feeds(x: np.ndarray, m: int) -> dict[str, np.ndarray]:
    return {
        "x": x,
        "a0": np.full((1, x.shape[1]), 7, np.float32),
        "b0": np.zeros((0, x.shape[1]), np.float32),
        "m": np.array(m, np.int64),
    }


def _expected(x: np.ndarray, m: int, negate: bool) -> tuple[np.ndarray, np.ndarray]:
    rows = [x[i] for i in range(m) if (x[i].sum() > 0) != negate]
    ya = np.concatenate([np.full((1, x.shape[1]), 7, np.float32), *[2 * r[None] for r in rows]])
    yb = np.concatenate([np.zeros((0, x.shape[1]), np.float32), *[3 * r[None] for r in rows]])
    return ya, yb


def _count_reads(model) -> tuple[int, int]:
    """(Shapes that read a Compress, ReduceSums): how the counts were read."""
    graph = ir.from_proto(model).graph
    producers = {v: n for n in graph for v in n.outputs}
    shapes = sum(
        1
        for n in graph
        if n.op_type == "Shape" and getattr(producers.get(n.inputs[0]), "op_type", "") == "Compress"
    )
    return shapes, sum(1 for n in graph if n.op_type == "ReduceSum")


INPUTS = [
    (X, 0),
    (X, 1),
    (X, 2),
    (X, 5),
    (np.abs(X) + 1, 5),  # every row kept
    (-np.abs(X) - 1, 5),  # none
    (np.zeros((3, 0), np.float32), 3),  # rows of no element: sums 0, kept only when negated
]


@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize(("x", "m"), INPUTS)
def test_one_count_for_the_stacks_one_mask_keeps(negate, x, m):
    model = parse(_model(negate))
    lowered, report, (ya, yb) = lower_and_compare(
        model, _feeds(x, m), target="onnxruntime", rules=WITHOUT_BATCHING
    )
    want_a, want_b = _expected(x, m, negate)
    np.testing.assert_array_equal(ya, want_a)
    np.testing.assert_array_equal(yb, want_b)
    assert report.rules_fired["loop-concat-to-scan"] == 2
    ops = op_counts(lowered)
    assert ops["Compress"] == 2 and ops["Reshape"] == 2 and ops["If"] == 0
    assert _count_reads(lowered) == (1, 0)  # one Shape of a Compress, no ReduceSum
    assert ops["Not"] == int(negate)


@pytest.mark.parametrize("negate", [False, True])
@pytest.mark.parametrize(("x", "m"), INPUTS[:4])
def test_the_other_targets_count_from_the_mask(negate, x, m):
    model = parse(_model(negate))
    lowered, _, (ya, yb) = lower_and_compare(
        model, _feeds(x, m), target="generic", rules=WITHOUT_BATCHING
    )
    want_a, want_b = _expected(x, m, negate)
    np.testing.assert_array_equal(ya, want_a)
    np.testing.assert_array_equal(yb, want_b)
    assert _count_reads(lowered) == (0, 1)  # ReduceSum(Cast(mask)), once (merged)


READS = """g (float[N,D] x, int64 m) => (float[?,?] p, float[?,?] q, float[?,?] r, bool[?] n) {
    t = Constant<value = bool {1}>()
    s, k = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[D] row, bool keep) {
        c2 = Identity(c)
        row = Gather<axis = 0>(x, i)
        keep = Identity(c)
    }>
    p = Compress<axis = 1>(s, k)
    q = Compress<axis = 0>(x, k)
    r = If(t) <then_branch = a () => (float[?,?] r1) {
        r1 = Compress<axis = 0>(s, k)
    }, else_branch = b () => (float[?,?] r2) {
        r2 = Identity(x)
    }>
    n = Identity(k)
}"""


def test_reader_takes_only_a_compress_along_the_iterations_of_the_loops_scan():
    graph = ir.from_proto(parse(READS)).graph
    k = next(n for n in graph if n.op_type == "Loop").outputs[1]
    # along axis 1; of x, which the Loop does not make; in a branch; none is a Not
    assert _reader(k, "Compress") is None
    assert _reader(k, "Not") is None
    loop = k.producer()
    taken = ir.node("Compress", [loop.outputs[0], k], {"axis": 0})
    graph.append(taken)
    assert _reader(k, "Compress") is taken.outputs[0]
    negation = ir.node("Not", [k])
    graph.append(negation)
    assert _reader(k, "Not") is negation.outputs[0]
