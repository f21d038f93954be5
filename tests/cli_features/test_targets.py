"""Target profiles: tensorrt refuses leftovers and dynamic scan lengths, onnxruntime warns."""

from __future__ import annotations

import onnx_ir as ir
import pytest
from support import parse

import seqlower
from cli_features.models import map_over_split, sequence_interface
from seqlower.targets import PROFILES, check_target


def lowered(model, **options):
    """The lowered model as an `onnx_ir.Model` (what `check_target` takes), and the report;
    lowered for the "portable" target unless told (the speed-first default may keep originals)."""
    options.setdefault("target", "portable")
    return seqlower.optimize(ir.from_proto(model), **options)


def test_tensorrt_lists_every_leftover_and_sequence_interface_with_its_graph_and_node():
    check = check_target(*lowered(sequence_interface()), "tensorrt")
    assert not check.ok and check.warnings == []
    assert check.errors[0].startswith("main: input 's' is a sequence")
    assert "--flatten-sequence-io --seq-len s=<n>" in check.errors[0]
    assert check.errors[1].startswith("main: output 'y' is a sequence")
    assert any(e.startswith("main: SequenceAt '") for e in check.errors)
    # the construct is the lowering's own: named by the node of the model it came from
    assert any(
        e.startswith("main: SequenceConstruct made from 'SplitToSequence#0 (y)'")
        for e in check.errors
    )


def test_tensorrt_names_a_loop_whose_scan_outputs_have_a_dynamic_length():
    check = check_target(*lowered(map_over_split("N")), "tensorrt")
    (error,) = check.errors
    assert error.startswith("main: Loop made from 'SequenceMap#0 (m)'")
    assert "trip count computed at run time" in error and "try --dim N=<size>" in error


def test_tensorrt_looks_inside_subgraphs():
    model = parse("""
agraph (float[N,4] x, bool c) => (float[M,4] y) {
  y = If (c) <then_branch = t () => (float[M,4] a) {
        s = SplitToSequence <axis=0> (x)
        m = SequenceMap <body = g (float[1,4] e) => (float[1,4] r) {
            r = If (c) <then_branch = t2 () => (float[1,4] p) { p = Softmax <axis=1> (e) },
                        else_branch = f2 () => (float[1,4] q) { q = Neg(e) }>
        }> (s)
        a = ConcatFromSequence <axis=0> (m)
      }, else_branch = f () => (float[N,4] b) { b = Neg(x) }>
}""")
    (error,) = check_target(*lowered(model), "tensorrt").errors
    where = "main/If#0 (y):then_branch: Loop made from 'SequenceMap#0 (m)'"
    assert error.startswith(where) and "computed at run time" in error


def test_a_static_length_passes_tensorrt():
    model, report = lowered(map_over_split("N"), dims={"N": 3})
    assert check_target(model, report, "tensorrt").ok


def test_a_loop_with_a_static_trip_count_is_fine():
    model = parse("""
agraph (float[4] x) => (float[3,4] y) {
  n = Constant <value = int64 {3}> ()
  t = Constant <value = bool {1}> ()
  y = Loop (n, t) <body = g (int64 i, bool c) => (bool co, float[4] r) {
      r = Relu(x)
      co = Identity(c)
  }>
}""")
    assert check_target(ir.serde.deserialize_model(model), None, "tensorrt").ok


def test_a_loop_that_may_stop_early_has_a_dynamic_scan_length():
    model = parse("""
agraph (float[4] x, bool go) => (float[K,4] y) {
  n = Constant <value = int64 {3}> ()
  t = Constant <value = bool {1}> ()
  y = Loop (n, t) <body = g (int64 i, bool c) => (bool co, float[4] r) {
      r = Relu(x)
      co = Identity(go)
  }>
}""")
    (error,) = check_target(ir.serde.deserialize_model(model), None, "tensorrt").errors
    assert "may stop early" in error


def test_onnxruntime_warns_about_the_cost_of_leftovers_but_accepts_them():
    check = check_target(*lowered(sequence_interface()), "onnxruntime")
    assert check.ok and check.errors == []
    assert any("SequenceAt" in w and "copies tensors in and out" in w for w in check.warnings)
    assert check.to_dict()["ok"] is True


def test_generic_says_nothing():
    check = check_target(*lowered(sequence_interface()), "generic")
    assert check.errors == [] and check.warnings == []


def test_an_unknown_target_is_an_error():
    model, report = lowered(sequence_interface())
    with pytest.raises(seqlower.SeqlowerError, match="unknown target 'tpu'"):
        check_target(model, report, "tpu")
    assert set(PROFILES) == {"generic", "portable", "onnxruntime", "tensorrt", "openvino", "tract"}
