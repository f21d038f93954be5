"""A loop that stops on a tensor's value (a greedy decoder's `break`, as TorchScript exports it:
a trip count of 2**63 - 1 and a condition the body computes) cannot run in tract nor give
TensorRT a static length: the refusal says to write a loop of a fixed count that runs every step,
and that loop, written so, fits both."""

from __future__ import annotations

from pathlib import Path

from support import parse

import seqlower
from seqlower.targets import STOPS_EARLY

BODY = """
  go = Constant <value = bool {1}> ()
  h, y = Loop (n, go, x) <body = step (int64 i, bool c, float[B,4] hp)
                                     => (bool co, float[B,4] hn, float[B,4] out) {
      hn = Tanh (hp)
      out = Identity (hn)
      CONDITION
  }>
}"""
STOPS_EARLY_LOOP = (
    "agraph (float[B,4] x) => (float[B,4] h, float[T,B,4] y) {\n"
    "  n = Constant <value = int64 {9223372036854775807}> ()"
    + BODY.replace(
        "CONDITION",
        """total = ReduceSum <keepdims = 0> (hn)
      limit = Constant <value = float {0.5}> ()
      co = Greater (total, limit)""",
    )
)
EVERY_STEP_LOOP = (
    "agraph (float[B,4] x) => (float[B,4] h, float[10,B,4] y) {\n"
    "  n = Constant <value = int64 {10}> ()" + BODY.replace("CONDITION", "co = Identity (c)")
)


def test_a_loop_that_stops_early_is_told_to_run_every_step_and_then_fits():
    stops = parse(STOPS_EARLY_LOOP)
    for target in ("tract", "tensorrt"):
        _, report = seqlower.optimize(stops, target=target)
        assert not report.fits_target
        assert any(error.endswith(f"; {STOPS_EARLY}") for error in report.target_errors), target
    every_step = parse(EVERY_STEP_LOOP)
    for target in ("tract", "tensorrt"):
        _, report = seqlower.optimize(every_step, target=target)
        assert report.fits_target, (target, report.target_errors)


def test_a_loop_of_run_time_count_is_told_about_dims_not_breaks():
    """A loop that runs every step of a count computed at run time gets the --dim hint, not the
    advice about breaks (it has none)."""
    model = parse(
        EVERY_STEP_LOOP.replace("float[10,B,4] y", "float[T,B,4] y").replace(
            "n = Constant <value = int64 {10}> ()",
            "shape = Shape (x)\n  zero = Constant <value = int64 {0}> ()\n"
            "  n = Gather (shape, zero)",
        )
    )
    _, report = seqlower.optimize(model, target="tensorrt")
    (error,) = report.target_errors
    assert error.endswith("the length follows B: try --dim B=<size>")
    assert STOPS_EARLY not in error


def test_the_readme_gives_the_same_advice():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    (row,) = [
        line for line in readme.splitlines() if "scan output(s) have a dynamic length" in line
    ]
    assert "`break`" in row and "mask the steps after the end" in row and "--dim" in row
