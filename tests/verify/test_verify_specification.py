"""Only the candidate failed, on an input the specification rejects: the trial is skipped.

onnxruntime splits a list by an empty vector of sizes into chunks of one; the specification
requires the sizes to add up to the dim. A lowered model follows the specification and fails
there. The instrumented original says when one of its SplitToSequence nodes split a non-empty
axis by no size, and verify skips such a trial, saying why. For other departures (a stack of an
empty element beside a misfit) verify runs the original under onnx.reference, and skips the
trial when the reference fails too, once it agreed with onnxruntime on a trial both models ran
(before or after that trial: a failure met first is judged again at the end).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from seqlower import optimize, runtime_quirks
from seqlower.verification import verify
from seqlower.verification.runner import ReferenceRunner
from seqlower.verification.specification import SpecificationJudge, splits_as_onnxruntime

UNBATCH = Path(__file__).resolve().parent.parent / "fixtures" / "torch_wild" / "pyg_unbatch"
X = np.arange(12, dtype=np.float32).reshape(4, 3)
TWO_GRAPHS = {"x": X, "batch": np.array([0, 0, 1, 1], np.int64)}
NO_GRAPH = {"x": X, "batch": np.full(4, -1, np.int64)}  # every id negative: no size at all
UNBATCH_OPS = {"SplitToSequence", "Loop", "SequenceAt", "ReduceMax"}


@pytest.fixture(scope="module")
def unbatch() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    if not runtime_quirks.holds("split-to-sequence-empty-split"):
        pytest.skip("onnxruntime no longer splits by an empty vector of sizes")
    model = onnx.load(UNBATCH / "model.onnx")
    return model, optimize(model).model


def test_a_trial_the_specification_rejects_is_skipped_not_a_difference(unbatch):
    report = verify(*unbatch, inputs=[TWO_GRAPHS, NO_GRAPH])
    assert [trial.status for trial in report.trials] == ["ok", "outside the specification"]
    rejected = report.trials[1]
    # the lowered model's Split of x by the counted sizes checks that they add up
    assert "Cannot split using values in 'split'" in rejected.candidate_error
    assert "splits a non-empty axis by an empty list of sizes" in rejected.rejected_input
    assert report.equivalent and report.skipped == 1


def test_strict_errors_report_it_with_both_errors(unbatch):
    report = verify(*unbatch, inputs=[TWO_GRAPHS, NO_GRAPH], strict_errors=True)
    assert not report.equivalent
    (line,) = report.failures()
    assert line.startswith("trial 1: only the candidate failed: ")
    assert "(the original's SplitToSequence" in line and "specification rejects" in line


def test_the_original_s_own_probe_needs_no_trial_to_vouch_for_it(unbatch):
    report = verify(*unbatch, inputs=[NO_GRAPH, TWO_GRAPHS])
    # the rejected input comes first: no trial had shown onnx.reference agrees with onnxruntime,
    # which the probe of the original does not need
    assert [trial.status for trial in report.trials] == ["outside the specification", "ok"]
    assert report.equivalent


def test_a_reference_that_disagrees_on_the_witness_excuses_nothing(unbatch):
    model, _ = unbatch
    wrong = {"centred": np.zeros((4, 3), np.float32), "readout": np.zeros((2, 3), np.float32)}
    judge = SpecificationJudge(lambda: ReferenceRunner(model), ops=UNBATCH_OPS)
    judge.witness(TWO_GRAPHS, wrong)
    assert judge.excuse(NO_GRAPH) is None


def test_a_reference_that_runs_the_input_excuses_nothing(unbatch):
    model, _ = unbatch
    right = ReferenceRunner(model).run(TWO_GRAPHS).outputs
    judge = SpecificationJudge(lambda: ReferenceRunner(model), ops=UNBATCH_OPS)
    judge.witness(TWO_GRAPHS, right)
    assert judge.excuse(TWO_GRAPHS) is None  # it runs: a candidate failing there is to blame
    assert "concatenate" in judge.excuse(NO_GRAPH)


def test_only_a_known_departure_of_onnxruntime_is_asked_about(unbatch):
    """onnx.reference has its own bugs (its SequenceInsert at position n inserts at 0): it is
    asked only where a probed quirk of onnxruntime may explain what the trial shows."""
    model, _ = unbatch
    right = ReferenceRunner(model).run(TWO_GRAPHS).outputs
    judge = SpecificationJudge(lambda: ReferenceRunner(model), ops={"Loop", "SequenceAt"})
    judge.witness(TWO_GRAPHS, right)
    assert judge.excuse(NO_GRAPH) is None  # no SplitToSequence: no departure explains it
    nan = {"x": np.full((4, 3), np.nan, np.float32), "batch": TWO_GRAPHS["batch"]}
    assert not judge.sides_with(nan, ReferenceRunner(model).run(nan).outputs)  # no ReduceMax


def test_the_command_says_why_the_trial_was_skipped(unbatch, tmp_path):
    from typer.testing import CliRunner

    from seqlower.cli.app import app

    original, lowered = tmp_path / "model.onnx", tmp_path / "lowered.onnx"
    onnx.save(unbatch[0], original)
    onnx.save(unbatch[1], lowered)
    result = CliRunner().invoke(app, ["verify", str(original), str(lowered)])  # trial 15: no id
    assert result.exit_code == 0, result.output
    assert "only the candidate failed, on an input the specification rejects" in result.output
    assert "splits a non-empty axis by an empty list of sizes" in result.output


HEADER = '<ir_version: 8, opset_import: ["" : 17]>\n'
ROW_MAX = onnx.parser.parse_model(
    HEADER
    + """g (float[N,2] x) => (float[2] top) {
    top = ReduceMax<axes = [0], keepdims = 0>(x)
}"""
)
# the specification's maximum (numpy's): NaN wherever a column holds one, in any order
NAN_KEEPING_MAX = onnx.parser.parse_model(
    HEADER
    + """g (float[N,2] x) => (float[2] top) {
    largest = ReduceMax<axes = [0], keepdims = 0>(x)
    nan = IsNaN(x)
    zero = Constant<value = float {0}>()
    nans = Where(nan, x, zero)
    axes = Constant<value = int64[1] {0}>()
    added = ReduceSum<keepdims = 0>(nans, axes)
    top = Add(largest, added)
}"""
)
ROW_MIN = onnx.parser.parse_model(
    HEADER
    + """g (float[N,2] x) => (float[2] top) {
    top = ReduceMin<axes = [0], keepdims = 0>(x)
}"""
)
PLAIN = {"x": np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)}
NAN_AFTER_A_NUMBER = {"x": np.array([[1.0, 2.0], [np.nan, -1.0]], np.float32)}


def test_a_difference_the_specification_computes_is_skipped_not_a_difference():
    if not runtime_quirks.holds("reduce-max-nan-order"):
        pytest.skip("onnxruntime's ReduceMax no longer ignores a NaN after a number")
    report = verify(ROW_MAX, NAN_KEEPING_MAX, inputs=[PLAIN, NAN_AFTER_A_NUMBER])
    assert [trial.status for trial in report.trials] == [
        "ok",
        "specification sides with candidate",
    ]
    (output,) = report.trials[1].outputs
    assert output.verdict == "specification sides with candidate"
    assert "expected 1.0, got nan" in output.detail  # onnxruntime's 1, the specification's NaN
    assert report.equivalent and report.skipped == 1


def test_a_difference_the_specification_does_not_compute_stays_a_difference():
    report = verify(ROW_MAX, ROW_MIN, inputs=[PLAIN, PLAIN])
    assert {trial.status for trial in report.trials} == {"differ"}
    assert not report.equivalent


def test_a_difference_before_the_trial_that_vouches_for_the_reference_is_judged_after_it():
    if not runtime_quirks.holds("reduce-max-nan-order"):
        pytest.skip("onnxruntime's ReduceMax no longer ignores a NaN after a number")
    report = verify(ROW_MAX, NAN_KEEPING_MAX, inputs=[NAN_AFTER_A_NUMBER, PLAIN])
    assert [trial.status for trial in report.trials] == ["specification sides with candidate", "ok"]
    assert report.equivalent and report.reproduction is None
    # with no trial at all to vouch for the reference, it stays a difference
    alone = verify(ROW_MAX, NAN_KEEPING_MAX, inputs=[NAN_AFTER_A_NUMBER])
    assert [trial.status for trial in alone.trials] == ["differ"]
    assert not alone.equivalent and alone.reproduction is not None


# Erasing position -1 leaves [x[3:4]] of shape [1] beside the inserted empty [0]: stacking them
# is an error by the specification; onnxruntime fills the second row with memory it never wrote,
# in the original and in the lowered model alike (quirk concat-empty-misfit). Position 1 leaves
# two empty elements: a [2, 0] stack both compute.
MISFIT_STACK = onnx.parser.parse_model(
    HEADER
    + """g (float[4] x, int64[3] sizes, int64 p) => (float[?,?] y) {
    s = SplitToSequence <axis = 0> (x, sizes)
    a = SequenceErase (s, p)
    zero = Constant <value = int64 {0}> ()
    b = SequenceErase (a, zero)
    e = Constant <value = float[0] {}> ()
    c = SequenceInsert (b, e)
    y = ConcatFromSequence <axis = 0, new_axis = 1> (c)
}"""
)
FITTING = {
    "x": np.array([-0.5, 1.75, 0.75, 2.0], np.float32),
    "sizes": np.array([3, 1, 0], np.int64),
    "p": np.array(1, np.int64),
}
MISFIT = {**FITTING, "p": np.array(-1, np.int64)}


@pytest.fixture(scope="module")
def misfit_stack() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    if not runtime_quirks.holds("concat-empty-misfit"):
        pytest.skip("onnxruntime now checks the dims of an empty input to Concat")
    return MISFIT_STACK, optimize(MISFIT_STACK).model


def test_values_of_a_concatenation_the_specification_rejects_are_not_a_difference(misfit_stack):
    report = verify(*misfit_stack, inputs=[FITTING, MISFIT])
    assert [trial.status for trial in report.trials] == ["ok", "outside the specification"]
    rejected = report.trials[1]
    assert rejected.candidate_error is None  # both ran
    assert "except for the concatenation axis" in rejected.reference_error
    assert report.skipped == 1 and not report.failures()
    from seqlower.cli.verify_command import _footer  # what the command prints below its table

    said = "\n".join(_footer(report))
    assert "trial 1 (skipped, not a difference): the outputs differ, and onnx.reference " in said
    strict = verify(*misfit_stack, inputs=[FITTING, MISFIT], strict_errors=True)
    (line,) = strict.failures()
    assert "the values differ where the specification rejects the input" in line


def test_a_misfit_before_the_trial_that_vouches_for_the_reference_is_judged_after_it(
    misfit_stack,
):
    report = verify(*misfit_stack, inputs=[MISFIT, FITTING])
    assert [trial.status for trial in report.trials] == ["outside the specification", "ok"]
    assert report.equivalent and report.skipped == 1 and report.reproduction is None
    alone = verify(*misfit_stack, inputs=[MISFIT])  # nothing vouches for the reference
    assert [trial.status for trial in alone.trials] == ["differ"]
    assert not alone.equivalent


def test_a_difference_where_the_reference_concatenates_stays_a_difference(misfit_stack):
    """Values that differ where the original's concatenation fits: nothing is rejected there."""
    doubled = onnx.parser.parse_model(
        HEADER + "g (float[2] x) => (float[4] y) { y = Concat <axis = 0> (x, x) }"
    )
    negated = onnx.parser.parse_model(
        HEADER + "g (float[2] x) => (float[4] y) { n = Neg (x) y = Concat <axis = 0> (x, n) }"
    )
    zeros, ones = {"x": np.zeros(2, np.float32)}, {"x": np.ones(2, np.float32)}
    report = verify(doubled, negated, inputs=[zeros, ones])
    assert [trial.status for trial in report.trials] == ["ok", "differ"]
    assert not report.equivalent


# The rows of each image above 0.5, stacked: the stack requires one shape, so the lowered model
# makes them a Loop's scan output, which checks every iteration's shape. Where the first image
# keeps no row and the second one, onnxruntime stacks the empty row beside the misfit (quirk
# concat-empty-misfit) and the lowered model fails: the specification rejects the original.
STACKED_KEPT_ROWS = onnx.parser.parse_model(
    HEADER
    + """g (float[B,N] scores) => (float[?,?] y) {
    t = Constant <value = bool {1}> ()
    shape = Shape (scores)
    zero = Constant <value = int64 {0}> ()
    b = Gather (shape, zero)
    e = SequenceEmpty <dtype = 1> ()
    s = Loop (b, t, e) <body = per_image (int64 i, bool c, seq(float) acc) => (bool c2,
                                                                          seq(float) out) {
        row = Gather <axis = 0> (scores, i)
        half = Constant <value = float {0.5}> ()
        keep = Greater (row, half)
        kept = Compress <axis = 0> (row, keep)
        out = SequenceInsert (acc, kept)
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis = 0, new_axis = 1> (s)
}"""
)
ONE_ROW_EACH = {"scores": np.array([[1.0, 0.0], [0.0, 2.0]], np.float32)}
NONE_THEN_ONE = {"scores": np.array([[0.0, 0.0], [0.0, 2.0]], np.float32)}


def test_a_failure_of_the_lowered_model_where_the_original_stacks_a_misfit_is_not_one():
    if not runtime_quirks.holds("concat-empty-misfit"):
        pytest.skip("onnxruntime now checks the dims of an empty input to Concat")
    lowered = optimize(STACKED_KEPT_ROWS).model
    assert "ConcatFromSequence" not in {node.op_type for node in lowered.graph.node}
    report = verify(STACKED_KEPT_ROWS, lowered, inputs=[ONE_ROW_EACH, NONE_THEN_ONE])
    assert [trial.status for trial in report.trials] == ["ok", "outside the specification"]
    rejected = report.trials[1]
    assert rejected.candidate_error  # the lowered model fails
    assert "except for the concatenation axis" in rejected.reference_error
    assert report.equivalent and report.skipped == 1
    # the misfit first: judged once the trial after it has vouched for the reference (the
    # mutation fuzzer's m16_235, masked mean pooling, met it as trial 0)
    first = verify(STACKED_KEPT_ROWS, lowered, inputs=[NONE_THEN_ONE, ONE_ROW_EACH])
    assert [trial.status for trial in first.trials] == ["outside the specification", "ok"]
    assert first.equivalent and first.reproduction is None
    # with nothing to vouch for the reference, it stays a difference
    alone = verify(STACKED_KEPT_ROWS, lowered, inputs=[NONE_THEN_ONE])
    assert [trial.status for trial in alone.trials] == ["candidate failed"]
    assert not alone.equivalent and alone.reproduction is not None


# PyTorch's unbind: a scalar split of 1 with keepdims=0, whose axis onnxruntime squeezes and the
# specification keeps (quirk scalar-split-keepdims; seqlower follows onnxruntime). Rows of no
# column beside a pad of 2 are a misfit stack, which onnxruntime runs (concat-empty-misfit) and
# the lowered model refuses; rows of 2 beside it fit.
UNBOUND_ROWS_AND_PAD = onnx.parser.parse_model(
    HEADER
    + """g (float[T,C] x, float[P] pad) => (float[?,?] y) {
    one = Constant <value = int64 {1}> ()
    s = SplitToSequence <axis = 0, keepdims = 0> (x, one)
    c = SequenceInsert (s, pad)
    y = ConcatFromSequence <axis = 0, new_axis = 1> (c)
}"""
)
ROWS_OF_TWO = {"x": np.arange(4, dtype=np.float32).reshape(2, 2), "pad": np.zeros(2, np.float32)}
ROWS_OF_NONE = {"x": np.zeros((2, 0), np.float32), "pad": np.zeros(2, np.float32)}


def test_the_reference_reads_an_unbind_as_onnxruntime_does_so_it_can_vouch():
    """Read as the specification reads it, the unbind's rows keep their axis: the reference
    then fails on the fitting trial that should vouch for it, and excused nothing (the mutation
    fuzzer's m6688_300, while_len_pad with tokens of no column, failed verification so)."""
    if not (
        runtime_quirks.holds("concat-empty-misfit")
        and runtime_quirks.holds("scalar-split-keepdims")
    ):
        pytest.skip("onnxruntime no longer shows concat-empty-misfit or scalar-split-keepdims")
    model = UNBOUND_ROWS_AND_PAD
    lowered = optimize(model).model
    for inputs in ([ROWS_OF_TWO, ROWS_OF_NONE], [ROWS_OF_NONE, ROWS_OF_TWO]):
        report = verify(model, lowered, inputs=inputs)
        statuses = [trial.status for trial in report.trials]
        assert sorted(statuses) == ["ok", "outside the specification"]
        rejected = report.trials[statuses.index("outside the specification")]
        assert rejected.candidate_error  # the lowered model fails
        assert "except for the concatenation axis" in rejected.reference_error
        assert report.equivalent and report.skipped == 1
    ops = {"SplitToSequence", "SequenceInsert", "ConcatFromSequence"}
    for new_ops, excused in (((), False), (splits_as_onnxruntime(), True)):
        judge = SpecificationJudge(lambda n=new_ops: ReferenceRunner(model, n), ops=ops)
        judge.witness(ROWS_OF_TWO, {"y": np.array([[0, 1], [2, 3], [0, 0]], np.float32)})
        assert (judge.excuse(ROWS_OF_NONE) is not None) is excused
