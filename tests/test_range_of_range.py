"""A Range from 0 by 1 over the length of a Range from 0 by 1 (a batched If counting the rows
of the loop it sits in) is that Range. Checked: what the cleanup folds, what it leaves and why,
and equal outputs under onnxruntime for limits below 0, 0 and above."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.range_of_range import fold_ranges_of_ranges

TWICE = """
agraph (int64 m) => (int64[?] y) {{
  z = Constant <value = int64 {{{start}}}> ()
  o = Constant <value = int64 {{{delta}}}> ()
  r = Range (z, m, o)
  {length}
  z2 = Constant <value = int64 {{0}}> ()
  o2 = Constant <value = int64 {{1}}> ()
  q = Range (z2, n, o2)
  y = Add (q, r)
}}"""
SQUEEZED = """s = Shape <start = 0, end = 1> (r)
  a = Constant <value = int64[1] {0}> ()
  n = Squeeze (s, a)"""
GATHERED = """s = Shape (r)
  i = Constant <value = int64 {0}> ()
  n = Gather (s, i)"""
SIZED = "n = Size (r)"


def _fold(text: str) -> tuple[int, ir.Model]:
    model = ir.from_proto(parse(text, opset=17))
    seqlower.passes.infer_shapes(model)
    return fold_ranges_of_ranges(model), model


@pytest.mark.parametrize("length", [SQUEEZED, GATHERED, SIZED], ids=["squeeze", "gather", "size"])
def test_a_range_over_the_length_of_a_range_is_that_range(length):
    text = TWICE.format(start=0, delta=1, length=length)
    folded, model = _fold(text)
    assert folded == 1
    assert op_counts(model)["Range"] == 1
    original = parse(text, opset=17)
    lowered, _ = lower(original, target="generic")
    assert op_counts(lowered)["Range"] == 1
    for m in (-3, 0, 1, 6):
        assert_same_outputs(original, lowered, {"m": np.array(m, np.int64)})


BATCHED_IF = """
agraph (int64[?] lengths, int64 m) => (int64[?] y) {
  z = Constant <value = int64 {0}> ()
  o = Constant <value = int64 {1}> ()
  r = Range (z, m, o)
  s = Shape <start = 0, end = 1> (r)
  a = Constant <value = int64[1] {0}> ()
  n = Squeeze (s, a)
  everyone = Range (z, n, o)
  b = Constant <value = int64[1] {1}> ()
  u = Unsqueeze (r, b)
  g = Greater (lengths, u)
  c = Cast <to = 7> (g)
  k = ReduceSum <keepdims = 0> (c, b)
  p = Greater (k, z)
  rows = Compress <axis = 0> (everyone, p)
  y = Gather (k, rows)
}"""


def test_the_rows_an_if_takes_read_the_iteration_numbers():
    model = parse(BATCHED_IF, opset=17)
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Range"] == 1
    for m, lengths in ((0, [2, 1]), (3, [2, 1]), (4, [0]), (-2, [3]), (2, [])):
        feeds = {"lengths": np.array(lengths, np.int64), "m": np.array(m, np.int64)}
        assert_same_outputs(model, lowered, feeds)


@pytest.mark.parametrize(
    ("start", "delta", "length"),
    [
        pytest.param(1, 1, SQUEEZED, id="the first Range starts at 1"),
        pytest.param(0, 2, SQUEEZED, id="the first Range steps by 2"),
        pytest.param(0, 1, SQUEEZED.replace("start = 0, end = 1", "start = 0, end = -1"),
                     id="a Shape that gives no dim"),
        pytest.param(0, 1, SQUEEZED.replace("n = Squeeze (s, a)", "n0 = Squeeze (s, a)\n"
                     "  one = Constant <value = int64 {1}> ()\n  n = Sub (n0, one)"),
                     id="one less than the length"),
    ],
)  # fmt: skip
def test_refused(start, delta, length):
    text = TWICE.format(start=start, delta=delta, length=length)
    folded, _ = _fold(text)
    assert folded == 0


def test_a_range_that_is_an_output_stays():
    text = (
        TWICE.format(start=0, delta=1, length=SIZED)
        .replace("y = Add (q, r)", "y = Identity (q)")
        .replace("(int64[?] y)", "(int64[?] y, int64[?] q)")
    )
    folded, _ = _fold(text)
    assert folded == 0


def test_int32_ranges_stay():
    text = """
agraph (int32 m) => (int32[?] y) {
  z = Constant <value = int32 {0}> ()
  o = Constant <value = int32 {1}> ()
  r = Range (z, m, o)
  s = Size (r)
  n = Cast <to = 6> (s)
  q = Range (z, n, o)
  y = Add (q, r)
}"""
    folded, _ = _fold(text)
    assert folded == 0


OWN_ENTRIES = """
agraph (int64 m, bool[?] c) => (int64[?] y) {{
  z = Constant <value = int64 {{0}}> ()
  o = Constant <value = int64 {{{delta}}}> ()
  r = Range (z, m, o)
  k = Compress {axis} (r, c)
  g = Gather (r, k)
  y = Mul (g, g)
}}"""


@pytest.mark.parametrize("axis", ["<axis = 0>", "<axis = -1>", ""])
def test_a_range_read_at_entries_compressed_from_it_is_those_entries(axis):
    text = OWN_ENTRIES.format(delta=1, axis=axis)
    folded, model = _fold(text)
    assert folded == 1
    assert "Gather" not in op_counts(model)
    original = parse(text, opset=17)
    lowered, _ = lower(original, target="generic")
    assert "Gather" not in op_counts(lowered)
    for m, picks in ((5, [1, 0, 1, 1, 0]), (3, [0, 0, 0]), (0, []), (-2, []), (4, [1, 1])):
        feeds = {"m": np.array(m, np.int64), "c": np.array(picks, bool)}
        assert_same_outputs(original, lowered, feeds)


def test_a_range_by_two_read_at_its_entries_stays():
    # entry j of Range(0, m, 2) is 2j: reading it at its own entries is no identity
    folded, _ = _fold(OWN_ENTRIES.format(delta=2, axis="<axis = 0>"))
    assert folded == 0


def test_a_read_at_entries_of_another_range_stays():
    text = """
agraph (int64 m, int64 n, bool[?] c) => (int64[?] y) {
  z = Constant <value = int64 {0}> ()
  o = Constant <value = int64 {1}> ()
  r = Range (z, m, o)
  s = Range (z, n, o)
  k = Compress <axis = 0> (s, c)
  g = Gather (r, k)
  y = Mul (g, g)
}"""
    folded, _ = _fold(text)
    assert folded == 0  # k may hold entries beyond r: the Gather must still fail there


# the rows of x counted (`Range(0, x.size(0))`), and that count read again as the Range's Shape
# to expand a value to every row: the Shape reads the dim
DIM_COUNTED = """
agraph (float[N,T] x, float v) => (float[?] y, int64[?] r) {{
  d = Shape <{dims}> (x)
  {squeeze}
  z = Constant <value = int64 {{{start}}}> ()
  o = Constant <value = int64 {{1}}> ()
  r = Range (z, n, o)
  l = Shape {length} (r)
  y = Expand (v, l)
}}"""
SQUEEZE_0 = "a = Constant <value = int64[1] {0}> ()\n  n = Squeeze (d, a)"


@pytest.mark.parametrize(
    ("dims", "squeeze", "length"),
    [
        ("start = 0, end = 1", SQUEEZE_0, "<start = 0, end = 1>"),
        ("start = 1, end = 2", SQUEEZE_0, ""),
        ("start = -1", "n = Squeeze (d)", "<start = 0>"),
        ("start = 0, end = 1", SQUEEZE_0.replace("{0}", "{-1}"), "<start = -1, end = 5>"),
    ],
    ids=["rows", "columns, the whole Shape", "the last dim, no axes", "axis -1, end past"],
)
def test_the_length_of_a_range_over_a_dim_is_that_dim(dims, squeeze, length):
    text = DIM_COUNTED.format(dims=dims, squeeze=squeeze, start=0, length=length)
    folded, model = _fold(text)
    assert folded == 1
    assert op_counts(model)["Shape"] == 1  # the dim's; the Range's went
    original = parse(text, opset=17)
    lowered, _ = lower(original, target="generic")
    for shape in ((0, 0), (0, 3), (3, 0), (1, 1), (4, 2)):
        feeds = {"x": np.zeros(shape, np.float32), "v": np.array(2.5, np.float32)}
        assert_same_outputs(original, lowered, feeds)


@pytest.mark.parametrize(
    ("dims", "squeeze", "start", "length"),
    [
        pytest.param("start = 0", SQUEEZE_0, 0, "", id="every dim: not declared [1]"),
        pytest.param("start = 0, end = 1", SQUEEZE_0, 1, "", id="a Range from 1"),
        pytest.param("start = 0, end = 1", "n = ReduceMax <keepdims = 0> (d)", 0, "",
                     id="not a Squeeze"),
        pytest.param("start = 0, end = 1", SQUEEZE_0, 0, "<start = 1>",
                     id="a Shape that gives no dim"),
    ],
)  # fmt: skip
def test_the_length_of_other_ranges_stays(dims, squeeze, start, length):
    text = DIM_COUNTED.format(dims=dims, squeeze=squeeze, start=start, length=length)
    folded, model = _fold(text)
    assert folded == 0
    assert op_counts(model)["Shape"] == 2


def test_the_length_of_a_range_a_graph_gives_stays():
    text = DIM_COUNTED.format(dims="start = 0, end = 1", squeeze=SQUEEZE_0, start=0, length="")
    text = text.replace("int64[?] r)", "int64[?] r, int64[1] l)")
    folded, _ = _fold(text)
    assert folded == 0


# d a Shape of a value of unknown rank: not declared [1], so the Squeeze may not give a scalar
# (a rank-0 value: d is empty and the Squeeze fails), and the Range the Shape alone reads stays
UNKNOWN_RANK = """
agraph (float[?] x, int64[?] p, float v) => (float[?] y) {
  w = Reshape (x, p)
  d = Shape <start = 0, end = 1> (w)
  a = Constant <value = int64[1] {0}> ()
  n = Squeeze (d, a)
  z = Constant <value = int64 {0}> ()
  o = Constant <value = int64 {1}> ()
  r = Range (z, n, o)
  l = Shape (r)
  y = Expand (v, l)
}"""


def test_the_length_of_a_range_over_a_shape_of_unknown_length_stays():
    folded, model = _fold(UNKNOWN_RANK)
    assert folded == 0
    assert op_counts(model)["Range"] == 1
    original = parse(UNKNOWN_RANK, opset=17)
    lowered, _ = lower(original, target="generic")
    v = np.array(1.5, np.float32)
    fed = {"x": np.zeros(6, np.float32), "p": np.array([3, 2], np.int64), "v": v}
    assert_same_outputs(original, lowered, fed)
    scalar = {"x": np.zeros(1, np.float32), "p": np.zeros(0, np.int64), "v": v}
    assert_both_fail(original, lowered, scalar)  # a rank-0 w: no dim to squeeze
