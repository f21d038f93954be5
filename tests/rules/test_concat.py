"""ConcatFromSequence -> Concat (Unsqueeze first with new_axis=1), or the split input itself."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_both_fail,
    assert_outputs_equal,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    run_ort,
    sequence_op_count,
)

import seqlower

RNG = np.random.default_rng(2)
A, B, C = (RNG.standard_normal((2, 3)).astype(np.float32) for _ in range(3))


def concat_model(attrs: str) -> str:
    return f"""g (float[2,3] a, float[2,3] b, float[2,3] c) => (float y) {{
        s = SequenceConstruct(a, b, c)
        y = ConcatFromSequence<{attrs}>(s)
    }}"""


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat_along_an_existing_axis(axis):
    lowered, _, (y,) = lower_and_compare(parse(concat_model(f"axis = {axis}")), [A, B, C])
    np.testing.assert_array_equal(y, np.concatenate([A, B, C], axis=axis))
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered) == {"Concat": 1}


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
def test_concat_with_new_axis_stacks(axis):
    """Trap 6: with new_axis=1 the axis ranges over [-r-1, r]; -3 is -r-1 for rank 2."""
    model = parse(concat_model(f"axis = {axis}, new_axis = 1"))
    lowered, _, (y,) = lower_and_compare(model, [A, B, C])
    np.testing.assert_array_equal(y, np.stack([A, B, C], axis=axis))
    assert sequence_op_count(lowered) == 0
    if axis in (2, -1):  # a new last axis interleaves the elements: no Concat joins them so
        assert op_counts(lowered)["Unsqueeze"] == 3
    else:  # one Concat of the elements, one Reshape to the stack's shape
        assert op_counts(lowered) == {"Concat": 1, "Reshape": 1, "Constant": 1}


@pytest.mark.parametrize(
    ("shapes", "reshaped"),
    [
        (("Q,3", "Q,3", "Q,3"), True),  # one named dim: -1 in the target
        (("2,Q", "2,Q", "2,Q"), True),  # before the axis (1): 0 copies it
        (("Q,3", "P,3", "Q,3"), False),  # may differ: each element unsqueezed
        (("Q,R", "Q,R", "Q,R"), False),  # two dims that are not numbers from the axis on
        (("Q,0", "Q,0", "Q,0"), False),  # a 0 in the target would copy a dim
    ],
)
def test_a_stack_is_one_concat_and_one_reshape_when_the_shapes_are_surely_one(shapes, reshaped):
    axis = 1 if shapes[0].startswith("2,") else 0
    model = parse(f"""g (float[{shapes[0]}] a, float[{shapes[1]}] b, float[{shapes[2]}] c)
        => (float y) {{
        s = SequenceConstruct(a, b, c)
        y = ConcatFromSequence<axis = {axis}, new_axis = 1>(s)
    }}""")
    dims = [[2 if d in "QPR2" else 0 if d == "0" else 3 for d in s.split(",")] for s in shapes]
    feeds = [RNG.standard_normal(d).astype(np.float32) for d in dims]
    lowered, _, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, np.stack(feeds, axis=axis))
    assert (op_counts(lowered)["Reshape"] == 1) == reshaped
    assert op_counts(lowered)["Unsqueeze"] == (0 if reshaped else 3)


@pytest.mark.parametrize("rows", [0, 2])
def test_a_stack_whose_target_needs_a_minus_one_never_copies_a_dim_that_may_be_0(rows):
    """[P, Q] elements stacked on axis 1: a target [0, 3, -1] copies P, and where P is 0
    the Reshape cannot tell -1 (onnxruntime fails; the original gives [0, 3, Q]). The elements
    are unsqueezed and concatenated instead (a run of the fuzzer found it: seed 1100593)."""
    model = parse("""g (float[P,Q] a, float[P,Q] b, float[P,Q] c) => (float y) {
        s = SequenceConstruct(a, b, c)
        y = ConcatFromSequence<axis = 1, new_axis = 1>(s)
    }""")
    feeds = [RNG.standard_normal((rows, 4)).astype(np.float32) for _ in range(3)]
    lowered, _, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, np.stack(feeds, axis=1))
    assert y.shape == (rows, 3, 4)
    assert op_counts(lowered)["Reshape"] == 0


def test_a_stack_of_elements_of_different_sizes_fails_as_the_original_does():
    model = parse("""g (float[Q,3] a, float[P,3] b) => (float y) {
        s = SequenceConstruct(a, b)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
    }""")
    lowered, _ = lower(model)
    feeds = [np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)]
    assert_both_fail(model, lowered, feeds)


def test_concat_of_an_always_empty_sequence_is_an_error():
    model = parse("""g () => (float y) {
        s = SequenceEmpty<dtype = 1>()
        [join] y = ConcatFromSequence<axis = 0>(s)
    }""")
    with pytest.raises(seqlower.InvalidModelError, match=r"'join'.*empty"):
        lower(model)


@pytest.mark.parametrize(("keepdims", "new_axis"), [(1, 0), (0, 1)])
def test_concat_that_undoes_a_split_is_the_input(keepdims, new_axis):
    model = parse(f"""g (float[2,N] x) => (float y) {{
        s = SplitToSequence<axis = 1, keepdims = {keepdims}>(x)
        y = ConcatFromSequence<axis = -1, new_axis = {new_axis}>(s)
    }}""")
    lowered, _, _ = lower_and_compare(model, [A])
    assert sequence_op_count(lowered) == 0
    assert set(op_counts(lowered)) <= {"Identity"}


def test_concat_of_split_chunks_on_another_axis_concatenates_the_chunks():
    model = parse("""g (float[2,3] x) => (float y) {
        s = SplitToSequence<axis = 1, keepdims = 0>(x)
        y = ConcatFromSequence<axis = 0>(s)
    }""")
    lowered, _, (y,) = lower_and_compare(model, [A])
    np.testing.assert_array_equal(y, np.concatenate(list(A.T)))
    assert sequence_op_count(lowered) == 0


def test_concat_of_a_sequence_typed_model_input_is_kept_with_a_reason():
    model = parse("""g (seq(float[2,3]) s) => (float y) {
        y = ConcatFromSequence<axis = 0>(s)
    }""")
    lowered, report, _ = lower_and_compare(model, [[A, B]])
    assert op_counts(lowered)["ConcatFromSequence"] == 1
    assert "'s' is a sequence-typed model input" in reasons(report, "ConcatFromSequence")


@pytest.mark.parametrize(
    ("dtype", "onnx_type"),
    [
        (np.int8, "int8"),
        (np.uint64, "uint64"),
        (np.bool_, "bool"),
        (np.float16, "float16"),
        (np.float64, "double"),
        (np.str_, "string"),
    ],
)
def test_edge_dtypes(dtype, onnx_type):
    """Stack and a run-time SequenceAt (a Gather, or an If chain for strings); numpy is the
    oracle (onnxruntime has no sequence kernels for some of these types)."""
    t = onnx_type
    model = parse(f"""g ({t}[2] a, {t}[2] b, int64 p) => ({t} y, {t} z) {{
        s = SequenceConstruct(a, b, a)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
        z = SequenceAt(s, p)
    }}""")
    a, b = (RNG.integers(0, 5, 2).astype(dtype) for _ in range(2))
    if dtype is np.str_:
        a, b = a.astype(object), b.astype(object)
    feeds = {"a": a, "b": b, "p": np.array(-2, dtype=np.int64)}
    lowered, _ = lower(model)
    assert_outputs_equal([np.stack([a, b, a]), b], run_ort(lowered, feeds))
    assert sequence_op_count(lowered) == 0
