"""loop-batch gives a branch the rows of the iteration numbers it reads, not a Gather of them.

An If whose condition differs per element runs each branch on the rows that take it, and gives
the branch every batched value it reads at those rows, Gather(value, rows) with rows a Compress
of Range(0, N). The iteration numbers of a batched loop are Range(0, M), and the batch has M
rows (every read cut to M, or checked, or proved to hold M), so their Gather at rows is the rows
(`Emitter.at_rows`): a Gather and the Range it read go, and the Gather could not have failed
(every row is below N <= M).

Tested three ways: what it emits (no Gather of a Range), what keeps its Gather (a batched value
other than the iteration numbers, the iteration number plus one computed outside the branch),
and the same outputs as the original under onnxruntime, or a failure in both, at every length
from none up, with no, some and every row taking the branch.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import assert_same_or_both_fail, lower, op_counts, parse, run_ort

# for i in range(x.size(0) - TAKEN): out.append(x[i] * i if x[i].sum() > 0 else -x[i])
BRANCHED = """g (float[N,3] x) => (float[S,3] y) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = int64 {0}>()
    fzero = Constant<value = float {0}>()
    taken = Constant<value = int64 {TAKEN}>()
    dims = Shape(x)
    n = Gather<axis = 0>(dims, zero)
    m = Sub(n, taken)
    y = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] r) {
        c2 = Identity(c)
        e = Gather<axis = 0>(x, i)
        s = ReduceSum<keepdims = 0>(e)
        p = Greater(s, fzero)
        k = Identity(i)
        r = If(p) <then_branch = th () => (float[3] a) {
            f = Cast<to = 1>(READ)
            a = Mul(e, f)
        }, else_branch = el () => (float[3] b) {
            b = Neg(e)
        }>
    }>
}"""

# the same loop, M given at run time (may exceed the rows: the read is checked)
RUN_TIME = BRANCHED.replace("(float[N,3] x)", "(float[N,3] x, int64 m)").replace(
    "m = Sub(n, taken)", "unused = Sub(n, taken)"
)


def batched(model: onnx.ModelProto, **options) -> onnx.ModelProto:
    lowered, report = lower(model, **options)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert "Loop" not in op_counts(lowered)
    return lowered


def gathers_of_ranges(lowered: onnx.ModelProto) -> int:
    """How many Gathers read the output of a Range."""
    ranges = {o for n in lowered.graph.node if n.op_type == "Range" for o in n.output}
    return sum(n.op_type == "Gather" and n.input[0] in ranges for n in lowered.graph.node)


def inputs(rows: int, signs: str, rng: np.random.Generator) -> np.ndarray:
    """rows of x whose sums are positive (branch taken) for none, some or every row."""
    x = np.abs(rng.standard_normal((rows, 3))).astype(np.float32) + 0.5
    if signs == "none":
        return -x
    if signs == "some":
        x[::2] *= -1
    return x


SIGNS = ("none", "some", "every")


@pytest.mark.parametrize("taken", [0, 1, 2])
@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_the_iteration_numbers_at_the_rows_of_a_branch_are_those_rows(taken, target):
    model = parse(BRANCHED.replace("TAKEN", str(taken)).replace("READ", "i"))
    lowered = batched(model, target=target)
    assert gathers_of_ranges(lowered) == 0
    rng = np.random.default_rng(71)
    for rows in (0, 1, 2, 5):  # m < 0 for rows < taken: no iteration, no row
        for signs in SIGNS:
            feeds = {"x": inputs(rows, signs, rng)}
            assert assert_same_or_both_fail(model, lowered, feeds)
            (y,) = run_ort(lowered, feeds)
            assert y.shape == (max(rows - taken, 0), 3)


def test_a_trip_count_given_at_run_time_fails_where_the_loop_fails():
    """M past the rows: the read's check fails, as the loop's read does; M <= 0: nothing."""
    model = parse(RUN_TIME.replace("TAKEN", "0").replace("READ", "i"))
    lowered = batched(model)
    assert gathers_of_ranges(lowered) == 0
    rng = np.random.default_rng(72)
    ran = set()
    for m in (-2, 0, 1, 3, 4):
        for rows in (0, 1, 3):
            for signs in SIGNS:
                feeds = {"x": inputs(rows, signs, rng), "m": np.array(m, np.int64)}
                if assert_same_or_both_fail(model, lowered, feeds):
                    ran.add((m, rows))
    assert ran == {(m, r) for m in (-2, 0, 1, 3, 4) for r in (0, 1, 3) if m <= r}


@pytest.mark.parametrize("read", ["i", "k"])
def test_a_copy_of_the_iteration_numbers_is_read_at_the_rows_too(read):
    """k = Identity(i), read in the branch: the same Range, no Gather of it either."""
    model = parse(BRANCHED.replace("TAKEN", "1").replace("READ", read))
    lowered = batched(model)
    assert not any(
        n.op_type == "Gather" and n.input[0].endswith(("iteration_numbers", "Identity"))
        for n in lowered.graph.node
    )
    assert op_counts(lowered)["Gather"] == 3  # x's rows to each branch, Shape(x)[0]
    rng = np.random.default_rng(73)
    for rows in (0, 1, 2, 5):
        for signs in SIGNS:
            assert assert_same_or_both_fail(model, lowered, {"x": inputs(rows, signs, rng)})


def test_a_value_computed_from_the_iteration_numbers_keeps_its_gather():
    """i + i, computed outside the branch, is not the Range: read at the rows by a Gather."""
    text = BRANCHED.replace("TAKEN", "1").replace("k = Identity(i)", "k = Add(i, i)")
    model = parse(text.replace("READ", "k"))
    lowered = batched(model)
    produced = {o: n.op_type for n in lowered.graph.node for o in n.output}
    kept = [
        n for n in lowered.graph.node if n.op_type == "Gather" and produced.get(n.input[0]) == "Add"
    ]
    assert len(kept) == 1
    rng = np.random.default_rng(74)
    for rows in (0, 1, 2, 5):
        for signs in SIGNS:
            assert assert_same_or_both_fail(model, lowered, {"x": inputs(rows, signs, rng)})
