"""concat-of-whole-split: a Concat that joins every chunk of a Split, in order and along its axis,
reads the split tensor: what it emits, what it refuses, and the same values under onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower_and_compare, op_counts, parse, rule_check

from seqlower.rule import Refusal
from seqlower.rules import whole_split

# torch.cat(list(x.split(sizes, axis)) + [t], axis), as it lowers
JOINED = """g (float[N,3] x, float[2,3] t, int64[2] sizes) => (float[?,3] y) {{
    a, b = Split<axis = {split_axis}>(x, sizes)
    y = Concat<axis = {concat_axis}>({inputs})
}}"""
X = np.arange(15, dtype=np.float32).reshape(5, 3)
T = -np.ones((2, 3), np.float32)


@pytest.mark.parametrize(
    ("inputs", "want"),
    [
        ("a, b, t", np.concatenate([X, T])),
        ("t, a, b", np.concatenate([T, X])),
        ("a, b", X),
    ],
    ids=["then-appended", "after-prepended", "alone"],
)
@pytest.mark.parametrize("axes", [(0, 0), (-2, 0), (0, -2)])
def test_every_chunk_joined_again_is_the_tensor(inputs, want, axes):
    split_axis, concat_axis = axes
    model = parse(JOINED.format(split_axis=split_axis, concat_axis=concat_axis, inputs=inputs))
    feeds = {"x": X, "t": T, "sizes": np.array([2, 3])}
    lowered, report, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, want)
    assert report.rules_fired == {"concat-of-whole-split": 1}
    assert "Split" not in op_counts(lowered)


def _refusal(text: str) -> str:
    found = rule_check(parse(text), whole_split._check, "Concat")
    assert isinstance(found, Refusal), "concat-of-whole-split accepts the Concat"
    return found.reason


@pytest.mark.parametrize(
    ("inputs", "axes"),
    [("b, a, t", (0, 0)), ("a, t, b", (0, 0)), ("a, t", (0, 0)), ("a, b", (0, 1))],
    ids=["reordered", "interleaved", "one-chunk", "other-axis"],
)
def test_refuses_chunks_not_joined_whole_in_order(inputs, axes):
    text = JOINED.format(split_axis=axes[0], concat_axis=axes[1], inputs=inputs)
    if axes[1] == 1:
        text = text.replace("float[?,3] y", "float[?,?] y")
    assert "no Split has every piece joined" in _refusal(text)
