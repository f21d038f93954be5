"""`--target onnxruntime` makes Loops cheaper after lowering: a body returns its condition input
(no Identity per iteration), and a Loop that runs a static, positive number of times becomes a
Scan. What each emits, what each refuses, and equal outputs under onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same_outputs, lower, op_counts, parse

from seqlower import runtime_quirks

# h = tanh(x[t] + h) for each row t; every h is also collected (TorchScript's RNN loop)
RNN = """
agraph (float[{T},3] x) => (float[3] last, float[{T},3] hs) {{
  shape = Shape (x)
  zero = Constant <value = int64 {{0}}> ()
  steps = Gather <axis = 0> (shape, zero)
  t = Constant <value = bool {{1}}> ()
  h0 = Constant <value = float[3] {{0, 0, 0}}> ()
  last, hs = Loop (steps, t, h0) <body = body (int64 i, bool c, float[3] h) => (bool c_out,
                                                                              float[3] h_new,
                                                                              float[3] h_new) {{
    row = Gather <axis = 0> (x, i)
    s = Add (row, h)
    h_new = Tanh (s)
    c_out = Identity (t)
  }}>
}}"""

# y = x * i summed over i in range(n): the body computes with its iteration number
# acc = acc * x + x * i: a state no batching can take (a running sum alone, loop-batch would)
WEIGHTED = """
agraph (float[3] x) => (float[3] total, float[{N},3] parts) {{
  n = Constant <value = int64 {{{N}}}> ()
  t = Constant <value = bool {{1}}> ()
  zero = Constant <value = float[3] {{0, 0, 0}}> ()
  total, parts = Loop (n, t, zero) <body = body (int64 i, bool c, float[3] acc)
                                     => (bool c_out, float[3] acc_new, float[3] part) {{
    f = Cast <to = 1> (i)
    part = Mul (x, f)
    decayed = Mul (acc, x)
    acc_new = Add (decayed, part)
    c_out = Identity (c)
  }}>
}}"""


def _rnn(steps: str = "T") -> bytes:
    return parse(RNN.format(T=steps))


def _bodies_condition_outputs(model) -> list[str]:  # type: ignore[no-untyped-def]
    """For each Loop of the main graph: 'input' when its body returns its condition input,
    else the operator that makes the condition output."""
    found = []
    for node in model.graph.node:
        if node.op_type == "Loop":
            body = node.attribute[0].g
            out = body.output[0].name
            if out == body.input[1].name:
                found.append("input")
            else:
                found.append(next(n.op_type for n in body.node if out in n.output))
    return found


def _rnn_feeds(steps: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(steps).standard_normal((steps, 3)).astype(np.float32)}


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_a_loop_of_run_time_length_returns_its_condition_input(steps):
    model = _rnn()
    lowered, report = lower(model, target="onnxruntime")
    assert _bodies_condition_outputs(lowered) == ["input"]
    assert report.rules_fired == {"loop-condition-passthrough": 1}
    assert op_counts(lowered)["Scan"] == 0  # it may run zero times: a Scan would fail
    assert_same_outputs(model, lowered, _rnn_feeds(steps))


def test_other_targets_keep_the_condition_identity():
    """OpenVINO cannot convert a Loop body whose condition output is its condition input."""
    lowered, report = lower(_rnn(), target="portable")
    assert _bodies_condition_outputs(lowered) == ["Identity"]
    assert "loop-condition-passthrough" not in report.rules_fired


def test_a_while_loop_keeps_its_condition():
    model = parse("""
agraph (float[3] x) => (float[3] y) {
  big = Constant <value = int64 {100}> ()
  one = Constant <value = float {1}> ()
  s0 = ReduceSum <keepdims = 0> (x)
  go = Greater (s0, one)
  y = Loop (big, go, x) <body = body (int64 i, bool c, float[3] v) => (bool more, float[3] w) {
    half = Constant <value = float {0.5}> ()
    w = Mul (v, half)
    s = ReduceSum <keepdims = 0> (w)
    more = Greater (s, one)
  }>
}""")
    lowered, report = lower(model, target="onnxruntime")
    assert _bodies_condition_outputs(lowered) == ["Greater"]
    assert report.rules_fired == {}
    assert_same_outputs(model, lowered, {"x": np.array([3.0, 2.0, 1.0], np.float32)})


def test_a_loop_over_the_rows_of_a_static_tensor_becomes_a_scan_over_them():
    model = _rnn("5")
    lowered, report = lower(model, target="onnxruntime")
    ops = op_counts(lowered)
    assert ops["Loop"] == 0 and ops["Scan"] == 1 and ops["Gather"] == 0
    assert report.rules_fired == {"loop-to-scan": 1}
    # h_new is both the state and the scan output: one of them is returned as a copy
    scan = next(n for n in lowered.graph.node if n.op_type == "Scan")
    body = scan.attribute[0].g
    assert len({o.name for o in body.output}) == len(body.output)
    assert_same_outputs(model, lowered, _rnn_feeds(5))


@pytest.mark.skipif(
    not runtime_quirks.holds("scan-shared-outputs"),
    reason="this onnxruntime computes a Scan body's shared outputs right",
)
def test_without_the_copy_onnxruntime_returns_wrong_values():
    """The copy is needed: the Scan with the body's outputs shared computes something else.
    The oracle is numpy (onnx.reference 1.18 cannot run this Scan body either)."""
    from support import run_ort

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    a0, b0 = np.ones(3, np.float32), np.zeros(3, np.float32)
    got = run_ort(parse(runtime_quirks.SCAN_SHARED_OUTPUTS), {"x": x, "a0": a0, "b0": b0})
    right = [a0, x.sum(0), np.cumsum(x, 0)]  # a passed on, b summed, every partial sum
    assert not all(np.array_equal(a, b) for a, b in zip(got, right))


def test_a_loop_that_reads_its_iteration_number_becomes_a_scan_over_a_range():
    model = parse(WEIGHTED.format(N=4))
    lowered, report = lower(model, target="onnxruntime")
    ops = op_counts(lowered)
    assert ops["Loop"] == 0 and ops["Scan"] == 1 and ops["Range"] == 1
    assert report.rules_fired == {"loop-to-scan": 1}
    assert_same_outputs(model, lowered, {"x": np.array([1.0, -2.0, 0.5], np.float32)})


def test_a_loop_that_runs_zero_times_stays_a_loop():
    """A Scan over zero iterations fails in onnxruntime (quirk `empty-scan`)."""
    model = parse(WEIGHTED.format(N=0))
    lowered, _ = lower(model, target="onnxruntime")
    assert op_counts(lowered)["Scan"] == 0 and op_counts(lowered)["Loop"] == 1
    assert_same_outputs(model, lowered, {"x": np.array([1.0, -2.0, 0.5], np.float32)})


def test_a_state_that_changes_shape_stays_a_loop():
    model = parse("""
agraph (float[3] x) => (float[N] y) {
  n = Constant <value = int64 {3}> ()
  t = Constant <value = bool {1}> ()
  y0 = Constant <value = float[1] {0}> ()
  y = Loop (n, t, y0) <body = body (int64 i, bool c, float[K] acc) => (bool c_out, float[M] grown) {
    grown = Concat <axis = 0> (acc, x)
    c_out = Identity (c)
  }>
}""")
    lowered, report = lower(model, target="onnxruntime")
    assert op_counts(lowered)["Scan"] == 0
    assert report.rules_fired == {"loop-condition-passthrough": 1}
    assert_same_outputs(model, lowered, {"x": np.array([1.0, 2.0, 3.0], np.float32)})


@pytest.mark.skipif(
    not runtime_quirks.holds("empty-scan"), reason="this onnxruntime runs a Scan over nothing"
)
def test_a_scan_over_nothing_fails_in_onnxruntime():
    from support import run_ort

    with pytest.raises(Exception, match="dim0"):
        run_ort(parse(runtime_quirks.EMPTY_SCAN), {"x": np.zeros((0, 3), np.float32)})


def test_lowering_twice_changes_nothing():
    model = _rnn()
    once, _ = lower(model, target="onnxruntime")
    twice, _ = lower(once, target="onnxruntime")
    assert once.SerializeToString() == twice.SerializeToString()
