"""SplitToSequence -> Split (+ Squeeze where keepdims=0 applies), design.md traps 1 to 4."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_outputs_equal,
    assert_same_or_both_fail,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    run_ort,
    run_reference,
    sequence_op_count,
    sequence_op_counts,
)

RNG = np.random.default_rng(0)
X27 = RNG.standard_normal((2, 7)).astype(np.float32)
X32 = RNG.standard_normal((3, 2)).astype(np.float32)


def first_and_last(split_args: str, attrs: str, prelude: str = "") -> str:
    """x split into a sequence; outputs its first and last element."""
    return f"""g (float[2,7] x) => (float first, float last) {{
        {prelude}
        [split] s = SplitToSequence<{attrs}>({split_args})
        zero = Constant<value = int64 {{0}}>()
        minus_one = Constant<value = int64 {{-1}}>()
        first = SequenceAt(s, zero)
        last = SequenceAt(s, minus_one)
    }}"""


def test_no_split_keepdims_1_gives_one_split_and_no_squeeze():
    model = parse(first_and_last("x", "axis = 1, keepdims = 1"))
    lowered, _, (first, last) = lower_and_compare(model, {"x": X27})
    assert first.shape == last.shape == (2, 1)
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Split"] == 1
    assert op_counts(lowered)["Squeeze"] == 0


def test_no_split_keepdims_0_squeezes_the_axis():
    model = parse(first_and_last("x", "axis = 1, keepdims = 0"))
    lowered, _, (first, _) = lower_and_compare(model, {"x": X27})
    assert first.shape == (2,)
    assert sequence_op_count(lowered) == 0


def test_negative_axis():
    model = parse(first_and_last("x", "axis = -1, keepdims = 0"))
    lowered, _, (_, last) = lower_and_compare(model, {"x": X27})
    np.testing.assert_array_equal(last, X27[:, -1])
    assert sequence_op_count(lowered) == 0


def test_scalar_split_that_does_not_divide_leaves_a_smaller_last_chunk():
    three = "three = Constant<value = int64 {3}>()"
    model = parse(first_and_last("x, three", "axis = 1", prelude=three))
    lowered, _, (first, last) = lower_and_compare(model, {"x": X27})
    assert first.shape == (2, 3)
    assert last.shape == (2, 1)
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Squeeze"] == 0


def test_one_dimensional_split_with_a_zero_size_chunk():
    model = parse("""g (float[2,7] x) => (float a, float b, float c, int64 n) {
        sizes = Constant<value = int64[3] {2, 0, 5}>()
        s = SplitToSequence<axis = 1>(x, sizes)
        i0 = Constant<value = int64 {0}>()
        i1 = Constant<value = int64 {1}>()
        i2 = Constant<value = int64 {2}>()
        a = SequenceAt(s, i0)
        b = SequenceAt(s, i1)
        c = SequenceAt(s, i2)
        n = SequenceLength(s)
    }""")
    lowered, _, (a, b, c, n) = lower_and_compare(model, {"x": X27})
    assert (a.shape, b.shape, c.shape, int(n)) == ((2, 2), (2, 0), (2, 5), 3)
    assert sequence_op_count(lowered) == 0


def test_one_dimensional_split_ignores_keepdims():
    """Trap 2: keepdims=0 with a 1-D split must NOT squeeze (onnxruntime agrees)."""
    model = parse("""g (float[3,2] x) => (float y) {
        ones = Constant<value = int64[3] {1, 1, 1}>()
        s = SplitToSequence<axis = 0, keepdims = 0>(x, ones)
        i = Constant<value = int64 {1}>()
        y = SequenceAt(s, i)
    }""")
    lowered, report, (y,) = lower_and_compare(model, {"x": X32})
    assert y.shape == (1, 2)
    assert op_counts(lowered)["Squeeze"] == 0
    assert sequence_op_count(lowered) == 0
    assert report.warnings == []


def test_runtime_split_sizes_of_static_length_become_a_split_input():
    """Opset >= 13: Split takes its sizes as an input, so they may be computed at run time."""
    model = parse(
        """g (float[2,7] x, int64[3] sizes) => (float a, float c) {
            s = SplitToSequence<axis = 1>(x, sizes)
            i0 = Constant<value = int64 {0}>()
            i2 = Constant<value = int64 {2}>()
            a = SequenceAt(s, i0)
            c = SequenceAt(s, i2)
        }""",
        opset=13,
    )
    feeds = {"x": X27, "sizes": np.array([1, 2, 4], dtype=np.int64)}
    lowered, _, (a, c) = lower_and_compare(model, feeds)
    assert (a.shape, c.shape) == ((2, 1), (2, 4))
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Split"] == 1


@pytest.mark.parametrize("opset", [11, 12])
def test_runtime_split_sizes_are_refused_before_opset_13(opset):
    model = parse(
        """g (float[2,7] x, int64[3] sizes) => (seq(float[2,?]) s, int64 n) {
            s = SplitToSequence<axis = 1>(x, sizes)
            n = SequenceLength(s)
        }""",
        opset=opset,
    )
    feeds = {"x": X27, "sizes": np.array([1, 2, 4], dtype=np.int64)}
    lowered, report, (_, n) = lower_and_compare(model, feeds)
    assert int(n) == 3  # the length is still known statically
    assert "Split before opset 13 needs them static" in reasons(report, "SplitToSequence")
    assert sequence_op_counts(lowered) == {"SplitToSequence": 1}


def test_a_split_count_that_depends_on_data_is_kept_with_a_reason():
    """Trap 4: the chunk size is a model input, so the number of chunks is unknown."""
    model = parse("""g (float[2,7] x, int64 chunk) => (seq(float[2,?]) s) {
        s = SplitToSequence<axis = 1>(x, chunk)
    }""")
    feeds = {"x": X27, "chunk": np.array(3, dtype=np.int64)}
    lowered, report, _ = lower_and_compare(model, feeds)
    assert "split size is computed at run time" in reasons(report, "SplitToSequence")
    assert op_counts(lowered)["SplitToSequence"] == 1


def test_an_unknown_dim_is_kept_with_a_reason():
    model = parse("""g (float[2,N] x) => (seq(float[2]) s) {
        s = SplitToSequence<axis = 1, keepdims = 0>(x)
    }""")
    lowered, report, (s,) = lower_and_compare(model, {"x": X27})
    assert len(s) == 7
    assert op_counts(lowered)["SplitToSequence"] == 1
    assert "depends on the size of dim 1" in reasons(report, "SplitToSequence")


# -- design.md trap 1: a scalar split of 1 with keepdims=0 -------------------------------------

SCALAR_SPLIT_KEEPDIMS_0 = """g (float[3,2] x) => (float y) {{
    chunk = Constant<value = int64 {{{chunk}}}>()
    [unbind] s = SplitToSequence<axis = 0, keepdims = 0>(x, chunk)
    i = Constant<value = int64 {{1}}>()
    y = SequenceAt(s, i)
}}"""


def test_scalar_split_1_keepdims_0_follows_onnxruntime_without_a_warning():
    model = parse(SCALAR_SPLIT_KEEPDIMS_0.format(chunk=1))
    lowered, report, (y,) = lower_and_compare(model, {"x": X32})
    assert y.shape == (2,)  # onnxruntime squeezes, as PyTorch's unbind export relies on
    assert sequence_op_count(lowered) == 0
    assert not any("'unbind'" in warning for warning in report.warnings)  # what PyTorch meant


def test_scalar_split_1_keepdims_0_spec_reading_keeps_the_axis():
    model = parse(SCALAR_SPLIT_KEEPDIMS_0.format(chunk=1))
    lowered, report = lower(model, split_keepdims="spec")
    (expected,) = run_reference(model, {"x": X32})
    actual = run_ort(lowered, {"x": X32})
    assert expected.shape == (1, 2)
    assert_outputs_equal([expected], actual)
    assert any("'unbind'" in warning for warning in report.warnings)
    assert sequence_op_count(lowered) == 0


def test_scalar_split_2_keepdims_0_follows_the_spec_where_onnxruntime_fails():
    model = parse(SCALAR_SPLIT_KEEPDIMS_0.format(chunk=2))
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error type
        run_ort(model, {"x": X32})
    lowered, report = lower(model)
    assert_outputs_equal(run_reference(model, {"x": X32}), run_ort(lowered, {"x": X32}))
    assert any("'unbind'" in w and "fails" in w for w in report.warnings)
    assert sequence_op_count(lowered) == 0


@pytest.mark.parametrize(
    ("dtype", "onnx_type"),
    [
        (np.int8, "int8"),
        (np.uint64, "uint64"),
        (np.bool_, "bool"),
        (np.float16, "float16"),
        (np.float64, "double"),
    ],
)
def test_edge_dtypes(dtype, onnx_type):
    """onnxruntime has no SplitToSequence kernel for int8 or uint64: numpy is the oracle."""
    model = parse(f"""g ({onnx_type}[3,2] x) => ({onnx_type}[3,2] y, {onnx_type} z) {{
        s = SplitToSequence<axis = 0, keepdims = 0>(x)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(s)
        i = Constant<value = int64 {{-1}}>()
        z = SequenceAt(s, i)
    }}""")
    x = RNG.integers(0, 5, (3, 2)).astype(dtype)
    lowered, _ = lower(model)
    assert_outputs_equal([x, x[-1]], run_ort(lowered, {"x": x}))
    assert sequence_op_count(lowered) == 0


def test_string_elements():
    model = parse("""g (string[3,2] x) => (string y) {
        s = SplitToSequence<axis = 1, keepdims = 0>(x)
        i = Constant<value = int64 {1}>()
        y = SequenceAt(s, i)
    }""")
    x = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object)
    lowered, _, (y,) = lower_and_compare(model, {"x": x})
    assert y.tolist() == ["b", "d", "f"]
    assert sequence_op_count(lowered) == 0


@pytest.mark.parametrize(
    ("dims", "split", "attrs", "splits"),
    [
        ("float[4,1]", "", "axis = 1, keepdims = 0", 0),  # unbind of a dim of 1: x itself
        ("float[4,1]", "", "axis = -1, keepdims = 1", 0),
        ("float[1,4]", "", "axis = 0, keepdims = 1", 0),
        ("float[4,1]", ", one", "axis = 1", 0),  # sizes [1] of a dim of 1
        ("float[4,3]", "", "axis = -1, keepdims = 0", 1),  # three chunks
        ("float[4,N]", ", one", "axis = 1", 1),  # [1] of an unknown dim: Split fails unless 1
    ],
)
def test_a_split_into_one_chunk_of_the_whole_axis_is_the_tensor(dims, split, attrs, splits):
    text = f"""g ({dims} x) => (float[?] first) {{
        one = Constant<value = int64[1] {{1}}>()
        s = SplitToSequence<{attrs}>(x{split})
        zero = Constant<value = int64 {{0}}>()
        e = SequenceAt(s, zero)
        first = Flatten<axis = 0>(e)
    }}"""
    model = parse(text)
    lowered, _ = lower(model)
    assert op_counts(lowered)["Split"] == splits
    for columns in (1, 3):
        shape = [int(d) if d.isdigit() else columns for d in dims[6:-1].split(",")]
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        assert_same_or_both_fail(model, lowered, {"x": x})
