"""TorchScript's floor division (`torch.div(a, k, rounding_mode="floor")`, `a // k`) of a dividend
never negative by a positive constant is the Div alone; any other floor division keeps its sign
correction. Checked: what the cleanup folds, what it leaves and why, and equal outputs under
onnxruntime (negative dividends where the correction stays, int32, a loop body)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.floor_division import fold_floor_divisions

# q = a // K as TorchScript exports it (the Less of the divisor folded or not)
FLOOR = """
agraph ({t}[N] x) => ({t}[?] r) {{
  {dividend}
  k = Constant <value = {t} {{{k}}}> ()
  zero = Constant <value = {t} {{0}}> ()
  one = Constant <value = {t} {{1}}> ()
  d = Div (a, k)
  neg = Less (a, zero)
  kneg = Less (k, zero)
  signs = Xor (neg, kneg)
  m = Mod <fmod = 0> (a, k)
  exact = Equal (m, zero)
  inexact = Not (exact)
  wrong = And (signs, inexact)
  s = Sub (d, one)
  q = Where (wrong, s, d)
  r = Identity (q)
}}"""
# the positions of the entries above 0 (torch.where(x > 0)[0]): never negative
POSITIONS_IN_ORDER = """zero0 = Constant <value = {t} {{0}}> ()
  pos = Greater (x, zero0)
  nz = NonZero (pos)
  axes = Constant <value = int64[1] {{0}}> ()
  found = Squeeze (nz, axes)
  a = Cast <to = {to}> (found)"""
RAW = "a = Identity (x)"  # the input itself: may be negative
TO = {"int64": 7, "int32": 6}


def _model(t: str = "int64", k: int = 2, dividend: str = POSITIONS_IN_ORDER):  # type: ignore[no-untyped-def]
    text = FLOOR.format(t=t, k=k, dividend=dividend.format(t=t, to=TO[t]))
    return parse(text, opset=17)


def _folded(model) -> int:  # type: ignore[no-untyped-def]
    graph_model = ir.from_proto(model)
    seqlower.passes.infer_shapes(graph_model)
    return fold_floor_divisions(graph_model)


@pytest.mark.parametrize("t", sorted(TO))
def test_the_floor_division_of_positions_is_a_div(t):
    model = _model(t)
    assert _folded(model) == 1
    lowered, _ = lower(model, target="generic")
    counts = op_counts(lowered)
    assert counts["Div"] == 1 and not {"Where", "Mod", "Xor", "Less"} & set(counts)
    dtype = np.int64 if t == "int64" else np.int32
    for x in ([3, -1, 0, 5, 7, 2, -4, 9], [], [-1, -2], [1] * 9):
        assert_same_outputs(model, lowered, {"x": np.array(x, dtype)})


@pytest.mark.parametrize(
    ("k", "dividend", "why"),
    [
        (2, RAW, "the dividend may be negative"),
        (-2, POSITIONS_IN_ORDER, "a negative divisor"),
        (0, POSITIONS_IN_ORDER, "a divisor of 0"),
    ],
)
def test_other_floor_divisions_keep_their_correction(k, dividend, why):
    model = _model(k=k, dividend=dividend)
    assert _folded(model) == 0, why
    if k == 0:
        return  # a division by 0 fails in onnxruntime either way
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Where"] == 1
    x = np.array([3, -1, 0, -5, 7, 2, -4, 9], np.int64)
    assert_same_outputs(model, lowered, {"x": x})


def test_a_condition_read_elsewhere_or_of_another_value_stays():
    """The Where reads a condition made from another tensor than the dividend: not this form."""
    text = FLOOR.format(t="int64", k=2, dividend=POSITIONS_IN_ORDER.format(t="int64", to=7))
    text = text.replace("neg = Less (a, zero)", "neg = Less (x, zero)")
    assert _folded(parse(text, opset=17)) == 0


def test_a_floor_division_that_is_a_graph_output_stays_computed():
    text = FLOOR.format(t="int64", k=2, dividend=POSITIONS_IN_ORDER.format(t="int64", to=7))
    text = text.replace("[?] r)", "[?] q)").replace("  r = Identity (q)\n", "")
    model = ir.from_proto(parse(text, opset=17))
    seqlower.passes.infer_shapes(model)
    assert fold_floor_divisions(model) == 0  # q is the graph's output
    assert [node.op_type for node in model.graph][-1] == "Where"
