"""A Cast to the type its input has is removed; the value keeps its name where it is an output."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from support import assert_same_outputs, lower, op_counts, parse

import seqlower


def test_a_cast_to_the_same_type_is_removed_and_the_output_keeps_its_name():
    model = parse("""
agraph (float[N,3] x) => (int64 n, float[N,3] y) {
  shape = Shape (x)
  zero = Constant <value = int64 {0}> ()
  rows = Gather <axis = 0> (shape, zero)
  n = Cast <to = 7> (rows)
  y = Cast <to = 1> (x)
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Cast"] == 1  # y = Cast(x): x is a graph input, it keeps the Cast
    assert [o.name for o in lowered.graph.output] == ["n", "y"]
    assert_same_outputs(model, lowered, {"x": np.ones((4, 3), np.float32)})


def test_a_cast_to_another_type_stays():
    model = parse("""
agraph (int64[3] x) => (float[3] y) {
  two = Constant <value = int64 {2}> ()
  z = Mul (x, two)
  y = Cast <to = 1> (z)
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Cast"] == 1
    assert_same_outputs(model, lowered, {"x": np.arange(3, dtype=np.int64)})


def test_a_cast_in_a_loop_body_is_removed_once_per_body():
    model = parse("""
agraph (float[3] x, int64 n) => (float[3] y) {
  t = Constant <value = bool {1}> ()
  y = Loop (n, t, x) <body = body (int64 i, bool c, float[3] v) => (bool c_out, float[3] w) {
    zero = Constant <value = float {0}> ()
    s = ReduceSum <keepdims = 0> (v)
    positive = Greater (s, zero)
    keep = Cast <to = 9> (positive)
    half = Constant <value = float {0.5}> ()
    scaled = Mul (v, half)
    w = Where (keep, scaled, v)
    c_out = Identity (c)
  }>
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Cast"] == 0
    feeds = {"x": np.array([1.0, -2.0, 4.0], np.float32), "n": np.array(3, np.int64)}
    assert_same_outputs(model, lowered, feeds)


def test_the_pass_alone_counts_what_it_removed():
    model = ir.from_proto(
        parse("""
agraph (float[2] x) => (float[2] y) {
  a = Relu (x)
  b = Cast <to = 1> (a)
  y = Neg (b)
}""")
    )
    seqlower.passes.infer_shapes(model)
    cleanup = seqlower.passes.CleanupPass()
    cleanup(model)
    assert cleanup.casts_removed == 1
    assert [node.op_type for node in model.graph] == ["Relu", "Neg"]


def test_an_original_kept_for_speed_loses_its_no_op_cast_too():
    """`n = Cast<to=int64>(SequenceLength(xs))`: the original is kept as given for speed, its
    Cast removed (the estimate of it assumed so); `n` keeps its name and type."""
    from pathlib import Path

    import onnx

    path = Path(__file__).parent / "fixtures" / "torch" / "len_of_split" / "model.onnx"
    model = onnx.load(path)
    kept, report = seqlower.optimize(model, target="onnxruntime")
    assert report.stop_reason.startswith("kept the original")
    onnx.checker.check_model(kept, full_check=True)
    assert op_counts(kept)["Cast"] == 0 and op_counts(kept)["SequenceLength"] == 1
    assert [o.name for o in kept.graph.output] == ["n", "last_sum"]
    assert kept.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    x = np.random.default_rng(2).standard_normal((7, 2)).astype(np.float32)
    assert_same_outputs(model, kept, {"x": x})
