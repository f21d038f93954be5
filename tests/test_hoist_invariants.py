"""Loop-invariant operators leave Loop and Scan bodies; what may fail or varies stays."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_both_fail, assert_same_outputs, lower, parse

import seqlower
from seqlower.passes.hoist_invariants import hoist_loop_invariants


def _body_ops(model: onnx.ModelProto, loop: str = "Loop") -> list[str]:
    node = next(n for n in model.graph.node if n.op_type == loop)
    body = next(a.g for a in node.attribute if a.name == "body")
    return [n.op_type for n in body.node]


def _main_ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


# a while loop whose body multiplies an input by a weight on every iteration (a `Linear` of an
# input inside `while`), appending to a list
WHILE_LINEAR = """
agraph (float[1,4] x, float[1,4] h, int64 n) => (float[?,4] y) {
  w = Constant <value = float[4,4] {1,0,0,0, 0,2,0,0, 0,0,1,0, 1,0,0,1}> ()
  b = Constant <value = float[4] {0.5,0,0,-1}> ()
  big = Constant <value = int64 {100}> ()
  empty = SequenceEmpty <dtype = 1> ()
  zero = Constant <value = int64 {0}> ()
  go = Less (zero, n)
  last, ys = Loop (big, go, h, empty) <body = body (int64 i, bool c, float[1,4] hi, seq(float) acc)
      => (bool c_out, float[1,4] h_out, seq(float) acc_out) {
    wx = Gemm <transB = 1> (x, w, b)
    act = Tanh (wx)
    h_out = Add (act, hi)
    acc_out = SequenceInsert (acc, h_out)
    one = Constant <value = int64 {1}> ()
    k = Add (i, one)
    c_out = Less (k, n)
  }>
  y = ConcatFromSequence <axis = 0> (ys)
}"""


def test_a_gemm_of_outer_values_leaves_a_while_loop_and_the_results_stay():
    model = parse(WHILE_LINEAR)
    lowered, report = lower(model, target="generic")
    body = _body_ops(lowered)
    assert "Gemm" not in body and "Tanh" not in body  # Tanh reads only the hoisted Gemm
    assert report.rules_fired["hoist-loop-invariant"] == 2
    rng = np.random.default_rng(0)
    x, h = rng.standard_normal((1, 4)).astype(np.float32), np.zeros((1, 4), np.float32)
    for n in (3, 1):
        assert_same_outputs(model, lowered, {"x": x, "h": h, "n": np.array(n, np.int64)})


def test_a_loop_that_runs_zero_times_gives_the_same_result_with_the_moved_nodes():
    text = WHILE_LINEAR.replace("float[?,4] y)", "float[1,4] last, int64 count)")
    text = text.replace("y = ConcatFromSequence <axis = 0> (ys)", "count = SequenceLength (ys)")
    model = parse(text)
    lowered, _ = lower(model, target="generic")
    assert "Gemm" in _main_ops(lowered)
    feeds = {"x": np.ones((1, 4), np.float32), "h": np.full((1, 4), 2.0, np.float32)}
    for n in (0, 2):
        assert_same_outputs(model, lowered, {**feeds, "n": np.array(n, np.int64)})


def _loop(body: str, inputs: str = "float[3] x, int64 n", extra: str = "") -> onnx.ModelProto:
    return parse(f"""
agraph ({inputs}) => (float[3] y) {{
  t = Constant <value = bool {{1}}> ()
  {extra}
  y = Loop (n, t, x) <body = body (int64 i, bool c, float[3] v) => (bool c_out, float[3] w) {{
    {body}
    c_out = Identity (c)
  }}>
}}""")


def _hoisted(model: onnx.ModelProto) -> tuple[int, ir.Model]:
    ir_model = ir.from_proto(model)
    seqlower.passes.infer_shapes(ir_model)
    return hoist_loop_invariants(ir_model), ir_model


def test_a_slice_of_constant_bounds_moves_with_its_constants():
    model = _loop(
        """
    s = Constant <value = int64[1] {1}> ()
    e = Constant <value = int64[1] {3}> ()
    part = Slice (x, s, e)
    pad = Constant <value = float[1] {0}> ()
    shifted = Concat <axis = 0> (part, pad)
    w = Add (v, shifted)""",
        inputs="float[3] x, int64 n",
    )
    moved, ir_model = _hoisted(model)
    assert moved == 1
    loop = next(n for n in ir_model.graph if n.op_type == "Loop")
    assert [n.op_type for n in ir_model.graph][-4:] == ["Constant", "Constant", "Slice", "Loop"]
    assert "Slice" not in [n.op_type for n in loop.attributes["body"].as_graph()]
    proto = ir.to_proto(ir_model)
    onnx.checker.check_model(proto, full_check=True)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    for n in (0, 2):
        assert_same_outputs(model, proto, {"x": x, "n": np.array(n, np.int64)})


def test_what_may_fail_or_varies_or_is_an_output_stays_in_the_body():
    model = _loop(
        """
    k = Constant <value = int64 {2}> ()
    q = Div (n, k)
    qf = Cast <to = 1> (q)
    g = Gather <axis = 0> (x, k)
    odd = Add (x, z)
    iv = Cast <to = 1> (i)
    s1 = Add (v, qf)
    s2 = Add (s1, g)
    s3 = Add (s2, iv)
    w = Add (s3, odd)""",
        inputs="float[3] x, int64 n, float[?] z",
    )
    moved, ir_model = _hoisted(model)
    # the integer Div may divide by zero, the Gather may read out of range, `odd` adds shapes
    # that may not broadcast ([3] and [?]), `iv` reads the iteration number: none moves, nor
    # the Cast of the Div that stays
    assert moved == 0
    loop = next(n for n in ir_model.graph if n.op_type == "Loop")
    body = [n.op_type for n in loop.attributes["body"].as_graph()]
    assert body.count("Div") == 1 and body.count("Gather") == 1 and body.count("Add") == 5


def test_a_body_output_computed_from_outer_values_stays():
    model = _loop("w = Relu (x)")
    moved, _ = _hoisted(model)
    assert moved == 0


def test_an_invariant_of_two_nested_loops_leaves_both():
    model = parse("""
agraph (float[2,3] x, float[3,3] m, int64 n) => (float[2,3] y) {
  t = Constant <value = bool {1}> ()
  y = Loop (n, t, x) <body = outer (int64 i, bool c, float[2,3] v) => (bool c1, float[2,3] w) {
    w = Loop (n, t, v) <body = inner (int64 j, bool d, float[2,3] u) => (bool d1, float[2,3] r) {
      p = MatMul (x, m)
      r = Add (u, p)
      d1 = Identity (d)
    }>
    c1 = Identity (c)
  }>
}""")
    moved, ir_model = _hoisted(model)
    assert moved == 2  # into the outer body, then out of it
    assert [n.op_type for n in ir_model.graph][-2:] == ["MatMul", "Loop"]
    proto = ir.to_proto(ir_model)
    onnx.checker.check_model(proto, full_check=True)
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.standard_normal((2, 3)).astype(np.float32),
        "m": rng.standard_normal((3, 3)).astype(np.float32),
    }
    for n in (0, 3):
        assert_same_outputs(model, proto, {**feeds, "n": np.array(n, np.int64)})


def test_a_matmul_whose_inner_dims_may_differ_stays():
    model = parse("""
agraph (float[2,K] x, float[J,3] m, int64 n) => (float[2,3] y) {
  t = Constant <value = bool {1}> ()
  init = Constant <value = float[2,3] {0,0,0,0,0,0}> ()
  y = Loop (n, t, init) <body = body (int64 i, bool c, float[2,3] v) => (bool c1, float[2,3] w) {
    p = MatMul (x, m)
    w = Add (v, p)
    c1 = Identity (c)
  }>
}""")
    moved, _ = _hoisted(model)
    assert moved == 0


def test_hoisting_is_deterministic():
    model = parse(WHILE_LINEAR)
    first, _ = seqlower.optimize(model)
    second, _ = seqlower.optimize(model)
    assert first.SerializeToString() == second.SerializeToString()


def test_a_product_over_a_known_axis_moves_and_a_maximum_stays():
    """The areas of all boxes, computed in every iteration of a suppression loop, move; a
    ReduceMax (which has no value for an empty input) stays."""
    model = _loop(
        """
    wh = Slice (boxes, s, e, ax)
    areas = ReduceProd <keepdims = 0> (wh, ax)
    top = ReduceMax <keepdims = 1> (areas, z)
    scaled = Mul (v, top)
    w = Add (scaled, areas)""",
        inputs="float[3] x, int64 n, float[3,4] boxes",
        extra="""s = Constant <value = int64[1] {2}> ()
  e = Constant <value = int64[1] {4}> ()
  ax = Constant <value = int64[1] {1}> ()
  z = Constant <value = int64[1] {0}> ()""",
    )
    moved, ir_model = _hoisted(model)
    assert moved == 2  # the Slice and the ReduceProd
    loop = next(n for n in ir_model.graph if n.op_type == "Loop")
    body = [n.op_type for n in loop.attributes["body"].as_graph()]
    assert "ReduceProd" not in body and "ReduceMax" in body
    proto = ir.to_proto(ir_model)
    onnx.checker.check_model(proto, full_check=True)
    rng = np.random.default_rng(4)
    boxes = rng.standard_normal((3, 4)).astype(np.float32)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    for n in (0, 2):
        assert_same_outputs(model, proto, {"x": x, "n": np.array(n, np.int64), "boxes": boxes})


def test_a_range_of_a_constant_step_and_zeros_of_a_shape_move_a_range_of_any_step_stays():
    """`torch.arange(max_len) < length` in a padding loop: the Range moves; so does a
    ConstantOfShape of a Shape (its dims are never negative); a Range whose step is read at
    run time (0 fails) stays."""
    model = _loop(
        """
    zero = Constant <value = int64 {0}> ()
    one = Constant <value = int64 {1}> ()
    positions = Range (zero, m, one)
    counted = Range (zero, m, k)
    sizes = Shape (x)
    zeros = ConstantOfShape <value = float[1] {0}> (sizes)
    p = Cast <to = 1> (positions)
    q = Cast <to = 1> (counted)
    ps = ReduceSum <keepdims = 1> (p)
    qs = ReduceSum <keepdims = 1> (q)
    added = Add (v, zeros)
    summed = Add (added, ps)
    w = Add (summed, qs)""",
        inputs="float[3] x, int64 n, int64 m, int64 k",
    )
    moved, ir_model = _hoisted(model)
    loop = next(n for n in ir_model.graph if n.op_type == "Loop")
    body = [n.op_type for n in loop.attributes["body"].as_graph()]
    assert body.count("Range") == 1 and "ConstantOfShape" not in body and "Shape" not in body
    proto = ir.to_proto(ir_model)
    onnx.checker.check_model(proto, full_check=True)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    for n in (0, 2):
        feeds = {"x": x, "n": np.array(n), "m": np.array(4), "k": np.array(2)}
        assert_same_outputs(model, proto, feeds)
    assert moved >= 4  # the Range, its Cast and sum; the Shape and its zeros


# the frame an RNN-T decoder's inner `while` loop reads: a Gather of an outer tensor at an
# outer position, which may be out of range, in a loop entered unconditionally (TRIP, COND)
FRAME_STEPS = """
agraph (float[T,4] enc, int64 t_pos, float[4] g0) => (float[4] g) {
  trip = Constant <value = int64 {TRIP}> ()
  go = Constant <value = bool {COND}> ()
  g = Loop (trip, go, g0) <body = steps (int64 k, bool c, float[4] gi) => (bool c1, float[4] go1) {
    frame = Gather <axis = 0> (enc, t_pos)
    mixed = Add (frame, gi)
    go1 = Tanh (mixed)
    one = Constant <value = int64 {1}> ()
    k1 = Add (k, one)
    three = Constant <value = int64 {3}> ()
    c1 = Less (k1, three)
  }>
}"""


def _frame_steps(trip: str, cond: str = "1") -> onnx.ModelProto:
    return parse(FRAME_STEPS.replace("TRIP", trip).replace("COND", cond))


def _frame_feeds(position: int) -> dict[str, np.ndarray]:
    enc = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    return {"enc": enc, "t_pos": np.array(position, np.int64), "g0": np.ones(4, np.float32)}


@pytest.mark.parametrize("trip", ["9223372036854775807", "1", "5"])
def test_a_read_that_may_fail_leaves_a_loop_sure_to_run_once_and_fails_where_it_did(trip):
    model = _frame_steps(trip)
    moved, ir_model = _hoisted(model)
    assert moved == 1
    assert [n.op_type for n in ir_model.graph][-2:] == ["Gather", "Loop"]
    proto = ir.to_proto(ir_model)
    onnx.checker.check_model(proto, full_check=True)
    for position in (0, 2, -1, -3):
        assert_same_outputs(model, proto, _frame_feeds(position))
    for position in (3, -4):  # out of range: the first iteration failed, now the Gather before
        assert_both_fail(model, proto, _frame_feeds(position))


@pytest.mark.parametrize(("trip", "cond"), [("0", "1"), ("3", "0"), ("-1", "1")])
def test_a_read_that_may_fail_stays_in_a_loop_that_may_not_run(trip, cond):
    model = _frame_steps(trip, cond)
    moved, ir_model = _hoisted(model)
    assert moved == 0
    proto = ir.to_proto(ir_model)
    assert_same_outputs(model, proto, _frame_feeds(7))  # never read: no failure in either


def test_a_trip_count_known_only_at_run_time_keeps_the_read_in_the_body():
    text = FRAME_STEPS.replace("int64 t_pos,", "int64 t_pos, int64 trip,")
    text = text.replace("  trip = Constant <value = int64 {TRIP}> ()\n", "").replace("COND", "1")
    moved, _ = _hoisted(parse(text))
    assert moved == 0


def test_a_random_operator_stays_in_a_loop_sure_to_run_once():
    text = FRAME_STEPS.replace("TRIP", "2").replace("COND", "1")
    text = text.replace(
        "frame = Gather <axis = 0> (enc, t_pos)",
        "noise = RandomUniformLike (g0)\n    frame = Add (noise, g0)",
    )
    moved, ir_model = _hoisted(parse(text))
    body = next(n for n in ir_model.graph if n.op_type == "Loop").attributes["body"].as_graph()
    assert "RandomUniformLike" in [n.op_type for n in body]
    assert moved == 0  # and the Add of the noise with it
