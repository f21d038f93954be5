"""Reads of a split at constant positions (at-of-chunks) and its length (length-of-split): one
table of chunk starts, one Gather of it for all the constant reads of a graph, no table of ends
where a read's end is known without one; out-of-range positions still fail at run time."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, lower_and_compare, op_counts, parse, run_ort, sequence_op_count

RNG = np.random.default_rng(7)

# x.split(2) of a dynamic N: len(xs), xs[-1], xs[0], xs[-2] (PyTorch's len_neg_index)
READS = """g (float[N,3] x) => (float last, float first, float before_last, int64 n) {{
    size = Constant<value = {dtype} {{{size}}}>()
    s = SplitToSequence<axis = 0>(x, size)
    m1 = Constant<value = int64 {{-1}}>()
    z = Constant<value = int64 {{0}}>()
    m2 = Constant<value = int64 {{-2}}>()
    last = SequenceAt(s, m1)
    first = SequenceAt(s, z)
    before_last = SequenceAt(s, m2)
    n = SequenceLength(s)
}}"""


def _chunks(x: np.ndarray, size: int) -> list[np.ndarray]:
    return [x[i : i + size] for i in range(0, x.shape[0], size)]


def test_constant_reads_share_one_gather_of_the_chunk_starts():
    lowered, report = lower(parse(READS.format(dtype="int64", size=2)))
    assert report.rules_fired == {"at-of-chunks": 1, "length-of-split": 1}
    counts = op_counts(lowered)
    # Shape, Gather (the dim), Range (the starts): the one table; one Gather of its entries
    # [-1, 0, -2] and one Split of them; a Slice per read; the length is the table's size
    assert counts["Range"] == 1  # the length's copy of the table merged into it by cleanup
    assert counts["Gather"] == 2 and counts["Split"] == 1 and counts["Slice"] == 3
    assert counts["Size"] == 1
    assert not {"Add", "Div", "CumSum"} & set(counts)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("rows", [3, 4, 5, 6])
def test_constant_reads_give_the_chunks(dtype, rows):
    model = parse(READS.format(dtype=dtype, size=2))
    x = RNG.standard_normal((rows, 3)).astype(np.float32)
    _, _, (last, first, before_last, n) = lower_and_compare(model, {"x": x})
    chunks = _chunks(x, 2)
    np.testing.assert_array_equal(last, chunks[-1])
    np.testing.assert_array_equal(first, chunks[0])
    np.testing.assert_array_equal(before_last, chunks[-2])
    assert int(n) == len(chunks)


@pytest.mark.parametrize("rows", [0, 1, 2])
def test_a_read_out_of_range_fails_in_both_models(rows):
    """0 rows: no chunk (every read fails); 1 or 2 rows: one chunk, xs[-2] fails."""
    model = parse(READS.format(dtype="int64", size=2))
    lowered, _ = lower(model)
    feeds = {"x": np.zeros((rows, 3), np.float32)}
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)out of|invalid|bound|range"):
            run_ort(candidate, feeds)


@pytest.mark.parametrize("position", [0, 2, -3])
def test_a_single_out_of_range_read_fails_in_both_models(position):
    model = parse(f"""g (float[N,3] x) => (float y) {{
        two = Constant<value = int64 {{2}}>()
        s = SplitToSequence<axis = 0>(x, two)
        p = Constant<value = int64 {{{position}}}>()
        y = SequenceAt(s, p)
    }}""")
    lowered, _ = lower(model)
    rows = {0: 0, 2: 4, -3: 4}[position]  # 0 chunks, or 2 chunks
    feeds = {"x": np.zeros((rows, 3), np.float32)}
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)out of|invalid|bound|range"):
            run_ort(candidate, feeds)
    x = RNG.standard_normal((7, 3)).astype(np.float32)  # 4 chunks: in range
    _, _, (y,) = lower_and_compare(model, {"x": x})
    np.testing.assert_array_equal(y, _chunks(x, 2)[position])


@pytest.mark.parametrize(
    ("dtype", "numpy_type"),
    [("bool", np.bool_), ("float16", np.float16), ("int32", np.int32), ("string", np.str_)],
)
def test_edge_element_types(dtype, numpy_type):
    model = parse(f"""g ({dtype}[N,2] x) => ({dtype} a, {dtype} b, {dtype} c) {{
        three = Constant<value = int64 {{3}}>()
        s = SplitToSequence<axis = 0>(x, three)
        p0 = Constant<value = int64 {{0}}>()
        p1 = Constant<value = int64 {{1}}>()
        m1 = Constant<value = int64 {{-1}}>()
        a = SequenceAt(s, p0)
        b = SequenceAt(s, p1)
        c = SequenceAt(s, m1)
    }}""")
    x = (RNG.standard_normal((7, 2)) * 10).astype(numpy_type)
    # numpy is the oracle: onnxruntime 1.20 has no bool SplitToSequence for the original
    lowered, _ = lower(model)
    a, b, c = run_ort(lowered, {"x": x})
    chunks = _chunks(x, 3)
    for got, want in ((a, chunks[0]), (b, chunks[1]), (c, chunks[-1])):
        assert np.asarray(got).astype(str).tolist() == want.astype(str).tolist()
    assert sequence_op_count(lowered) == 0


RUNTIME_SIZES = """g (float[N,2] x, int64[K] sizes) => (float a, float b, float c, float d) {
    s = SplitToSequence<axis = 0>(x, sizes)
    p0 = Constant<value = int64 {0}>()
    p1 = Constant<value = int64 {1}>()
    m1 = Constant<value = int64 {-1}>()
    m2 = Constant<value = int64 {-2}>()
    a = SequenceAt(s, p0)
    b = SequenceAt(s, p1)
    c = SequenceAt(s, m1)
    d = SequenceAt(s, m2)
}"""


@pytest.mark.parametrize("sizes", [[1, 2, 3], [0, 2, 0, 4], [3, 0, 3, 0]])
def test_run_time_sizes_read_the_starts_and_ends_once(sizes):
    """Zero-size chunks included: a chunk's end is the next chunk's start."""
    model = parse(RUNTIME_SIZES)
    x = RNG.standard_normal((sum(sizes), 2)).astype(np.float32)
    feeds = {"x": x, "sizes": np.array(sizes, np.int64)}
    lowered, _, outputs = lower_and_compare(model, feeds)
    chunks = np.split(x, np.cumsum(sizes)[:-1])
    for got, want in zip(outputs, (chunks[0], chunks[1], chunks[-1], chunks[-2])):
        np.testing.assert_array_equal(got, want)
    counts = op_counts(lowered)
    # starts (exclusive CumSum) read at [0, 1, -2, -1] by one Gather and a Split; ends read at
    # [0, 1] by a Gather each
    assert counts["CumSum"] == 2 and counts["Split"] == 1 and counts["Gather"] == 3


def test_run_time_sizes_too_few_chunks_fail_in_both_models():
    model = parse(RUNTIME_SIZES)
    lowered, _ = lower(model)
    feeds = {"x": np.zeros((3, 2), np.float32), "sizes": np.array([3], np.int64)}
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)out of|invalid|bound|range"):
            run_ort(candidate, feeds)


def test_a_read_in_a_branch_is_checked_only_where_it_runs():
    """A constant read inside an If branch is not grouped with the reads of the split's graph:
    hoisted, its check would fail where the branch does not run."""
    model = parse("""g (float[N,3] x, bool c) => (float y, float z) {
        two = Constant<value = int64 {2}>()
        s = SplitToSequence<axis = 0>(x, two)
        z0 = Constant<value = int64 {0}>()
        m1 = Constant<value = int64 {-1}>()
        z = SequenceAt(s, z0)
        y = If(c) <then_branch = g1 () => (float[?,3] t) {
            five = Constant<value = int64 {5}>()
            t = SequenceAt(s, five)
        }, else_branch = g2 () => (float[?,3] e) {
            e = SequenceAt(s, m1)
        }>
    }""")
    x = RNG.standard_normal((5, 3)).astype(np.float32)  # 3 chunks: position 5 is out of range
    lowered, report, (y, z) = lower_and_compare(model, {"x": x, "c": np.array(False)})
    np.testing.assert_array_equal(y, x[4:])
    np.testing.assert_array_equal(z, x[:2])
    assert report.rules_fired["at-of-chunks"] == 1
    for candidate in (model, lowered):
        with pytest.raises(Exception, match=r"(?i)out of|invalid|bound|range"):
            run_ort(candidate, {"x": x, "c": np.array(True)})


@pytest.mark.parametrize("size", [0, -2])
def test_a_chunk_size_below_one_fails_in_both_models(size):
    model = parse(f"""g (float[N,3] x) => (float y) {{
        size = Constant<value = int64 {{{size}}}>()
        s = SplitToSequence<axis = 0>(x, size)
        z = Constant<value = int64 {{0}}>()
        y = SequenceAt(s, z)
    }}""")
    lowered, _ = lower(model)
    feeds = {"x": np.zeros((4, 3), np.float32)}
    for candidate in (model, lowered):
        with pytest.raises(Exception):  # noqa: B017 (the runtimes word it differently)
            run_ort(candidate, feeds)


@pytest.mark.parametrize("size", [1, 3])
@pytest.mark.parametrize("rows", [0, 1, 5, 6])
def test_the_length_of_a_static_size_split(size, rows):
    model = parse(f"""g (float[2,N] x) => (int64 n) {{
        size = Constant<value = int64 {{{size}}}>()
        s = SplitToSequence<axis = 1>(x, size)
        n = SequenceLength(s)
    }}""")
    lowered, report, (n,) = lower_and_compare(model, {"x": np.zeros((2, rows), np.float32)})
    assert int(n) == -(-rows // size)
    assert report.rules_fired == {"length-of-split": 1}
    # chunks of one: the dim itself; else the size of the table of chunk starts
    assert ("Range" in op_counts(lowered)) == (size > 1)
    assert not {"Add", "Div"} & set(op_counts(lowered))
