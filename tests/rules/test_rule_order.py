"""Order of rewrites: rules that commit to a run-time form (`Rule.last_resort`: a SequenceMap
as a Loop, a selection by a run-time position) wait until no other rule applies, so that a
length or a position that another rewrite makes static reaches the static forms first. Here a
loop can unroll only after an If with a constant condition is inlined and the split it holds is
lowered; meanwhile its body holds a SequenceMap over the carried list (length unknown in the
body) and reads elements at the iteration number (a run-time position in the body)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir
from support import lower, lower_and_compare, op_counts, parse, sequence_op_count

from seqlower.passes import LowerSequencesPass, NormalizePass
from seqlower.rule import RuleSet
from seqlower.rules import default_rules

X = np.array([[[1.25, 2.75], [0.5, 3]], [[2, 1], [1, 2]]], np.float32)

# `xs = list(x.unbind(0)) if True else []; for i in range(2): xs.append(det(xs)[-1] * ...)`
MAP_IN_BODY = """g (float[2,2,2] x) => (float[?,2,2] y) {
  c = Constant<value = bool {1}>()
  s0 = If(c) <
    then_branch = tb () => (seq(float[2,2]) r) { r = SplitToSequence<axis = 0, keepdims = 0>(x) },
    else_branch = eb () => (seq(float[2,2]) r2) { r2 = SequenceEmpty<dtype = 1>() }>
  n0 = Constant<value = int64 {2}>()
  t = Constant<value = bool {1}>()
  s = Loop(n0, t, s0) <body = b (int64 i, bool cc, seq(float[2,2]) acc)
                              => (bool co, seq(float[2,2]) acc2) {
     co = Identity(cc)
     m = SequenceMap(acc) <body = mb (float[2,2] u) => (float r) { r = Det(u) }>
     k = SequenceLength(m)
     one = Constant<value = int64 {1}>()
     km = Sub(k, one)
     last = SequenceAt(m, km)
     two2 = Constant<value = int64[2] {2, 2}>()
     lastb = Expand(last, two2)
     ith = SequenceAt(acc, i)
     sum = Add(lastb, ith)
     acc2 = SequenceInsert(acc, sum)
  }>
  y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}"""


def test_a_map_in_a_loop_body_unrolls_with_the_loop():
    model = parse(MAP_IN_BODY)
    lowered, report, (y,) = lower_and_compare(model, {"x": X})
    assert y.shape == (4, 2, 2)
    assert sequence_op_count(lowered) == 0
    fired = report.rules_fired
    assert fired["sequence-map-unroll"] == 2 and fired["loop-unroll"] == 1
    assert not {"sequence-map-to-loop", "at-dynamic-gather", "at-dynamic-if-chain"} & set(fired)
    assert op_counts(lowered)["Loop"] == 0 and op_counts(lowered)["Det"] == 2  # only the last


def test_without_the_deferral_the_map_became_a_loop_first():
    """The same rules with no rule marked last-resort: the map is a Loop before its length is
    known, and its unrolled copies compute every element (the issue 16 pattern 9 form)."""
    eager = RuleSet(dataclasses.replace(rule, last_resort=False) for rule in default_rules())
    model = ir.from_proto(parse(MAP_IN_BODY))
    NormalizePass()(model)
    lowering = LowerSequencesPass(eager)
    lowering(model)
    assert lowering.fired["sequence-map-to-loop"] == 1
    deferred = LowerSequencesPass()
    model = ir.from_proto(parse(MAP_IN_BODY))
    NormalizePass()(model)
    deferred(model)
    assert "sequence-map-to-loop" not in deferred.fired
    assert deferred.iterations <= lowering.iterations


def test_the_last_resort_still_applies_when_nothing_else_does():
    """A map (of a body no batching rule takes) over a split of unknown length becomes a Loop
    all the same, and a run-time position over elements of different shapes an If chain."""
    model = parse("""g (float[N,2,2] x, int64 p) => (float[?] y, float[?] z) {
      s = SplitToSequence<axis = 0, keepdims = 0>(x)
      m = SequenceMap(s) <body = mb (float[2,2] u) => (float r) { r = Det(u) }>
      y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
      a = Constant<value = float[1] {1}>()
      b = Constant<value = float[3] {1, 2, 3}>()
      q = SequenceConstruct(a, b)
      z = SequenceAt(q, p)
    }""")
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired["at-dynamic-if-chain"] == 1
    assert report.rules_fired["sequence-map-to-loop"] == 1
    for p, n in ((0, 2), (1, 1), (-1, 3), (-2, 2)):
        lower_and_compare(model, {"x": np.concatenate([X, X])[:n], "p": np.array(p)})
    assert report.stop_reason == "fixpoint: no rule applies"
