"""`a + i * -1` is `a - i` (TorchScript's index of a backwards range); a product read
elsewhere, a multiplier other than -1, or one that broadcasts the result larger stays."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from support import assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.negated_terms import fold_negated_terms

_BACKWARDS = """
agraph (int64 i, int64 a, float[3] x, float[3] b) => (int64 y, float[3] z) {
  minus1 = Constant <value = int64 {-1}> ()
  fminus1 = Constant <value = float {-1}> ()
  n = Mul (i, minus1)
  y = Add (a, n)
  m = Mul (fminus1, x)
  z = Add (m, b)
}"""


def _fold(text: str) -> int:
    model = ir.from_proto(parse(text))
    seqlower.passes.infer_shapes(model)
    return fold_negated_terms(model)


def test_adding_a_negated_term_is_a_subtraction():
    model = parse(_BACKWARDS)
    lowered, _ = lower(model, target="generic")
    counts = op_counts(lowered)
    assert counts["Sub"] == 2 and "Mul" not in counts and "Add" not in counts
    big = np.iinfo(np.int64).max
    for i, a in ((3, 10), (-4, 2), (big, -1), (-big - 1, 0)):  # wrap-around included
        feeds = {
            "i": np.array(i, dtype=np.int64),
            "a": np.array(a, dtype=np.int64),
            "x": np.array([1.5, -0.0, np.inf], dtype=np.float32),
            "b": np.array([2.0, 0.0, 1.0], dtype=np.float32),
        }
        assert_same_outputs(model, lowered, feeds)


def test_other_products_stay():
    read_twice = _BACKWARDS.replace("=> (int64 y, float[3] z)", "=> (int64 y, float[3] z, int64 n)")
    assert _fold(read_twice) == 1  # the float one only
    not_minus_one = _BACKWARDS.replace("int64 {-1}", "int64 {-2}").replace(
        "float {-1}", "float {1}"
    )
    assert _fold(not_minus_one) == 0
    widening = _BACKWARDS.replace("float {-1}", "float[1,1] {-1}").replace(
        "float[3] z", "float[1,3] z"
    )
    assert _fold(widening) == 1  # the int one only: [1, 1] * x would make z [1, 3]
