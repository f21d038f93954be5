"""unsqueezed-stack: a stack written as Unsqueezes and a Concat is one Concat and one Reshape;
what it emits, what it refuses (and why), and the same values under onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_both_fail, assert_same_outputs, lower, op_counts, parse, rule_check

from seqlower.rule import Refusal
from seqlower.rules import unsqueezed_stacks

STACK = """g ({dtype}[{dims}] a, {dtype}[{dims}] b, {dtype}[{dims}] c) => ({dtype}[?,?,?] s) {{
    axes = Constant<value = int64[1] {{{axis}}}>()
    ua = Unsqueeze(a, axes)
    ub = Unsqueeze(b, axes)
    uc = Unsqueeze(c, axes)
    s = Concat<axis = {axis}>(ua, ub, uc)
}}"""

_TYPES = {"float": np.float32, "float16": np.float16, "int8": np.int8, "bool": np.bool_}


def _feeds(dims: list[int], numpy_type: type) -> dict[str, np.ndarray]:
    size = int(np.prod(dims))
    return {
        name: (np.arange(size).reshape(dims) * (k + 1) % 7).astype(numpy_type)
        for k, name in enumerate("abc")
    }


@pytest.mark.parametrize("dtype", list(_TYPES))
@pytest.mark.parametrize(
    ("dims", "axis", "runs"),
    [
        ("2,3", 0, [[2, 3]]),
        ("2,3", 1, [[2, 3]]),
        ("2,3", -2, [[2, 3]]),
        ("N,3", 0, [[4, 3], [0, 3], [1, 3]]),  # a named dim, 0 at run time too
        ("2,N", 1, [[2, 5], [2, 0]]),
    ],
)
def test_a_stack_is_one_concat_and_one_reshape(dtype, dims, axis, runs):
    model = parse(STACK.format(dtype=dtype, dims=dims, axis=axis))
    lowered, report = lower(model)
    assert report.rules_fired == {"unsqueezed-stack": 1}
    counts = op_counts(lowered)
    assert counts["Unsqueeze"] == 0 and counts["Concat"] == 1 and counts["Reshape"] == 1
    for shape in runs:
        (stacked,) = assert_same_outputs(model, lowered, _feeds(shape, _TYPES[dtype]))
        feeds = _feeds(shape, _TYPES[dtype])
        np.testing.assert_array_equal(stacked, np.stack([feeds[n] for n in "abc"], axis))


def test_unsqueeze_axes_as_an_attribute_before_opset_13():
    text = STACK.format(dtype="float", dims="2,3", axis=1).replace(
        "ua = Unsqueeze(a, axes)\n    ub = Unsqueeze(b, axes)\n    uc = Unsqueeze(c, axes)",
        "ua = Unsqueeze<axes = [1]>(a)\n    ub = Unsqueeze<axes = [1]>(b)\n"
        "    uc = Unsqueeze<axes = [1]>(c)",
    )
    model = parse(text, opset=11)
    lowered, report = lower(model)
    assert report.rules_fired == {"unsqueezed-stack": 1}
    assert_same_outputs(model, lowered, _feeds([2, 3], np.float32))


def _refusal(text: str) -> str:
    found = rule_check(parse(text), unsqueezed_stacks._check, "Concat")
    assert isinstance(found, Refusal), "unsqueezed-stack accepts the Concat"
    return found.reason


@pytest.mark.parametrize(
    ("dims", "axis", "why"),
    [
        ("2,3", 2, "new last axis"),
        ("2,0", 0, "a dim is 0"),
        ("N,M", 0, "more than one dim"),
        ("2,?", 0, "a dim is unknown"),
    ],
)
def test_refuses(dims, axis, why):
    assert why in _refusal(STACK.format(dtype="float", dims=dims, axis=axis))


def test_tensors_of_other_shapes_stay():
    text = STACK.format(dtype="float", dims="2,3", axis=0).replace("float[2,3] c", "float[2,4] c")
    assert "not known to have one shape" in _refusal(text)
    named = STACK.format(dtype="float", dims="N,3", axis=0).replace("float[N,3] c", "float[M,3] c")
    assert "not known to have one shape" in _refusal(named)  # N and M may differ
    lowered, _ = lower(parse(named))
    feeds = _feeds([2, 3], np.float32)
    feeds["c"] = np.ones((3, 3), np.float32)  # the stack fails; so must the lowered model
    assert_both_fail(parse(named), lowered, feeds)


def test_unsqueezes_on_other_axes_or_other_inputs_stay():
    other_axis = STACK.format(dtype="float", dims="2,3", axis=0).replace(
        "uc = Unsqueeze(c, axes)",
        "one = Constant<value = int64[1] {1}>()\n    uc = Unsqueeze(c, one)",
    )
    assert "another axis" in _refusal(other_axis)
    not_unsqueezed = STACK.format(dtype="float", dims="2,3", axis=0).replace(
        "uc = Unsqueeze(c, axes)",
        "shape = Constant<value = int64[3] {1, 2, 3}>()\n    uc = Reshape(c, shape)",
    )
    assert "not every input" in _refusal(not_unsqueezed)
