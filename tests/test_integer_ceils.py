"""The ceiling of a float made from an integer, and the trip count of a range that steps down
by one (`integer_ceils`). Checked: what each form becomes (no Ceil, no Div), what stays and
why, and equal outputs under onnxruntime, no element, one and negative values included."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, op_counts, parse, run_ort

import seqlower
from seqlower.passes.integer_ceils import fold_integer_ceils

# TorchScript's `for i in range(n - 1, -1, -1)` over the rows of x: the count as a Range's
# limit, the iteration numbers as the output
COUNT_DOWN = """
agraph (float[N, 2] x) => (int64[?] y) {{
  n = Size (x)
  b = Constant <value = int64{b_shape} {{{b}}}> ()
  a = Constant <value = int64{a_shape} {{{a}}}> ()
  start = Sub (n, b)
  d = Sub (a, start)
  f = Cast <to = {to}> (d)
  c32 = Constant <value = float{c_shape} {{{c}}}> ()
  c = Cast <to = {to}> (c32)
  q = Div (f, c)
  up = Ceil (q)
  count = Cast <to = 7> (up)
  zero = Constant <value = int64 {{0}}> ()
  one = Constant <value = int64 {{1}}> ()
  y = Range (zero, count, one)
}}"""


def _count_down(to: int = 1, a: int = -1, b: int = 1, c: float = -1.0, c_shape: str = ""):
    text = COUNT_DOWN.format(
        to=to,
        a=a,
        b=b,
        c=c,
        c_shape=c_shape,
        a_shape="",
        b_shape="",
    )
    return parse(text, opset=17)  # n = Size(x) = 2N, never negative


def _feeds(rows: int) -> dict[str, np.ndarray]:
    return {"x": np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) - 3}


@pytest.mark.parametrize("to", [1, 11, 10])
def test_a_count_down_by_one_is_the_length(to):
    model = _count_down(to=to)
    lowered, _ = lower(model)
    ops = op_counts(lowered)
    assert "Ceil" not in ops and "Div" not in ops and "Sub" not in ops, ops
    assert ops["Cast"] == 2, ops
    for rows in (0, 1, 3, 7):
        (want,) = run_ort(model, _feeds(rows))
        (got,) = run_ort(lowered, _feeds(rows))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, np.arange(rows * 2))


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"c": -2.0}, "a step of -2 does not negate"),
        ({"a": -1, "b": 2}, "a + b = 1: the count is n - 1"),
        ({"c_shape": "[1, 1]"}, "a divisor of rank 2 makes the scalar count [1, 1]"),
    ],
)
def test_what_a_count_down_keeps(options, why):
    model = _count_down(**options)
    lowered, _ = lower(model)
    ops = op_counts(lowered)
    assert ops["Ceil"] == 1 and ops["Div"] == 1, why
    if options.get("c_shape"):
        return  # Range takes no limit of rank 2: the original fails as well
    for rows in (0, 1, 3):
        (want,) = run_ort(model, _feeds(rows))
        (got,) = run_ort(lowered, _feeds(rows))
        np.testing.assert_array_equal(got, want)


# n an input: it may be negative (the type's minimum, whose negation wraps to itself)
GIVEN = """
agraph (int64 n) => (float y, float z) {
  b = Constant <value = int64 {1}> ()
  a = Constant <value = int64 {-1}> ()
  start = Sub (n, b)
  d = Sub (a, start)
  f = Cast <to = 1> (d)
  c = Constant <value = float {-1}> ()
  q = Div (f, c)
  y = Ceil (q)
  z = Ceil (f)
}"""


def test_a_count_down_from_a_value_that_may_be_negative_stays():
    text = GIVEN.replace("y = Ceil (q)", "yy = Ceil (q)\n  y = Identity (yy)")
    model = parse(text.replace("z = Ceil (f)", "zz = Ceil (f)\n  z = Identity (zz)"), opset=17)
    lowered, _ = lower(model)
    ops = op_counts(lowered)
    assert ops["Div"] == 1, ops  # n may be INT64_MIN: kept
    assert ops["Ceil"] == 1, ops  # the count's; the other, of an integer's float, goes
    for n in (np.iinfo(np.int64).min, -5, -1, 0, 1, 6, 2**40 + 1):
        feeds = {"n": np.array(n, np.int64)}
        want, got = run_ort(model, feeds), run_ort(lowered, feeds)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(g, w)


def test_a_ceil_that_is_a_graph_output_stays():
    model = ir.from_proto(parse(GIVEN, opset=17))
    seqlower.passes.infer_shapes(model)
    assert fold_integer_ceils(model) == 0


INTEGER_FLOAT = """
agraph ({x_type}[N] x) => (int64[N] y) {{
  f = Cast <to = {to}> (x)
  up = Ceil (f)
  y = Cast <to = 7> (up)
}}"""


@pytest.mark.parametrize(("x_type", "dtype"), [("int64", np.int64), ("int32", np.int32)])
@pytest.mark.parametrize("to", [1, 11])
def test_the_ceiling_of_an_integer_made_float_is_that_float(x_type, dtype, to):
    model = parse(INTEGER_FLOAT.format(x_type=x_type, to=to), opset=17)
    lowered, _ = lower(model)
    assert "Ceil" not in op_counts(lowered), op_counts(lowered)
    big = np.iinfo(dtype).max
    for x in ([], [0], [-3, 4, -1], [big, -big, 2**24 + 1 if dtype == np.int64 else 7]):
        feeds = {"x": np.array(x, dtype)}
        (want,) = run_ort(model, feeds)
        (got,) = run_ort(lowered, feeds)
        np.testing.assert_array_equal(got, want)


def test_the_ceiling_of_a_float_made_from_a_float_stays():
    text = INTEGER_FLOAT.format(x_type="float", to=11)
    model = parse(text, opset=17)
    lowered, _ = lower(model)
    assert op_counts(lowered)["Ceil"] == 1
    feeds = {"x": np.array([-1.5, 0.25, 2.0, -0.0], np.float32)}
    (want,) = run_ort(model, feeds)
    (got,) = run_ort(lowered, feeds)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, [-1, 1, 2, 0])
