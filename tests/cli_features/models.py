"""Small models shared by the cli_features tests, in ONNX text syntax (see tests/support.py)."""

from __future__ import annotations

import numpy as np
from support import parse

RNG = np.random.default_rng(7)


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def map_over_split(rows: str = "N", body_out: str = "float[1,4]", else_width: int = 4):
    """ConcatFromSequence(SequenceMap(SplitToSequence(x[rows, 4]), body=If(c, Relu, ...))).

    The If makes the body unbatchable (its Softmax is no elementwise choice that a Where could
    make), so the tier is decided by the length alone: unroll when
    `rows` is static, a Loop otherwise. With `else_width` != 4 the branches disagree on the
    element shape and the branch taken depends on the element too (`c` xor its sum > 0), so the
    body output has no one shape and the Loop must carry a sequence.
    """
    other = "Neg(e)" if else_width == 4 else "Concat <axis=1> (e, e)"
    taken = "c" if else_width == 4 else "d"
    per_element = (
        ""
        if else_width == 4
        else """zero = Constant <value = float {0}> ()
      total = ReduceSum <keepdims = 0> (e)
      positive = Greater (total, zero)
      d = Xor (c, positive)
      """
    )
    return parse(f"""
agraph (float[{rows},4] x, bool c) => (float[M,K] y) {{
  s = SplitToSequence <axis=0> (x)
  m = SequenceMap <body = g (float[1,4] e) => ({body_out} r) {{
      {per_element}r = If ({taken}) <
          then_branch = t () => (float[1,4] a) {{ a = Softmax <axis=1> (e) }},
          else_branch = f () => (float[1,{else_width}] b) {{ b = {other} }}>
  }}> (s)
  y = ConcatFromSequence <axis=0> (m)
}}""")


def batchable_map():
    """SequenceMap with a Relu body over a dynamic-length split: batched."""
    return parse("""
agraph (float[N,4] x) => (float[M,4] y) {
  s = SplitToSequence <axis=0> (x)
  m = SequenceMap <body = g (float[1,4] e) => (float[1,4] r) { r = Relu(e) }> (s)
  y = ConcatFromSequence <axis=0> (m)
}""")


def sequence_interface():
    """A sequence-typed input read at a constant position, and a sequence output of static
    length (the rows of x, after a Neg)."""
    return parse("""
agraph (seq(float[2]) s, float[3,4] x) => (float[2] t, seq(float[1,4]) y) {
  zero = Constant <value = int64 {1}> ()
  t = SequenceAt(s, zero)
  n = Neg(x)
  y = SplitToSequence <axis=0> (n)
}""")
