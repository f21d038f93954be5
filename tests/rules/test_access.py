"""SequenceAt and SequenceLength read elements and lengths directly (Gather, If chain, Constant)."""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    run_ort,
    sequence_op_count,
)

import seqlower

RNG = np.random.default_rng(1)
A, B, C = (RNG.standard_normal(2).astype(np.float32) for _ in range(3))
X = RNG.standard_normal((4, 3)).astype(np.float32)


SAME_SHAPES = """g (float[2] a, float[2] b, float[2] c, int64 p) => (float y) {
    s = SequenceConstruct(a, b, c)
    y = SequenceAt(s, p)
}"""

DIFFERENT_SHAPES = """g (float[2] a, float[3] b, float[1] c, int64 p) => (float y) {
    s = SequenceConstruct(a, b, c)
    y = SequenceAt(s, p)
}"""


def test_constant_positions_pick_the_element():
    model = parse("""g (float[2] a, float[3] b, float[1] c) => (float y0, float y1, float y2) {
        s = SequenceConstruct(a, b, c)
        zero = Constant<value = int64 {0}>()
        minus_two = Constant<value = int32 {-2}>()
        last = Constant<value = int64 {2}>()
        y0 = SequenceAt(s, zero)
        y1 = SequenceAt(s, minus_two)
        y2 = SequenceAt(s, last)
    }""")
    b3, c1 = RNG.standard_normal(3).astype(np.float32), C[:1]
    lowered, _, outputs = lower_and_compare(model, {"a": A, "b": b3, "c": c1})
    np.testing.assert_array_equal(outputs[1], b3)
    assert sequence_op_count(lowered) == 0
    assert set(op_counts(lowered)) <= {"Identity"}


@pytest.mark.parametrize("p", [0, 1, 2, -1, -3])
def test_runtime_position_same_shapes_becomes_a_gather(p):
    model = parse(SAME_SHAPES)
    feeds = {"a": A, "b": B, "c": C, "p": np.array(p, dtype=np.int64)}
    lowered, _, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, [A, B, C][p])
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Gather"] == 1
    assert op_counts(lowered)["If"] == 0


@pytest.mark.parametrize("p", [0, 1, 2, -1, -2, -3])
def test_runtime_position_different_shapes_becomes_an_if_chain(p):
    model = parse(DIFFERENT_SHAPES)
    b3, c1 = RNG.standard_normal(3).astype(np.float32), C[:1]
    feeds = {"a": A, "b": b3, "c": c1, "p": np.array(p, dtype=np.int64)}
    lowered, _, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, [A, b3, c1][p])
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["If"] == 2


@pytest.mark.parametrize("text", [SAME_SHAPES, DIFFERENT_SHAPES], ids=["gather", "if-chain"])
@pytest.mark.parametrize("p", [3, -4])
def test_an_out_of_range_runtime_position_still_fails_at_run_time(text, p):
    model = parse(text)
    lowered, _ = lower(model)
    shapes = (2, 2, 2) if text is SAME_SHAPES else (2, 3, 1)
    a, b, c = (np.zeros(n, np.float32) for n in shapes)
    feeds = {"a": a, "b": b, "c": c, "p": np.array(p, dtype=np.int64)}
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)out of|invalid|bound|range"):
            run_ort(candidate, feeds)


@pytest.mark.parametrize("position", [3, -4])
def test_out_of_range_constant_position_is_an_error_naming_the_node(position):
    model = parse(f"""g (float[2] a, float[2] b, float[2] c) => (float y) {{
        s = SequenceConstruct(a, b, c)
        p = Constant<value = int64 {{{position}}}>()
        [read_it] y = SequenceAt(s, p)
    }}""")
    with pytest.raises(seqlower.InvalidModelError, match=r"'read_it'.*out of range"):
        lower(model)


def test_reading_an_always_empty_sequence_is_an_error():
    model = parse("""g (int64 p) => (float y) {
        s = SequenceEmpty<dtype = 1>()
        [read_it] y = SequenceAt(s, p)
    }""")
    with pytest.raises(seqlower.InvalidModelError, match=r"'read_it'.*empty"):
        lower(model)


# -- over a split --------------------------------------------------------------------------------


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("p", [0, 2, -1])
def test_runtime_position_into_a_split_of_unknown_length_is_a_gather(keepdims, p):
    model = parse(f"""g (float[N,3] x, int64 p) => (float y) {{
        s = SplitToSequence<axis = 0, keepdims = {keepdims}>(x)
        y = SequenceAt(s, p)
    }}""")
    lowered, _, (y,) = lower_and_compare(model, {"x": X, "p": np.array(p, dtype=np.int64)})
    assert y.shape == ((3,) if keepdims == 0 else (1, 3))
    assert sequence_op_count(lowered) == 0


def test_runtime_position_into_a_split_of_static_length_reads_the_input():
    model = parse("""g (float[4,3] x, int64 p) => (float y) {
        s = SplitToSequence<axis = 1, keepdims = 0>(x)
        y = SequenceAt(s, p)
    }""")
    lowered, _, (y,) = lower_and_compare(model, {"x": X, "p": np.array(-2, dtype=np.int64)})
    np.testing.assert_array_equal(y, X[:, -2])
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Split"] == 0  # Gather from x itself


EVEN_CHUNKS = """g (float[N,8,M] x, int64 p) => (float y) {
    two = Constant<value = int64 {2}>()
    s = SplitToSequence<axis = 1>(x, two)
    y = SequenceAt(s, p)
}"""


@pytest.mark.parametrize("p", [0, 2, 3, -1, -4])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_runtime_position_into_even_chunks_is_one_gather_of_a_reshape(p, n):
    """x.chunk(4, 1)[p]: the four [N, 2, M] chunks are one Reshape to [N, 4, 2, M] away."""
    x = RNG.standard_normal((n, 8, 3)).astype(np.float32)
    model = parse(EVEN_CHUNKS)
    lowered, report, (y,) = lower_and_compare(model, {"x": x, "p": np.array(p, dtype=np.int64)})
    np.testing.assert_array_equal(y, np.split(x, 4, axis=1)[p])
    assert report.rules_fired["at-even-chunks"] == 1
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["If"] == op_counts(lowered)["Where"] == 0
    # M is known at run time only: the bounds come from constant tables (two Gathers, a Slice)
    assert op_counts(lowered)["Gather"] == 2 and op_counts(lowered)["Slice"] == 1


@pytest.mark.parametrize("p", [1, -1])
@pytest.mark.parametrize("n", [0, 2])
def test_even_chunks_with_static_trailing_dims_are_one_reshape_and_one_gather(p, n):
    x = RNG.standard_normal((n, 8, 3)).astype(np.float32)
    model = parse(EVEN_CHUNKS.replace("float[N,8,M]", "float[N,8,3]"))
    lowered, report, (y,) = lower_and_compare(model, {"x": x, "p": np.array(p, dtype=np.int64)})
    np.testing.assert_array_equal(y, np.split(x, 4, axis=1)[p])
    assert report.rules_fired["at-even-chunks"] == 1
    assert op_counts(lowered)["Reshape"] == op_counts(lowered)["Gather"] == 1


@pytest.mark.parametrize("p", [4, -5])
def test_an_out_of_range_position_into_even_chunks_still_fails(p):
    model = parse(EVEN_CHUNKS)
    lowered, _ = lower(model)
    feeds = {"x": np.zeros((2, 8, 3), np.float32), "p": np.array(p, dtype=np.int64)}
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)out of|invalid|bound|range"):
            run_ort(candidate, feeds)


def test_uneven_chunks_are_not_reshaped():
    model = parse(EVEN_CHUNKS.replace("float[N,8,M]", "float[N,7,M]"))
    x = RNG.standard_normal((2, 7, 3)).astype(np.float32)
    _, report, (y,) = lower_and_compare(model, {"x": x, "p": np.array(-1, dtype=np.int64)})
    np.testing.assert_array_equal(y, x[:, 6:])
    assert "at-even-chunks" not in report.rules_fired


@pytest.mark.parametrize("n", [1, 5, 6])
def test_reads_of_uneven_chunks_share_one_table_of_bounds(n):
    model = parse("""g (float[N,3] x, int64 p) => (float a, float b, float c) {
        two = Constant<value = int64 {2}>()
        s = SplitToSequence<axis = 0>(x, two)
        last = Constant<value = int64 {-1}>()
        first = Constant<value = int64 {0}>()
        a = SequenceAt(s, p)
        b = SequenceAt(s, last)
        c = SequenceAt(s, first)
    }""")
    x = RNG.standard_normal((n, 3)).astype(np.float32)
    chunks = [x[i : i + 2] for i in range(0, n, 2)]
    p = -len(chunks)
    lowered, report, (a, b, c) = lower_and_compare(model, {"x": x, "p": np.array(p)})
    for got, want in ((a, chunks[p]), (b, chunks[-1]), (c, chunks[0])):
        np.testing.assert_array_equal(got, want)
    assert report.rules_fired["at-of-chunks"] == 1  # one rewrite reads for all three
    counts = op_counts(lowered)
    assert counts["Range"] == counts["Shape"] == 1 and counts["Slice"] == 3


def test_runtime_position_into_an_unknown_length_sequence_is_kept_with_a_reason():
    model = parse("""g (seq(float[2]) s, int64 p) => (float y) {
        y = SequenceAt(s, p)
    }""")
    for length in (1, 3):
        feeds = {"s": [A] * length, "p": np.array(-1, dtype=np.int64)}
        lowered, report, _ = lower_and_compare(model, feeds)
    assert op_counts(lowered)["SequenceAt"] == 1
    assert "'s' is a sequence-typed model input" in reasons(report, "SequenceAt")


# -- SequenceLength ----------------------------------------------------------------------------


def test_length_of_known_elements_is_a_constant():
    model = parse("""g (float[2] a, float[2] b) => (int64 n) {
        e = SequenceEmpty<dtype = 1>()
        s1 = SequenceInsert(e, a)
        s2 = SequenceConstruct(a, b, a)
        n1 = SequenceLength(s1)
        n2 = SequenceLength(s2)
        n = Add(n1, n2)
    }""")
    lowered, _, (n,) = lower_and_compare(model, {"a": A, "b": B})
    assert int(n) == 4
    assert sequence_op_count(lowered) == 0


def test_length_of_an_empty_sequence_is_zero():
    model = parse("""g () => (int64 n) {
        e = SequenceEmpty<dtype = 7>()
        n = SequenceLength(e)
    }""")
    lowered, _, (n,) = lower_and_compare(model, {})
    assert int(n) == 0
    assert sequence_op_count(lowered) == 0


@pytest.mark.parametrize(
    ("chunk", "n", "expected"), [(None, 7, 7), (3, 7, 3), (3, 6, 2), (8, 7, 1)]
)
def test_length_of_a_split_of_unknown_size_is_computed_from_the_shape(chunk, n, expected):
    split = "x" if chunk is None else "x, chunk"
    model = parse(f"""g (float[2,N] x) => (int64 len) {{
        chunk = Constant<value = int64 {{{chunk or 1}}}>()
        s = SplitToSequence<axis = -1>({split})
        len = SequenceLength(s)
    }}""")
    x = np.zeros((2, n), dtype=np.float32)
    lowered, _, (length,) = lower_and_compare(model, {"x": x})
    assert int(length) == expected
    assert sequence_op_count(lowered) == 0


def test_length_of_a_sequence_typed_model_input_is_kept_with_a_reason():
    model = parse("""g (seq(float[2]) s) => (int64 n) {
        n = SequenceLength(s)
    }""")
    lowered, report, _ = lower_and_compare(model, {"s": [A, B]})
    assert op_counts(lowered)["SequenceLength"] == 1
    assert "'s' is a sequence-typed model input" in reasons(report, "SequenceLength")


# -- run-time split sizes: only the count of sizes matters ------------------------------------

SIZES = """g (float[N,3] x, {t}[K] sizes) => (int64 n) {{
    s = SplitToSequence<axis = {axis}>(x, sizes)
    n = SequenceLength(s)
}}"""


def _same_or_both_fail(model, lowered, feeds) -> None:  # type: ignore[no-untyped-def]
    outcomes = []
    for candidate in (model, lowered):
        try:
            outcomes.append(int(run_ort(candidate, feeds)[0]))
        except Exception:  # the spec makes sizes that do not add up a run-time error
            outcomes.append(None)
    assert outcomes[0] == outcomes[1], (feeds["sizes"], outcomes)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize(("axis", "opset"), [(0, 18), (-2, 18), (0, 11)])
def test_length_of_a_split_by_runtime_sizes_is_the_count_of_sizes(dtype, axis, opset):
    t = "int64" if dtype == np.int64 else "int32"
    model = parse(SIZES.format(t=t, axis=axis), opset=opset)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired == {"length-of-split": 1}
    x = np.zeros((5, 3), np.float32)
    # lengths 0 (onnxruntime reads empty sizes as no split), 1 and several; zero-size chunks;
    # sizes that do not add up, or add up only with a negative size, fail in both
    for sizes in (
        [],
        [5],
        [2, 3],
        [1, 1, 1, 1, 1],
        [0, 5, 0],
        [2, 2],
        [6],
        [6, -1],
        [3, 3],
        [-1, 6],
        [4],
        [7, -1, -1],
        [-1, 3],
        [-5, 10],
    ):
        feeds = {"x": x, "sizes": np.array(sizes, dtype=dtype)}
        _same_or_both_fail(model, lowered, feeds)
    assert int(run_ort(lowered, {"x": x, "sizes": np.array([2, 3], dtype)})[0]) == 2
    with pytest.raises(Exception, match="out of data bounds"):
        run_ort(lowered, {"x": x, "sizes": np.array([6, -1], dtype)})
    # no size on a dim of 5: chunks of one in onnxruntime, five; on a dim of 0: none
    assert int(run_ort(lowered, {"x": x, "sizes": np.array([], dtype)})[0]) == 5
    for sizes in ([], [0], [0, 0], [1], [-1, 1]):
        empty = {"x": np.zeros((0, 3), np.float32), "sizes": np.array(sizes, dtype=dtype)}
        _same_or_both_fail(model, lowered, empty)
    counts = op_counts(lowered)
    if opset >= 12:  # Max and Min of integers: no test of the empty case
        assert counts["Where"] == 0 and counts["Max"] == 1 and counts["Min"] == 1
    else:
        assert counts["Where"] == 2 and counts["Max"] == 0


def test_length_of_a_split_by_sizes_of_unknown_rank_is_kept_with_a_reason():
    model = parse("""g (float[N,3] x, int64[R] shape, int64[K] raw) => (int64 n) {
        sizes = Reshape(raw, shape)
        s = SplitToSequence<axis = 0>(x, sizes)
        n = SequenceLength(s)
    }""")
    lowered, report = lower(model)
    assert op_counts(lowered)["SequenceLength"] == 1
    assert "length-of-split: the rank of the 'split' input is unknown" in reasons(
        report, "SequenceLength"
    )


# -- strings: onnxruntime's Gather mis-copies them, so the If chain (or nothing) must be used ---

STRINGS = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object)


@pytest.mark.parametrize(
    "build",
    [
        "s = SequenceConstruct(r0, r1, r2)",
        "s = SplitToSequence<axis = 0, keepdims = 0>(x)",
    ],
    ids=["construct", "split"],
)
@pytest.mark.parametrize("p", [0, 1, -1])
def test_runtime_position_over_strings(build, p):
    model = parse(f"""g (string[3,2] x, int64 p) => (string y) {{
        r = SplitToSequence<axis = 0, keepdims = 0>(x)
        zero = Constant<value = int64 {{0}}>()
        one = Constant<value = int64 {{1}}>()
        two = Constant<value = int64 {{2}}>()
        r0 = SequenceAt(r, zero)
        r1 = SequenceAt(r, one)
        r2 = SequenceAt(r, two)
        {build}
        y = SequenceAt(s, p)
    }}""")
    lowered, _, (y,) = lower_and_compare(model, {"x": STRINGS, "p": np.array(p)})
    assert y.tolist() == STRINGS[p].tolist()
    assert sequence_op_count(lowered) == 0
    assert op_counts(lowered)["Gather"] == 1  # only the one that checks the position's range


def test_runtime_position_into_a_split_of_strings_of_unknown_length_is_kept_by_the_rules():
    model = parse("""g (string[N,2] x, int64 p) => (string y) {
        s = SplitToSequence<axis = 0, keepdims = 0>(x)
        y = SequenceAt(s, p)
    }""")
    lowered, report, (y,) = lower_and_compare(
        model, {"x": STRINGS, "p": np.array(1)}, tensor_lists=False
    )
    assert y.tolist() == ["c", "d"]
    assert op_counts(lowered)["Gather"] == 0
    assert "mis-copies string tensors" in reasons(report, "SequenceAt")


def test_runtime_position_into_a_split_of_strings_of_unknown_length_becomes_tensors():
    """The tensor form gathers only from its int64 tables and slices the strings."""
    model = parse("""g (string[N,2] x, int64 p) => (string y) {
        s = SplitToSequence<axis = 0, keepdims = 0>(x)
        y = SequenceAt(s, p)
    }""")
    for p in (0, 1, -1, -3):
        lowered, report, (y,) = lower_and_compare(model, {"x": STRINGS, "p": np.array(p)})
        assert y.tolist() == STRINGS[p].tolist()
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired.get("tensor-list") == 2


# sizes counted from a bool (pyg's unbatch: rows per graph id) are never negative: the check
# keeps only |Sum - dim|, and still fails wherever SplitToSequence does

COUNTED = """g (float[N,3] x, int64[M] batch) => (int64 n) {{
    one = Constant<value = int64[1] {{1}}>()
    column = Unsqueeze(batch, one)
    top = ReduceMax<keepdims = 0>(batch)
    start = Constant<value = int64 {{0}}>()
    step = Constant<value = int64 {{1}}>()
    count = Add(top, step)
    ids = Range(start, count, step)
    hits = Equal(column, ids)
    flags = Cast<to = {to}>(hits)
    zero = Constant<value = int64[1] {{0}}>()
    sizes = ReduceSum<keepdims = 0>(flags, zero)
    s = SplitToSequence<axis = 0>(x, sizes)
    n = SequenceLength(s)
}}"""


@pytest.mark.parametrize(("to", "max_ops"), [(7, 0), (6, 1)])
def test_a_split_by_counts_checks_only_the_sum(to, max_ops):
    # to=7 (int64): a count, proved >= 0, |Sum - dim| alone; to=6 (int32, whose sums the proof
    # does not bound): not proved, Max(Sum(|sizes|) - dim, dim - Sum) checks the signs too
    model = parse(COUNTED.format(to=to))
    lowered, report = lower(model)
    assert report.rules_fired == {"length-of-split": 1}
    counts = op_counts(lowered)
    assert counts["Max"] == max_ops and counts["Abs"] == 1
    assert "Where" not in counts and "Equal" in counts  # the model's own Equal; no empty test
    x = np.zeros((5, 3), np.float32)
    # rows of graphs 0..2 (5 of 5 counted), a negative id (4 of 5 counted: fails in both),
    # fewer ids than rows (fails), every row in graph 1 (graph 0 empty), all ids negative
    # (no sizes: chunks of one in onnxruntime)
    for batch, ok in (
        ([0, 0, 1, 2, 2], True),
        ([0, 1, 1, 2, -3], False),
        ([-1, 0, 1, 2, 2], False),
        ([0, 1, 2], False),
        ([1, 1, 1, 1, 1], True),
        ([-1, -1, -2, -1, -1], True),
    ):
        feeds = {"x": x, "batch": np.array(batch, np.int64)}
        _same_or_both_fail_counted(model, lowered, feeds, ok)


def _same_or_both_fail_counted(model, lowered, feeds, ok) -> None:  # type: ignore[no-untyped-def]
    outcomes = []
    for candidate in (model, lowered):
        try:
            outcomes.append(int(run_ort(candidate, feeds)[0]))
        except Exception:  # sizes that do not add up to N are a run-time error
            outcomes.append(None)
    assert outcomes[0] == outcomes[1], (feeds["batch"], outcomes)
    assert (outcomes[1] is not None) == ok, (feeds["batch"], outcomes)


# a run-time position into a list of one element whose shape is not known (the If chain's form)
ONE_CHUNK_AT = """g (float[N] x, int64 p) => (float[?] y) {
    four = Constant<value = int32[1] {4}>()
    chunks = SplitToSequence<axis = -1>(x, four)
    y = SequenceAt(chunks, p)
}"""


@pytest.mark.parametrize("position", [-2, -1, 0, 1, 5])
def test_a_run_time_position_into_one_element_is_still_checked(position):
    """One element read at p: -1 and 0 give it, any other p fails in both. (An If chain of one
    element read no position, so nothing failed where the original did.)"""
    model = parse(ONE_CHUNK_AT)
    lowered, report = lower(model)
    assert report.rules_fired.get("at-dynamic-if-chain") == 1, report.rules_fired
    assert "If" not in op_counts(lowered) and sequence_op_count(lowered) == 0
    feeds = {"x": np.array([1.0, -2.0, 0.5, 3.0], np.float32), "p": np.array(position)}
    if position in (-1, 0):
        assert_same_outputs(model, lowered, feeds)
    else:
        assert_both_fail(model, lowered, feeds)


ONE_STRING_AT = """g (string[N] x, int64 p) => (string[?] y) {
    chunks = SequenceConstruct(x)
    y = SequenceAt(chunks, p)
}"""


@pytest.mark.parametrize("opset", [11, 18])
@pytest.mark.parametrize("position", [-2, -1, 0, 1])
def test_a_run_time_position_into_one_string_element_is_checked_without_a_gather(position, opset):
    """Strings are never gathered (quirk string-gather): the position is checked on [0] and the
    element sliced out."""
    model = parse(ONE_STRING_AT, opset=opset)
    lowered, report = lower(model)
    assert report.rules_fired.get("at-dynamic-if-chain") == 1, report.rules_fired
    assert sequence_op_count(lowered) == 0 and op_counts(lowered)["Slice"] == 1
    feeds = {"x": np.array(["a", "bc", ""], dtype=object), "p": np.array(position)}
    if position in (-1, 0):
        assert_same_outputs(model, lowered, feeds)
    else:
        assert_both_fail(model, lowered, feeds)
