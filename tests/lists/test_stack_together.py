"""Lists that pass elements to one another are stacked together when induction proves their
one shape: a child-sum tree LSTM keeps the hidden and cell states of the nodes done in two
lists, collects each node's children from them into two lists that start from a zero state
`[1, 3]`, and pushes the node's new states, computed from the children's sums. Shape inference
knows no dim of what it pushes; assuming every element of the four lists is `[1, 3]`, the loop
analysis proves each push is `[1, 3]`, so each list is one stacked tensor `[n, 1, 3]`."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same_outputs, lower, parse, sequence_op_count


def _tree(h_push: str = "hnew = Add(th, hsum)", init: str = "") -> str:
    """`for i in range(n)`: children of node i (parent[j] == i, j < i) read from the lists of
    the nodes done, their states summed, node i's states pushed. `init` given: the zero state
    is a graph input of unknown rows instead of a constant."""
    zero_state = "" if init else "init = Constant<value = float[1,3] {0, 0, 0}>()"
    extra_input = ", float[?,3] init" if init else ""
    return f"""g (float[N,3] x, int64[N] parent, float[3,3] w{extra_input})
        => (float[?,?] y, float[?,?] z) {{
    t = Constant<value = bool {{1}}>()
    zero = Constant<value = int64 {{0}}>()
    axes0 = Constant<value = int64[1] {{0}}>()
    one1 = Constant<value = int64[1] {{1}}>()
    {zero_state}
    hs0 = SequenceEmpty<dtype = 1>()
    cs0 = SequenceEmpty<dtype = 1>()
    shape = Shape(x)
    n = Gather(shape, zero)
    hs, cs = Loop(n, t, hs0, cs0) <body = outer (int64 i, bool c,
            seq(float[?,?]) h_in, seq(float[?,?]) c_in)
            => (bool c2, seq(float[?,?]) h_out, seq(float[?,?]) c_out) {{
        kh0 = SequenceConstruct(init)
        kc0 = SequenceConstruct(init)
        kh, kc = Loop(i, t, kh0, kc0) <body = inner (int64 j, bool d,
                seq(float[?,?]) a, seq(float[?,?]) b)
                => (bool d2, seq(float[?,?]) a2, seq(float[?,?]) b2) {{
            p = Gather(parent, j)
            hit = Equal(p, i)
            a2, b2 = If(hit) <then_branch = th () => (seq(float[?,?]) ta, seq(float[?,?]) tb) {{
                eh = SequenceAt(h_in, j)
                ta = SequenceInsert(a, eh)
                ec = SequenceAt(c_in, j)
                tb = SequenceInsert(b, ec)
            }}, else_branch = el () => (seq(float[?,?]) ea, seq(float[?,?]) eb) {{
                ea = Identity(a)
                eb = Identity(b)
            }}>
            d2 = Identity(d)
        }}>
        hcat = ConcatFromSequence<axis = 0>(kh)
        hsum = ReduceSum<keepdims = 1>(hcat, axes0)
        ccat = ConcatFromSequence<axis = 0>(kc)
        csum = ReduceSum<keepdims = 1>(ccat, axes0)
        i1 = Unsqueeze(i, axes0)
        i2 = Add(i1, one1)
        xi = Slice(x, i1, i2, axes0)
        xw = MatMul(xi, w)
        cnew = Add(xw, csum)
        th = Tanh(cnew)
        {h_push}
        h_out = SequenceInsert(h_in, hnew)
        c_out = SequenceInsert(c_in, cnew)
        c2 = Identity(c)
    }}>
    y = ConcatFromSequence<axis = 0>(hs)
    z = ConcatFromSequence<axis = 0>(cs)
}}"""


def _expected(x, parent, w, init, doubled=False):  # type: ignore[no-untyped-def]
    hs: list[np.ndarray] = []
    cs: list[np.ndarray] = []
    for i in range(len(x)):
        kids = [j for j in range(i) if parent[j] == i]
        hsum = np.concatenate([init, *[hs[j] for j in kids]]).sum(0, keepdims=True)
        csum = np.concatenate([init, *[cs[j] for j in kids]]).sum(0, keepdims=True)
        c = x[i : i + 1] @ w + csum
        h = np.concatenate([np.tanh(c), hsum]) if doubled else np.tanh(c) + hsum
        hs.append(h)
        cs.append(c)
    return np.concatenate(hs), np.concatenate(cs)


def _feeds(parent: list[int]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(len(parent))
    return {
        "x": rng.standard_normal((len(parent), 3)).astype(np.float32),
        "parent": np.array(parent, np.int64),
        "w": rng.standard_normal((3, 3)).astype(np.float32),
    }


def _tiers(report) -> dict[str, set[str]]:  # type: ignore[no-untyped-def]
    found: dict[str, set[str]] = {}
    for node in report.nodes:
        if node.op_type.startswith("Sequence") or node.op_type == "ConcatFromSequence":
            found.setdefault(node.tier, set()).update(node.outputs)
    return found


# a chain (each node the parent of the one before), a star, one node, and nodes with no child
TREES = [[1, 2, 3, -1], [3, 3, 3, -1], [-1], [-1, -1, -1], [2, 2, 4, 4, -1]]


@pytest.mark.parametrize("parent", TREES)
def test_lists_that_feed_each_other_are_stacked_together(parent):
    model = parse(_tree())
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert set(_tiers(report)) == {"stacked"}
    feeds = _feeds(parent)
    y, z = assert_same_outputs(model, lowered, feeds)
    want_y, want_z = _expected(feeds["x"], parent, feeds["w"], np.zeros((1, 3), np.float32))
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z, want_z, rtol=1e-5, atol=1e-6)


def test_a_group_whose_push_has_another_shape_keeps_its_sizes_and_the_other_is_stacked():
    """A hidden state of two rows (`cat([tanh(c), hsum])`) fails the hypothesis `[1, 3]` for the
    hidden lists, which keep their sizes; the cell lists, proved without them, are stacked."""
    model = parse(_tree(h_push="hnew = Concat<axis = 0>(th, hsum)"))
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    tiers = _tiers(report)
    assert "stacked" in tiers and len(tiers) == 2, tiers
    assert "c_out" in tiers["stacked"] and "h_out" not in tiers["stacked"], tiers
    for parent in ([1, 2, -1], [2, 2, -1], [-1]):
        feeds = _feeds(parent)
        y, z = assert_same_outputs(model, lowered, feeds)
        want = _expected(feeds["x"], parent, feeds["w"], np.zeros((1, 3), np.float32), True)
        np.testing.assert_allclose(y, want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(z, want[1], rtol=1e-5, atol=1e-6)


def test_no_static_shape_in_the_group_is_no_hypothesis():
    """The zero state is an input of unknown rows: no list shows a static shape to assume, so
    no list is stacked; the result is the same for a state of two rows."""
    model = parse(_tree(init="input"))
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert "stacked" not in _tiers(report)
    for rows in (1, 2):
        feeds = _feeds([1, -1])
        feeds["init"] = np.ones((rows, 3), np.float32)
        y, z = assert_same_outputs(model, lowered, feeds)
        want_y, want_z = _expected(feeds["x"], [1, -1], feeds["w"], feeds["init"])
        np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(z, want_z, rtol=1e-5, atol=1e-6)
