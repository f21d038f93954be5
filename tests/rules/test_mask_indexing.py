"""mask-index-to-compress: `x[m]` as TorchScript exports it (NonZero, Transpose, GatherND) becomes
one Compress: what it emits, what it refuses, and the same rows under onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, rule_check, run_ort

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


# `torch.where(m)[0]` indexing as TorchScript exports it: NonZero, Transpose, an unbind along
# axis 1 (one chunk: a Split of one piece, which is the tensor itself, and a Squeeze)
WHERE_INDEXED = """g ({dtype}[N,3] x, float[M] scores) => ({dtype}[?,?] kept) {{
    half = Constant<value = float {{0.5}}>()
    m = Greater(scores, half)
    positions = NonZero(m)
    rows = Transpose<perm = [1, 0]>(positions)
    one = Constant<value = int64 {{1}}>()
    parts = SplitToSequence<axis = 1, keepdims = 0>(rows, one)
    zero = Constant<value = int64 {{{position}}}>()
    where = SequenceAt(parts, zero)
    kept = Gather<axis = {axis}>(x, where)
}}"""


@pytest.mark.parametrize(
    ("dtype", "numpy_type"), [("float", np.float32), ("int64", np.int64), ("bool", np.bool_)]
)
@pytest.mark.parametrize(("axis", "position"), [(0, 0), (-2, -1), (1, 0), (-1, 0)])
@pytest.mark.parametrize(
    "scores",
    [[0.9, 0.1, 0.7], [0.1, 0.2, 0.3], [], [0.6, 0.6], [0.9, 0.1, 0.7, 0.2]],
    ids=["some", "none", "empty", "shorter", "mask-longer-false-past-the-end"],
)
def test_gather_of_the_true_positions_is_one_compress(dtype, numpy_type, axis, position, scores):
    model = parse(WHERE_INDEXED.format(dtype=dtype, axis=axis, position=position))
    x = (np.arange(9).reshape(3, 3) % 2).astype(numpy_type)
    if dtype != "bool":
        x = np.arange(9).reshape(3, 3).astype(numpy_type)
    feeds = {"x": x, "scores": np.array(scores, np.float32)}
    lowered, report, (kept,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(kept, np.take(x, np.flatnonzero(np.array(scores) > 0.5), axis))
    assert report.rules_fired.get("mask-positions-to-compress") == 1
    counts = op_counts(lowered)
    assert counts["Compress"] == 1
    for gone in ("NonZero", "Transpose", "Split", "Squeeze", "Gather"):
        assert gone not in counts


def test_a_true_position_past_the_end_fails_the_original_only():
    """As for GatherND: Compress ignores a true position past the dim, where Gather fails."""
    model = parse(WHERE_INDEXED.format(dtype="float", axis=0, position=0))
    lowered, _ = lower(model)
    feeds = {"x": np.ones((3, 3), np.float32), "scores": np.array([0.9, 0, 0, 0.9], np.float32)}
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime raises its own error types
        run_ort(model, feeds)
    (kept,) = run_ort(lowered, feeds)
    assert kept.shape == (1, 3)


OTHER_POSITIONS = """g (float[N,3] x, bool[M] m) => (float[?,3] kept) {{
    positions = NonZero(m)
    {index}
    kept = Gather<axis = 0>(x, p)
}}"""


@pytest.mark.parametrize(
    "index",
    [
        "zero = Constant<value = int64[1] {0}>()\n    p = Squeeze(positions, zero)",
        "flat = Constant<value = int64[1] {-1}>()\n    p = Reshape(positions, flat)",
        "zero = Constant<value = int64 {0}>()\n    p = Gather<axis = 0>(positions, zero)",
        "t = Transpose<perm = [1, 0]>(positions)\n    zero = Constant<value = int64 {0}>()\n"
        "    p = Gather<axis = -1>(t, zero)",
    ],
    ids=["squeeze", "reshape", "gather-row", "gather-column"],
)
def test_other_forms_of_the_positions(index):
    model = parse(OTHER_POSITIONS.format(index=index))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for mask in ([True, False, True, True], [False] * 4, [], [True, True]):
        feeds = {"x": x, "m": np.array(mask, np.bool_)}
        lowered, report, (kept,) = lower_and_compare(model, feeds)
        np.testing.assert_array_equal(kept, x[: len(mask)][np.array(mask, np.bool_)])
    assert report.rules_fired.get("mask-positions-to-compress") == 1
    assert op_counts(lowered)["NonZero"] == 0


def _gather_refusal(text: str, target: str = "generic") -> str:
    found = rule_check(parse(text), mask_indexing._check_gather, "Gather", target=target)
    assert isinstance(found, Refusal), "mask-positions-to-compress accepts the Gather"
    return found.reason


@pytest.mark.parametrize(
    ("index", "mask"),
    [
        ("one = Constant<value = int64[1] {1}>()\n    p = Squeeze(positions, one)", "bool[M,1]"),
        ("f = Constant<value = int64[2] {-1, 1}>()\n    p = Reshape(positions, f)", "bool[M]"),
        ("i = Constant<value = int64 {1}>()\n    p = Gather<axis = 0>(positions, i)", "bool[M]"),
        ("t = Transpose<perm = [1, 0]>(positions)\n    zero = Constant<value = int64 {0}>()\n"
         "    p = Gather<axis = 0>(t, zero)", "bool[M]"),
        ("p = Identity(positions)", "bool[M]"),
        ("zero = Constant<value = int64[1] {0}>()\n    p = Squeeze(positions, zero)", "int64[M]"),
    ],
    ids=["2-d-mask", "reshape-2-d", "second-row", "first-row-of-columns", "no-read", "int-mask"],
)  # fmt: skip
def test_gathers_of_other_indices_stay(index, mask):
    text = OTHER_POSITIONS.format(index=index).replace("bool[M] m", f"{mask} m")
    assert "not the true positions" in _gather_refusal(text)


@pytest.mark.parametrize("target", ["tract", "tensorrt"])
def test_targets_without_compress_keep_the_gather_of_positions(target):
    text = WHERE_INDEXED.format(dtype="float", axis=0, position=0)
    assert "does not take Compress" in _gather_refusal(text, target)
