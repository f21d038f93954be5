"""unit-axis-round-trip: Squeeze(f(Unsqueeze(x, a)), a) -> f(x) when f never looks at axis a."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import lower_and_compare, op_counts, parse

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import unit_axes

RNG = np.random.default_rng(7)
X = RNG.standard_normal((5, 4)).astype(np.float32)
Y = RNG.standard_normal((5, 4)).astype(np.float32)
W = RNG.standard_normal((4, 3)).astype(np.float32)


def round_trip(
    body: str, axis: int = 1, out: str = "float[N,3] y", opset: int = 18
) -> onnx.ModelProto:
    axes = (
        f"u = Unsqueeze<axes = [{axis}]>(x)"
        if opset < 13
        else (f"ax = Constant<value = int64[1] {{{axis}}}>()\n        u = Unsqueeze(x, ax)")
    )
    squeeze = f"y = Squeeze<axes = [{axis}]>(z)" if opset < 13 else "y = Squeeze(z, ax)"
    return parse(
        f"""g (float[N,4] x, float[N,4] v, float[4,3] w) => ({out}) {{
        {axes}
        {body}
        {squeeze}
    }}""",
        opset=opset,
    )


MLP = """m = MatMul(u, w)
        b = Constant<value = float[3] {0.5, -1, 2}>()
        s = Add(m, b)
        z = Relu(s)"""


@pytest.mark.parametrize("axis", [1, -2])
@pytest.mark.parametrize("opset", [11, 18])
def test_a_matmul_add_relu_runs_without_the_unit_axis(axis, opset):
    model = round_trip(MLP, axis, opset=opset)
    lowered, report, _ = lower_and_compare(model, {"x": X, "v": Y, "w": W})
    counts = op_counts(lowered)
    assert counts["Unsqueeze"] == counts["Squeeze"] == 0
    assert counts["MatMul"] == 1 and counts["Relu"] == 1
    assert report.rules_fired == {"unit-axis-round-trip": 1}


def test_a_second_unsqueezed_operand_is_dropped_too():
    body = """au = Unsqueeze(v, ax)
        t = Tanh(u)
        s = Add(t, au)
        z = Neg(s)"""
    model = round_trip(body, 1, out="float[N,4] y")
    lowered, _, _ = lower_and_compare(model, {"x": X, "v": Y, "w": W})
    assert op_counts(lowered)["Unsqueeze"] == 0 and op_counts(lowered)["Squeeze"] == 0


def refusal(model: onnx.ModelProto) -> str:
    """Why unit-axis-round-trip refuses the Squeeze of the main graph."""
    typed = ir.from_proto(onnx.shape_inference.infer_shapes(model))
    squeeze = next(node for node in typed.graph if node.op_type == "Squeeze")
    found = unit_axes._check(squeeze, Context(Facts(typed), Rewriter(typed), Options()))
    assert isinstance(found, Refusal), "unit-axis-round-trip accepts the Squeeze"
    return found.reason


FULL_RANK = """c = Constant<value = float[1,1,4] {0,1,2,3}>()
        z = Add(u, c)"""


@pytest.mark.parametrize(
    ("body", "out", "why"),
    [
        ("z = ReduceMax<keepdims = 1>(u, ax)", "float[N,1] y", "ReduceMax 'z' may look at"),
        # an operand of full rank could broadcast along the unit axis (here it does not)
        (FULL_RANK, "float[N,4] y", "Add 'z' may look at the unit axis"),
        ("z = Relu(u)\n        k = Neg(u)", "float[N,4] y, float[N,1,4] k", "'u' has other"),
        ("m = MatMul(w2, u)\n        z = Relu(m)", "float[N,4] y", "MatMul 'm' may look at"),
    ],
    ids=["reduce", "full-rank-operand", "two-readers", "matmul-on-the-right"],
)
def test_refuses_ops_that_may_see_the_axis(body, out, why):
    if "w2" in body:
        body = "w2 = Constant<value = float[1,1] {2}>()\n        " + body
    model = round_trip(body, 1, out=out)
    assert why in refusal(model)
    lowered, _, _ = lower_and_compare(model, {"x": X, "v": Y, "w": W})
    assert op_counts(lowered)["Squeeze"] == 1
