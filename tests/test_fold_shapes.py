"""Static shape arithmetic becomes constants once lowering is done (`passes/fold_shapes.py`):
what is folded, what is not (and why), and that the folded model computes the same."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, parse

from seqlower.passes import infer_shapes
from seqlower.passes.fold_shapes import fold_static_shapes

# `x.size(-1) // 3` as a TorchScript export writes it, then used as a Slice end
HEADS = """
agraph (float[B,S,24] x) => (float[B,S,8] y) {
    shape = Shape (x)
    minus_one = Constant <value = int64[1] {-1}> ()
    last = Gather <axis = 0> (shape, minus_one)
    three = Constant <value = int64[1] {3}> ()
    width = Div (last, three)
    zero = Constant <value = int64[1] {0}> ()
    y = Slice (x, zero, width, minus_one)
}
"""


def _ops(model) -> list[str]:
    return [node.op_type for node in model.graph.node]


def _inferred(text: str) -> ir.Model:
    """The model in onnx_ir form with its shapes inferred, as lowering leaves it."""
    model = ir.from_proto(parse(text))
    infer_shapes(model)
    return model


def test_shape_arithmetic_on_static_dims_becomes_a_constant():
    model = parse(HEADS)
    lowered, _ = lower(model)
    assert _ops(lowered) == ["Constant", "Constant", "Constant", "Slice"]
    width = next(n for n in lowered.graph.node if n.output[0] == "width")
    assert width.op_type == "Constant"
    x = np.arange(2 * 3 * 24, dtype=np.float32).reshape(2, 3, 24)
    assert_same_outputs(model, lowered, {"x": x})


def test_a_symbolic_dim_is_not_folded():
    model = parse(
        HEADS.replace("float[B,S,24] x", "float[B,S,D] x").replace("[B,S,8] y", "[B,S,?] y")
    )
    lowered, _ = lower(model)
    assert _ops(lowered).count("Shape") == 1 and "Div" in _ops(lowered)
    x = np.ones((2, 3, 12), np.float32)
    assert_same_outputs(model, lowered, {"x": x})


def test_an_overridable_initializer_is_not_folded():
    """An initializer that is also a graph input may be fed another value at run time."""
    model = parse("""
agraph (float[B,S,24] x, int64[1] heads) => (float[B,S,?] y) <int64[1] heads = {3}> {
    shape = Shape (x)
    minus_one = Constant <value = int64[1] {-1}> ()
    last = Gather <axis = 0> (shape, minus_one)
    width = Div (last, heads)
    zero = Constant <value = int64[1] {0}> ()
    y = Slice (x, zero, width, minus_one)
}""")
    lowered, _ = lower(model)
    assert "Div" in _ops(lowered)
    x = np.ones((1, 2, 24), np.float32)
    assert_same_outputs(model, lowered, {"x": x, "heads": np.array([4], np.int64)})


def test_a_weight_is_not_folded():
    """A float tensor is no shape: `MatMul` by a transposed constant keeps its weight as is."""
    model = parse("""
agraph (float[2,2] x) => (float[2,2] y) {
    w = Constant <value = float[2,2] {1, 2, 3, 4}> ()
    n = Neg (w)
    y = MatMul (x, n)
}""")
    lowered, _ = lower(model)
    assert "Neg" in _ops(lowered)


def test_a_loop_state_and_a_body_output_stay_computed():
    """OpenVINO misreads a Loop whose state starts as a folded constant, or whose body returns
    one: the initial table and the body's condition stay as computed."""
    model = _inferred("""
agraph (int64 n) => (int64[?] y) {
    e = Constant <value = int64[2] {0, 5}> ()
    one = Constant <value = int64[1] {1}> ()
    two = Constant <value = int64[1] {2}> ()
    start = Slice (e, one, two)
    t = Constant <value = bool {1}> ()
    y = Loop (n, t, start) <body = body (int64 i, bool c, int64[?] acc)
                                        => (bool c_out, int64[?] grown) {
        c_out = Identity (t)
        u = Unsqueeze (i, one)
        grown = Concat <axis = 0> (acc, u)
    }>
}""")  # fmt: skip
    assert fold_static_shapes(model) == 0
    body = model.graph.node(5).attributes["body"].as_graph()
    assert [node.op_type for node in body] == ["Identity", "Unsqueeze", "Concat"]


@pytest.mark.parametrize("end, folded", [(1, 2), (0, 1)])
def test_an_empty_result_is_not_folded(end, folded):
    """An empty constant a Loop starts from is made a ConstantOfShape for onnxruntime; folding
    one would change the model at every lowering."""
    model = _inferred(
        f"""
agraph (float[1] x) => (float[?] y) {{
    s = Shape (x)
    zero = Constant <value = int64[1] {{0}}> ()
    end = Constant <value = int64[1] {{{end}}}> ()
    shape = Slice (s, zero, end)
    y = Reshape (x, shape)
}}"""
    )
    assert fold_static_shapes(model) == folded  # Shape, and the Slice unless it is empty
    assert ("Slice" in [node.op_type for node in model.graph]) == (end == 0)


def test_folding_is_a_fixpoint():
    model = parse(HEADS)
    lowered, report = lower(model)
    again, report = lower(lowered)
    assert report.rules_fired == {}
    assert again.SerializeToString() == lowered.SerializeToString()


@pytest.mark.parametrize(
    ("dtype", "count", "folded"),
    [
        ("int64", 1, True),
        ("int64", 64, True),
        ("int64", 65, False),  # more than MAX_ELEMENTS
        ("bool", 3, True),
        ("float", 1, True),
        ("float", 2, False),  # only scalars of floating point are folded
        ("double", 1, True),
    ],
)
def test_the_declared_shape_answers_first_as_the_content_would(dtype, count, folded):
    """A static value whose inferred shape and type already rule folding out is answered
    without computing it (`_too_large`); each verdict is the one the content gives."""
    cast = {"int64": 7, "bool": 9, "float": 1, "double": 11}[dtype]
    model = _inferred(
        f"""
    agraph (float[{count}] x) => (float[{count}] y) {{
        zero = Constant <value = int64 {{0}}> ()
        axes = Constant <value = int64[1] {{0}}> ()
        shape = Shape (x)
        n = Gather <axis = 0> (shape, zero)
        count = Unsqueeze (n, axes)
        ones = ConstantOfShape <value = int64[1] {{1}}> (count)
        made = Cast <to = {cast}> (ones)
        back = Cast <to = 1> (made)
        y = Add (x, back)
    }}
    """
    )
    made = next(node for node in model.graph if node.outputs[0].name == "made")
    assert [d for d in made.outputs[0].shape] == [count]
    fold_static_shapes(model)
    assert (made.op_type == "Constant") is folded
