"""A model whose branches declare shapes for their lists that inference contradicts (onnxruntime
ignores those, and so does the input check) is written with those declarations dropped, where
they alone make the output fail the full check: exit 0, not an internal error (the mutation
fuzzer's m13_178, threshold_keep with a branch's list rewired to a list of another rank, kept as
given for onnxruntime). A check failing for another reason stays an internal error, and the
model's declarations are left as they were."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

from seqlower.cli.app import _check_output
from seqlower.errors import InternalError
from seqlower.ops import iter_all_graphs
from seqlower.subgraph_declarations import forget_subgraph_output_shapes

HEADER = '<ir_version: 8, opset_import: ["" : 17]>\n'

# `seq(float)` in the text format declares elements of rank 0 (an empty shape): the rows of x
# (rank 1) and its chunks (rank 2) both contradict it
RANKS = (
    HEADER
    + """g (float[4,3] x, bool c) => (float y, int64 n) {
    one = Constant <value = int64 {1}> ()
    s = If (c) <then_branch = th () => (seq(float) t) {
            t = SplitToSequence <axis = 0, keepdims = 0> (x)
        }, else_branch = el () => (seq(float) t2) {
            t2 = SplitToSequence <axis = 0> (x, one)
        }>
    joined = ConcatFromSequence <axis = 0> (s)
    y = ReduceSum <keepdims = 0> (joined)
    n = SequenceLength (s)
}"""
)


def _branch_shapes(model: onnx.ModelProto) -> list[bool]:
    """Whether each branch output of the If declares its elements' shape."""
    (node,) = [n for n in model.graph.node if n.op_type == "If"]
    return [
        attribute.g.output[0].type.sequence_type.elem_type.tensor_type.HasField("shape")
        for attribute in node.attribute
    ]


def test_the_input_declares_what_inference_contradicts_and_onnxruntime_runs_it():
    model = onnx.parser.parse_model(RANKS)
    assert _branch_shapes(model) == [True, True]
    with pytest.raises(onnx.shape_inference.InferenceError, match="differ in rank"):
        onnx.checker.check_model(model, full_check=True)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    session = ort.InferenceSession(model.SerializeToString())
    assert [int(session.run(None, {"x": x, "c": np.array(c)})[1]) for c in (True, False)] == [4, 4]


@pytest.mark.parametrize("target", ["onnxruntime", "portable"])
def test_it_is_written_without_them_and_computes_the_same(tmp_path, target):
    source, written = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(onnx.parser.parse_model(RANKS), source)
    command = [sys.executable, "-m", "seqlower", "optimize", str(source), str(written), "-q"]
    result = subprocess.run(
        [*command, "--target", target], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    lowered = onnx.load(written)
    onnx.checker.check_model(lowered, full_check=True)
    original = ort.InferenceSession(str(source))
    candidate = ort.InferenceSession(str(written))
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    for c in (True, False):
        feeds = {"x": x, "c": np.array(c)}
        for want, got in zip(original.run(None, feeds), candidate.run(None, feeds), strict=True):
            np.testing.assert_array_equal(got, want)


def test_only_subgraph_outputs_lose_their_shapes():
    model = ir.from_proto(onnx.parser.parse_model(RANKS))
    assert forget_subgraph_output_shapes(model) == 2
    for graph in iter_all_graphs(model):
        if graph is not model.graph:
            assert all(value.shape is None for value in graph.outputs)
    assert [value.shape is not None for value in model.graph.outputs] == [True, True]
    assert forget_subgraph_output_shapes(model) == 0


def test_a_check_failing_for_another_reason_stays_an_internal_error():
    # a type error in a branch (float + int64) is held against the model: its declarations stay
    wrong = RANKS.replace(
        "t = SplitToSequence <axis = 0, keepdims = 0> (x)",
        "bad = Add (x, one)\n            t = SplitToSequence <axis = 0, keepdims = 0> (bad)",
    )
    model = ir.from_proto(onnx.parser.parse_model(wrong))
    with pytest.raises(InternalError, match="the lowered model fails the ONNX checker"):
        _check_output(model)
    assert _branch_shapes(ir.to_proto(model)) == [True, True]
