"""Reads and cuts of what a cut of the last rows left, made on the tensor itself: a stack
popped twice reads rows -1 and -2 and cuts once; they fail where the original fails, and other
cuts stay."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.trimmed_reads import fold_trimmed_reads

_POP_TWICE = """
agraph (float[N,8] d) => (float[K,8] rest, float[8] right, float[8] left) {
  zero = Constant <value = int64[1] {0}> ()
  minus1 = Constant <value = int64[1] {-1}> ()
  last = Constant <value = int64 {-1}> ()
  right = Gather <axis = 0> (d, last)
  s = Slice (d, zero, minus1)
  left = Gather <axis = 0> (s, last)
  rest = Slice (s, zero, minus1)
}"""


def _feeds(n: int) -> dict[str, np.ndarray]:
    return {"d": np.arange(n * 8, dtype=np.float32).reshape(n, 8)}


def _fold(text: str) -> int:
    model = ir.from_proto(parse(text))
    seqlower.passes.infer_shapes(model)
    return fold_trimmed_reads(model)


def test_two_pops_read_the_tensor_and_cut_it_once():
    model = parse(_POP_TWICE)
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Slice"] == 1
    for n in (2, 5):
        assert_same_outputs(model, lowered, _feeds(n))
    for n in (0, 1):  # too few rows for the second read: both fail
        assert_both_fail(model, lowered, _feeds(n))


def test_reads_at_several_negative_positions_and_nested_cuts():
    model = parse(
        """
agraph (float[N,8] d) => (float[K,8] rest, float[2,8] pair) {
  zero = Constant <value = int64[1] {0}> ()
  minus2 = Constant <value = int64[1] {-2}> ()
  minus3 = Constant <value = int64[1] {-3}> ()
  both = Constant <value = int64[2] {-1, -2}> ()
  s = Slice (d, zero, minus2)
  pair = Gather <axis = 0> (s, both)
  rest = Slice (s, zero, minus3)
}"""
    )
    lowered, _ = lower(model, target="generic")
    assert op_counts(lowered)["Slice"] == 1
    for n in (4, 7, 9):
        assert_same_outputs(model, lowered, _feeds(n))
    for n in (0, 3):
        assert_both_fail(model, lowered, _feeds(n))


def test_cuts_that_are_not_trims_of_the_last_rows_stay():
    assert _fold(_POP_TWICE) == 2
    from_row_1 = _POP_TWICE.replace(
        "s = Slice (d, zero, minus1)",
        "one = Constant <value = int64[1] {1}> ()\n  s = Slice (d, one, minus1)",
    )
    assert _fold(from_row_1) == 0  # Gather(s, -1) and Gather(d, -2) fail on different sizes
    positive = _POP_TWICE.replace(
        "left = Gather <axis = 0> (s, last)",
        "first = Constant <value = int64 {0}> ()\n  left = Gather <axis = 0> (s, first)",
    )
    assert _fold(positive) == 0  # s is still read from the front: the cuts stay two
    other_axis = (
        _POP_TWICE.replace("float[N,8] d", "float[8,N] d")
        .replace(
            "s = Slice (d, zero, minus1)",
            "ax = Constant <value = int64[1] {1}> ()\n  s = Slice (d, zero, minus1, ax)",
        )
        .replace(
            "=> (float[K,8] rest, float[8] right, float[8] left)",
            "=> (float[K,8] rest, float[N] right, float[8] left)",
        )
    )
    assert _fold(other_axis) == 0
