"""Static-value folding (seqlower.analysis.static_values): shape arithmetic on static shapes of
any operator folds, by numpy or by onnx.reference one node at a time, so trip counts and
positions computed from shapes are static and loops over them unroll. What it folds, what it
refuses and why, and equality with the original under onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower_and_compare, op_counts, parse, sequence_op_count

from seqlower.analysis.static_values import MAX_FOLD_ELEMENTS, StaticValues


def _values(text: str) -> tuple[StaticValues, dict[str, ir.Value]]:
    model = ir.from_proto(parse(text))
    values = {v.name: v for node in model.graph for v in node.outputs}
    values.update({v.name: v for v in model.graph.inputs})
    return StaticValues(model.opset_imports[""]), values


# min(H, W) // 4 + 1 as TorchScript writes it, with H, W from a static shape
TRIP = """
  shp = Shape(x)
  one = Constant<value = int64 {{1}}>()
  two = Constant<value = int64 {{2}}>()
  zero1 = Constant<value = int64[1] {{0}}>()
  four = Constant<value = int64 {{4}}>()
  h = Gather<axis = 0>(shp, one)
  w = Gather<axis = 0>(shp, two)
  hu = Unsqueeze(h, zero1)
  wu = Unsqueeze(w, zero1)
  hw = Concat<axis = 0>(hu, wu)
  m = ReduceMin<keepdims = 0>(hw)
  mf = Cast<to = 1>(m)
  ff = Cast<to = 1>(four)
  dv = Div(mf, ff)
  f = Floor(dv)
  q = Cast<to = 7>(f)
  mx = Max(q, one)
  n = Add(mx, {offset})
"""


def test_shape_arithmetic_of_any_operator_folds():
    values, named = _values(
        f"""g (float[2,12,9] x, float[N] d) => (int64 n, int64[?] r, int64 k, float z, int64 dyn) {{
        minus = Constant<value = int64 {{-1}}>()
        {TRIP.format(offset="minus")}
        r = Range(zero, n, one)
        zero = Constant<value = int64 {{0}}>()
        nn = Neg(n)
        k = Mod<fmod = 0>(nn, four)
        zf = Cast<to = 1>(zero)
        z = Sin(zf)
        dyn = Size(d)
    }}"""
    )
    assert values.get_int(named["m"]) == 9
    assert values.get_int(named["n"]) == 2 - 1  # min(12, 9) // 4 = 2; Max(2, 1) - 1
    assert values.get_ints(named["r"]) == [0]
    assert values.get_int(named["k"]) == 3  # Python's -1 % 4, as Mod with fmod=0
    assert values.get(named["z"]).tolist() == 0.0  # Sin: evaluated by onnx.reference
    assert values.get(named["dyn"]) is None  # Size of a symbolic dim


def test_not_folded_random_overridable_large_or_data_dependent():
    values, named = _values(
        f"""g (float[3] x, int64 p) => (float[3] r, int64 q, float[{MAX_FOLD_ELEMENTS + 1}] big,
                                     float[3] y) <int64 p = {{2}}> {{
        r = RandomUniformLike(x)
        q = Add(p, p)
        shape = Constant<value = int64[1] {{{MAX_FOLD_ELEMENTS + 1}}}>()
        big = ConstantOfShape(shape)
        y = Relu(x)
    }}"""
    )
    assert values.get(named["r"]) is None  # not deterministic
    assert values.get(named["q"]) is None  # the initializer is also an input: callers override
    assert values.get(named["big"]) is None  # too large to fold
    assert values.get(named["y"]) is None  # reads a model input


def test_a_long_chain_folds_without_recursion():
    steps = 5000
    lines = "\n".join(f"v{k + 1} = Add(v{k}, one)" for k in range(steps))
    values, named = _values(f"""g (float[1] x) => (int64 y, float[1] z) {{
        one = Constant<value = int64 {{1}}>()
        v0 = Constant<value = int64 {{0}}>()
        {lines}
        y = Identity(v{steps})
        z = Relu(x)
    }}""")
    assert values.get_int(named["y"]) == steps


PREPEND = """g (float[2,{h},{w}] x, float[3] a) => (float[?,3] y) {{
  {trip}
  t = Constant<value = bool {{1}}>()
  e = SequenceConstruct(a)
  s = Loop(n, t, e) <body = b (int64 i, bool c, seq(float) acc) => (bool co, seq(float) acc2) {{
     co = Identity(c)
     fi = Cast<to = 1>(i)
     v = Mul(a, fi)
     front = Constant<value = int64 {{0}}>()
     acc2 = SequenceInsert(acc, v, front)
  }}>
  y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}}"""


@pytest.mark.parametrize(
    ("h", "w", "offset", "count"),
    [(12, 9, "zero", 2), (3, 8, "minus", 0), (4, 5, "zero", 1), (16, 20, "zero", 4)],
)
def test_a_loop_whose_trip_count_is_shape_arithmetic_unrolls(h, w, offset, count):
    """`for i in range(min(H, W) // 4 + k): out.insert(0, a * i)`: trip counts 0, 1, several."""
    consts = "zero = Constant<value = int64 {0}>()\n  minus = Constant<value = int64 {-1}>()"
    trip = consts + TRIP.format(offset=offset)
    model = parse(PREPEND.format(h=h, w=w, trip=trip))
    a = np.array([1, 2, 3], dtype=np.float32)
    feeds = {"x": np.zeros((2, h, w), np.float32), "a": a}
    lowered, report, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, np.stack([*(a * i for i in reversed(range(count))), a]))
    assert sequence_op_count(lowered) == 0 and op_counts(lowered)["Loop"] == 0
    assert report.rules_fired["loop-unroll"] == 1


def test_a_value_a_rewrite_makes_static_is_seen_by_the_next_question():
    """`len(xs) - 1` is not static while the SequenceLength stays; once a rule replaces it by a
    Constant, the same StaticValues (one per sweep) folds the subtraction."""
    values, named = _values("""g (float[2] x) => (int64 last) {
        s = SequenceConstruct(x, x, x)
        n = SequenceLength(s)
        one = Constant<value = int64 {1}>()
        last = Sub(n, one)
    }""")
    assert values.get(named["last"]) is None
    length = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(np.array(3)))])
    named["n"].producer().graph.insert_before(named["n"].producer(), length)
    named["n"].replace_all_uses_with(length.outputs[0])
    assert values.get_int(named["last"]) == 2


def test_an_if_with_a_static_condition_folds_to_its_taken_branch():
    """min(h, w) as some exporters write it: If(h < w) then h else w, on static dims."""
    values, named = _values("""g (float[6,4] x, bool c) => (int64 m, int64 d) {
        shp = Shape(x)
        zero = Constant<value = int64 {0}>()
        one = Constant<value = int64 {1}>()
        h = Gather<axis = 0>(shp, zero)
        w = Gather<axis = 0>(shp, one)
        less = Less(h, w)
        m = If(less) <then_branch = t () => (int64 a) { a = Identity(h) },
                      else_branch = e () => (int64 b) { b = Identity(w) }>
        d = If(c) <then_branch = t2 () => (int64 a2) { a2 = Identity(h) },
                   else_branch = e2 () => (int64 b2) { b2 = Identity(w) }>
    }""")
    assert values.get_int(named["m"]) == 4
    assert values.get(named["d"]) is None  # the condition is a model input
