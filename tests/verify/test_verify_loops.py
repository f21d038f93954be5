"""Loops are exercised: fed trip counts and conditions run the body 3, 1, 0, 5, 2, 4 times, the
report says how often each Loop ran, and a wrong slice end in ONNX's test_loop13_seq is caught
(issue 13, item 2)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from seqlower.verification import LOOP_ITERATIONS, SEQUENCE_LENGTHS, generate_inputs, verify

LOOP13_SEQ = """<ir_version: 7, opset_import: ["": 13]>
test_loop13_seq (int64 trip_count, bool cond, seq(float) seq_empty) => (seq(float) seq_res) {
    seq_res = Loop(trip_count, cond, seq_empty) <body = loop_body (int64 iter_count,
            bool cond_in, seq(float) seq_in) => (bool cond_out, seq(float) seq_out) {
        cond_out = Identity(cond_in)
        x = Constant<value = float[5] {1, 2, 3, 4, 5}>()
        one = Constant<value = int64 {1}>()
        slice_start = Constant<value = int64[1] {0}>()
        end = OP(iter_count, one)
        axes = Constant<value = int64 {0}>()
        slice_end = Unsqueeze(end, axes)
        slice_out = Slice(x, slice_start, slice_end)
        seq_out = SequenceInsert(seq_in, slice_out)
    }>
}"""


def _loop13(op: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(LOOP13_SEQ.replace("OP", op))
    onnx.checker.check_model(model, full_check=True)
    return model


def test_the_loop13_seq_mutant_with_sub_for_add_is_caught():
    original, mutant = _loop13("Add"), _loop13("Sub")
    assert verify(original, _loop13("Add")).equivalent
    report = verify(original, mutant)
    assert not report.equivalent
    assert report.trials[0].status == "differ"
    # trials with the same difference are named together
    assert report.failures()[0].startswith("trials 0, 9, 13, output 'seq_res': shape differs")
    assert report.trials[0].loops == {"Loop #0": "3 iterations"}


def test_trip_counts_and_conditions_run_the_body_0_to_8_times():
    model = ir.from_proto(_loop13("Add"))
    seen = []
    for trial in range(16):
        feeds = generate_inputs(model, trial=trial, seed=trial)
        assert feeds["trip_count"].dtype == np.int64 and feeds["trip_count"].shape == ()
        assert feeds["cond"].dtype == np.bool_ and bool(feeds["cond"])
        seen.append(int(feeds["trip_count"]))
    assert seen == list(LOOP_ITERATIONS)
    assert set(seen) == {0, 1, 2, 3, 4, 5, 6, 7, 8}
    report = verify(_loop13("Add"), _loop13("Add"), edges=False)
    assert [trial.loops["Loop #0"] for trial in report.trials] == [
        f"{count} iteration{'' if count == 1 else 's'}" for count in seen
    ]
    # the output shows it: the input sequence and one slice per iteration
    assert [trial.outputs[0].shape.split(" ")[0] for trial in report.trials] == [
        f"seq[{length + count}]" for length, count in zip(SEQUENCE_LENGTHS, seen, strict=True)
    ]
    # and the instrumented original counted the same iterations
    assert report.coverage.loops == {"Loop #0": set(seen)}
    assert report.coverage.summary() == "Loop trip counts 0..8, sequence lengths 0..8"


WHILE = """<ir_version: 9, opset_import: ["": 18]>
g (bool go, float[2] x) => (float[2] y) {
    y = Loop(, go, x) <body = b (int64 i, bool c, float[2] v) => (bool c_out, float[2] w) {
        limit = Constant<value = int64 {2}>()
        c_out = Less(i, limit)
        w = Add(v, v)
    }>
}"""


def test_a_condition_without_trip_count_is_false_only_in_the_zero_trial():
    model = ir.from_proto(onnx.parser.parse_model(WHILE))
    conditions = [bool(generate_inputs(model, trial=trial)["go"]) for trial in range(6)]
    assert conditions == [count > 0 for count in LOOP_ITERATIONS[:6]]
    report = verify(
        onnx.parser.parse_model(WHILE), onnx.parser.parse_model(WHILE), trials=3, edges=False
    )
    assert report.equivalent
    assert [trial.loops for trial in report.trials] == [
        {},
        {},
        {"Loop #0": "0 iterations (its condition is false)"},
    ]


EARLY_EXIT = """<ir_version: 9, opset_import: ["": 18]>
g (int64 n, float[2] x) => (float[2] y) {
    y = Loop(n, , x) <body = b (int64 i, bool c, float[2] v) => (bool c_out, float[2] w) {
        limit = Constant<value = int64 {OP}>()
        c_out = Less(i, limit)
        w = Add(v, v)
    }>
}"""


@pytest.mark.parametrize(("limit", "equivalent"), [("4", True), ("1", False)])
def test_a_loop_that_stops_early_is_reported_as_at_most(limit, equivalent):
    original = onnx.parser.parse_model(EARLY_EXIT.replace("OP", "4"))
    candidate = onnx.parser.parse_model(EARLY_EXIT.replace("OP", limit))
    report = verify(original, candidate)
    assert report.equivalent is equivalent
    assert report.trials[0].loops == {
        "Loop #0": "at most 3 iterations (its body may stop it sooner)"
    }
