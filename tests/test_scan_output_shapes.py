"""A Loop of no iteration gives scan outputs whose other dims come from the body's declared
output shape: the lowered model keeps the declarations inference cannot prove
(seqlower/passes/scan_output_shapes.py)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, parse, run_ort, sequence_op_count

from seqlower.passes.scan_output_shapes import DeclaredScanShapes

# r = Reshape(x, shape): inference proves float[?], the body declares float[3]; the list of r is
# read back by a second Loop, whose body declares float[3] too
TWO_LOOPS = parse(
    """g (int64 m, float[3] x, int64[1] shp) => (float[?,?] y, float[?,?] z) {
    t = Constant<value = bool {1}>()
    s0 = SequenceEmpty<dtype = 1>()
    s, z = Loop(m, t, s0) <body = body (int64 i, bool c, seq(float) acc)
                                 => (bool c2, seq(float) grown, float[3] r) {
        c2 = Identity(c)
        r = Reshape(x, shp)
        grown = SequenceInsert(acc, r)
    }>
    n = SequenceLength(s)
    y = Loop(n, t) <body = body2 (int64 j, bool c) => (bool c3, float[3] e) {
        c3 = Identity(c)
        e0 = SequenceAt(s, j)
        e = Relu(e0)
    }>
}"""
)


def _feeds(trips: int) -> dict[str, np.ndarray]:
    x = np.array([1.0, -2.0, 0.5], np.float32)
    return {"m": np.array(trips, np.int64), "x": x, "shp": np.array([3], np.int64)}


@pytest.mark.parametrize("target", ["portable", "onnxruntime"])
def test_a_loop_of_no_iteration_gives_the_declared_dims(target: str) -> None:
    lowered, _ = lower(TWO_LOOPS, target=target)
    if target == "portable":
        assert sequence_op_count(lowered) == 0
    for trips in (0, 1, 3):
        outputs = assert_same_outputs(TWO_LOOPS, lowered, _feeds(trips))
        assert [o.shape for o in outputs] == [(trips, 3), (trips, 3)]


def _body_output_shape(model: ir.Model) -> ir.Shape | None:
    loop = next(node for node in model.graph if node.op_type == "Loop")
    return loop.attributes["body"].as_graph().outputs[1].shape


def _single_loop(declared: str) -> ir.Model:
    return ir.from_proto(
        parse(
            f"""g (int64 m, float[3] x, int64[1] shp) => (float[?,?] z) {{
            t = Constant<value = bool {{1}}>()
            z = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, {declared} r) {{
                c2 = Identity(c)
                r = Reshape(x, shp)
            }}>
        }}"""
        )
    )


@pytest.mark.parametrize(
    ("declared", "now", "restored"),
    [
        ("float[3]", [None], [3]),  # what inference left unknown takes the declared number
        ("float[3]", [ir.SymbolicDim("unk__0")], [3]),
        ("float[3]", [4], [4]),  # a number inference proves stays (the declaration lied)
        ("float[N]", [None], None),  # no number declared: nothing to give back
        ("float[3,1]", [None], None),  # another rank: left alone
    ],
)
def test_only_dims_that_are_not_numbers_take_a_declared_number(declared, now, restored) -> None:
    model = _single_loop(declared)
    recorded = DeclaredScanShapes(model)
    loop = next(node for node in model.graph if node.op_type == "Loop")
    body_output = loop.attributes["body"].as_graph().outputs[1]
    body_output.shape = ir.Shape(now)
    assert recorded.restore(model) == (restored is not None and restored != now)
    want = restored if restored is not None else now
    assert list(_body_output_shape(model)) == want  # type: ignore[arg-type]


def test_a_scan_output_the_lowering_did_not_touch_keeps_its_declared_dims() -> None:
    model = _single_loop("float[3]")
    lowered, _ = lower(ir.to_proto(model), target="generic")
    (z,) = run_ort(lowered, _feeds(0))
    assert z.shape == (0, 3)
