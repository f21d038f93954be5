"""mask-index-to-compress: `x[m]` as TorchScript exports it (NonZero, Transpose, GatherND) becomes
one Compress: what it emits, what it refuses, and the same rows under onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, rule_check

from seqlower.rule import Refusal
from seqlower.rules import mask_indexing

INDEXED = """g ({dtype}[N,4] x, float[M] scores) => ({dtype}[?,4] kept) {{
    half = Constant<value = float {{0.5}}>()
    m = Greater(scores, half)
    positions = NonZero(m)
    rows = Transpose<perm = [1, 0]>(positions)
    kept = GatherND(x, rows)
}}"""


@pytest.mark.parametrize(("dtype", "numpy_type"), [("float", np.float32), ("int64", np.int64)])
@pytest.mark.parametrize(
    "scores",
    [[0.9, 0.1, 0.7], [0.1, 0.2, 0.3], [], [0.6, 0.6, 0.6], [0.9, 0.1, 0.7, 0.2]],
    ids=["some", "none", "empty", "all", "mask-longer-false-past-the-end"],
)
def test_boolean_mask_indexing_is_one_compress(dtype, numpy_type, scores):
    model = parse(INDEXED.format(dtype=dtype))
    rows = min(len(scores), 3)
    x = np.arange(rows * 4).reshape(rows, 4).astype(numpy_type)
    feeds = {"x": x, "scores": np.array(scores, np.float32)}
    lowered, report, (kept,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(kept, x[np.array(scores[:rows]) > 0.5].reshape(-1, 4))
    assert report.rules_fired == {"mask-index-to-compress": 1}
    counts = op_counts(lowered)
    assert counts["Compress"] == 1 and "NonZero" not in counts and "GatherND" not in counts


def _refusal(text: str, target: str = "generic") -> str:
    found = rule_check(parse(text), mask_indexing._check, "GatherND", target=target)
    assert isinstance(found, Refusal), "mask-index-to-compress accepts the GatherND"
    return found.reason


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("m = Greater(scores, half)", "m = Cast<to = 1>(scores)", "not a 1-D bool tensor"),
        ("float[M] scores", "float[M,2] scores", "not a 1-D bool tensor"),
        ("perm = [1, 0]", "perm = [0, 1]", "transposed otherwise"),
        ("kept = GatherND(x, rows)", "kept = GatherND<batch_dims = 1>(x, rows)", "batch dims"),
    ],
    ids=["float-mask", "2-d-mask", "other-transpose", "batch-dims"],
)
def test_refuses(old, new, why):
    text = INDEXED.format(dtype="float")
    assert old in text
    assert why in _refusal(text.replace(old, new))


@pytest.mark.parametrize("target", ["tract", "tensorrt"])
def test_targets_without_compress_keep_the_gather(target):
    text = INDEXED.format(dtype="float")
    assert "does not take Compress" in _refusal(text, target)
    lowered, report = lower(parse(text), target=target)
    assert "mask-index-to-compress" not in report.rules_fired
    assert op_counts(lowered)["GatherND"] == 1
