"""Every SequenceLength of one split in one graph becomes one value (`length-of-split`): the
first rewrite builds the length, the later ones of the same walk of the graph read it, so n
lengths cost one Shape and Gather (and the split form's arithmetic once), plus an Identity per
graph output that needs a name of its own."""

from __future__ import annotations

import collections

import numpy as np
import onnx_ir as ir
import pytest
from support import (
    assert_both_fail,
    assert_same_or_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    rules_without,
    run_ort,
)

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.rewriter import Rewriter
from seqlower.rule import Context

# `{split}` makes s from x (and `sizes`/`chunk` where it reads them); n0..n{k-1} are outputs
SPLITS = {
    "whole": "s = SplitToSequence<axis = -2, keepdims = 0>(x)",
    "static scalar": """two = Constant<value = int64 {2}>()
    s = SplitToSequence<axis = 0>(x, two)""",
    "run-time scalar": "s = SplitToSequence<axis = 0>(x, chunk)",
    "run-time sizes": "s = SplitToSequence<axis = 0>(x, sizes)",
}


def _lengths(split: str, count: int):
    outputs = ", ".join(f"int64 n{k}" for k in range(count))
    # each length read from s or through an Identity of it, alternately
    reads = "\n    ".join(
        f"n{k} = SequenceLength({'s' if k % 2 == 0 else 't'})" for k in range(count)
    )
    return parse(f"""g (float[N,3] x, int32 chunk, int64[M] sizes) => ({outputs}) {{
    {SPLITS[split]}
    t = Identity(s)
    {reads}
}}""")


def _same_or_both_fail(model, lowered, feeds) -> list | None:
    """The outputs of both (equal) where the original runs, else None (both fail)."""
    try:
        run_ort(model, feeds)
    except Exception:  # onnxruntime raises its own error types
        assert_both_fail(model, lowered, feeds)
        return None
    return assert_same_outputs(model, lowered, feeds)


def _feeds(x_rows: int, chunk: int, sizes: list[int]) -> dict:
    return {
        "x": np.arange(3 * x_rows, dtype=np.float32).reshape(x_rows, 3),
        "chunk": np.array(chunk, np.int32),
        "sizes": np.array(sizes, np.int64),
    }


@pytest.mark.parametrize("split", list(SPLITS))
def test_lengths_of_one_split_are_one_value(split):
    one, _ = lower(_lengths(split, 1))
    model = _lengths(split, 4)
    lowered, report = lower(model)
    assert report.rules_fired == {"length-of-split": 4}
    # the length's nodes once; an Identity names each of the three other outputs
    want = op_counts(one)
    want["Identity"] += 3
    assert op_counts(lowered) == want
    assert [o.name for o in lowered.graph.output] == ["n0", "n1", "n2", "n3"]
    for rows, chunk, sizes in ((5, 2, [2, 3]), (0, 3, []), (4, 4, [0, 4, 0]), (6, 1, [6])):
        outputs = _same_or_both_fail(model, lowered, _feeds(rows, chunk, sizes))
        assert outputs is not None and len({int(n) for n in outputs}) == 1
    if split == "run-time sizes":  # sizes that do not add up: both fail
        assert_both_fail(model, lowered, _feeds(5, 2, [2, 2]))


def test_each_graph_builds_its_own_length_and_reads_it_there():
    """Lengths in a branch read the split around it: the branch gets one length of its own
    (built where it is needed, not in the graph around the If), the main graph another."""
    model = parse("""g (float[N,3] x, bool c) => (int64 n0, int64 n1, int64 y, int64 z) {
    s = SplitToSequence<axis = -2, keepdims = 0>(x)
    n0 = SequenceLength(s)
    t = Identity(s)
    n1 = SequenceLength(t)
    n2 = SequenceLength(s)
    z = Add(n2, n2)
    y = If(c) <then_branch = th () => (int64 a) {
        l1 = SequenceLength(s)
        l2 = SequenceLength(t)
        a = Mul(l1, l2)
    }, else_branch = el () => (int64 b) {
        b = SequenceLength(s)
    }>
}""")
    lowered, report = lower(model)
    assert report.rules_fired == {"length-of-split": 6}
    (if_node,) = (node for node in lowered.graph.node if node.op_type == "If")
    main = collections.Counter(node.op_type for node in lowered.graph.node)
    assert (main["Shape"], main["Gather"], main["Identity"]) == (1, 1, 1)
    for branch in if_node.attribute:
        assert collections.Counter(node.op_type for node in branch.g.node)["Gather"] == 1
    for rows in (0, 1, 5):
        for c in (True, False):
            feeds = {"x": np.zeros((rows, 3), np.float32), "c": np.array(c)}
            n0, n1, y, z = assert_same_outputs(model, lowered, feeds)
            assert (n0, n1, y, z) == (rows, rows, rows * rows if c else rows, 2 * rows)


def test_lengths_of_different_forms_of_one_split_stay_apart():
    """The length that is only the trip count of a Loop reading every chunk leaves empty sizes
    unchecked (`_length_of_sizes`, `empty_read`); another length of the same split, a graph
    output, keeps the full check: two values, not one."""
    model = parse("""g (float[N,3] x, int64[M] sizes, float[3] start) => (float[3] total, int64 m) {
    s = SplitToSequence<axis = 0>(x, sizes)
    n = SequenceLength(s)
    m = SequenceLength(s)
    t = Constant<value = bool {1}>()
    total = Loop(n, t, start) <body = body (int64 i, bool c, float[3] acc)
            => (bool c2, float[3] more) {
        c2 = Identity(c)
        piece = SequenceAt(s, i)
        zero = Constant<value = int64[1] {0}>()
        sum = ReduceSum<keepdims = 0>(piece, zero)
        more = Add(acc, sum)
    }>
}""")
    lowered, report = lower(model, target="generic", rules=rules_without("loop-batch"))
    assert report.rules_fired["length-of-split"] == 2
    # the empty case (Min) in the output's length only, the Loop counting the other
    assert op_counts(lowered)["Min"] == 1
    (loop,) = (node for node in lowered.graph.node if node.op_type == "Loop")
    assert loop.input[0] != "m"
    start = np.array([1.0, 2.0, 3.0], np.float32)
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    for sizes in ([1, 2, 3], [6], [0, 6, 0], [2, 2], [7, -1]):
        feeds = {"x": x, "sizes": np.array(sizes, np.int64), "start": start}
        assert_same_or_both_fail(model, lowered, feeds)


def test_a_remembered_value_whose_node_was_removed_is_not_reused():
    model = ir.from_proto(parse("""g (float[N] x) => (float y) { y = Neg(x) }"""))
    graph = model.graph
    context = Context(Facts(model), Rewriter(model), Options())
    value = context.rewriter.before(graph.node(0)).op("Abs", [graph.inputs[0]])
    context.remember("key", graph, value)
    assert context.built_earlier("key", graph) is value
    assert context.built_earlier("other key", graph) is None
    body = ir.Graph([], [], nodes=[])
    assert context.built_earlier("key", body) is None  # remembered for the main graph only
    graph.remove(value.producer())
    assert context.built_earlier("key", graph) is None
