"""Shapes of loop-carried tensors (passes/carried_shapes.py): declared on the body input where
every iteration ends with the shape it started with; a dim that changes becomes unknown (the
rest kept), a rank that changes is not declared at all. The body declares [7, 7, 7], a lie
of the kind real exports tell: it is never trusted."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

from seqlower.passes.normalize import infer_shapes

LOOP = """<ir_version: 8, opset_import: ["" : 18]>
g (float[N,5] h0, int64 m) => (float[?] y) {{
    y0 = Loop (m, , h0) <body = b (int64 i, bool c, float[7,7,7] h)
                                => (bool co, float[7,7,7] out) {{
        co = Identity (c)
        {update}
    }}>
    y = ReduceSum <keepdims = 0> (y0)
}}"""


def body_input_shape(update: str) -> list | None:
    model = ir.from_proto(onnx.parser.parse_model(LOOP.format(update=update)))
    infer_shapes(model)
    loop = next(node for node in model.graph if node.op_type == "Loop")
    shape = loop.attributes["body"].as_graph().inputs[2].shape
    return None if shape is None else [d if isinstance(d, int) else d.value for d in shape]


@pytest.mark.parametrize(
    ("update", "shape"),
    [
        ("out = Tanh (h)", ["N", 5]),
        ("two = Constant <value = int64[2] {2, 1}> ()\n out = Tile (h, two)", [None, 5]),
        ("out = Concat <axis = 0> (h, h)", [None, 5]),
        ("t = Transpose (h)\n out = MatMul (h, t)", ["N", None]),  # [N, 5], then [N, N]
    ],
)
def test_what_every_iteration_gives_back_is_declared(update, shape):
    assert body_input_shape(update) == shape


@pytest.mark.parametrize(
    "update",
    [
        "zero = Constant <value = int64[1] {0}> ()\n out = Unsqueeze (h, zero)",  # rank grows
        "out = ReduceSum <keepdims = 0> (h)",  # rank 0 after one iteration
    ],
)
def test_a_rank_that_changes_is_not_declared(update):
    assert body_input_shape(update) is None


def _loop_result_shapes(update: str) -> tuple[list | None, list | None]:
    """The shapes of the Loop's result and of a Neg of it, after inference."""
    text = LOOP.format(update=update).replace("ReduceSum <keepdims = 0> (y0)", "Neg (y0)")
    model = ir.from_proto(onnx.parser.parse_model(text))
    infer_shapes(model)
    loop, negate = list(model.graph)

    def dims(value: ir.Value) -> list | None:
        shape = value.shape
        if shape is None:
            return None
        return [d if isinstance(d, int) else d.value for d in shape]

    return dims(loop.outputs[0]), dims(negate.outputs[0])


@pytest.mark.parametrize(
    ("update", "result"),
    [
        ("out = Tanh (h)", ["N", 5]),
        ("out = Concat <axis = 0> (h, h)", [None, 5]),  # the rows grow: dim 0 unknown
    ],
)
def test_a_loop_result_has_the_dims_its_initial_value_and_the_body_agree_on(update, result):
    """ONNX inference gives a Loop's carried result no shape at all; it is the initial value
    or the body's last output, so it has the dims both give, and what reads it a rank."""
    found, negated = _loop_result_shapes(update)
    assert found == result
    assert negated is not None and len(negated) == 2 and negated[1] == 5


def test_a_loop_result_whose_rank_changes_has_no_shape():
    zero = "zero = Constant <value = int64[1] {0}> ()\n out = Unsqueeze (h, zero)"
    assert _loop_result_shapes(zero) == (None, None)
