"""The instrumented original: If conditions and Loop counts as extra outputs, at any depth, with
the same outputs as the original; and what the verifier does when the copy cannot run."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

import seqlower.verification.check as check
from seqlower import runtime_quirks
from seqlower.verification import verify
from seqlower.verification.coverage import Coverage, instrument

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'

# A Loop whose body holds an If whose else branch holds another Loop (of 2 iterations).
NESTED = onnx.parser.parse_model(
    HEADER
    + """g (float[N] x, int64 n, bool c) => (float[N] y) {
    y = Loop(n, c, x) <body = b (int64 i, bool ci, float[N] xi) => (bool co, float[N] xo) {
        co = Identity(ci)
        zero = Constant<value = float {0.0}>()
        s = ReduceSum<keepdims = 0>(xi)
        positive = Greater(s, zero)
        xo = If(positive) <then_branch = t () => (float[N] a) { a = Neg(xi) },
                           else_branch = e () => (float[N] d) {
            two = Constant<value = int64 {2}>()
            yes = Constant<value = bool {1}>()
            d = Loop(two, yes, xi) <body = b2 (int64 j, bool cj, float[N] v)
                                        => (bool cjo, float[N] w) {
                cjo = Identity(cj)
                w = Add(v, v)
            }>
        }>
    }>
}"""
)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds), strict=True))


def test_nested_branches_and_loops_are_exposed_and_the_outputs_unchanged():
    copy, probes = instrument(NESTED)
    onnx.checker.check_model(copy, full_check=True)
    assert sorted({(probe.label, probe.kind) for probe in probes}) == [
        ("Loop #0", "loop"),
        ("Loop #0 > If #0", "if"),
        ("Loop #0 > If #0 else > Loop #0", "loop"),
    ]
    coverage = Coverage(probes)
    runs = [(0, [1.0, 2.0]), (3, [1.0, -2.0]), (1, [-3.0, 1.0])]
    for count, values in runs:
        feeds = {"x": np.float32(values), "n": np.array(count), "c": np.array(True)}
        outputs = _run(copy, feeds)
        np.testing.assert_array_equal(outputs["y"], _run(NESTED, feeds)["y"])
        coverage.record(outputs)
    # the sums stay negative (-1 doubled, -2 doubled): the else branch only, its Loop twice
    assert coverage.branches == {"Loop #0 > If #0": {False}}
    assert coverage.loops == {"Loop #0": {0, 1, 3}, "Loop #0 > If #0 else > Loop #0": {2}}
    assert coverage.untaken() == [("Loop #0 > If #0", True)]
    assert coverage.summary() == "If: 1/2 branches, Loop trip counts 0..3"


def test_a_model_without_if_or_loop_is_left_as_it_is():
    model = onnx.parser.parse_model(HEADER + "g (float[2] x) => (float[2] y) { y = Neg(x) }")
    copy, probes = instrument(model)
    assert copy is model and probes == ()


def test_a_loop_that_leaves_out_its_scan_outputs_is_not_instrumented():
    model = onnx.parser.parse_model(
        HEADER
        + """g (int64 n, float[2] x) => (float[2] y) {
        y = Loop(n, , x) <body = b (int64 i, bool c, float[2] v)
                              => (bool co, float[2] w, float[2] s) {
            co = Identity(c)
            w = Add(v, v)
            s = Identity(v)
        }>
    }"""
    )
    copy, probes = instrument(model)
    assert probes == () and copy is model


def test_the_verifier_runs_the_original_itself_when_the_copy_does_not_load(monkeypatch):
    def broken(model: onnx.ModelProto):
        copy, probes = instrument(model)
        copy.graph.node[0].op_type = "NoSuchOperator"
        return copy, probes

    monkeypatch.setattr(check, "instrument", broken)
    report = verify(NESTED, NESTED)
    assert report.equivalent, report.failures()
    assert report.coverage.note.startswith("If and Loop coverage not recorded: cannot load")
    assert report.coverage.branches == {} and report.coverage.dims


def test_coverage_counts_only_trials_that_compared():
    # an empty x (N = 0) fails the Gather in both models: that trial covers nothing
    model = onnx.parser.parse_model(
        HEADER
        + """g (float[N] x) => (float[N] y) {
        zero = Constant<value = float {0.0}>()
        first = Constant<value = int64 {0}>()
        top = Gather(x, first)
        big = Greater(top, zero)
        y = If(big) <then_branch = t () => (float[N] a) { a = Neg(x) },
                     else_branch = e () => (float[N] b) { b = Identity(x) }>
    }"""
    )
    report = verify(model, model)
    assert report.coverage.branches == {"If #0": {True, False}}
    skipped = {trial.index for trial in report.trials if not trial.compared}
    assert skipped and all("N=0" in report.trials[index].plan for index in skipped)
    assert report.coverage.dims == {"N": {1, 2, 3, 4, 5, 8}}


# x split by run-time sizes in a Loop body; the number of chunks of each iteration
SPLIT_IN_A_LOOP = onnx.parser.parse_model(
    HEADER
    + """g (float[N] x, int64[K] sizes, int64 n) => (int64[?] y) {
    yes = Constant<value = bool {1}>()
    last, y = Loop(n, yes, x) <body = b (int64 i, bool ci, float[?] xi) => (bool co, float[?] xo,
                                                                          int64 k) {
        co = Identity(ci)
        s = SplitToSequence <axis = -1> (xi, sizes)
        k = SequenceLength (s)
        xo = Identity(xi)
    }>
}"""
)


def test_a_split_of_a_non_empty_axis_by_no_size_is_seen():
    """The flag of a SplitToSequence by an empty list of sizes over a non-empty axis (the
    specification rejects it; onnxruntime splits into chunks of one): 1 only there."""
    copy, probes = instrument(SPLIT_IN_A_LOOP)
    onnx.checker.check_model(copy, full_check=True)
    assert {(probe.label, probe.kind) for probe in probes} >= {
        ("Loop #0 > SplitToSequence #0", "split")
    }
    coverage = Coverage(probes)
    cases = [  # (x, sizes, n, flagged)
        ([1.0, 2.0, 3.0], [2, 1], 2, False),
        ([], [], 2, False),  # an empty axis: no size is what it needs
        ([1.0, 2.0, 3.0], [], 0, False),  # the body never runs
    ]
    if runtime_quirks.holds("split-to-sequence-empty-split"):  # else the original fails there
        cases.append(([1.0, 2.0, 3.0], [], 2, True))
    for x, sizes, n, flagged in cases:
        feeds = {"x": np.float32(x), "sizes": np.array(sizes, np.int64), "n": np.array(n)}
        outputs = _run(copy, feeds)
        np.testing.assert_array_equal(outputs["y"], _run(SPLIT_IN_A_LOOP, feeds)["y"])
        found = coverage.empty_split(outputs)
        assert found == ("Loop #0 > SplitToSequence #0" if flagged else None), (x, sizes, n)
