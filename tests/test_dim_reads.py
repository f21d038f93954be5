"""One dim read one way: the Shape of an elementwise operator with an operand of unit dims
reads its other operand (`elementwise_shapes`), and a dim gathered from a whole Shape reads the
graph's Shape of that one entry (`dim_reads`), so that the merge of duplicates joins them.
Checked: what each rewrites, what each leaves and why, and equal outputs (or both models
failing) under onnxruntime, tensors with no element included."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.dim_reads import read_dims_alike
from seqlower.passes.elementwise_shapes import fold_elementwise_shapes

SHAPES = [(0, 3), (2, 0), (1, 1), (3, 5)]

MASKED = """
agraph (int64[K, T] x, {c_type} c) => (int64[?] y, bool[K, T] e) {{
  e = {op} ({left}, {right})
  y = Shape <start = {start}, end = {end}> (e)
}}"""


def _parsed(text: str):
    model = ir.from_proto(parse(text, opset=17))
    seqlower.passes.infer_shapes(model)
    return model


def _feeds(shape, c_shape, dtype=np.int64):
    rng = np.random.default_rng(sum(shape) + len(c_shape))
    return {
        "x": rng.integers(-2, 3, size=shape).astype(dtype),
        "c": rng.integers(-2, 3, size=c_shape).astype(dtype),
    }


@pytest.mark.parametrize(
    ("op", "c_type", "c_shape"),
    [
        ("Equal", "int64", ()),
        ("Greater", "int64[1]", (1,)),
        ("LessOrEqual", "int64[1, 1]", (1, 1)),
    ],
)
@pytest.mark.parametrize(("start", "end", "swap"), [(1, 2, False), (0, 2, True), (-1, 2, False)])
def test_the_shape_of_a_comparison_with_a_unit_operand_is_the_shape_of_the_other(
    op, c_type, c_shape, start, end, swap
):
    left, right = ("c", "x") if swap else ("x", "c")
    text = MASKED.format(c_type=c_type, op=op, left=left, right=right, start=start, end=end)
    model = _parsed(text)
    assert fold_elementwise_shapes(model) == 1
    shape = next(n for n in model.graph if n.op_type == "Shape")
    assert shape.inputs[0].name == "x"
    assert shape.attributes.get_int("start") == start
    original = parse(text, opset=17)
    lowered, _ = lower(original, target="generic")
    for dims in SHAPES:
        assert_same_outputs(original, lowered, _feeds(dims, c_shape))


ARITHMETIC = """
agraph (float[K, T] x, float c) => (int64[2] y) {{
  e = {op} (x, c)
  y = Shape (e)
}}"""


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min"])
def test_arithmetic_with_a_scalar_goes_with_its_shape(op):
    text = ARITHMETIC.format(op=op)
    original = parse(text, opset=17)
    lowered, _ = lower(original, target="generic")
    assert op_counts(lowered) == {"Shape": 1}  # the operator is read by nothing else
    for dims in SHAPES:
        feeds = {"x": np.ones(dims, np.float32), "c": np.array(2.5, np.float32)}
        assert_same_outputs(original, lowered, feeds)


CHAIN = """
agraph (int64[K] x, int64 m) => (int64[1] y) {
  d = Constant <value = int64[1] {4}> ()
  s = Sub (d, x)
  n = Min (m, s)
  y = Shape (n)
}"""


def test_a_chain_of_them_is_followed_to_its_first_operand():
    model = _parsed(CHAIN)
    assert fold_elementwise_shapes(model) == 2
    shape = next(n for n in model.graph if n.op_type == "Shape")
    assert shape.inputs[0].name == "x"
    original = parse(CHAIN, opset=17)
    lowered, _ = lower(original, target="generic")
    assert op_counts(lowered) == {"Shape": 1}
    again, _ = lower(lowered, target="generic")
    assert again.graph == lowered.graph  # nothing left for a second lowering
    for size in (0, 1, 3):
        feeds = {"x": np.arange(size, dtype=np.int64), "m": np.array(2, np.int64)}
        assert_same_outputs(original, lowered, feeds)


KEPT = {
    # Div of integers by 0 fails: not taken
    "div": ("agraph (int64[K, T] x, int64 c) => (int64[?] y) { e = Div (x, c)\n y = Shape (e) }"),
    # c's dim is T's, not 1: the fold does not compare dims
    "dim not one": (
        "agraph (int64[K, T] x, int64[T] c) => (int64[?] y) { e = Equal (x, c)\n y = Shape (e) }"
    ),
    # c of a rank above x's: the result has c's rank
    "rank above": (
        "agraph (int64[T] x, int64[1, 1] c) => (int64[?] y) { e = Equal (x, c)\n y = Shape (e) }"
    ),
    # x of no declared rank
    "unknown rank": (
        "agraph (int64 x_scalar, int64 c) => (int64[?] y) "
        "{ s = Constant <value = int64[1] {2}> ()\n"
        "  x = ConstantOfShape <value = int64[1] {1}> (s)\n"
        "  e = Equal (x, c)\n y = Shape (e) }"
    ),
    # three operands
    "max of three": (
        "agraph (int64[K, T] x, int64 c) => (int64[?] y) { e = Max (x, c, c)\n y = Shape (e) }"
    ),
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_what_the_elementwise_fold_leaves(name):
    model = ir.from_proto(parse(KEPT[name], opset=17))
    if name != "unknown rank":
        seqlower.passes.infer_shapes(model)
    else:  # the Shape reads a value whose rank is not declared
        next(n for n in model.graph if n.op_type == "ConstantOfShape").outputs[0].shape = None
    assert fold_elementwise_shapes(model) == 0


def test_what_is_left_computes_the_same():
    # the kept forms lowered: their outputs equal the original's
    cases = {
        "dim not one": {"x": np.zeros((2, 3), np.int64), "c": np.arange(3, dtype=np.int64)},
        "rank above": {"x": np.zeros((3,), np.int64), "c": np.zeros((1, 1), np.int64)},
    }
    for name, feeds in cases.items():
        original = parse(KEPT[name], opset=17)
        lowered, _ = lower(original, target="generic")
        assert_same_outputs(original, lowered, feeds)


DIMS = """
agraph (float[K, T] x) => (int64 y, int64[?] z) {{
  d = Shape <start = {start}, end = {end}> (x)
  a = Constant <value = int64[1] {{0}}> ()
  m = Squeeze (d, a)
  s = Shape (x)
  k = Constant <value = {k_type} {{{k}}}> ()
  n = Gather (s, k)
  y = Mul (m, n)
  z = Unsqueeze (n, a)
}}"""


@pytest.mark.parametrize(("start", "end", "k"), [(1, 2, 1), (-1, 2, 1), (1, 2, -1), (0, 1, 0)])
def test_a_gathered_dim_reads_the_shape_of_that_entry(start, end, k):
    text = DIMS.format(start=start, end=end, k=k, k_type="int64")
    model = _parsed(text)
    assert read_dims_alike(model) == 1
    counts = op_counts(model)
    assert counts["Gather"] == 0 and counts["Shape"] == 2  # the whole Shape went
    original = parse(text, opset=17)
    lowered, _ = lower(original, target="generic")
    # merged: one Shape and one Squeeze where two Shapes, a Squeeze and a Gather were
    assert op_counts(lowered)["Shape"] == 1
    assert op_counts(lowered)["Squeeze"] == 1
    assert op_counts(lowered)["Gather"] == 0
    for dims in ((0, 0), (2, 3), (1, 0), (4, 1)):
        feeds = {"x": np.zeros(dims, np.float32)}
        assert_same_outputs(original, lowered, feeds)


def test_a_gathered_dim_in_int32():
    text = DIMS.format(start=1, end=2, k=1, k_type="int32")
    model = _parsed(text)
    assert read_dims_alike(model) == 1


@pytest.mark.parametrize(
    ("name", "start", "end", "k", "k_type"),
    [
        ("another dim", 0, 1, 1, "int64"),  # only dim 0 read as one entry
        ("two entries", 0, 2, 1, "int64"),  # a Shape of two entries is not one dim
        ("a vector index", 1, 2, "1", "int64[1]"),  # Gather gives [T], not T
    ],
)
def test_what_the_dim_read_leaves(name, start, end, k, k_type):
    text = DIMS.format(start=start, end=end, k=k, k_type=k_type)
    if end - start == 2:  # a Squeeze of two entries fails: the dims read by their largest
        text = text.replace("m = Squeeze (d, a)", "m = ReduceMax <keepdims = 0> (d)")
    if k_type == "int64[1]":
        text = text.replace("(int64 y,", "(int64[1] y,").replace("int64[?] z", "int64[?] z")
        text = text.replace("z = Unsqueeze (n, a)", "z = Identity (n)")
    model = _parsed(text)
    assert read_dims_alike(model) == 0
    original = parse(text, opset=17)
    lowered, _ = lower(original, target="generic")
    for dims in ((0, 2), (2, 3)):
        assert_same_outputs(original, lowered, {"x": np.zeros(dims, np.float32)})


OUT_OF_RANGE = """
agraph (float[K, T] x) => (int64 y) {
  d = Shape <start = 1, end = 2> (x)
  a = Constant <value = int64[1] {0}> ()
  m = Squeeze (d, a)
  s = Shape (x)
  k = Constant <value = int64 {2}> ()
  n = Gather (s, k)
  y = Mul (m, n)
}"""


def test_a_dim_beyond_the_rank_stays_and_fails_in_both():
    model = _parsed(OUT_OF_RANGE)
    assert read_dims_alike(model) == 0
    original = parse(OUT_OF_RANGE, opset=17)
    lowered, _ = lower(original, target="generic", load_ort=False)
    assert op_counts(lowered)["Gather"] == 1
    assert_both_fail(original, lowered, {"x": np.zeros((2, 3), np.float32)})


GRAPH_OUTPUT = """
agraph (float[K, T] x) => (int64 n, int64[1] d) {
  d = Shape <start = 1, end = 2> (x)
  s = Shape (x)
  k = Constant <value = int64 {1}> ()
  n = Gather (s, k)
}"""


def test_a_gather_that_is_a_graph_output_stays():
    model = _parsed(GRAPH_OUTPUT)
    assert read_dims_alike(model) == 0


ROW_LENGTH = """
agraph (int64[K, T] tokens) => (int64[?] y) {
  eos = Constant <value = int64 {2}> ()
  e = Equal (tokens, eos)
  d = Shape <start = 1, end = 2> (e)
  a = Constant <value = int64[1] {0}> ()
  t = Squeeze (d, a)
  s = Shape (tokens)
  one = Constant <value = int64 {1}> ()
  n = Gather (s, one)
  c = Cast <to = 7> (e)
  b = Constant <value = int64[1] {1}> ()
  found = ReduceSum <keepdims = 0> (c, b)
  m = Mul (found, t)
  y = Add (m, n)
}"""


def test_a_row_length_read_through_its_mask_and_from_the_whole_shape_is_read_once():
    original = parse(ROW_LENGTH, opset=17)
    lowered, _ = lower(original, target="generic")
    counts = op_counts(lowered)
    assert counts["Shape"] == 1 and counts["Gather"] == 0
    for dims in ((0, 3), (2, 0), (3, 4)):
        tokens = np.random.default_rng(dims[0]).integers(0, 4, size=dims).astype(np.int64)
        assert_same_outputs(original, lowered, {"tokens": tokens})
