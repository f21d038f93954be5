"""The verifier catches deliberately broken candidates and accepts true equivalents."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

from seqlower.errors import ModelInputError
from seqlower.verification import verify

HEADER = '<ir_version: 9, opset_import: ["": 18]>\n'


def _model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(HEADER + text)
    onnx.checker.check_model(model, full_check=True)
    return model


ADD = _model("g (float[N] x, float[N] y) => (float[N] z) { z = Add(x, y) }")
SUB = _model("g (float[N] x, float[N] y) => (float[N] z) { z = Sub(x, y) }")
SCALE = _model("""g (float[N] x) => (float[N] z) {
    c = Constant<value = float[1] {2.0}>()
    z = Mul(x, c)
}""")
SCALE_CHANGED = _model("""g (float[N] x) => (float[N] z) {
    c = Constant<value = float[1] {2.5}>()
    z = Mul(x, c)
}""")
PAIR = _model("g (float[N] x, float[N] y) => (seq(float[N]) s) { s = SequenceConstruct(x, y) }")
PAIR_SWAPPED = _model(
    "g (float[N] x, float[N] y) => (seq(float[N]) s) { s = SequenceConstruct(y, x) }"
)
PAIR_DROPPED = _model(
    "g (float[N] x, float[N] y) => (seq(float[N]) s) { s = SequenceConstruct(x) }"
)
KEEP = _model("g (float[N, 2] x) => (float[N, 2] z) { z = Identity(x) }")
FLAT = _model("""g (float[N, 2] x) => (float[M] z) {
    shape = Constant<value = int64[1] {-1}>()
    z = Reshape(x, shape)
}""")
AS_DOUBLE = _model("g (float[N, 2] x) => (double[N, 2] z) { z = Cast<to = 11>(x) }")


def _at(position: int) -> onnx.ModelProto:
    return _model(f"""g (float[4, 2] x) => (float[1, 2] y) {{
        p = Constant<value = int64 {{{position}}}>()
        q = SplitToSequence<axis = 0>(x)
        y = SequenceAt(q, p)
    }}""")


@pytest.mark.parametrize(
    ("original", "candidate", "verdict"),
    [
        (ADD, SUB, "values differ"),
        (SCALE, SCALE_CHANGED, "values differ"),
        (PAIR, PAIR_SWAPPED, "values differ"),
        (PAIR, PAIR_DROPPED, "length differs"),
        (KEEP, FLAT, "shape differs"),
        (KEEP, AS_DOUBLE, "dtype differs"),
        (_at(1), _at(2), "values differ"),
    ],
    ids=["add-sub", "constant", "permuted", "dropped", "shape", "dtype", "off-by-one"],
)
def test_broken_candidates_are_caught(original, candidate, verdict):
    report = verify(original, candidate)
    assert not report.equivalent
    # the typical trials differ; a later one may not (N=0, all zeros, one constant value)
    assert {trial.status for trial in report.trials} <= {"ok", "differ"}
    assert [trial.status for trial in report.trials[:3]] == ["differ"] * 3
    assert all(trial.outputs[0].verdict == verdict for trial in report.trials[:3])
    assert sum(trial.status == "differ" for trial in report.trials) >= 10


def test_permuted_sequence_names_the_element():
    report = verify(PAIR, PAIR_SWAPPED, trials=1)
    assert report.trials[0].outputs[0].detail.startswith("element 0:")


CONCAT_SEQ = _model("""g (float[N, 3] x, float[N, 3] y) => (float[N, 6] z) {
    s = SequenceConstruct(x, y)
    z = ConcatFromSequence<axis = 1>(s)
}""")
CONCAT = _model(
    "g (float[N, 3] x, float[N, 3] y) => (float[N, 6] z) { z = Concat<axis = 1>(x, y) }"
)
AT_SEQ = _model("""g (float[N, 3] x, int64 p) => (float[3] y) {
    q = SplitToSequence<axis = 0, keepdims = 0>(x)
    y = SequenceAt(q, p)
}""")
AT_GATHER = _model("g (float[N, 3] x, int64 p) => (float[3] y) { y = Gather<axis = 0>(x, p) }")
SPLIT_SEQ = _model("""g (float[N, 3] x, int64[2] sizes) => (float[M, 3] y) {
    q = SplitToSequence<axis = 0>(x, sizes)
    one = Constant<value = int64 {1}>()
    y = SequenceAt(q, one)
}""")
SPLIT = _model("""g (float[N, 3] x, int64[2] sizes) => (float[M, 3] y) {
    a, y = Split<axis = 0>(x, sizes)
}""")


@pytest.mark.parametrize(
    ("original", "candidate"),
    [(CONCAT_SEQ, CONCAT), (AT_SEQ, AT_GATHER), (SPLIT_SEQ, SPLIT)],
    ids=["concat", "sequence-at-gather", "split"],
)
def test_true_equivalents_are_accepted(original, candidate):
    report = verify(original, candidate, trials=4)
    assert report.equivalent, report.failures()
    assert {trial.status for trial in report.trials} == {"ok"}


def test_models_are_accepted_as_path_proto_and_ir(tmp_path):
    path = tmp_path / "concat.onnx"
    onnx.save(CONCAT_SEQ, path)
    report = verify(path, ir.serde.deserialize_model(CONCAT), trials=1)
    assert report.equivalent
    assert verify(str(path), CONCAT, trials=1).equivalent


def test_missing_extra_and_reordered_outputs_are_reported():
    original = _model("g (float[2] x) => (float[2] a, float[2] b) { a = Neg(x) b = Abs(x) }")
    reordered = _model("g (float[2] x) => (float[2] b, float[2] a) { a = Neg(x) b = Abs(x) }")
    renamed = _model("g (float[2] x) => (float[2] a, float[2] c) { a = Neg(x) c = Abs(x) }")
    problems = verify(original, reordered, trials=1).problems
    assert problems == (
        "output 'a' is output 1 of the candidate, output 0 of the original",
        "output 'b' is output 0 of the candidate, output 1 of the original",
    )
    report = verify(original, renamed, trials=1)
    assert not report.equivalent
    assert report.problems == (
        "the candidate has no output 'b'",
        "the candidate has an extra output 'c'",
    )
    assert report.trials[0].outputs[1].verdict == "missing"


def test_changed_inputs_are_reported():
    original = _model("g (float[2] x, float[2] y) => (float[2] z) { z = Add(x, y) }")
    candidate = _model("g (float[2] x, float[2] w) => (float[2] z) { z = Add(x, w) }")
    with pytest.raises(ModelInputError) as caught:
        verify(original, candidate, trials=1)
    assert str(caught.value) == (
        "the models take different inputs, so they cannot be compared: the candidate has no "
        "input 'y'; the candidate needs an input 'w' that the original does not have"
    )
    retyped = _model("g (float[2] x, int64[2, 1] y) => (int64[2, 1] z) { z = Identity(y) }")
    with pytest.raises(
        ModelInputError,
        match="input 'y': tensor of float, rank 1, in the original; tensor of int64, rank 2, in",
    ):
        verify(original, retyped, trials=1)
