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
