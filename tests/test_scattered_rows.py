"""Rows scattered to the places a mask selects and compressed back by that mask are the rows;
a mask reshaped to all of the shape it has is the mask (seqlower/passes/scattered_rows.py).
Checked: what the cleanup folds, what it leaves and why, and the same outputs under
onnxruntime (or a failure in both) with no row, one row and many, every mask."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_or_both_fail, lower, op_counts, parse

import seqlower
from seqlower.passes.scattered_rows import fold_scattered_rows

# the batched form of `for i in range(len(x)): if x[i] > s: out.append(x[i] * 2)`
SCATTERED = """
agraph (float[N] x, float s{inputs}) => (float[?] y) {{
  m = Greater (x, s)
  sh = Shape <start = 0, end = 1> (x)
  a = Constant <value = int64[1] {{0}}> ()
  n = Squeeze (sh, a)
  z = Constant <value = int64 {{0}}> ()
  o = Constant <value = int64 {{1}}> ()
  r = Range (z, n, o)
  mm = Reshape ({target})
  places = Compress <axis = 0> (r, mm)
  picked = Gather <axis = 0> (x, places)
  two = Constant <value = float {{2}}> ()
  v = Mul (picked, two)
  rs = Shape <start = 0, end = 1> (r)
  filler = Constant <value = float {{0}}> ()
  base = Expand (filler, rs)
  one = Constant <value = int64[1] {{1}}> ()
  ix = Unsqueeze (places, one)
  whole = ScatterND {reduction}({base}, ix, {rows})
  c = Compress {axis}(whole, {mask})
  y = Neg (c)
}}"""
AS_BATCHED = {
    "inputs": "",
    "target": "m, sh",
    "reduction": "",
    "base": "base",
    "rows": "v",
    "axis": "<axis = 0> ",
    "mask": "mm",
}


def model(**changes: str) -> onnx.ModelProto:
    return parse(SCATTERED.format(**{**AS_BATCHED, **changes}), opset=17)


def folded(proto: onnx.ModelProto) -> tuple[int, ir.Model]:
    graph_model = ir.from_proto(proto)
    seqlower.passes.infer_shapes(graph_model)
    return fold_scattered_rows(graph_model), graph_model


def feeds_for(rows: int, threshold: float, **extra: np.ndarray) -> dict[str, np.ndarray]:
    x = np.linspace(-1.0, 1.0, rows, dtype=np.float32)
    return {"x": x, "s": np.array(threshold, np.float32), **extra}


CASES = [(rows, s) for rows in (0, 1, 2, 5) for s in (-2.0, 0.0, 2.0)]  # none, some, every row


def test_rows_scattered_and_compressed_back_are_the_rows():
    original = model()
    count, graph_model = folded(original)
    assert count == 2  # the Reshape, then the Compress
    assert "ScatterND" not in op_counts(graph_model) and "Reshape" not in op_counts(graph_model)
    lowered, _ = lower(original, target="generic")
    counts = op_counts(lowered)
    assert "ScatterND" not in counts and "Expand" not in counts and counts["Compress"] == 1
    for rows, s in CASES:
        assert assert_same_or_both_fail(original, lowered, feeds_for(rows, s))


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"inputs": ", float[K] b", "base": "b"}, "base's rows not proved the mask's"),
        ({"inputs": ", float[J] w", "rows": "w"}, "the rows not proved one per place"),
        ({"inputs": ", bool[N] k", "mask": "k"}, "compressed by another mask"),
        ({"axis": ""}, "a Compress without an axis flattens"),
        ({"reduction": '<reduction = "add"> '}, "a ScatterND that adds"),
    ],
)
def test_left_alone_where_not_proved(changes, why):
    original = model(**changes)
    count, graph_model = folded(original)
    assert count == 1, why  # the Reshape only
    assert op_counts(graph_model)["ScatterND"] == 1, why
    lowered, _ = lower(original, target="generic")
    assert op_counts(lowered)["ScatterND"] == 1, why
    names = {i.name for i in original.graph.input}
    for rows, s in CASES:
        feeds = feeds_for(rows, s)
        if "b" in names:
            feeds["b"] = np.zeros(3, np.float32)
        if "w" in names:
            feeds["w"] = np.ones(2, np.float32)
        if "k" in names:
            feeds["k"] = np.arange(rows) % 2 == 0
        # another base or other rows fail in the ScatterND where their sizes differ: in both
        assert_same_or_both_fail(original, lowered, feeds)


@pytest.mark.parametrize(
    ("target", "inputs"),
    [
        ("m, shape_of_t", ", float[N] t"),  # the shape of another value
        ("m, sh_whole", ""),  # Shape(x) whole: folds
    ],
    ids=["other", "whole"],
)
def test_a_reshape_folds_only_to_the_mask_own_shape(target, inputs):
    text = SCATTERED.format(**{**AS_BATCHED, "target": target, "inputs": inputs}).replace(
        "  mm = Reshape", "  shape_of_t = Shape (t)\n  sh_whole = Shape (x)\n  mm = Reshape"
    )
    if not inputs:
        text = text.replace("  shape_of_t = Shape (t)\n", "")
    original = parse(text, opset=17)
    count, graph_model = folded(original)
    kept = "Reshape" in op_counts(graph_model)
    assert kept == bool(inputs) and count == (0 if inputs else 2)
    lowered, _ = lower(original, target="generic")
    for rows, s in CASES:
        extra = {"t": np.zeros(rows if rows != 2 else 3, np.float32)} if inputs else {}
        assert_same_or_both_fail(original, lowered, feeds_for(rows, s, **extra))


def test_a_mask_compared_with_a_vector_is_not_proved_of_its_shape():
    """Greater(x, t), t of N entries too, broadcasts to x's shape only when t has x's: not
    proved from the operands' ranks, so the Reshape (and the scatter behind it) stays."""
    text = SCATTERED.format(**{**AS_BATCHED, "inputs": ", float[M] t"}).replace(
        "m = Greater (x, s)", "m = Greater (x, t)"
    )
    original = parse(text, opset=17)
    count, graph_model = folded(original)
    assert count == 0 and op_counts(graph_model)["Reshape"] == 1
    lowered, _ = lower(original, target="generic")
    for rows, t_rows in ((3, 3), (3, 1), (1, 3), (0, 0), (2, 3)):
        feeds = feeds_for(rows, 0.0, t=np.zeros(t_rows, np.float32))
        assert_same_or_both_fail(original, lowered, feeds)
