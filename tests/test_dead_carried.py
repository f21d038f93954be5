"""Values a Loop carries, scan outputs and If outputs that nothing needs are removed, with the
work that computes them; every value something needs stays (the condition, another needed
carried value, a scan output or If output that is read, a graph output); the result computes
what the original computes under onnxruntime, for 0, 1 and more iterations."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, op_counts, parse, rules_without

from seqlower.passes.dead_carried import remove_dead_carried

# `a` is read after the loop; `t` grows by a Concat every iteration and its final value is not
_GROWN = """
agraph (int64 n, float[3] x) => (float[3] a_out) {
  yes = Constant <value = bool {1}> ()
  empty = Constant <value = float[0] {}> ()
  a_out, t_out = Loop (n, yes, x, empty) <body = body (int64 i, bool c, float[3] a, float[?] t)
      => (bool c_out, float[3] a2, float[?] t2) {
    c_out = Identity (c)
    a2 = Add (a, x)
    s = Shape <start = 0, end = 1> (a)
    f = Cast <to = 1> (s)
    t2 = Concat <axis = -1> (t, f)
  }>
}"""


def _removed(text: str) -> tuple[onnx.ModelProto, int]:
    model = ir.from_proto(parse(text))
    count = remove_dead_carried(model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    return proto, count


def _body(model: onnx.ModelProto, op: str = "Loop") -> onnx.GraphProto:
    (node,) = (n for n in model.graph.node if n.op_type == op)
    return node.attribute[0].g


def _same(original: onnx.ModelProto, removed: onnx.ModelProto, feeds: list[dict]) -> None:
    for feed in feeds:
        assert_same_outputs(original, removed, feed)


def _counts(n: int, **more: np.ndarray) -> list[dict]:
    x = np.array([1.0, -2.0, 3.5], np.float32)
    return [{"n": np.array(k, np.int64), "x": x, **more} for k in (0, 1, n)]


def test_a_grown_value_whose_final_value_is_unread_goes_with_its_work():
    removed, count = _removed(_GROWN)
    assert count == 1
    body = _body(removed)
    assert [v.name for v in body.input] == ["i", "c", "a"]
    assert [v.name for v in body.output] == ["c_out", "a2"]
    assert {n.op_type for n in body.node} == {"Identity", "Add"}  # Shape, Cast, Concat went
    (loop,) = (n for n in removed.graph.node if n.op_type == "Loop")
    assert list(loop.input) == ["n", "yes", "x"] and list(loop.output) == ["a_out"]
    assert "empty" not in {o for n in removed.graph.node for o in n.output}
    _same(parse(_GROWN), removed, _counts(4))


def test_what_the_condition_or_a_needed_value_reads_stays():
    by_condition = _GROWN.replace(
        "c_out = Identity (c)",
        "k = Size (t)\n    lim = Constant <value = int64 {2}> ()\n    c_out = Less (k, lim)",
    )
    assert _removed(by_condition)[1] == 0  # the loop stops after two iterations
    _same(parse(by_condition), _removed(by_condition)[0], _counts(5))
    by_value = _GROWN.replace(
        "a2 = Add (a, x)", "m = ReduceSum <keepdims = 0> (t)\n    a2 = Add (a, m)"
    )
    assert _removed(by_value)[1] == 0
    returned = _GROWN.replace("(float[3] a_out)", "(float[3] a_out, float[?] t_out)")
    assert _removed(returned)[1] == 0  # a graph output


def test_values_that_only_feed_each_other_go_together():
    text = """
agraph (int64 n, float[3] x) => (float[3] a_out) {
  yes = Constant <value = bool {1}> ()
  one = Constant <value = float {1}> ()
  two = Constant <value = float {2}> ()
  a_out, u_out, v_out = Loop (n, yes, x, one, two) <body = body (int64 i, bool c, float[3] a,
      float u, float v) => (bool c_out, float[3] a2, float u2, float v2) {
    c_out = Identity (c)
    a2 = Add (a, x)
    u2 = Add (v, one)
    v2 = Mul (u, two)
  }>
}"""
    removed, count = _removed(text)
    assert count == 2
    assert [v.name for v in _body(removed).input] == ["i", "c", "a"]
    _same(parse(text), removed, _counts(3))


def test_an_if_output_that_feeds_only_an_unneeded_value_goes_from_both_branches():
    # a list's rows and row counts, grown in one branch, only the rows read (a ragged list)
    text = """
agraph (int64 n, float[N,3] x) => (float[?,3] rows_out) {
  yes = Constant <value = bool {1}> ()
  no_rows = Constant <value = float[0,3] {}> ()
  no_counts = Constant <value = int64[0] {}> ()
  rows_out, counts_out = Loop (n, yes, no_rows, no_counts) <body = body (int64 i, bool c,
      float[?,3] rows, int64[?] counts) => (bool c_out, float[?,3] rows2, int64[?] counts2) {
    c_out = Identity (c)
    two = Constant <value = int64 {2}> ()
    r = Mod (i, two)
    zero = Constant <value = int64 {0}> ()
    even = Equal (r, zero)
    rows2, counts2 = If (even) <then_branch = then () => (float[?,3] a, int64[?] b) {
      a = Identity (rows)
      b = Identity (counts)
    }, else_branch = other () => (float[?,3] a2, int64[?] b2) {
      a2 = Concat <axis = 0> (rows, x)
      k = Shape <start = 0, end = 1> (x)
      b2 = Concat <axis = 0> (counts, k)
    }>
  }>
}"""
    removed, count = _removed(text)
    assert count == 2  # the carried counts, and the If output that made them
    body = _body(removed)
    (branching,) = (n for n in body.node if n.op_type == "If")
    assert len(branching.output) == 1
    for branch in branching.attribute:
        assert len(branch.g.output) == 1
        assert {n.op_type for n in branch.g.node} <= {"Identity", "Concat"}
        assert sum(n.op_type == "Concat" for n in branch.g.node) <= 1
    for rows in (0, 2):
        x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        _same(parse(text), removed, [{"n": np.array(k, np.int64), "x": x} for k in (0, 1, 4)])


def test_scan_outputs_and_if_outputs_nobody_reads_go_and_read_ones_stay():
    text = """
agraph (int64 n, bool p, float[3] x) => (float[3] a_out, float[?,3] ys, float[3] first) {
  yes = Constant <value = bool {1}> ()
  a_out, ys, zs = Loop (n, yes, x) <body = body (int64 i, bool c, float[3] a)
      => (bool c_out, float[3] a2, float[3] y, float[3] z) {
    c_out = Identity (c)
    a2 = Add (a, x)
    y = Neg (a)
    z = Abs (a)
  }>
  first, second = If (p) <then_branch = then () => (float[3] f1, float[3] s1) {
    f1 = Relu (x)
    s1 = Sigmoid (x)
  }, else_branch = other () => (float[3] f2, float[3] s2) {
    f2 = Neg (x)
    s2 = Tanh (x)
  }>
}"""
    removed, count = _removed(text)
    assert count == 2
    assert [v.name for v in _body(removed).output] == ["c_out", "a2", "y"]
    counts = op_counts(removed)
    assert counts["Abs"] == counts["Sigmoid"] == counts["Tanh"] == 0
    assert counts["Neg"] == 2 and counts["Relu"] == 1
    for p in (True, False):
        _same(parse(text), removed, _counts(3, p=np.array(p)))


def test_a_value_carried_by_a_loop_in_a_loop_body():
    text = """
agraph (int64 n, float[3] x) => (float[3] a_out) {
  yes = Constant <value = bool {1}> ()
  zero = Constant <value = float {0}> ()
  a_out = Loop (n, yes, x) <body = outer (int64 i, bool c, float[3] a)
      => (bool c_out, float[3] a3) {
    c_out = Identity (c)
    a3, w_out = Loop (n, yes, a, zero) <body = inner (int64 j, bool d, float[3] b, float w)
        => (bool d_out, float[3] b2, float w2) {
      d_out = Identity (d)
      b2 = Add (b, x)
      w2 = ReduceSum <keepdims = 0> (b)
    }>
  }>
}"""
    removed, count = _removed(text)
    assert count == 1
    assert op_counts(removed)["ReduceSum"] == 0
    _same(parse(text), removed, _counts(3))


def test_bool_values_and_an_empty_input():
    text = """
agraph (int64 n, float[K] x) => (float[K] a_out) {
  yes = Constant <value = bool {1}> ()
  flag = Constant <value = bool[1] {0}> ()
  a_out, f_out = Loop (n, yes, x, flag) <body = body (int64 i, bool c, float[K] a, bool[?] f)
      => (bool c_out, float[K] a2, bool[?] f2) {
    c_out = Identity (c)
    a2 = Add (a, x)
    g = Not (f)
    f2 = Concat <axis = 0> (f, g)
  }>
}"""
    removed, count = _removed(text)
    assert count == 1
    for k in (0, 3):
        x = np.linspace(-1, 1, k).astype(np.float32)
        _same(parse(text), removed, [{"n": np.array(m, np.int64), "x": x} for m in (0, 2)])


def test_in_the_pipeline_the_ragged_list_carries_no_row_counts():
    # pack_padded_sequence with lists: rows appended in an If (a `break` in the loop)
    text = """
agraph (float[T,B,3] x, int64[B] lengths) => (float[?,3] data) {
  yes = Constant <value = bool {1}> ()
  zero = Constant <value = int64 {0}> ()
  axis0 = Constant <value = int64[1] {0}> ()
  t = Constant <value = int64 {0}> ()
  big = Constant <value = int64 {9223372036854775807}> ()
  s = Shape <start = 0, end = 1> (x)
  steps = Squeeze (s, axis0)
  empty = SequenceEmpty <dtype = 1> ()
  last, out = Loop (big, yes, t, empty) <body = body (int64 i, bool c, int64 k, seq(float[?,3]) acc)
      => (bool c_out, int64 k2, seq(float[?,3]) acc2) {
    live = Greater (lengths, i)
    live64 = Cast <to = 7> (live)
    b = ReduceSum <keepdims = 0> (live64)
    none = Equal (b, zero)
    go, acc2 = If (none) <then_branch = then () => (bool g1, seq(float[?,3]) a1) {
      g1 = Constant <value = bool {0}> ()
      a1 = Identity (acc)
    }, else_branch = other () => (bool g2, seq(float[?,3]) a2) {
      row = Gather <axis = 0> (x, i)
      end = Unsqueeze (b, axis0)
      part = Slice (row, axis0, end, axis0)
      a2 = SequenceInsert (acc, part)
      g2 = Constant <value = bool {1}> ()
    }>
    one = Constant <value = int64 {1}> ()
    k2 = Add (k, one)
    more = Less (k2, steps)
    c_out = And (more, go)
  }>
  data = ConcatFromSequence <axis = 0> (out)
}"""
    model = parse(text)
    # the loop as a loop (`loop-break-count` would count it first, and then batch it: below)
    looping = rules_without("loop-break-count")
    lowered, _ = lower(model, rules=looping)
    again, _ = lower(model, rules=looping)
    assert lowered.SerializeToString() == again.SerializeToString()
    body = _body(lowered)
    assert len(body.input) == 4  # i, c, k and the rows: no row counts
    # the rows put in keep the 3 columns of x: the list is rows, not a flat buffer of values
    # with a table of shapes (no Reshape, no Shape of what is put in)
    counts = op_counts(lowered)
    assert counts["Reshape"] == 0 and counts["Shape"] <= 1
    x = np.arange(4 * 3 * 3, dtype=np.float32).reshape(4, 3, 3)
    batched, _ = lower(model)
    assert "Loop" not in op_counts(batched)
    for lengths in ([4, 2, 1], [1, 1, 1], [2, 0, 0], [4, 4, 4]):
        assert_same_outputs(model, lowered, {"x": x, "lengths": np.array(lengths, np.int64)})
        assert_same_outputs(model, batched, {"x": x, "lengths": np.array(lengths, np.int64)})


def test_a_list_of_which_only_the_length_is_read_is_lowered_once_for_all():
    """The rows go while lowering (not only in cleanup), so that the rules see the row counts
    alone: lowering the result again changes nothing."""
    text = """
agraph (int64 n, bool[N,3] x) => (int64 count) {
  empty = SequenceEmpty <dtype = 9> ()
  out = Loop (n, "", empty) <body = body (int64 i, bool c, seq(bool[?,3]) acc)
      => (bool c_out, seq(bool[?,3]) acc2) {
    c_out = Identity (c)
    two = Constant <value = int64 {2}> ()
    r = Mod (i, two)
    zero = Constant <value = int64 {0}> ()
    even = Equal (r, zero)
    acc2 = If (even) <then_branch = then () => (seq(bool[?,3]) a) {
      one = Constant <value = int64[1] {1}> ()
      zero1 = Constant <value = int64[1] {0}> ()
      end = Reshape (i, one)
      rows = Slice (x, zero1, end)
      flipped = Not (rows)
      a = SequenceInsert (acc, flipped)
    }, else_branch = other () => (seq(bool[?,3]) b) {
      b = Identity (acc)
    }>
  }>
  count = SequenceLength (out)
}"""
    model = parse(text)
    lowered, _ = lower(model)
    again, report = lower(lowered)
    assert report.rules_fired == {}
    assert again.SerializeToString() == lowered.SerializeToString()
    x = np.ones((4, 3), np.bool_)
    for n in (0, 1, 4):
        assert_same_outputs(model, lowered, {"n": np.array(n, np.int64), "x": x})


def test_when_every_output_is_needed_no_graph_is_walked_and_nothing_changes(monkeypatch):
    # the Loop's carried value and the If's output are both read: the demand walk finds every
    # output needed, so the walk of every graph that removes outputs is not made
    text = """
agraph (int64 n, float[3] x, bool b) => (float[3] a_out, float[3] y, float[3] z) {
  yes = Constant <value = bool {1}> ()
  a_out = Loop (n, yes, x) <body = body (int64 i, bool c, float[3] a) => (bool c_out, float[3] a2) {
    c_out = Identity (c)
    a2 = Add (a, x)
  }>
  y, z = If (b) <then_branch = t () => (float[3] p, float[3] p2) { p = Neg (x)  p2 = Neg (p) },
                 else_branch = e () => (float[3] q, float[3] q2) { q = Abs (x)  q2 = Neg (q) }>
}"""
    import seqlower.passes.dead_carried as dead_carried

    walks = []
    original = dead_carried.iter_all_graphs
    monkeypatch.setattr(dead_carried, "iter_all_graphs", lambda m: walks.append(m) or original(m))
    before = ir.to_proto(ir.from_proto(parse(text))).SerializeToString()
    removed, count = _removed(text)
    assert count == 0 and walks == []
    assert removed.SerializeToString() == before
    # one output of the If unread: the walk is made, and the output goes
    unread = text.replace(", float[3] z)", ")")
    _, count = _removed(unread)
    assert count == 1 and len(walks) == 1


_SCAN = """g (float[3,2] x, float[2] z) => (float[2] y) {
  y, ys = Scan <num_scan_inputs = 1, body = b (float[2] acc, float[2] row)
      => (float[2] acc2, float[2] out) {
    acc2 = Add (acc, row)
    out = Neg (row)
  }> (z, x)
}"""

# the same, the Scan body's scan output made by a Loop whose second carried value is unread
_LOOP_IN_SCAN = _SCAN.replace(
    "out = Neg (row)",
    """one = Constant <value = int64 {1}> ()
    out, t = Loop (one, , row, row) <body = l (int64 i, bool c, float[2] r, float[2] s)
        => (bool c2, float[2] r2, float[2] s2) {
      c2 = Identity (c)
      r2 = Neg (r)
      s2 = Add (s, r)
    }>""",
)


@pytest.fixture
def walked(monkeypatch) -> list[object]:
    """The roots of every walk of the values the dead-carried pass makes, in order."""
    from seqlower.passes import dead_carried

    calls: list[object] = []
    original = dead_carried._Needed.walk

    def counted(self: object, roots: list[ir.Value]) -> None:
        calls.append(roots)
        original(self, roots)

    monkeypatch.setattr(dead_carried._Needed, "walk", counted)
    return calls


def test_values_are_walked_only_when_a_loop_or_an_if_is_somewhere(walked):
    """Only Loops and Ifs lose outputs: a model whose subgraphs (here a Scan body) hold
    neither is answered by a walk of its nodes, without the walk of the values, which a Loop
    in a Scan body still gets."""
    assert _removed(_SCAN)[1] == 0
    assert walked == []
    assert _removed(_LOOP_IN_SCAN)[1] == 1  # the Loop's second carried value, unread
    assert len(walked) == 1


def test_the_values_are_not_walked_when_every_loop_and_if_output_is_read(walked):
    """An output goes only when nothing reads it: with every output of every Loop and If read
    (or a graph output), one walk of the nodes answers, without the walk of the values; one
    If output read by nothing and the walk is made, and that output goes."""
    text = """
agraph (int64 n, float[3] x, bool b) => (float[3] a_out, float[3] s) {
  yes = Constant <value = bool {1}> ()
  a_out = Loop (n, yes, x) <body = body (int64 i, bool c, float[3] a) => (bool c_out, float[3] a2) {
    c_out = Identity (c)
    a2 = Add (a, x)
  }>
  y, z = If (b) <then_branch = t () => (float[3] p, float[3] p2) { p = Neg (x)  p2 = Neg (p) },
                 else_branch = e () => (float[3] q, float[3] q2) { q = Abs (x)  q2 = Neg (q) }>
  s = Add (y, z)
}"""
    before = ir.to_proto(ir.from_proto(parse(text))).SerializeToString()
    removed, count = _removed(text)
    assert count == 0 and walked == []
    assert removed.SerializeToString() == before
    unread = text.replace("s = Add (y, z)", "s = Neg (y)")
    removed, count = _removed(unread)
    assert count == 1 and len(walked) == 1
    (node,) = (n for n in removed.graph.node if n.op_type == "If")
    assert len(node.output) == 1
