"""Chains of Unsqueeze, Squeeze, Transpose and reductions that only add, drop or move axes of
one (the batched form of a per-row NonZero: a mask `[K, 1, T]` transposed and squeezed back; a
count reduced over the axis an Unsqueeze made) become at most a Squeeze and an Unsqueeze, and a
Shape of one reads the source; Not(Not(x)) is x. Checked: what the cleanup emits, what it leaves
and why, and equal outputs under onnxruntime (no rows, negative axes, NaN, int32, double, bool,
a Squeeze of a dim that is not 1 failing in both)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.double_negation import fold_double_negations
from seqlower.passes.unit_axes import fold_unit_axes

# the mask of a row of tokens equal to 2, held as [K, 1, T], moved to [K, T, 1] and squeezed:
# the Equal itself; its count per row reduced over an axis of one an Unsqueeze made
NONZERO_ROWS = """
agraph ({t}[K,T] x) => ({t}[K,T] y, int64[K] count) {{
  two = Constant <value = {t} {{2}}> ()
  one = Constant <value = int64[1] {{1}}> ()
  x2 = Mul (x, x)
  eq = Equal (x, two)
  a1 = Constant <value = int64[1] {{{unsq}}}> ()
  u = Unsqueeze (eq, a1)
  t = Transpose <perm = [0, 2, 1]> (u)
  a2 = Constant <value = int64[1] {{{sq}}}> ()
  m = Squeeze (t, a2)
  c = Cast <to = 7> (m)
  s = ReduceSum <keepdims = 0> (c, one)
  r = Unsqueeze (s, one)
  {reduce}
  count = Neg (p)
  y = Where (m, x, x2)
}}"""
PROD17 = "p = ReduceProd <axes = [1], keepdims = 0> (r)"
PROD18 = "p = ReduceProd <keepdims = 0> (r, one)"


def _nonzero(t: str = "float", unsq: int = 1, sq: int = 2, reduce: str = PROD17) -> str:
    return NONZERO_ROWS.format(t=t, unsq=unsq, sq=sq, reduce=reduce)


def _fold(text: str, opset: int = 17) -> tuple[int, ir.Model]:
    model = ir.from_proto(parse(text, opset=opset))
    seqlower.passes.infer_shapes(model)
    return fold_unit_axes(model), model


def _ops(model: ir.Model) -> dict[str, int]:
    return dict(op_counts(model))


def _feeds(dtype: type, rows: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rows)
    return {"x": rng.integers(0, 4, size=(rows, 5)).astype(dtype)}


@pytest.mark.parametrize(
    ("t", "dtype"), [("float", np.float32), ("double", np.float64), ("int32", np.int32)]
)
@pytest.mark.parametrize("rows", [0, 1, 3])
@pytest.mark.parametrize(("opset", "reduce"), [(17, PROD17), (18, PROD18)])
def test_the_mask_chain_and_the_count_are_their_sources(t, dtype, rows, opset, reduce):
    model = parse(_nonzero(t, reduce=reduce), opset=opset)
    lowered, _ = lower(model, target="generic")
    ops = op_counts(lowered)
    for gone in ("Unsqueeze", "Transpose", "Squeeze", "ReduceProd"):
        assert gone not in ops, ops
    assert_same_outputs(model, lowered, _feeds(dtype, rows))


@pytest.mark.parametrize(("unsq", "sq"), [(-2, -1), (1, -1), (-2, 2)])
def test_negative_axes_are_the_same_axes(unsq, sq):
    model = parse(_nonzero(unsq=unsq, sq=sq), opset=17)
    folded, ir_model = _fold(_nonzero(unsq=unsq, sq=sq))
    assert folded == 2  # the mask chain and the count
    assert "Transpose" not in _ops(ir_model)
    lowered, _ = lower(model, target="generic")
    assert_same_outputs(model, lowered, _feeds(np.float32))


# an Expand to [K, 1, T], transposed to [K, T, 1] and squeezed: one Squeeze of the Expand
EXPANDED = """
agraph (float[K,T] x) => (float[K,T] y) {
  z = Constant <value = int64 {0}> ()
  o = Constant <value = int64 {1}> ()
  shp = Shape <start = 1, end = 2> (x)
  n = Squeeze (shp)
  rng = Range (z, n, o)
  a01 = Constant <value = int64[2] {0, 1}> ()
  row = Unsqueeze (rng, a01)
  k = Shape <start = 0, end = 1> (x)
  one = Constant <value = int64[1] {1}> ()
  dims = Concat <axis = 0> (k, one, shp)
  e = Expand (row, dims)
  t = Transpose <perm = [0, 2, 1]> (e)
  a2 = Constant <value = int64[1] {2}> ()
  p = Squeeze (t, a2)
  f = Cast <to = 1> (p)
  y = Add (f, x)
}"""


@pytest.mark.parametrize("rows", [0, 1, 4])
def test_a_moved_axis_of_one_is_one_squeeze(rows):
    folded, model = _fold(EXPANDED)
    assert folded == 1
    ops = _ops(model)
    assert "Transpose" not in ops and ops["Squeeze"] == 2  # `n`'s, and the one made
    made = [n for n in model.graph if n.op_type == "Squeeze" and n.inputs[0].name == "e"]
    assert len(made) == 1
    axes = made[0].inputs[1].producer().attributes["value"].as_tensor().numpy()
    assert axes.tolist() == [1]
    lowered, _ = lower(parse(EXPANDED, opset=17), target="generic")
    assert "Transpose" not in op_counts(lowered)
    x = np.random.default_rng(rows).standard_normal((rows, 6)).astype(np.float32)
    assert_same_outputs(parse(EXPANDED, opset=17), lowered, {"x": x})


SHAPE_OF_CHAIN = """
agraph (float[K,T] x) => (int64[1] n, float[K,1,T] u) {
  a = Constant <value = int64[1] {1}> ()
  u = Unsqueeze (x, a)
  n = Shape <start = 2, end = 3> (u)
}"""


def test_a_shape_of_a_chain_reads_the_source():
    folded, model = _fold(SHAPE_OF_CHAIN)
    assert folded == 1
    shape = next(n for n in model.graph if n.op_type == "Shape")
    assert shape.inputs[0].name == "x"
    assert shape.attributes.get_int("start") == 1 and shape.attributes.get_int("end") == 2
    lowered, _ = lower(parse(SHAPE_OF_CHAIN, opset=17), target="generic")
    for rows in (0, 2):
        x = np.ones((rows, 7), np.float32)
        assert_same_outputs(parse(SHAPE_OF_CHAIN, opset=17), lowered, {"x": x})


def test_a_shape_of_an_added_axis_stays():
    added = SHAPE_OF_CHAIN.replace("start = 2, end = 3", "start = 1, end = 3")
    assert _fold(added)[0] == 0  # dim 1 is the Unsqueeze's own, not a dim of x


MAX_OVER_ONE = """
agraph (float[K,T] x) => (float[K,T] y) {
  a = Constant <value = int64[1] {-1}> ()
  u = Unsqueeze (x, a)
  m = ReduceMax <axes = [2], keepdims = 0> (u)
  y = Neg (m)
}"""


def test_a_maximum_over_an_axis_of_one_keeps_nan():
    model = parse(MAX_OVER_ONE, opset=17)
    lowered, _ = lower(model, target="generic")
    ops = op_counts(lowered)
    assert "ReduceMax" not in ops and "Unsqueeze" not in ops
    x = np.array([[np.nan, 1.0, -np.inf], [2.0, np.nan, 0.0]], np.float32)
    assert_same_outputs(model, lowered, {"x": x})


BOOL_CHAIN = """
agraph (bool[K,T] x) => (bool[K,T] y) {
  a = Constant <value = int64[2] {0, 2}> ()
  u = Unsqueeze (x, a)
  t = Transpose <perm = [2, 1, 0, 3]> (u)
  b = Constant <value = int64[2] {0, 2}> ()
  s = Squeeze (t, b)
  y = Not (s)
}"""


def test_a_bool_chain_through_a_transpose_of_ones_only():
    model = parse(BOOL_CHAIN, opset=17)
    folded, ir_model = _fold(BOOL_CHAIN)
    assert folded == 1
    assert set(_ops(ir_model)) == {"Not"}
    lowered, _ = lower(model, target="generic")
    for rows in (0, 3):
        x = np.random.default_rng(rows).integers(0, 2, (rows, 4)).astype(bool)
        assert_same_outputs(model, lowered, {"x": x})


# -- refused -----------------------------------------------------------------------------------

REAL_TRANSPOSE = """
agraph (float[K,T] x) => (float[T,K] y) {
  a = Constant <value = int64[1] {1}> ()
  u = Unsqueeze (x, a)
  t = Transpose <perm = [2, 1, 0]> (u)
  b = Constant <value = int64[1] {1}> ()
  y = Squeeze (t, b)
}"""

UNKNOWN_DIM = """
agraph (float[K,T,M] x) => (float[K,T] y) {
  a = Constant <value = int64[1] {0}> ()
  u = Unsqueeze (x, a)
  b = Constant <value = int64[2] {0, 3}> ()
  y = Squeeze (u, b)
}"""

SHARED_MIDDLE = """
agraph (float[K,1,T] x) => (float[K,T] y, float[K,T,1] w) {
  t = Transpose <perm = [0, 2, 1]> (x)
  w = Identity (t)
  b = Constant <value = int64[1] {2}> ()
  y = Squeeze (t, b)
}"""

OTHER_REDUCTION = """
agraph (float[K] x) => (float[K] y) {
  a = Constant <value = int64[1] {1}> ()
  u = Unsqueeze (x, a)
  y = ReduceL2 <axes = [1], keepdims = 0> (u)
}"""

ALL_AXES = """
agraph (float[K] x) => (float y) {
  a = Constant <value = int64[1] {1}> ()
  u = Unsqueeze (x, a)
  y = ReduceSum <keepdims = 0> (u)
}"""

OUTPUT_CHAIN = """
agraph (float[K,T] x) => (float[K,T] y) {
  a = Constant <value = int64[1] {1}> ()
  u = Unsqueeze (x, a)
  y = Squeeze (u, a)
}"""

SUMMED_CHAIN = """
agraph (float[K,T] x) => (float[K,T] y) {
  a = Constant <value = int64[1] {1}> ()
  u = Unsqueeze (x, a)
  s = Squeeze (u, a)
  y = Add (s, x)
}"""


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(REAL_TRANSPOSE, id="a Transpose that moves axes of more than one"),
        pytest.param(UNKNOWN_DIM, id="a Squeeze of a dim not known to be 1"),
        pytest.param(SHARED_MIDDLE, id="a chain whose middle has another reader: no fewer nodes"),
        pytest.param(OTHER_REDUCTION, id="ReduceL2 of one value is its absolute value"),
        pytest.param(ALL_AXES, id="a reduction over all axes (no axes given)"),
        pytest.param(OUTPUT_CHAIN, id="the chain's result is an output of its graph"),
    ],
)
def test_refused(text):
    folded, model = _fold(text)
    assert folded == 0
    before = _ops(ir.from_proto(parse(text, opset=17)))
    assert _ops(model) == before


def test_the_refused_squeeze_still_fails_where_the_dim_is_not_one():
    model = parse(UNKNOWN_DIM, opset=17)
    lowered, _ = lower(model, target="generic")
    assert_both_fail(model, lowered, {"x": np.ones((2, 3, 4), np.float32)})
    assert_same_outputs(model, lowered, {"x": np.ones((2, 3, 1), np.float32)})


def test_a_chain_that_gives_its_source_is_nothing():
    folded, model = _fold(SUMMED_CHAIN)
    assert folded == 1
    assert set(_ops(model)) == {"Add"}


def test_the_same_bytes_twice():
    model = parse(_nonzero(), opset=17)
    first, _ = lower(model, target="generic")
    second, _ = lower(model, target="generic")
    assert first.SerializeToString() == second.SerializeToString()


# -- Not(Not(x)) -------------------------------------------------------------------------------

NOT_NOT = """
agraph (bool[N] x) => (bool[N] y, bool[N] z) {
  n = Not (x)
  m = Not (n)
  y = And (m, x)
  z = Identity (n)
}"""


def test_a_double_negation_is_the_value():
    model = ir.from_proto(parse(NOT_NOT, opset=17))
    assert fold_double_negations(model) == 1
    assert _ops(model) == {"Not": 1, "And": 1, "Identity": 1}  # the inner Not: z reads it
    lowered, _ = lower(parse(NOT_NOT, opset=17), target="generic")
    for size in (0, 5):
        x = np.random.default_rng(size).integers(0, 2, size).astype(bool)
        assert_same_outputs(parse(NOT_NOT, opset=17), lowered, {"x": x})


def test_a_double_negation_that_is_an_output_stays():
    text = NOT_NOT.replace("y = And (m, x)", "y = Not (n)").replace("m = Not (n)\n", "")
    model = ir.from_proto(parse(text, opset=17))
    assert fold_double_negations(model) == 0
