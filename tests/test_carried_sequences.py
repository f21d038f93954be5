"""Element shapes of loop-built sequences after inference (seqlower/passes/carried_sequences.py):
what is corrected, what is left as inferred, and that the lowering of such a list runs."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest

import seqlower
from seqlower.passes.normalize import infer_shapes

LOOP = """<ir_version: 8, opset_import: ["" : 18]>
g (float[3,2] x, int64 m, bool k) => (float[?,?] y, float[?,?] z, float[?,?] w) {{
    s0 = SequenceConstruct (x)
    l = Loop (m, , s0) <body = b (int64 i, bool c, seq(float) acc) => (bool co, seq(float) out) {{
        one = Constant <value = int64[1] {{1}}> ()
        zero = Constant <value = int64[1] {{0}}> ()
        i1 = Reshape (i, one)
        stop = Add (i1, one)
        p = {piece}
        out = SequenceInsert (acc, p)
        co = Identity (c)
    }}>
    last = Constant <value = int64 {{-1}}> ()
    y = SequenceAt (l, last)
    z = If (k) <
        then_branch = t () => (float[?,?] u) {{
            first = Constant <value = int64 {{0}}> ()
            u = SequenceAt (l, first)
        }},
        else_branch = e () => (float[?,?] v) {{
            v = Identity (x)
        }}
    >
    w = Neg (x)
}}"""


def inferred(piece: str) -> ir.Model:
    model = ir.from_proto(onnx.parser.parse_model(LOOP.format(piece=piece)))
    infer_shapes(model)
    return model


def shapes(model: ir.Model) -> dict[str, list | None]:
    return {
        value.name: None
        if value.shape is None
        else [d if isinstance(d, int) else d.value for d in value.shape]
        for node in model.graph
        for value in node.outputs
    }


def test_elements_of_another_shape_make_the_dims_unknown_and_keep_the_rank() -> None:
    found = shapes(inferred("Slice (x, zero, stop)"))  # x[:i+1]: [1, 2], [2, 2], ...
    assert found["s0"] == [3, 2]
    assert found["l"] == [None, None]  # onnx alone says [3, 2]
    assert found["y"] == [None, None]  # read from l: its dims came from the wrong shape
    assert found["z"] == [None, None]  # an If branch reads l
    assert found["w"] == [3, 2]  # nothing to do with l


def test_elements_of_the_initial_shape_keep_it() -> None:
    found = shapes(inferred("Neg (x)"))
    assert found["l"] == [3, 2]
    assert found["y"] == [3, 2]
    assert found["z"] == [3, 2]


def test_elements_of_another_rank_make_the_shape_unknown() -> None:
    found = shapes(inferred("ReduceSum <keepdims = 0> (x, zero)"))  # [2]
    assert found["l"] is None
    assert found["y"] is None
    assert found["w"] == [3, 2]


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_a_loop_built_list_of_slices_lowers_and_computes_the_same(trips: int) -> None:
    proto = onnx.parser.parse_model(LOOP.format(piece="Slice (x, zero, stop)"))
    feeds = {
        "x": np.arange(6, dtype=np.float32).reshape(3, 2),
        "m": np.array(trips),
        "k": np.array(True),
    }
    expected = ort.InferenceSession(proto.SerializeToString()).run(None, feeds)
    lowered, _ = seqlower.optimize(ir.from_proto(proto))
    lowered_proto = ir.to_proto(lowered)
    onnx.checker.check_model(lowered_proto, full_check=True)
    assert not any(node.op_type.startswith("Sequence") for node in lowered_proto.graph.node)
    got = ort.InferenceSession(lowered_proto.SerializeToString()).run(None, feeds)
    for want, have in zip(expected, got):
        np.testing.assert_array_equal(want, have)


def test_a_sequence_map_over_a_loop_built_list_types_its_body_by_the_join():
    """Fuzz seed 1004112: the body of a SequenceMap over l is typed by l's elements; with
    onnx's [3, 2] it was lowered to a Loop declaring scan outputs of the wrong shape."""
    text = LOOP.format(piece="Slice (x, zero, stop)").replace(
        "    w = Neg (x)\n",
        "    w0 = SequenceMap (l) <body = f (float[?,?] e) => (float[?,?] o) {"
        " o = Identity (e) }>\n"
        "    w = ConcatFromSequence <axis = 0> (w0)\n",
    )
    model = ir.from_proto(onnx.parser.parse_model(text))
    infer_shapes(model)
    mapped = next(node for node in model.graph if node.op_type == "SequenceMap")
    body_input = mapped.attributes["body"].as_graph().inputs[0]
    assert (
        body_input.shape is not None and [d for d in body_input.shape if isinstance(d, int)] == []
    )
    feeds = {
        "x": np.arange(6, dtype=np.float32).reshape(3, 2),
        "m": np.array(2),
        "k": np.array(True),
    }
    proto = onnx.parser.parse_model(text)
    expected = ort.InferenceSession(proto.SerializeToString()).run(None, feeds)
    lowered, _ = seqlower.optimize(ir.from_proto(proto))
    got = ort.InferenceSession(ir.to_proto(lowered).SerializeToString()).run(None, feeds)
    for want, have in zip(expected, got):
        np.testing.assert_array_equal(want, have)
