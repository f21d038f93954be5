"""The length of a vector read from its Shape (`Gather(Shape(v), 0)`, `Reshape(Shape(v), [])`,
`Squeeze(Shape(v))`) is `Size(v)`: what the fold makes, what it leaves and why, and the outputs
under onnxruntime at lengths 0, 1 and 5."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.vector_lengths import fold_vector_lengths

# the length read, then used (an output of its graph read directly stays computed)
TEMPLATE = """
agraph ({dtype}[N] v) => (int64 y) {{
  one = Constant <value = int64 {{1}}> ()
  {shape}
  {read}
  y = Add (n, one)
}}"""

SHAPE = "s = Shape (v)"
READS = {
    "gather 0": "i = Constant <value = int64 {0}> ()\n  n = Gather (s, i)",
    "gather -1": "i = Constant <value = int64 {-1}> ()\n  n = Gather <axis = -1> (s, i)",
    "gather int32 index": "i = Constant <value = int32 {0}> ()\n  n = Gather (s, i)",
    "reshape to []": "e = Constant <value = int64[0] {}> ()\n  n = Reshape (s, e)",
    "squeeze": "n = Squeeze (s)",
    "squeeze axis 0": "a = Constant <value = int64[1] {0}> ()\n  n = Squeeze (s, a)",
    "squeeze axis -1": "a = Constant <value = int64[1] {-1}> ()\n  n = Squeeze (s, a)",
}
SHAPES = {
    "whole": SHAPE,
    "end 1": "s = Shape <end = 1> (v)",
    "start -1": "s = Shape <start = -1> (v)",
    "end 5": "s = Shape <start = 0, end = 5> (v)",
}


def _folded(text: str, opset: int = 18) -> tuple[onnx.ModelProto, onnx.ModelProto, int]:
    original = parse(text, opset=opset)
    model = ir.from_proto(original)
    seqlower.passes.infer_shapes(model)
    count = fold_vector_lengths(model)
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    return original, proto, count


def _assert_same_at_lengths(original, folded, dtype=np.float32):
    for length in (0, 1, 5):
        assert_same_outputs(original, folded, {"v": np.ones(length, dtype=dtype)})


@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_read_of_a_vectors_length_becomes_its_size(read, shape):
    original, folded, count = _folded(
        TEMPLATE.format(dtype="float", shape=SHAPES[shape], read=READS[read])
    )
    assert count == 1
    counts = op_counts(folded)
    assert counts["Size"] == 1 and "Shape" not in counts
    assert not {"Gather", "Reshape", "Squeeze"} & set(counts)
    _assert_same_at_lengths(original, folded)


@pytest.mark.parametrize("dtype", [("bool", np.bool_), ("int64", np.int64), ("double", np.float64)])
def test_the_element_type_of_the_vector_does_not_matter(dtype):
    name, numpy_type = dtype
    text = TEMPLATE.format(dtype=name, shape=SHAPE, read=READS["squeeze"])
    original, folded, count = _folded(text)
    assert count == 1
    _assert_same_at_lengths(original, folded, numpy_type)


def test_the_attribute_form_of_squeeze_before_opset_13():
    text = TEMPLATE.format(dtype="float", shape=SHAPE, read="n = Squeeze <axes = [0]> (s)")
    original, folded, count = _folded(text, opset=11)
    assert count == 1 and op_counts(folded)["Size"] == 1
    _assert_same_at_lengths(original, folded)


def test_every_read_goes_and_the_shape_becomes_one_size():
    text = """
agraph (float[N] v) => (int64 y) {
  s = Shape (v)
  i = Constant <value = int64 {0}> ()
  n = Gather (s, i)
  e = Constant <value = int64[0] {}> ()
  m = Reshape (s, e)
  y = Add (n, m)
}"""
    original, folded, count = _folded(text)
    assert count == 2 and op_counts(folded) == {"Size": 1, "Add": 1}
    _assert_same_at_lengths(original, folded)


def test_a_read_inside_a_loop_body_reads_the_size_made_outside():
    text = """
agraph (float[N] v, int64 trips) => (int64 total) {
  s = Shape (v)
  zero = Constant <value = int64 {0}> ()
  t = Constant <value = bool {1}> ()
  total = Loop (trips, t, zero)
    <body = body (int64 it, bool c, int64 acc) => (bool c2, int64 acc2) {
    i = Constant <value = int64 {0}> ()
    n = Gather (s, i)
    acc2 = Add (acc, n)
    c2 = Identity (c)
  }>
}"""
    original, folded, count = _folded(text)
    assert count == 1 and op_counts(folded)["Size"] == 1 and "Shape" not in op_counts(folded)
    for length in (0, 1, 5):
        for trips in (0, 3):
            feeds = {"v": np.ones(length, np.float32), "trips": np.array(trips, np.int64)}
            assert_same_outputs(original, folded, feeds)


@pytest.mark.parametrize(
    "text",
    [
        # a matrix: its first dim is not its Size
        TEMPLATE.format(dtype="float", shape=SHAPE, read=READS["gather 0"]).replace(
            "float[N] v", "float[N,3] v"
        ),
        # rank unknown
        TEMPLATE.format(dtype="float", shape=SHAPE, read=READS["gather 0"]).replace(
            "float[N] v", "float v"
        ),
        # a Shape that keeps no dim: the Gather would fail, the Size would not
        TEMPLATE.format(dtype="float", shape="s = Shape <start = 1> (v)", read=READS["gather 0"]),
        # index 1 (fails on a [n]), and a 1-D index (gives [n], not a scalar)
        TEMPLATE.format(
            dtype="float",
            shape=SHAPE,
            read="i = Constant <value = int64 {1}> ()\n  n = Gather (s, i)",
        ),
        TEMPLATE.format(
            dtype="float",
            shape=SHAPE,
            read="i = Constant <value = int64[1] {0}> ()\n  n0 = Gather (s, i)\n"
            "  e = Constant <value = int64[0] {}> ()\n  n = Reshape (n0, e)",
        ),
        # an index given at run time
        TEMPLATE.format(dtype="float", shape=SHAPE, read="n = Gather (s, i)").replace(
            "(float[N] v)", "(float[N] v, int64 i)"
        ),
        # a Reshape to [1], not to a scalar
        TEMPLATE.format(
            dtype="float",
            shape=SHAPE,
            read="e = Constant <value = int64[1] {1}> ()\n  n1 = Reshape (s, e)\n"
            "  n = Squeeze (n1)",
        ),
        # the Shape read as a shape (input 1 of a Reshape) too: it stays, so nothing is saved
        TEMPLATE.format(
            dtype="float",
            shape=SHAPE,
            read="n = Squeeze (s)\n  w = Reshape (v, s)",
        ).replace("=> (int64 y)", "=> (int64 y, float[N] w)"),
    ],
    ids=[
        "matrix",
        "rank unknown",
        "shape without the dim",
        "index 1",
        "1-D index",
        "run-time index",
        "reshape to [1]",
        "shape read as a shape",
    ],
)
def test_what_is_not_a_vectors_length_read_once_stays(text):
    _, folded, count = _folded(text)
    assert count == 0
    assert op_counts(folded)["Shape"] == 1


@pytest.mark.parametrize(
    "text",
    [
        # the length itself an output of the graph
        TEMPLATE.format(dtype="float", shape=SHAPE, read=READS["gather 0"]).replace(
            "=> (int64 y)", "=> (int64 y, int64 n)"
        ),
        # the Shape an output of the graph
        TEMPLATE.format(dtype="float", shape=SHAPE, read=READS["gather 0"]).replace(
            "=> (int64 y)", "=> (int64 y, int64[1] s)"
        ),
    ],
    ids=["length an output", "shape an output"],
)
def test_graph_outputs_stay_computed(text):
    _, folded, count = _folded(text)
    assert count == 0 and op_counts(folded)["Shape"] == 1


LIST_LENGTH = """
agraph (float[N] x) => (float[N] y) {
  xs = SplitToSequence <axis = 0, keepdims = 0> (x)
  n = SequenceLength (xs)
  f = Cast <to = 1> (n)
  y = Mul (x, f)
}"""


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
def test_the_length_of_a_lowered_list_of_scalars_is_one_size(target):
    model = parse(LIST_LENGTH)
    lowered, _ = lower(model, target=target)
    counts = op_counts(lowered)
    assert counts["Size"] == 1 and "Shape" not in counts and "SequenceLength" not in counts
    for rows in (0, 1, 5):
        x = np.arange(rows, dtype=np.float32)
        assert_same_outputs(model, lowered, {"x": x})
