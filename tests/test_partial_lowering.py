"""A model that can only be partly lowered is judged as a whole by the default target: when
sequence operators stay and lowering the rest grows the model (conversions at the boundary of
what stays), the original is returned, and the report says so; `partial=True` (`--partial`)
lowers what it can even so."""

from __future__ import annotations

import numpy as np
import onnx
from support import assert_same_outputs, parse, run_ort, sequence_op_count
from typer.testing import CliRunner

import seqlower
from seqlower.cli import app
from seqlower.pipeline import KEPT_PARTIAL_HINT

# `s` stays (split by a run-time number of sizes, in a model of opset 13, below the 14 that the
# tensor form of a list needs); `s[p]` alone could be read from `x` by Slice: 10 more nodes for
# a list that stays anyway
_GROWS = """
g (float[N,3] x, int64[K] sizes, float[12] V, int64[R] shape, int64 p, int64 q)
    => (float[?,3] a, float[?] b) {
   s = SplitToSequence <axis = 0> (x, sizes)
   a0 = SequenceAt (s, p)
   a = Relu (a0)
   W = Reshape (V, shape)
   t = SequenceInsert (s, W)
   last = SequenceAt (t, q)
   minus = Constant <value = int64[1] {-1}> ()
   b = Reshape (last, minus)
}
"""


def _feeds() -> dict[str, np.ndarray]:
    return {
        "x": np.arange(18, dtype=np.float32).reshape(6, 3) - 5,
        "sizes": np.array([1, 3, 2], dtype=np.int64),
        "V": np.arange(12, dtype=np.float32),
        "shape": np.array([4, 3], dtype=np.int64),
        "p": np.array(-2, dtype=np.int64),
        "q": np.array(3, dtype=np.int64),
    }


def _nodes(model: onnx.ModelProto) -> int:
    return len(model.graph.node)


def test_a_model_that_only_partly_lowers_and_grows_is_kept_as_given():
    model = parse(_GROWS, opset=13)
    lowered, report = seqlower.optimize(model)
    assert _nodes(lowered) == _nodes(model)
    assert sequence_op_count(lowered) == sequence_op_count(model) == 4
    assert report.stop_reason.startswith("kept the original: 3 of its 4 sequence operators")
    assert f"from {_nodes(model)} to 18 nodes" in report.stop_reason
    (split,) = [op for op in report.remaining if op.op_type == "SplitToSequence"]
    assert split.reasons[0] == "partial: kept as given: the model can only be partly lowered"
    assert any("the number of split sizes depends on data" in r for r in split.reasons)
    assert all(op.hint == KEPT_PARTIAL_HINT for op in report.remaining)
    onnx.checker.check_model(lowered, full_check=True)
    assert_same_outputs(model, lowered, _feeds())


def test_partial_lowers_what_it_can_and_computes_the_same():
    model = parse(_GROWS, opset=13)
    lowered, report = seqlower.optimize(model, partial=True)
    assert _nodes(lowered) == 18
    assert sequence_op_count(lowered) == 3
    assert not report.stop_reason.startswith("kept the original")
    onnx.checker.check_model(lowered, full_check=True)
    assert_same_outputs(model, lowered, _feeds())


def test_the_hint_works_on_the_command_line(tmp_path):
    source, out = tmp_path / "model.onnx", tmp_path / "out.onnx"
    onnx.save(parse(_GROWS, opset=13), source)
    kept = CliRunner().invoke(app, ["optimize", str(source), str(out)])
    assert kept.exit_code == 0, kept.output
    printed = " ".join(kept.stdout.split())  # as wrapped to fit the terminal
    assert "try --partial" in printed
    assert "--partial lowers it even so" in printed
    assert "costs more as tensors" not in printed  # nothing was lowered
    assert _nodes(onnx.load(out)) == 8
    lowered = CliRunner().invoke(app, ["optimize", str(source), str(out), "--partial", "-q"])
    assert lowered.exit_code == 0, lowered.output
    assert _nodes(onnx.load(out)) == 18
    np.testing.assert_array_equal(run_ort(onnx.load(out), _feeds())[1], np.arange(12.0))


def test_a_partial_lowering_that_does_not_grow_the_model_is_kept():
    """`s[p]` read from `x` by one Gather while `s` stays: no larger, so lowered."""
    model = parse(
        """
g (float[N,3,4] x, float[12] V, int64[R] shape, int64 p) => (float[?,3,4] a, float[?] b) {
    s = SplitToSequence <axis = 0, keepdims = 0> (x)
    a0 = SequenceAt (s, p)
    a = Relu (a0)
    W = Reshape (V, shape)
    t = SequenceInsert (s, W)
    last = SequenceAt (t, p)
    minus = Constant <value = int64[1] {-1}> ()
    b = Reshape (last, minus)
}""",
        opset=13,
    )
    lowered, report = seqlower.optimize(model)
    assert report.rules_fired == {"at-of-split": 1}
    assert sequence_op_count(lowered) == sequence_op_count(model) - 1
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((3, 3, 4)).astype(np.float32),
        "V": np.arange(12, dtype=np.float32),
        "shape": np.array([2, 6], dtype=np.int64),
        "p": np.array(-1, dtype=np.int64),
    }
    assert_same_outputs(model, lowered, feeds)


def test_a_model_with_a_sequence_output_keeps_its_partial_lowering():
    """Its interface stays a sequence whatever is done: the lowering behind it is kept."""
    text = _GROWS.replace("=> (float[?,3] a, float[?] b)", "=> (float[?,3] a, seq(float) t)")
    model = parse(
        text.replace("   last = SequenceAt (t, q)\n", "").replace(
            "   minus = Constant <value = int64[1] {-1}> ()\n   b = Reshape (last, minus)\n", ""
        ),
        opset=13,
    )
    lowered, report = seqlower.optimize(model)
    assert not report.stop_reason.startswith("kept the original")
    assert sequence_op_count(lowered) < sequence_op_count(model)
