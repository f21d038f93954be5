"""A Transpose of a constant weight is folded into the weight, where that is cheap and safe."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_outputs_equal, parse, run_ort

import seqlower

LINEAR = """
agraph (float[B,4] x) => (float[B,3] y) <float[3,4] w = {W}> {{
  wt = Transpose <perm = [1, 0]> (w)
  y = MatMul (x, wt)
}}"""
WEIGHTS = ", ".join(str(v) for v in np.arange(12, dtype=np.float32) / 7)


def _nodes(model: ir.Model) -> list[str]:
    return [node.op_type for node in model.graph]


def test_a_transpose_of_a_weight_is_folded_and_computes_the_same():
    model = parse(LINEAR.format(W="{" + WEIGHTS + "}"))
    lowered, report = seqlower.optimize(ir.from_proto(model))
    assert _nodes(lowered) == ["MatMul"]
    onnx.checker.check_model(ir.to_proto(lowered), full_check=True)
    assert report.rules_fired == {"fold-constant-transpose": 1}
    assert report.nodes_before == 2 and report.nodes_after == 1
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    assert_outputs_equal(run_ort(model, {"x": x}), run_ort(lowered, {"x": x}))


def test_a_weight_read_twice_is_not_copied():
    model = parse(
        """
agraph (float[B,4] x, float[B,3] z) => (float[B,3] y, float[B,4] v) <float[3,4] w = {W}> {{
  wt = Transpose <perm = [1, 0]> (w)
  y = MatMul (x, wt)
  v = MatMul (z, w)
}}""".format(W="{" + WEIGHTS + "}")
    )
    lowered, _ = seqlower.optimize(ir.from_proto(model))
    assert "Transpose" in _nodes(lowered)


def test_an_overridable_weight_is_not_folded():
    """An initializer that is also a graph input may be fed another value at run time."""
    model = ir.from_proto(parse(LINEAR.format(W="{" + WEIGHTS + "}")))
    model.graph.inputs.append(model.graph.initializers["w"])
    lowered, _ = seqlower.optimize(model)
    assert "Transpose" in _nodes(lowered)


@pytest.mark.parametrize("perm", [[0, 2, 1], [2, 0, 1]])
def test_a_constant_node_in_three_dims(perm):
    values = ", ".join(str(v) for v in range(24))
    out = [[2, 3, 4][p] for p in perm]
    model = parse(f"""
agraph (int64[{out[0]},{out[1]},{out[2]}] x) => (int64[{out[0]},{out[1]},{out[2]}] y) {{
  c = Constant <value = int64[2,3,4] {{{values}}}> ()
  t = Transpose <perm = {perm}> (c)
  y = Add (x, t)
}}""")
    lowered, report = seqlower.optimize(ir.from_proto(model))
    assert _nodes(lowered) == ["Add"] and report.rules_fired == {"fold-constant-transpose": 1}
    x = np.zeros(out, dtype=np.int64)
    expected = np.transpose(np.arange(24).reshape(2, 3, 4), perm)
    assert_outputs_equal([expected], run_ort(lowered, {"x": x}))
