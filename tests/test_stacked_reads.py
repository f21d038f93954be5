"""A read at a constant index of a stack (`torch.stack((a, b, c, d), 1)[:, 2]`, TorchScript's
box clipping and area) is the value stacked there; any other read of a Concat stays. Checked:
what the cleanup folds, what it leaves and why, and equal outputs under onnxruntime (negative
indices, no rows, int32 and double, an index out of range failing in both, a loop body)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse

import seqlower
from seqlower.passes.stacked_reads import fold_stacked_reads

MAX = 9223372036854775807

# four columns of x stacked on axis 1, then reads of columns of the stack; `keep` reads the
# stack itself (the box list a detection head returns)
STACK = """
agraph ({t}[N,4] x) => ({t}[?] out, {t}[N,?] keep) {{
  i0 = Constant <value = int64 {{0}}> ()
  i1 = Constant <value = int64 {{1}}> ()
  i2 = Constant <value = int64 {{2}}> ()
  i3 = Constant <value = int64 {{3}}> ()
  c0 = Gather <axis = 1> (x, i0)
  c1 = Gather <axis = 1> (x, i1)
  c2 = Gather <axis = 1> (x, i2)
  c3 = Gather <axis = 1> (x, i3)
  w = Sub (c2, c0)
  h = Sub (c3, c1)
  ax = Constant <value = int64[1] {{{ax}}}> ()
  u0 = Unsqueeze (c0, ax)
  u1 = Unsqueeze (c1, ax)
  u2 = Unsqueeze (w, ax)
  u3 = Unsqueeze (h, ax)
  {parts}
  s = Concat <axis = {cat}> ({concat})
  {read}
  k = Constant <value = int64 {{{k}}}> ()
  g = Gather <axis = {gax}> ({src}, k)
  out = Mul (g, g)
  keep = Identity (s)
}}"""
WHOLE = """st = Constant <value = int64[1] {0}> ()
  en = Constant <value = int64[1] {INT64_MAX}> ()
  sa = Constant <value = int64[1] {0}> ()
  sp = Constant <value = int64[1] {1}> ()
  src = Slice (s, st, en, sa, sp)""".replace("INT64_MAX", str(MAX))


# columns of x picked by a mask: a part whose width inference does not give
UNKNOWN = """cols = Constant <value = bool[4] {1, 0, 1, 1}> ()
  pair = Compress <axis = 1> (x, cols)"""


def _stack(
    t: str = "float",
    k: int = 2,
    *,
    ax: int = 1,
    cat: int = 1,
    gax: int = 1,
    parts: str = "",
    concat: str = "u0, u1, u2, u3",
    read: str = WHOLE,
    src: str = "src",
    keep: bool = True,
):  # type: ignore[no-untyped-def]
    text = STACK.format(
        t=t, k=k, ax=ax, cat=cat, gax=gax, parts=parts, concat=concat, read=read, src=src
    )
    if not keep:
        text = text.replace(f", {t}[N,?] keep", "").replace("  keep = Identity (s)\n", "")
    return parse(text, opset=17)


def _folded(model) -> int:  # type: ignore[no-untyped-def]
    graph_model = ir.from_proto(model)
    seqlower.passes.infer_shapes(graph_model)
    return fold_stacked_reads(graph_model)


def _feeds(t: str, rows: int) -> dict[str, np.ndarray]:
    dtype = {"float": np.float32, "double": np.float64, "int32": np.int32}[t]
    x = (np.arange(rows * 4) * 7 % 11 - 5).astype(dtype).reshape(rows, 4)
    return {"x": x}


@pytest.mark.parametrize("t", ["float", "double", "int32"])
@pytest.mark.parametrize("k", [2, -2, 0, 3, -4])
def test_a_read_of_a_stack_is_the_stacked_value(t, k):
    model = _stack(t, k)
    assert _folded(model) == 1
    lowered, _ = lower(model, target="generic")
    # the four column reads of x stay; the read of the stack goes
    assert op_counts(lowered)["Gather"] == 4
    for rows in (0, 1, 5):
        assert_same_outputs(model, lowered, _feeds(t, rows))


@pytest.mark.parametrize(
    "options",
    [
        {"read": "", "src": "s"},  # the stack read directly
        {"ax": -1, "cat": -1, "gax": -1},  # negative axes of a known rank
        {"ax": 1, "cat": -1, "gax": 1},  # the same axis written two ways
    ],
    ids=["no-slice", "negative-axes", "mixed-axes"],
)
def test_reads_folded_in_other_spellings(options):
    model = _stack(**options)
    assert _folded(model) == 1
    lowered, _ = lower(model, target="generic")
    for rows in (0, 3):
        assert_same_outputs(model, lowered, _feeds("float", rows))


def test_parts_of_known_size_move_the_index():
    # a [N, 2] part first: entry 3 is the second Unsqueeze's value (w)
    parts = """two = Constant <value = int64[2] {0, 1}> ()
  pair = Gather <axis = 1> (x, two)"""
    model = _stack(k=3, parts=parts, concat="pair, u1, u2, u3")
    assert _folded(model) == 1
    lowered, _ = lower(model, target="generic")
    for rows in (0, 4):
        assert_same_outputs(model, lowered, _feeds("float", rows))


@pytest.mark.parametrize(
    "options",
    [
        {"k": 4},  # out of range: the Gather fails at run time
        {"k": -5},
        {"gax": 0},  # a read along another axis
        {"ax": 0, "cat": 0, "gax": 1},  # stacked along axis 0, read along axis 1
        {"read": WHOLE.replace("{0}>", "{1}>", 1)},  # a Slice that drops the first row
        {"read": WHOLE.replace("{1}> ()\n  src", "{2}> ()\n  src")},  # a step of 2
        {"parts": UNKNOWN, "concat": "pair, u1"},  # a part of unknown size first
        {"k": 1, "parts": "pair = Identity (u1)", "concat": "u0, pair"},  # not an Unsqueeze
        {"keep": False},  # the stack read by the Gather alone: its failure would go
    ],
    ids=[
        "out-of-range",
        "out-of-range-negative",
        "other-axis",
        "stacked-on-another-axis",
        "slice-not-whole",
        "slice-with-step",
        "part-of-unknown-size",
        "part-not-an-unsqueeze",
        "concat-read-by-gather-alone",
    ],
)
def test_reads_that_stay(options):
    assert _folded(_stack(**options)) == 0


def test_a_read_out_of_range_fails_in_both():
    model = _stack(k=4)
    lowered, _ = lower(model, target="generic")
    assert_both_fail(model, lowered, _feeds("float", 3))


def test_parts_of_one_known_shape_fold_without_another_reader():
    # [2, 3] parts: the Concat cannot fail, so the read folds although nothing else reads it
    model = parse(
        """
agraph (float[2,3] a, float[2,3] b) => (float[2,3] out) {
  ax = Constant <value = int64[1] {1}> ()
  ua = Unsqueeze (a, ax)
  ub = Unsqueeze (b, ax)
  s = Concat <axis = 1> (ua, ub)
  k = Constant <value = int64 {-1}> ()
  g = Gather <axis = 1> (s, k)
  out = Neg (g)
}""",
        opset=17,
    )
    graph_model = ir.from_proto(model)
    seqlower.passes.infer_shapes(graph_model)
    assert fold_stacked_reads(graph_model) == 1
    lowered = ir.to_proto(graph_model)
    assert "Concat" not in op_counts(lowered) and "Gather" not in op_counts(lowered)
    feeds = {"a": np.ones((2, 3), np.float32), "b": np.full((2, 3), -2.0, np.float32)}
    assert_same_outputs(model, lowered, feeds)


def test_a_read_in_a_loop_body_is_folded():
    # per image (a run-time count of iterations, 0 included), its boxes stacked and read back
    model = parse(
        """
agraph (float[N,4] x, int64 n) => (float[M] areas) {
  t = Constant <value = bool {1}> ()
  empty = Constant <value = float[0] {}> ()
  last, areas = Loop (n, t, empty) <body = body (int64 i, bool c, float[?] acc) => (bool c2,
      float[?] acc2, float[?] area) {
    i0 = Constant <value = int64 {0}> ()
    i2 = Constant <value = int64 {2}> ()
    c0 = Gather <axis = 1> (x, i0)
    x2 = Gather <axis = 1> (x, i2)
    ax = Constant <value = int64[1] {1}> ()
    u0 = Unsqueeze (c0, ax)
    u2 = Unsqueeze (x2, ax)
    s = Concat <axis = 1> (u0, u2)
    k0 = Constant <value = int64 {0}> ()
    k1 = Constant <value = int64 {-1}> ()
    a = Gather <axis = 1> (s, k0)
    b = Gather <axis = 1> (s, k1)
    d = Sub (b, a)
    area = ReduceSum <keepdims = 0> (s)
    acc2 = Concat <axis = 0> (acc, d)
    c2 = Identity (c)
  }>
}""",
        opset=17,
    )
    assert _folded(model) == 2
    lowered, _ = lower(model, target="generic")
    for rows, n in ((0, 0), (3, 2), (1, 1)):
        feeds = {"x": _feeds("float", rows)["x"], "n": np.array(n, np.int64)}
        assert_same_outputs(model, lowered, feeds)
