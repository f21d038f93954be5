"""What only one If branch reads moves into that branch; what both read, what may fail and
what the graph returns stay. Conditions compared on one-element vectors (--target
onnxruntime) drop the Reshape to a scalar only where nothing but If conditions reads it."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from support import assert_same_outputs, parse, run_ort

from seqlower.passes.single_element_conditions import SingleElementConditionsPass
from seqlower.passes.sink_into_branches import sink_into_branches

# `n` and `big` are read in the else branch only, `w` by both branches, `g` (a Gather at a
# run-time index, which may fail) by the else branch only, `shown` is a graph output
BRANCHES = """
g (float[N,3] x, bool p, int64 k) => (float[?] y, int64[1] shown) {
  dims = Shape <end = 1> (x)
  scalar = Constant <value = int64[0] {}> ()
  n = Reshape (dims, scalar)
  two = Constant <value = int64 {2}> ()
  big = Greater (n, two)
  w = Neg (x)
  row = Gather (x, k)
  shown = Shape <end = 1> (w)
  y = If (p) <then_branch = then () => (float[?] t) {
      axes = Constant <value = int64[1] {0}> ()
      t = ReduceSum <keepdims = 0> (w, axes)
  }, else_branch = other () => (float[?] e) {
      axes2 = Constant <value = int64[1] {1}> ()
      s = ReduceSum <keepdims = 0> (w, axes2)
      f = Cast <to = 1> (big)
      sf = Mul (s, f)
      first = ReduceMax <keepdims = 0> (row)
      e = Add (sf, first)
  }>
}"""


def _inferred(proto: onnx.ModelProto) -> ir.Model:
    """The model with its shapes inferred, as the pipeline has them when it cleans up."""
    return ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(proto))


def _branch_ops(model: ir.Model, name: str) -> list[str]:
    (node,) = [n for n in model.graph if n.op_type == "If"]
    return [n.op_type for n in node.attributes[name].as_graph()]


def test_only_what_one_branch_alone_reads_moves_into_it():
    proto = parse(BRANCHES)
    model = _inferred(proto)
    assert sink_into_branches(model) == 3  # Shape, Reshape, Greater (Constants stay outside)
    main = [n.op_type for n in model.graph]
    assert main.count("Shape") == 1 and "Greater" not in main and "Reshape" not in main
    assert "Neg" in main and "Gather" in main  # read by both branches / may fail
    assert _branch_ops(model, "else_branch")[:3] == ["Shape", "Reshape", "Greater"]
    moved = ir.serde.serialize_model(model)
    onnx.checker.check_model(moved, full_check=True)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for p in (True, False):
        feeds = {"x": x, "p": np.array(p), "k": np.array(1)}
        assert_same_outputs(proto, moved, feeds)


def test_a_failing_read_outside_the_branch_still_fails():
    proto = parse(BRANCHES)
    model = _inferred(proto)
    sink_into_branches(model)
    moved = ir.serde.serialize_model(model)
    x = np.zeros((2, 3), np.float32)
    for graph in (proto, moved):  # the Gather stayed where it was: it runs either way
        try:
            run_ort(graph, {"x": x, "p": np.array(True), "k": np.array(5)})
        except Exception:  # onnxruntime raises its own error types
            continue
        raise AssertionError("the out-of-range Gather did not fail")


def test_a_length_read_only_by_conditions_stays_a_vector():
    text = """
g (float[N,3] x) => (float[?] y) {
  dims = Shape <end = 1> (x)
  scalar = Constant <value = int64[0] {}> ()
  n = Reshape (dims, scalar)
  two = Constant <value = int64 {2}> ()
  big = GreaterOrEqual (n, two)
  y = If (big) <then_branch = then () => (float[?] t) {
      axes = Constant <value = int64[1] {0}> ()
      t = ReduceSum <keepdims = 0> (x, axes)
  }, else_branch = other () => (float[?] e) {
      axes2 = Constant <value = int64[1] {0}> ()
      e = ReduceMax <keepdims = 0> (x, axes2)
  }>
}"""
    proto = parse(text)
    model = _inferred(proto)
    conditions = SingleElementConditionsPass()
    conditions(model)
    assert conditions.count == 1
    assert "Reshape" not in [n.op_type for n in model.graph]
    moved = ir.serde.serialize_model(model)
    onnx.checker.check_model(moved, full_check=True)
    for rows in (1, 2, 5):
        assert_same_outputs(proto, moved, {"x": np.ones((rows, 3), np.float32) * rows})


def test_a_length_read_by_anything_else_stays_a_scalar():
    text = """
g (float[N,3] x) => (float[?] y, int64 m) {
  dims = Shape <end = 1> (x)
  scalar = Constant <value = int64[0] {}> ()
  n = Reshape (dims, scalar)
  two = Constant <value = int64 {2}> ()
  big = GreaterOrEqual (n, two)
  m = Add (n, two)
  y = If (big) <then_branch = then () => (float[?] t) {
      axes = Constant <value = int64[1] {0}> ()
      t = ReduceSum <keepdims = 0> (x, axes)
  }, else_branch = other () => (float[?] e) {
      axes2 = Constant <value = int64[1] {0}> ()
      e = ReduceMax <keepdims = 0> (x, axes2)
  }>
}"""
    model = _inferred(parse(text))
    conditions = SingleElementConditionsPass()
    conditions(model)
    assert conditions.count == 0
    assert "Reshape" in [n.op_type for n in model.graph]


def test_a_ragged_lists_bounds_read_by_one_branch_move_into_it():
    """A CumSum of row counts and its Unsqueeze, read only where a list element is assigned
    (HF DynamicCache.update's else branch), run only when that branch does."""
    proto = parse("""
    g (int64[N] counts, bool p, int64 i) => (int64[?] y) {
      ax = Constant <value = int64 {0}> ()
      ends = CumSum (counts, ax)
      axes = Constant <value = int64[1] {-1}> ()
      col = Unsqueeze (ends, axes)
      y = If (p) <then_branch = then () => (int64[?] t) {
          t = Identity (counts)
      }, else_branch = other () => (int64[?] e) {
          e = Gather (col, i)
      }>
    }""")
    model = _inferred(proto)
    assert sink_into_branches(model) == 2
    assert [n.op_type for n in model.graph if n.op_type != "Constant"] == ["If"]
    assert _branch_ops(model, "else_branch")[-3:] == ["CumSum", "Unsqueeze", "Gather"]
    moved = ir.serde.serialize_model(model)
    onnx.checker.check_model(moved, full_check=True)
    counts = np.array([2, 0, 3])
    for flag, i in ((True, 0), (False, -1), (False, 1)):
        assert_same_outputs(proto, moved, {"counts": counts, "p": np.array(flag), "i": np.array(i)})


def test_an_unsqueeze_or_cumsum_that_may_fail_stays_outside():
    cases = {
        # an axis beyond the result's rank: inference rejects it, and a rank unknown stays
        "far = Constant <value = int64[1] {3}> ()\n  col = Unsqueeze (counts, far)": "Unsqueeze",
        # the axis is a run-time input
        "col = CumSum (counts, k)": "CumSum",
        # a type onnxruntime's CumSum does not take
        "ax = Constant <value = int64 {0}> ()\n  col = CumSum (halves, ax)": "CumSum",
    }
    for made, op in cases.items():
        proto = parse(f"""
        g (int64[N] counts, float16[N] halves, bool p, int64 k) => (int64[?] y) {{
          {made}
          y = If (p) <then_branch = then () => (int64[?] t) {{
              t = Identity (counts)
          }}, else_branch = other () => (int64[?] e) {{
              s = Shape (col)
              e = Identity (s)
          }}>
        }}""")
        model = _inferred(proto) if op != "Unsqueeze" else ir.from_proto(proto)
        assert sink_into_branches(model) == 0, made
        assert op in [n.op_type for n in model.graph], made


# `m` is read only in the else branch of an If within the else branch of the outer If
NESTED = """
g (float[3] x, bool p, bool q) => (float[3] y) {
  m = Mul (x, x)
  y = If (p) <then_branch = then () => (float[3] t) {
      t = Neg (x)
  }, else_branch = other () => (float[3] e) {
      e = If (q) <then_branch = inner_then () => (float[3] a) {
          a = Relu (x)
      }, else_branch = inner_else () => (float[3] b) {
          b = Abs (m)
      }>
  }>
}"""


def test_a_node_moves_into_the_innermost_branch_that_reads_it_in_one_run():
    """Moved into the outer else branch, the Mul is then sunk within it: lowering a lowered
    model again finds nothing left to move."""
    proto = parse(NESTED)
    model = _inferred(proto)
    assert sink_into_branches(model) == 2  # into the outer branch, then the inner one
    assert sink_into_branches(model) == 0
    (outer,) = [n for n in model.graph if n.op_type == "If"]
    (inner,) = outer.attributes["else_branch"].as_graph()
    assert [n.op_type for n in inner.attributes["else_branch"].as_graph()] == ["Mul", "Abs"]
    moved = ir.serde.serialize_model(model)
    onnx.checker.check_model(moved, full_check=True)
    x = np.array([-1, 2, -3], np.float32)
    for p in (True, False):
        for q in (True, False):
            assert_same_outputs(proto, moved, {"x": x, "p": np.array(p), "q": np.array(q)})
