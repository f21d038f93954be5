"""A model output declared with no shape (the ONNX checker rejects it): lowered, and declared
with the rank seqlower proves (`seqlower.output_ranks`); refused where no rank is proved."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import assert_same_outputs, lower, parse, run_ort

import seqlower
from seqlower.errors import InvalidModelError

# a list built in a Loop from empty, then the element put in front: ONNX inference gives the
# loop's list no element shape, so `y` and `z` have none; seqlower's rank walk proves 2 and 1
_BUILT_IN_A_LOOP = """
g (float[N] x, int64 n) => (float y, float z, int64 k) {
    e = SequenceEmpty<dtype=1>()
    s = Loop(n, , e) <body = b (int64 i, bool c, seq(float) acc)
                                => (bool co, seq(float) acc2) {
        co = Identity(c)
        fi = Cast<to=1>(i)
        v = Mul(x, fi)
        acc2 = SequenceInsert(acc, v)
    }>
    zero = Constant<value = int64 {0}>()
    s2 = SequenceInsert(s, x, zero)
    y = ConcatFromSequence<axis=0, new_axis=1>(s2)
    last = Constant<value = int64 {-1}>()
    z = SequenceAt(s2, last)
    k = SequenceLength(s2)
}
"""


def _shapeless(model: onnx.ModelProto, *names: str) -> onnx.ModelProto:
    for output in model.graph.output:
        if output.name in names:
            output.type.tensor_type.ClearField("shape")
    return model


def _rank(model: onnx.ModelProto, name: str) -> int | None:
    (output,) = [o for o in model.graph.output if o.name == name]
    tensor = output.type.tensor_type
    return len(tensor.shape.dim) if tensor.HasField("shape") else None


def test_the_checker_rejects_such_an_output_and_onnx_inference_gives_it_no_shape():
    model = _shapeless(parse(_BUILT_IN_A_LOOP), "y", "z")
    with pytest.raises(onnx.checker.ValidationError, match="Field 'shape' of 'type'"):
        onnx.checker.check_model(model)
    pruned = onnx.ModelProto()
    pruned.CopyFrom(model)
    inferred = onnx.shape_inference.infer_shapes(pruned)
    assert _rank(inferred, "y") is None and _rank(inferred, "z") is None


@pytest.mark.parametrize("target", ["generic", "onnxruntime", "portable"])
def test_an_output_without_shape_is_declared_with_the_proved_rank(target):
    model = _shapeless(parse(_BUILT_IN_A_LOOP), "y", "z")
    lowered, report = lower(model, target=target)  # full_check passes, onnxruntime loads it
    assert (_rank(lowered, "y"), _rank(lowered, "z"), _rank(lowered, "k")) == (2, 1, 0)
    assert sum(report.sequence_ops_after.values()) == 0
    x = np.array([1.0, -2.0, 0.5], np.float32)
    for n in (0, 1, 4):  # no iteration: the list holds only the element put in front
        feeds = {"x": x, "n": np.array(n, np.int64)}
        y, z, k = assert_same_outputs(model, lowered, feeds)
        assert y.shape == (n + 1, 3) and z.shape == (3,) and k == n + 1
        np.testing.assert_array_equal(z, x * max(n - 1, 0) if n else x)


def test_the_report_says_which_outputs_it_declared():
    model = _shapeless(parse(_BUILT_IN_A_LOOP), "z")
    _, report = seqlower.optimize(model)
    said = [w for w in report.warnings if "'z'" in w]
    assert said and "rank 1" in said[0], report.warnings


def test_an_output_whose_rank_is_not_proved_is_refused_naming_it():
    # a Reshape to a shape given at run time: its rank is the shape's length, unknown here
    model = _shapeless(
        parse("""
        g (float[N] x, int64[K] shape) => (float y, float w) {
            s = SplitToSequence(x)
            w = ConcatFromSequence<axis=0>(s)
            y = Reshape(x, shape)
        }"""),
        "y",
    )
    # onnxruntime runs the original: the rank exists only at run time
    (y, _) = run_ort(model, {"x": np.arange(6, dtype=np.float32), "shape": np.array([2, 3])})
    assert y.shape == (2, 3)
    with pytest.raises(InvalidModelError, match="ONNX checker rejects it: Field 'shape'") as err:
        seqlower.optimize(model)
    assert "output 'y'" in str(err.value) and "cannot prove its rank" in str(err.value)


def test_an_input_without_shape_is_still_refused():
    model = parse("""
        g (float x) => (float[N] y) {
            s = SplitToSequence<keepdims=0>(x)
            y = ConcatFromSequence<axis=0>(s)
        }""")
    model.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(InvalidModelError, match="input 'x' of the model declares"):
        seqlower.optimize(model)


def test_another_checker_error_beside_a_shapeless_output_is_the_refusal():
    model = _shapeless(parse(_BUILT_IN_A_LOOP), "y")
    model.graph.node.add(op_type="NoSuchOperator", input=["x"], output=["bad"])
    with pytest.raises(InvalidModelError, match="NoSuchOperator"):
        seqlower.optimize(model)
