"""A `try --dim` hint names the dims the length follows and no others, and following it works:
a Loop whose trip count is dim 0 of x[T, B, 4] (an RNN over `x.unbind(0)`) asks for T only, not
the batch size B (which would fix the batch for nothing)."""

from __future__ import annotations

from support import parse

import seqlower

RNN_OVER_STEPS = """
agraph (float[T,B,4] x) => (float[B,4] h, float[T,B,4] y) {
  shape = Shape (x)
  zero = Constant <value = int64 {0}> ()
  n = Gather (shape, zero)
  go = Constant <value = bool {1}> ()
  h0 = Gather <axis = 0> (x, zero)
  h, y = Loop (n, go, h0) <body = step (int64 i, bool c, float[B,4] hp)
                                       => (bool co, float[B,4] hn, float[B,4] out) {
      xt = Gather <axis = 0> (x, i)
      s = Add (xt, hp)
      hn = Tanh (s)
      co = Identity (c)
      out = Identity (hn)
  }>
}"""

# the trip count read by Shape <start = 1> (x): entry 0 of what it reads is dim 1 of x, T
SHAPE_FROM_ONE = """
agraph (float[S,T,B] x) => (float[S,B] h, float[T,S,B] y) {
  shape = Shape <start = 1> (x)
  zero = Constant <value = int64 {0}> ()
  n = Gather (shape, zero)
  go = Constant <value = bool {1}> ()
  h0 = Gather <axis = 1> (x, zero)
  h, y = Loop (n, go, h0) <body = step (int64 i, bool c, float[S,B] hp)
                                       => (bool co, float[S,B] hn, float[S,B] out) {
      xt = Gather <axis = 1> (x, i)
      s = Add (xt, hp)
      hn = Tanh (s)
      co = Identity (c)
      out = Identity (hn)
  }>
}"""


def test_the_tensorrt_hint_names_the_dim_the_trip_count_reads():
    model = parse(RNN_OVER_STEPS)
    _, report = seqlower.optimize(model, target="tensorrt")
    (error,) = report.target_errors
    assert error.endswith("the length follows T: try --dim T=<size>")
    _, followed = seqlower.optimize(model, target="tensorrt", dims={"T": 5})
    assert followed.fits_target, followed.target_errors


def test_a_shape_with_a_start_is_read_from_there():
    model = parse(SHAPE_FROM_ONE)
    _, report = seqlower.optimize(model, target="tensorrt")
    errors = [e for e in report.target_errors if "dynamic length" in e]
    assert len(errors) == 1 and errors[0].endswith("the length follows T: try --dim T=<size>")
    _, followed = seqlower.optimize(model, target="tensorrt", dims={"T": 3})
    assert followed.fits_target, followed.target_errors
