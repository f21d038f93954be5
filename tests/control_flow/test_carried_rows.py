"""A loop that reads, at its own iteration number, the states an enclosing loop appended so far
(a tree LSTM gathering its children's states): the reads are proved in range, so the inner
loop's two conditional appends become one Compress each and the inner loop goes; where the
proof does not hold, the checks stay and the lowered model fails where the original does."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_both_fail,
    assert_same_or_both_fail,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    rule_check,
    rules_without,
)

from seqlower.analysis.carried_rows import at_least_iterations, carried_rows, counts_iterations
from seqlower.rule import Context, Refusal
from seqlower.rules.loop_accumulators import _check

# for i in range(n): kids_h, kids_c = [zeros], [zeros]
#     for j in range(TRIP): if parent[j] == i: kids_h.append(hs[j]); kids_c.append(cs[j])
#     h = tanh(x[i] + sum(kids_h)); c = sum(kids_c) + h; APPEND_H; cs.append(c)
TREE = """
agraph (float[N,3] x, int64[N] parent) => (float[?,3] y, float[?,3] z) {
  t = Constant <value = bool {1}> ()
  shape = Shape (x)
  k0 = Constant <value = int64 {0}> ()
  n = Gather <axis = 0> (shape, k0)
  empty_h = SequenceEmpty <dtype = 1> ()
  empty_c = SequenceEmpty <dtype = 1> ()
  zero_row = Constant <value = float[1,3] {0, 0, 0}> ()
  axis0 = Constant <value = int64[1] {0}> ()
  hs, cs = Loop (n, t, empty_h, empty_c) <body = outer (int64 i, bool c, seq(float) sh,
      seq(float) sc) => (bool c1, seq(float) sh1, seq(float) sc1) {
    start_h = SequenceConstruct (zero_row)
    start_c = SequenceConstruct (zero_row)
    TRIP_DEF
    kh, kc = Loop (trip, t, start_h, start_c) <body = inner (int64 j, bool d, seq(float) ah,
        seq(float) ac) => (bool d1, seq(float) ah1, seq(float) ac1) {
      p = Gather <axis = 0> (parent, j)
      hit = Equal (p, i)
      ah1, ac1 = If (hit) <then_branch = th () => (seq(float) a, seq(float) b) {
        eh = SequenceAt (sh, j)
        a = SequenceInsert (ah, eh)
        ec = SequenceAt (sc, j)
        b = SequenceInsert (ac, ec)
      }, else_branch = el () => (seq(float) a2, seq(float) b2) {
        a2 = Identity (ah)
        b2 = Identity (ac)
      }>
      d1 = Identity (d)
    }>
    cat_h = ConcatFromSequence <axis = 0> (kh)
    cat_c = ConcatFromSequence <axis = 0> (kc)
    sum_h = ReduceSum <keepdims = 1> (cat_h, axis0)
    sum_c = ReduceSum <keepdims = 1> (cat_c, axis0)
    xi = Gather <axis = 0> (x, i)
    xr = Unsqueeze (xi, axis0)
    pre = Add (xr, sum_h)
    h = Tanh (pre)
    cn = Add (sum_c, h)
    APPEND_H
    sc1 = SequenceInsert (sc, cn)
    c1 = Identity (c)
  }>
  hs_end = SequenceInsert (hs, zero_row)
  cs_end = SequenceInsert (cs, zero_row)
  y = ConcatFromSequence <axis = 0> (hs_end)
  z = ConcatFromSequence <axis = 0> (cs_end)
}"""

PROVED = {"TRIP_DEF": "trip = Identity (i)", "APPEND_H": "sh1 = SequenceInsert (sh, h)"}
# the inner loop runs once more (j = i reads a state not made yet, when parent[i] == i)
ONE_PAST = {
    "TRIP_DEF": "one = Constant <value = int64 {1}> ()\n    trip = Add (i, one)",
    "APPEND_H": PROVED["APPEND_H"],
}
# the states grow only where h's first entry is positive: fewer rows than iterations
SOMETIMES = {
    "TRIP_DEF": PROVED["TRIP_DEF"],
    "APPEND_H": """zk = Constant <value = int64 {0}> ()
    h0 = Gather <axis = 1> (h, zk)
    h00 = ReduceSum <keepdims = 0> (h0)
    fz = Constant <value = float {0}> ()
    grow = Greater (h00, fz)
    sh1 = If (grow) <then_branch = g1 () => (seq(float) s1) { s1 = SequenceInsert (sh, h) },
        else_branch = g2 () => (seq(float) s2) { s2 = Identity (sh) }>""",
}


def _model(form: dict[str, str]) -> onnx.ModelProto:
    text = TREE
    for key, value in form.items():
        text = text.replace(key, value)
    return parse(text)


def _feeds(parents: list[int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((len(parents), 3)).astype(np.float32)
    return {"x": x, "parent": np.array(parents, np.int64).reshape(len(parents))}


# post-order trees (children before parents, the root's parent -1 or out of range), and no node
TREES = [[], [-1], [2, 2, 4, 4, -1], [1, 3, 3, 5, 5, 7, 7, -1], [5, 5, 5, 5, 5, 9]]


def _outer_body(model: onnx.ModelProto) -> list[str]:
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    body = next(a.g for a in loop.attribute if a.name == "body")
    return [n.op_type for n in body.node]


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_reads_of_the_states_made_so_far_need_no_check_and_the_inner_loop_goes(target):
    model = _model(PROVED)
    lowered, report = lower(model, target=target)
    assert report.rules_fired["loop-concat-to-scan"] == 2
    assert report.rules_fired["loop-batch"] == 1
    ops = op_counts(lowered)
    assert ops["Loop"] == 1 and ops["If"] == 0 and ops["Compress"] == 2
    body = _outer_body(lowered)
    # the parent ids are cut to the i ids before i, no check (i < n, the rows of parent); the
    # states, i rows in iteration i, are read whole: no Shape, Sub, Max, Gather of a check
    assert body.count("Slice") == 1  # the parents read
    assert not {"Sub", "Max", "Shape"} & set(body)
    for seed, parents in enumerate(TREES):
        assert_same_outputs(model, lowered, _feeds(parents, seed))


def test_negative_and_out_of_range_parent_ids_match_nothing_in_both():
    model = _model(PROVED)
    lowered, _ = lower(model, target="portable")
    for parents in ([-3, -1, -2], [7, 0, 1, -9], [0, 0, 0, 0]):
        assert_same_outputs(model, lowered, _feeds(parents))


def test_a_loop_reading_one_past_the_states_made_keeps_its_checks_and_fails_where_it_did():
    model = _model(ONE_PAST)
    lowered, _ = lower(model, target="portable")
    found = rule_check(_tensor_form(model), _check_inner, "Loop")
    assert isinstance(found, Refusal)
    assert "grows several values and a branch computes the appended tensor with Gather" in str(
        found.reason
    )
    for seed, parents in enumerate(TREES):
        assert_same_outputs(model, lowered, _feeds(parents, seed))
    assert_both_fail(model, lowered, _feeds([1, 1, -1]))  # node 1 is its own parent: hs[1]


def test_states_appended_only_sometimes_are_not_proved_and_both_models_agree_or_fail():
    model = _model(SOMETIMES)
    lowered, _ = lower(model, target="portable")
    found = rule_check(_tensor_form(model), _check_inner, "Loop")
    # the cell states, one per iteration, are proved; the hidden states are not: their read
    # stays in the If, which grows them alone
    assert not isinstance(found, Refusal) and [plan.index for plan in found] == [1]
    for seed in range(6):
        for parents in TREES[1:]:
            assert_same_or_both_fail(model, lowered, _feeds(parents, seed))


def _tensor_form(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its lists as tensors and no loop rewritten (what the rules read)."""
    lowered, _ = lower(model, rules=rules_without("loop-batch", "loop-concat-to-scan"))
    return lowered


def _check_inner(outer: ir.Node, ctx: Context) -> object:
    """`loop-concat-to-scan`'s check on the Loop nested in `outer`'s body."""
    inner = next(n for n in outer.attributes["body"].as_graph() if n.op_type == "Loop")
    return _check(inner, ctx)


# -- the analysis itself ----------------------------------------------------------------------

GROW = """
agraph (float[R,3] init, float[1,3] piece, float[K,3] wide, int64 n) => (float[?,3] y) {
  t = Constant <value = bool {1}> ()
  y = Loop (n, t, init) <body = b (int64 i, bool c, float[?,3] acc) => (bool c1, float[?,3] a1) {
    a1 = Concat <axis = AXIS> (acc, PIECE)
    c1 = Identity (c)
  }>
}"""


def _rows(text: str, init_rows: str = "R") -> tuple[ir.Value, ir.Value, callable]:
    model = ir.from_proto(parse(text.replace("float[R,3] init", f"float[{init_rows},3] init")))
    loop = next(n for n in model.graph if n.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    owners = {id(body): loop}
    return body.inputs[0], body.inputs[2], lambda g: owners.get(id(g))


def test_a_tensor_grown_by_one_row_per_iteration_from_none_counts_the_iterations():
    i, acc, owner = _rows(GROW.replace("AXIS", "0").replace("PIECE", "piece"), "0")
    assert carried_rows(acc, 0, owner) == (0, 1)
    assert counts_iterations(i, acc, 0, owner) and at_least_iterations(i, acc, 0, owner)
    assert carried_rows(acc, 1, owner) is None  # grown along axis 0 only


def test_a_head_start_or_a_wider_piece_bounds_the_rows_from_below_only():
    i, acc, owner = _rows(GROW.replace("AXIS", "0").replace("PIECE", "piece"), "2")
    assert carried_rows(acc, 0, owner) == (2, 1)
    assert at_least_iterations(i, acc, 0, owner) and not counts_iterations(i, acc, 0, owner)
    text = (
        GROW.replace("AXIS", "-2")
        .replace("PIECE", "piece")
        .replace("float[1,3] piece", "float[2,3] piece")
    )
    i, acc, owner = _rows(text, "0")
    assert carried_rows(acc, 0, owner) == (0, 2)
    assert at_least_iterations(i, acc, 0, owner) and not counts_iterations(i, acc, 0, owner)


def test_rows_of_unknown_count_or_an_unknown_start_prove_nothing():
    i, acc, owner = _rows(GROW.replace("AXIS", "0").replace("PIECE", "wide"), "0")
    assert carried_rows(acc, 0, owner) is None  # K rows a time, K not known
    i, acc, owner = _rows(GROW.replace("AXIS", "0").replace("PIECE", "piece"))
    assert carried_rows(acc, 0, owner) is None  # R initial rows
    i, acc, owner = _rows(GROW.replace("AXIS", "0").replace("PIECE", "piece"), "0")
    assert not at_least_iterations(acc, acc, 0, owner)  # not the iteration number
    assert not at_least_iterations(i, acc, 0, lambda g: None)  # no Loop holds the body


def test_two_values_grown_under_one_if_scan_its_condition_once():
    model = _model(PROVED)
    lowered, report = lower(model, target="portable", rules=rules_without("loop-batch"))
    assert report.rules_fired["loop-concat-to-scan"] == 2
    outer = next(n for n in lowered.graph.node if n.op_type == "Loop")
    body = next(a.g for a in outer.attribute if a.name == "body")
    inner = next(n for n in body.node if n.op_type == "Loop")
    inner_body = next(a.g for a in inner.attribute if a.name == "body")
    # the condition, then the two pieces: no copy of the condition for the second value
    assert len(inner_body.output) == 1 + 3
    assert [n.op_type for n in inner_body.node].count("Identity") == 1  # the loop's condition
    compress = [n for n in body.node if n.op_type == "Compress"]
    assert len(compress) == 2 and compress[0].input[1] == compress[1].input[1]
    for seed, parents in enumerate(TREES):
        assert_same_outputs(model, lowered, _feeds(parents, seed))


SCALARS_UP_TO_N = """
agraph (float[K] x, int64 n) => (float[?] y) {
  s = SplitToSequence <axis = 0, keepdims = 0> (x)
  t = Constant <value = bool {1}> ()
  e = SequenceEmpty <dtype = 1> ()
  out = Loop (n, t, e) <body = b (int64 i, bool c, seq(float) acc) => (bool c1, seq(float) a1) {
    v = SequenceAt (s, i)
    w = Add (v, v)
    a1 = SequenceInsert (acc, w)
    c1 = Identity (c)
  }>
  y = ConcatFromSequence <axis = 0, new_axis = 1> (out)
}"""


@pytest.mark.parametrize("n", [1, 2, 4, 5])
def test_a_list_of_scalars_read_up_to_a_count_of_another_length_is_not_asked_for_rows(n):
    # an element read of a list (SequenceAt), not a Gather of a tensor: the rows proof does not
    # apply to it (its source has no rank), and reading past the list fails in both models
    model = parse(SCALARS_UP_TO_N)
    lowered, _ = lower(model, target="portable")
    feeds = {"x": np.arange(4, dtype=np.float32), "n": np.array(n, np.int64)}
    if n <= 4:
        assert_same_outputs(model, lowered, feeds)
    else:
        assert_both_fail(model, lowered, feeds)
