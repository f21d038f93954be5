"""NonZero in a loop body (`torch.where(row == eos)[0]`) batches as a ragged value: the positions
of every element, padded, with the mask of those each element holds. Its readers: Transpose,
Squeeze, Unsqueeze (the mask moves along), Shape and Size (the count per element), a Gather at a
constant position along the ragged axis (the i-th held position; it fails where an element holds
too few, as Gather does) and the masked reductions. An If whose condition differs per element
runs each branch on its own rows only (`seqlower.batching.branches`).

Three ways: what it emits (no Loop, NonZero or If left), what it refuses and why, and the same
outputs as the original under onnxruntime, with no element, elements of no position, rows that
hold none, one or every position.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    rule_check,
)

from seqlower.rule import Refusal
from seqlower.rules import loop_batching

RNG = np.random.default_rng(35)

# lengths.append(int(eos[POS]) + 1 if eos.numel() > 0 else T), eos = torch.where(row == 2)[0]
FIRST_EOS = """g (int64[K,T] tokens) => (int64[K] lengths) {{
    t = Constant<value = bool {{1}}>()
    shape = Shape(tokens)
    zero = Constant<value = int64 {{0}}>()
    n = Gather(shape, zero)
    lengths = Loop(n, t) <body = body (int64 k, bool c) => (bool c2, int64 length) {{
        c2 = Identity(c)
        row = Gather<axis = 0>(tokens, k)
        two = Constant<value = int64 {{2}}>()
        eos = Equal(row, two)
        nz = NonZero(eos)
        pos = Transpose<perm = [1, 0]>(nz)
        unit = Constant<value = int64[1] {{1}}>()
        flat = Squeeze(pos, unit)
        dims_of_flat = Shape(flat)
        size = {count}
        none = Constant<value = int64 {{0}}>()
        some = Greater(size, none)
        length = If(some) <then_branch = then () => (int64 first) {{
            p = Constant<value = int64 {{{position}}}>()
            at = Gather(flat, p)
            plus = Constant<value = int64 {{1}}>()
            first = Add(at, plus)
        }}, else_branch = other () => (int64 whole) {{
            dims = Shape(tokens)
            second = Constant<value = int64 {{1}}>()
            whole = Gather(dims, second)
        }}>
    }}>
}}"""
SIZE = "Size(flat)"
SHAPE_PRODUCT = """ReduceProd<keepdims = 0>(dims_of_flat)"""


def first_eos(position: int = 0, count: str = SIZE):
    return parse(FIRST_EOS.format(position=position, count=count), opset=17)


def tokens(k: int, t: int) -> np.ndarray:
    return RNG.integers(0, 4, size=(k, t)).astype(np.int64)


FEEDS = [
    tokens(5, 6),
    np.array([[5, 2, 3, 2], [4, 4, 4, 4], [2, 1, 1, 1], [2, 2, 2, 2]], np.int64),
    np.zeros((0, 4), np.int64),  # no element
    np.zeros((3, 0), np.int64),  # elements of no position
    np.array([[1, 1, 2]], np.int64),
]


def assert_batched(model, feeds) -> None:
    __tracebackhide__ = True
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    ops = op_counts(lowered)
    assert not {"Loop", "NonZero", "If"} & set(ops), ops
    for feed in feeds:
        assert_same_outputs(model, lowered, {"tokens": feed})
    return lowered


@pytest.mark.parametrize("count", [SIZE, SHAPE_PRODUCT])
@pytest.mark.parametrize("position", [0, -1])
def test_first_and_last_held_position_under_a_guard(position, count):
    lowered = assert_batched(first_eos(position, count), FEEDS)
    # the guarded branch runs on its own rows: a Compress picks them, a ScatterND puts them back
    ops = op_counts(lowered)
    assert ops["Compress"] == 1 and ops["ScatterND"] == 1
    assert "CumSum" not in ops  # the first and the last held positions are an ArgMax each


@pytest.mark.parametrize("position", [1, -2])
def test_another_position_fails_where_an_element_holds_too_few(position):
    model = first_eos(position)
    lowered = lower(model)[0]
    assert "CumSum" in op_counts(lowered)
    many = np.array([[2, 2, 0], [1, 2, 2], [2, 2, 2]], np.int64)
    assert_same_outputs(model, lowered, {"tokens": many})
    assert_same_outputs(model, lowered, {"tokens": np.zeros((2, 3), np.int64)})  # none: else
    # one EOS: the guard (some) lets the Gather at 1 run, and it fails in both
    assert_both_fail(model, lowered, {"tokens": np.array([[2, 2], [0, 2]], np.int64)})


# the count alone: (row != 0).nonzero().shape[0] of a [3, 2] element (coordinates of rank 2)
COUNT_2D = """g (float[K,3,2] x) => (int64[K] counts, int64[K] firsts) {
    t = Constant<value = bool {1}>()
    shape = Shape(x)
    zero = Constant<value = int64 {0}>()
    n = Gather(shape, zero)
    counts, firsts = Loop(n, t) <body = body (int64 k, bool c)
                                  => (bool c2, int64 count, int64 first) {
        c2 = Identity(c)
        row = Gather<axis = 0>(x, k)
        nz = NonZero(row)
        dims = Shape<start = 1>(nz)
        count = Squeeze(dims)
        cols = Transpose<perm = [1, 0]>(nz)
        at = Constant<value = int64[1] {1}>()
        col = Unsqueeze(cols, at)
        total = ReduceSum<keepdims = 0>(col)
        first = Identity(total)
    }>
}"""


def test_the_count_and_a_sum_of_the_coordinates_of_rank_two_elements():
    model = parse(COUNT_2D, opset=17)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1
    assert not {"Loop", "NonZero"} & set(op_counts(lowered))
    x = RNG.standard_normal((4, 3, 2)).astype(np.float32)
    x[x < 0.3] = 0
    x[1] = 0
    x[2, 1, 0] = np.nan  # NaN is not zero
    for feed in (x, np.zeros((0, 3, 2), np.float32)):
        assert_same_outputs(model, lowered, {"x": feed})


def _refusal(text: str) -> str:
    found = rule_check(parse(text, opset=17), loop_batching._check, "Loop")
    assert isinstance(found, Refusal)
    return found.reason


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        # a position that differs per element
        ("p = Constant<value = int64 {{{position}}}>()", "p = Identity(k)", "differ per element"),
        # the ragged axis squeezed away
        ("flat = Squeeze(pos, unit)", "flat = Squeeze(nz, unit)", "Squeeze of the axis"),
        # branches of different shapes
        ("whole = Gather(dims, second)", "whole = Identity(dims)", "different or unknown shapes"),
    ],
)
def test_refuses(old, new, why):
    text = FIRST_EOS.replace(old, new).format(position=0, count=SIZE)
    assert why in _refusal(text)


def test_refuses_nonzero_of_an_element_of_dynamic_rank_two():
    text = COUNT_2D.replace("float[K,3,2] x", "float[K,M,2] x")
    assert "rank above 1 whose dims are not all static" in _refusal(text)


# an If whose branch would fail on the rows that do not take it: table[i] if i < len(table) else -1
GUARDED_READ = """g (int64[K] idx, float[L] table) => (float[K] y) {
    t = Constant<value = bool {1}>()
    shape = Shape(idx)
    zero = Constant<value = int64 {0}>()
    n = Gather(shape, zero)
    y = Loop(n, t) <body = body (int64 k, bool c) => (bool c2, float v) {
        c2 = Identity(c)
        i = Gather<axis = 0>(idx, k)
        dims = Shape(table)
        first = Constant<value = int64 {0}>()
        size = Gather(dims, first)
        inside = Less(i, size)
        v = If(inside) <then_branch = then () => (float read) {
            read = Gather(table, i)
        }, else_branch = other () => (float missing) {
            missing = Constant<value = float {-1}>()
        }>
    }>
}"""


def test_a_branch_runs_only_on_the_rows_that_take_it():
    model = parse(GUARDED_READ, opset=17)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1
    assert not {"Loop", "If"} & set(op_counts(lowered))
    table = RNG.standard_normal(4).astype(np.float32)
    for idx in ([0, 7, 3, 4, 1], [9, 8], [], [2]):
        feeds = {"idx": np.array(idx, np.int64), "table": table}
        assert_same_outputs(model, lowered, feeds)
    # no row takes the read: an empty table is never read
    empty = {"idx": np.array([0, 3], np.int64), "table": np.zeros(0, np.float32)}
    assert_same_outputs(model, lowered, empty)


def _index_of_gather_elements(model) -> str:
    """The op that makes the indices of the one GatherElements of `model`."""
    nodes = list(model.graph.node)
    (gather,) = [n for n in nodes if n.op_type == "GatherElements"]
    return next(n.op_type for n in nodes if gather.input[1] in n.output)


def test_the_position_read_from_an_element_of_rank_one_is_not_expanded():
    # the mask and the positions are both [N, T]: the ArgMax's [N, 1] is the index as it is
    lowered = assert_batched(first_eos(0), FEEDS)
    assert _index_of_gather_elements(lowered) == "Where"


# the coordinates of the first nonzero entry of each [3, 2] element: rank 2, ragged axis 1
FIRST_2D = """g (float[K,3,2] x) => (int64[K,2] firsts) {
    t = Constant<value = bool {1}>()
    shape = Shape(x)
    zero = Constant<value = int64 {0}>()
    n = Gather(shape, zero)
    firsts = Loop(n, t) <body = body (int64 k, bool c) => (bool c2, int64[2] first) {
        c2 = Identity(c)
        row = Gather<axis = 0>(x, k)
        nz = NonZero(row)
        at = Constant<value = int64 {POSITION}>()
        first = Gather<axis = 1>(nz, at)
    }>
}"""


@pytest.mark.parametrize("position", [0, -1, 1])
def test_the_position_read_from_an_element_of_rank_two_is_expanded(position):
    model = parse(FIRST_2D.replace("POSITION", str(position)), opset=17)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert _index_of_gather_elements(lowered) == "Expand"
    x = RNG.standard_normal((4, 3, 2)).astype(np.float32)
    x[1] = 0.0
    x[1, 2, 1] = 1.0  # one nonzero entry only: the read at 1 fails in both
    x[2, 0, 0] = 0.0
    many = np.ones((3, 3, 2), np.float32)
    assert_same_outputs(model, lowered, {"x": many})
    assert_same_outputs(model, lowered, {"x": np.zeros((0, 3, 2), np.float32)})
    if position in (0, -1):
        assert_same_outputs(model, lowered, {"x": x})
    else:
        assert_both_fail(model, lowered, {"x": x})
    assert_both_fail(model, lowered, {"x": np.zeros((2, 3, 2), np.float32)})  # none held
