"""Arithmetic with a constant that changes nothing goes (x + 0 and x - 0 on integers, x - 0,
x * 1 and x / 1 on floats too); what might change a value, a sign of zero or a shape stays."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.identity_arithmetic import remove_identity_arithmetic

# TorchScript's `for i in range(0, n - 3, 2): x[0 + i * 2 : ...]`, as exported
RANGE_FROM_ZERO = """
agraph (float[N,3] x, int64 n) => (float[?,3] y) {
  t = Constant <value = bool {1}> ()
  zero = Constant <value = int64 {0}> ()
  count = Sub (n, zero)
  empty = Constant <value = float[0,3] {}> ()
  y = Loop (count, t, empty) <body = body (int64 i, bool c, float[?,3] acc)
      => (bool c2, float[?,3] grown) {
    two = Constant <value = int64 {2}> ()
    step = Mul (i, two)
    start = Add (zero, step)
    axes = Constant <value = int64[1] {0}> ()
    s1 = Unsqueeze (start, axes)
    one = Constant <value = int64 {1}> ()
    stop = Add (start, one)
    e1 = Unsqueeze (stop, axes)
    row = Slice (x, s1, e1, axes)
    grown = Concat <axis = 0> (acc, row)
    c2 = Identity (c)
  }>
}"""


def test_adding_zero_to_a_position_and_subtracting_zero_go():
    model = parse(RANGE_FROM_ZERO)
    lowered, _ = lower(model, target="generic")
    counts = op_counts(lowered)
    assert "Sub" not in counts  # n - 0
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    for n in (0, 2, 3):
        assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, np.int64)})


def _removed(text: str) -> tuple[int, ir.Model]:
    model = ir.from_proto(parse(text))
    seqlower.passes.infer_shapes(model)
    return remove_identity_arithmetic(model), model


@pytest.mark.parametrize(
    ("body", "removed"),
    [
        ("y = Mul (x, one)", 1),
        ("y = Mul (onef, x)", 1),
        ("y = Div (x, one)", 1),
        ("y = Sub (x, zero)", 1),
        ("y = Add (x, zero)", 0),  # float: -0.0 + 0 is +0.0
        ("y = Sub (zero, x)", 0),  # 0 - x is -x
        ("y = Div (one, x)", 0),  # 1 / x
        ("y = Mul (x, two)", 0),
        ("y = Mul (x, ones23)", 0),  # [1, 1, 1] by [2, 3]: a value of each, not one
        ("y = Mul (x, one111)", 0),  # [1, 1, 1] of rank 3: the result gains a dim
    ],
)
def test_only_what_changes_nothing_goes_for_floats(body, removed):
    text = f"""
agraph (float[2,3] x) => (float[?,?,?] out) {{
  one = Constant <value = float {{1}}> ()
  onef = Constant <value = float[1] {{1}}> ()
  zero = Constant <value = float {{0}}> ()
  two = Constant <value = float {{2}}> ()
  ones23 = Constant <value = float[3] {{1, 1, 1}}> ()
  one111 = Constant <value = float[1,1,1] {{1}}> ()
  {body}
  out = Identity (y)
}}"""
    count, _ = _removed(text)
    assert count == removed


def test_integer_positions_lose_an_added_zero_on_either_side():
    count, model = _removed("""
agraph (int64 i) => (int64 out) {
  zero = Constant <value = int64 {0}> ()
  a = Add (zero, i)
  b = Add (a, zero)
  out = Identity (b)
}""")
    assert count == 2
    assert [node.op_type for node in model.graph if node.op_type != "Constant"] == ["Identity"]


def test_a_result_that_is_a_graph_output_stays():
    count, _ = _removed("""
agraph (int64 i) => (int64 out) {
  zero = Constant <value = int64 {0}> ()
  out = Add (i, zero)
}""")
    assert count == 0


@pytest.mark.parametrize(
    ("dims", "ruled_out"),
    [((), False), ((1,), False), ((1, 1), False), ((2,), True), ((0,), True), (("N",), False)],
)
def test_a_shape_of_other_than_one_element_rules_the_constant_out(dims, ruled_out):
    """The constant looked for has one element: a value whose static shape says otherwise is
    passed over without computing its content; a symbolic or absent shape is not."""
    from seqlower.analysis.static_values import not_one_element

    value = ir.Value(name="v", shape=ir.Shape(list(dims)), type=ir.TensorType(ir.DataType.INT64))
    assert not_one_element(value) is ruled_out
    assert not_one_element(ir.Value(name="w")) is False


def test_an_added_zero_of_one_element_in_a_vector_shape_goes():
    """Add(n, [0]) with n of shape [1]: the zero's shape [1] is one element, so it is looked
    at, and goes; Add(n, [0, 0]) (shape [2]) stays."""
    text = """
    agraph (int64[1] n) => (int64[1] y, int64[2] z) {
      zero = Constant <value = int64[1] {0}> ()
      zeros = Constant <value = int64[2] {0, 0}> ()
      one = Constant <value = int64[1] {2}> ()
      a = Add (n, zero)
      y = Mul (a, one)
      z = Add (n, zeros)
    }"""
    model = ir.from_proto(parse(text))
    seqlower.passes.infer_shapes(model)
    assert remove_identity_arithmetic(model) == 1
    assert sorted(node.op_type for node in model.graph) == ["Add", "Constant", "Constant", "Mul"]
