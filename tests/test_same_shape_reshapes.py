"""A Reshape to the shape its input has is removed; one whose target may differ, or whose -1 is
not determined (a dim of 0 beside it), stays."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same_or_both_fail, assert_same_outputs, lower, op_counts, parse


@pytest.mark.parametrize("n", [0, 1, 4])
def test_a_vector_reshaped_to_minus_one_is_the_vector(n):
    model = parse("""
agraph (int64 n, int64 s) => (int64[M] y) {
  zero = Constant <value = int64 {0}> ()
  one = Constant <value = int64 {1}> ()
  r = Range (zero, n, one)
  m = Mul (r, s)
  flat = Constant <value = int64[1] {-1}> ()
  y = Reshape (m, flat)
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Reshape"] == 0
    assert [o.name for o in lowered.graph.output] == ["y"]
    feeds = {"n": np.array(n, np.int64), "s": np.array(-3, np.int64)}
    assert_same_outputs(model, lowered, feeds)


@pytest.mark.parametrize(
    ("target", "allowzero"),
    [("-1, 4", 0), ("0, 4", 0), ("-1, 0", 0), ("-1, 4", 1)],
)
def test_a_target_giving_each_dim_is_removed(target, allowzero):
    model = parse(f"""
agraph (float[N,4] x) => (float[N,4] y) {{
  t = Constant <value = int64[2] {{{target}}}> ()
  r = Reshape <allowzero = {allowzero}> (x, t)
  y = Relu (r)
}}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Reshape"] == 0
    for rows in (0, 3):
        x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) - 5
        assert_same_outputs(model, lowered, {"x": x})


@pytest.mark.parametrize(
    ("shape", "target", "why"),
    [
        ("N,4", "-1, 2", "another shape"),
        ("N,4", "4, -1", "a dim given as a number that may differ at run time"),
        ("N,0", "0, -1", "beside a 0 the -1 is not determined"),
        ("N,M", "0, -1", "beside a run-time dim the -1 may be undetermined"),
        ("N,4", "0, -1", "beside a copied dim that may be 0 the -1 may be undetermined"),
        ("N,4", "0, 4", "allowzero 1 makes 0 a dim of 0"),
        ("N,4", "-1", "another rank"),
    ],
)
def test_a_target_that_may_differ_stays(shape, target, why):
    allowzero = 1 if why.startswith("allowzero") else 0
    size = len(target.split(","))
    model = parse(f"""
agraph (float[{shape}] x) => (float[?] y) {{
  t = Constant <value = int64[{size}] {{{target}}}> ()
  r = Reshape <allowzero = {allowzero}> (x, t)
  y = ReduceSum <keepdims = 0> (r)
}}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Reshape"] == 1, why
    dims = [4 if d in ("4", "M") else 0 if d == "0" else 2 for d in shape.split(",")]
    x = np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims)
    assert_same_or_both_fail(model, lowered, {"x": x})


def test_a_reshape_that_is_a_graph_output_gives_its_input_the_name():
    model = parse("""
agraph (float[N,4] x) => (float[N,4] y) {
  a = Relu (x)
  t = Constant <value = int64[2] {-1, 4}> ()
  y = Reshape (a, t)
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Reshape"] == 0
    assert [o.name for o in lowered.graph.output] == ["y"]
    assert_same_outputs(model, lowered, {"x": np.ones((2, 4), np.float32)})


def test_a_reshape_of_a_graph_input_to_a_graph_output_stays():
    model = parse("""
agraph (float[N,4] x) => (float[N,4] y) {
  t = Constant <value = int64[2] {-1, 4}> ()
  y = Reshape (x, t)
}""")
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Reshape"] == 1
    assert_same_outputs(model, lowered, {"x": np.ones((2, 4), np.float32)})
