"""The tensor form of lists (seqlower.lists): the last tier, tested alone (no pattern rule runs,
so every sequence operator takes its tensor form) and inside the whole lowering.

Each case checks what is emitted (no sequence op left, full_check, loads in onnxruntime), the
numbers (onnxruntime on the original and on the lowered model), and what is refused, with why.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower_tensor_form,
    op_counts,
    parse,
    reasons,
    sequence_op_count,
)

import seqlower
from seqlower.rule import RuleSet

ONLY_TENSOR_FORM = RuleSet([])  # no pattern rule: the tensor form lowers everything


# -- every operator, run-time positions, lengths 0, 1 and several -------------------------

RUNTIME_LIST = """
agraph (float[2,3] a, float[1,3] b, float[4,3] c, int64 p, int64 q) => (float[?,3] y, int64 n,
                                                                       float[?,3] at) {
    s = SequenceConstruct (a, b)
    s2 = SequenceInsert (s, c, p)
    s3 = SequenceErase (s2, q)
    y = ConcatFromSequence <axis=0> (s3)
    n = SequenceLength (s3)
    at = SequenceAt (s3, q)
}
"""


def _abc(rng: np.random.Generator) -> dict:
    return {
        "a": rng.standard_normal((2, 3)).astype(np.float32),
        "b": rng.standard_normal((1, 3)).astype(np.float32),
        "c": rng.standard_normal((4, 3)).astype(np.float32),
    }


def test_runtime_positions_lower_to_tensors():
    model = parse(RUNTIME_LIST)
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired.get("tensor-list") == 6
    assert {node.tier for node in report.nodes if node.op_type.startswith("Sequence")} == {"ragged"}
    feeds = _abc(np.random.default_rng(0))
    for p in range(-2, 3):  # insert: [-n, n] with n = 2
        for q in range(-2, 2):  # erase and read: [-n, n-1] with n = 3
            assert_same_outputs(model, lowered, {**feeds, "p": np.array(p), "q": np.array(q)})


LAYOUTS = {
    # elements' shapes, the concat axis, and what tells the layout apart in the output
    "stacked": ((2, 3), (2, 3), (2, 3), 0, {"CumSum": 0}),
    "ragged": ((2, 3), (1, 3), (4, 3), 0, {"ReduceProd": 0}),
    "flat": ((2, 3), (2, 1), (2, 4), 1, {}),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_operator_in_every_layout(layout):
    a, b, c, axis, absent = LAYOUTS[layout]
    model = parse(
        f"""
agraph (float[{a[0]},{a[1]}] a, float[{b[0]},{b[1]}] b, float[{c[0]},{c[1]}] c, int64 p, int64 q)
        => (float[?,?] y, int64 n, float[?,?] at, float[?,?] last) {{
    s = SequenceConstruct (a, b)
    s2 = SequenceInsert (s, c, p)
    s3 = SequenceErase (s2, q)
    y = ConcatFromSequence <axis={axis}> (s3)
    n = SequenceLength (s3)
    at = SequenceAt (s3, q)
    s4 = SequenceErase (s3)
    one = Constant <value=int64 {{1}}> ()
    s5 = SequenceInsert (s4, a, one)
    last = SequenceAt (s5, one)
}}"""
    )
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    counts = op_counts(lowered)
    assert all(counts[op] == count for op, count in absent.items()), counts
    rng = np.random.default_rng(7)
    feeds = {k: rng.standard_normal(v).astype(np.float32) for k, v in zip("abc", (a, b, c))}
    for p in range(-2, 3):
        for q in range(-2, 2):  # erase takes [-3, 2], the read after it [-2, 1]
            assert_same_outputs(model, lowered, {**feeds, "p": np.array(p), "q": np.array(q)})
    for p, q in ((3, 0), (-3, 0), (0, 3), (0, -4)):
        assert_both_fail(model, lowered, {**feeds, "p": np.array(p), "q": np.array(q)})


@pytest.mark.parametrize(("p", "q"), [(3, 0), (-3, 0), (0, 3), (0, -4)])
def test_out_of_range_positions_fail_in_both(p, q):
    model = parse(RUNTIME_LIST)
    lowered, _ = lower_tensor_form(model)
    feeds = {**_abc(np.random.default_rng(1)), "p": np.array(p), "q": np.array(q)}
    assert_both_fail(model, lowered, feeds)


GROWN_IN_LOOP = """
agraph (float[N,3] x, int64 m) => (float[?,3] y, int64 n, float[?,3] last) {
    e = SequenceEmpty <dtype=1> ()
    s = Loop (m, , e) <body = body (int64 i, bool c, seq(float) acc) => (bool c2, seq(float) out) {
        one = Constant <value=int64[1] {1}> ()
        zero = Constant <value=int64[1] {0}> ()
        i1 = Unsqueeze (i, zero)
        end = Add (i1, one)
        piece = Slice (x, zero, end, zero)
        out = SequenceInsert (acc, piece, zero_s)
        zero_s = Constant <value=int64 {0}> ()
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis=0> (s)
    n = SequenceLength (s)
    minus = Constant <value=int64 {-1}> ()
    last = SequenceAt (s, minus)
}
"""


def _grown_in_loop() -> onnx.ModelProto:
    # the insert reads zero_s before it is made in the text: put the Constant first
    text = GROWN_IN_LOOP.replace(
        "        out = SequenceInsert (acc, piece, zero_s)\n"
        "        zero_s = Constant <value=int64 {0}> ()\n",
        "        zero_s = Constant <value=int64 {0}> ()\n"
        "        out = SequenceInsert (acc, piece, zero_s)\n",
    )
    return parse(text)


@pytest.mark.parametrize("trips", [1, 2, 5])
def test_loop_prepends_pieces_of_growing_shape(trips):
    model = _grown_in_loop()
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    assert_same_outputs(model, lowered, {"x": x, "m": np.array(trips)})


def test_loop_that_never_runs_reads_an_empty_list_and_fails_in_both():
    model = _grown_in_loop()
    lowered, _ = lower_tensor_form(model)
    x = np.zeros((6, 3), np.float32)
    assert_both_fail(model, lowered, {"x": x, "m": np.array(0)})


SPLIT_BY_LENGTHS = """
agraph (float[T,3] x, int64[B] lengths, int64 p) => (float[?,3] y, float[?,3] at) {
    zero = Constant <value=int64 {0}> ()
    shape_l = Shape (lengths)
    b = Gather <axis=0> (shape_l, zero)
    e = SequenceEmpty <dtype=1> ()
    end, s = Loop (b, , zero, e) <body = body (int64 i, bool c, int64 start, seq(float) acc)
            => (bool c2, int64 stop, seq(float) out) {
        n = Gather <axis=0> (lengths, i)
        stop = Add (start, n)
        axis = Constant <value=int64[1] {0}> ()
        from = Unsqueeze (start, axis)
        to = Unsqueeze (stop, axis)
        piece = Slice (x, from, to, axis)
        out = SequenceInsert (acc, piece)
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis=0> (s)
    at = SequenceAt (s, p)
}
"""


@pytest.mark.parametrize(("lengths", "p"), [([2, 0, 3], 1), ([2, 0, 3], -1), ([4], 0)])
def test_a_loop_cutting_rows_by_run_time_lengths_builds_a_ragged_list(lengths, p):
    """Shape inference gives the pieces no dim (their Slice bounds are computed); the loop
    analysis shows that each keeps x's 3 columns, so the list is rows and row counts."""
    model = parse(SPLIT_BY_LENGTHS)
    lowered, report = lower_tensor_form(model)
    assert {node.tier for node in report.nodes if node.op_type.startswith("Sequence")} == {"ragged"}
    assert op_counts(lowered)["ReduceProd"] == 0  # no table of element shapes
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    feeds = {"x": x, "lengths": np.array(lengths), "p": np.array(p)}
    y, element = assert_same_outputs(model, lowered, feeds)
    np.testing.assert_array_equal(y, x[: sum(lengths)])
    starts = np.cumsum([0, *lengths])[:-1]
    np.testing.assert_array_equal(element, x[starts[p] : starts[p] + lengths[p]])


SIZES_READ = """
agraph (float[A,3] a, float[B,3] b, float[C,2] c, int64 p) => (int64[?] rows, int64[?] last,
                                                              int64[?] whole) {{
    s = SequenceConstruct ({elements})
    e = SequenceAt (s, p)
    rows = Shape <end = 1> (e)
    last = Shape <start = -1> (e)
    whole = Shape (e)
}}
"""


@pytest.mark.parametrize(
    ("elements", "layout"), [("a, b", "ragged"), ("a, c", "flat"), ("c, a, b", "flat")]
)
def test_the_shape_of_an_element_read_comes_from_the_sizes_of_the_list(elements, layout):
    """`len(seqs[p])`: the element itself is not read (no Slice of the data), only its row
    count (ragged) or its row of the table of shapes (flat)."""
    model = parse(SIZES_READ.format(elements=elements))
    lowered, report = lower_tensor_form(model)
    assert {node.tier for node in report.nodes if node.op_type.startswith("Sequence")} == {layout}
    counts = op_counts(lowered)
    assert counts["CumSum"] == 0, counts  # no bounds of elements: none is read
    rng = np.random.default_rng(3)
    feeds = {
        "a": rng.standard_normal((2, 3)).astype(np.float32),
        "b": rng.standard_normal((4, 3)).astype(np.float32),
        "c": rng.standard_normal((1, 2)).astype(np.float32),
    }
    n = elements.count(",") + 1
    for p in range(-n, n):
        assert_same_outputs(model, lowered, {**feeds, "p": np.array(p)})
    for p in (n, -n - 1):
        assert_both_fail(model, lowered, {**feeds, "p": np.array(p)})


IF_LISTS = """
agraph (float[2,4] a, float[3,4] b, bool c) => (float[?,4] y, int64 n) {
    s = If (c) <then_branch = tb () => (seq(float) o) { o = SequenceConstruct (a, b, a) },
                else_branch = eb () => (seq(float) o2) { o2 = SequenceConstruct (b) }>
    y = ConcatFromSequence <axis=0> (s)
    n = SequenceLength (s)
}
"""


@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_return_lists_of_different_lengths(cond):
    model = parse(IF_LISTS)
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    rng = np.random.default_rng(2)
    feeds = {
        "a": rng.standard_normal((2, 4)).astype(np.float32),
        "b": rng.standard_normal((3, 4)).astype(np.float32),
        "c": np.array(cond),
    }
    assert_same_outputs(model, lowered, feeds)


# -- ConcatFromSequence on every axis, stacks, ranks 0..4 ---------------------------------


def _concat_model(rank: int, axis: int, new_axis: int) -> onnx.ModelProto:
    dims = ",".join(["2"] * rank)
    shape = f"[{dims}]" if rank else ""
    return parse(
        f"""
agraph (float{shape} a, float{shape} b) => (float y) {{
    s = SequenceConstruct (a, b, a)
    y = ConcatFromSequence <axis={axis}, new_axis={new_axis}> (s)
}}"""
    )


@pytest.mark.parametrize(
    ("rank", "axis", "new_axis"),
    [
        (0, 0, 1),
        (1, 0, 0),
        (1, -1, 1),
        (2, 1, 0),
        (2, -1, 0),
        (2, 1, 1),
        (3, 2, 0),
        (3, -4, 1),
        (4, 3, 1),
        (4, 1, 0),
    ],
)
def test_concat_and_stack_on_every_axis(rank, axis, new_axis):
    model = _concat_model(rank, axis, new_axis)
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    rng = np.random.default_rng(rank)
    shape = (2,) * rank
    feeds = {
        "a": rng.standard_normal(shape).astype(np.float32),
        "b": rng.standard_normal(shape).astype(np.float32),
    }
    assert_same_outputs(model, lowered, feeds)


# a stacked list edited at a run-time position, then concatenated (not stacked)
EDITED_CONCAT = """
agraph (float[N,{dims}] x, float[{dims}] r, int64 p) => (float y) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    s2 = SequenceInsert (s, r, p)
    y = ConcatFromSequence <axis={axis}> (s2)
}}"""


@pytest.mark.parametrize(("dims", "axis"), [("2,3", 0), ("2,3", 1), ("2,3", -1), ("M,3", 0)])
def test_a_concat_of_elements_with_static_other_dims_is_one_reshape(dims, axis):
    """The other dims are static and not 0: one Reshape to a constant target with -1 on the
    concatenation axis, no Shape of the data (a symbolic dim on that axis may stay)."""
    model = parse(EDITED_CONCAT.format(dims=dims, axis=axis))
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    assert sequence_op_count(lowered) == 0
    assert counts["Reshape"] >= 1 and "ReduceProd" not in counts, counts
    shape = [2 if d == "M" else int(d) for d in dims.split(",")]
    rng = np.random.default_rng(len(dims) + axis)
    for rows, p in ((0, 0), (1, -1), (4, 2), (4, -4)):
        feeds = {
            "x": rng.standard_normal((rows, *shape)).astype(np.float32),
            "r": rng.standard_normal(shape).astype(np.float32),
            "p": np.array(p, np.int64),
        }
        assert_same_outputs(model, lowered, feeds)


@pytest.mark.parametrize(
    ("dims", "axis", "why"),
    [("M,3", 1, "a dim other than the axis is not static"), ("0,3", 1, "a dim is 0: -1 is void")],
)
def test_a_concat_whose_other_dims_are_not_all_static_reads_the_shape(dims, axis, why):
    model = parse(EDITED_CONCAT.format(dims=dims, axis=axis))
    lowered, _ = lower_tensor_form(model)
    assert op_counts(lowered)["ReduceProd"] == 1, why  # the merged size, read from the Shape
    shape = [2 if d == "M" else int(d) for d in dims.split(",")]
    for rows in (0, 3):
        feeds = {
            "x": np.ones((rows, *shape), np.float32),
            "r": np.zeros(shape, np.float32),
            "p": np.array(1 if rows else 0, np.int64),
        }
        assert_same_outputs(model, lowered, feeds)


# -- element types ---------------------------------------------------------------------

DTYPES = {
    "float": np.float32,
    "double": np.float64,
    "float16": np.float16,
    "int8": np.int8,
    "uint8": np.uint8,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
    "string": np.str_,
}


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_every_element_type(dtype):
    model = parse(
        f"""
agraph ({dtype}[2,2] a, {dtype}[3,2] b, int64 p) => ({dtype}[?,2] y, {dtype}[?,2] at) {{
    s = SequenceConstruct (a, b)
    s2 = SequenceInsert (s, a, p)
    y = ConcatFromSequence <axis=0> (s2)
    at = SequenceAt (s2, p)
}}"""
    )
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    numpy_type = DTYPES[dtype]
    a = np.arange(4).reshape(2, 2).astype(numpy_type)
    b = np.arange(6).reshape(3, 2).astype(numpy_type)
    for p in (-2, 0, 1):
        assert_same_outputs(model, lowered, {"a": a, "b": b, "p": np.array(p)})


def test_int32_positions():
    model = parse(
        """
agraph (float[2] a, float[3] b, int32 p) => (float[?] at) {
    s = SequenceConstruct (a, b)
    at = SequenceAt (s, p)
}"""
    )
    lowered, _ = lower_tensor_form(model)
    a, b = np.ones(2, np.float32), np.zeros(3, np.float32)
    for p in (-2, -1, 0, 1):
        assert_same_outputs(model, lowered, {"a": a, "b": b, "p": np.array(p, np.int32)})


def test_empty_elements_keep_their_shape():
    model = parse(
        """
agraph (float[N,0,3] a, float[2,0,3] b, int64 p) => (float[?,?,?] at, float[?,?,?] y) {
    s = SequenceConstruct (a, b)
    at = SequenceAt (s, p)
    y = ConcatFromSequence <axis=0> (s)
}"""
    )
    lowered, _ = lower_tensor_form(model)
    feeds = {"a": np.zeros((4, 0, 3), np.float32), "b": np.zeros((2, 0, 3), np.float32)}
    for p in (0, 1, -1):
        at, _ = assert_same_outputs(model, lowered, {**feeds, "p": np.array(p)})
        assert at.shape == ((4, 0, 3) if p == 0 else (2, 0, 3))


# -- SplitToSequence whose chunk count is known at run time only --------------------------


@pytest.mark.parametrize(
    ("attrs", "split", "concat_axis"),
    [
        ("axis=0", "s = Constant <value=int64 {2}> ()", 0),
        ("axis=1", "s = Constant <value=int64 {2}> ()", 1),
        ("axis=-1, keepdims=0", None, 0),
        ("axis=1, keepdims=0", None, -1),
        ("axis=0, keepdims=1", None, 0),
    ],
)
def test_split_of_a_run_time_dim(attrs, split, concat_axis):
    split_input = ", s" if split else ""
    model = parse(
        f"""
agraph (float[N,M] x, int64 p) => (float y, int64 n, float at) {{
    {split or ""}
    parts = SplitToSequence <{attrs}> (x{split_input})
    y = ConcatFromSequence <axis={concat_axis}> (parts)
    n = SequenceLength (parts)
    at = SequenceAt (parts, p)
}}"""
    )
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    for rows, cols in ((5, 3), (1, 1), (4, 6)):
        x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
        for p in (0, -1):
            assert_same_outputs(model, lowered, {"x": x, "p": np.array(p)})


def test_split_by_sizes_fed_at_run_time():
    model = parse(
        """
agraph (float[N,M] x, int64[K] sizes, int64 p) => (float[?,?] at, float[?,?] y) {
    parts = SplitToSequence <axis=1> (x, sizes)
    at = SequenceAt (parts, p)
    y = ConcatFromSequence <axis=1> (parts)
}"""
    )
    lowered, _ = lower_tensor_form(model)
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    for sizes in ([3, 0, 4], [7], [1, 1, 1, 1, 1, 1, 1]):
        for p in (0, -1):
            feeds = {"x": x, "sizes": np.array(sizes, np.int64), "p": np.array(p)}
            assert_same_outputs(model, lowered, feeds)


# -- refusals: what stays, and why --------------------------------------------------------


def test_model_interface_stays():
    model = parse(
        """
agraph (float[2] a, float[3] b) => (seq(float) s) {
    s = SequenceConstruct (a, b)
}"""
    )
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 1
    assert "feeds the sequence-typed output" in reasons(report)


def test_elements_of_different_ranks_stay():
    model = parse(
        """
agraph (float[2] a, float[3,2] b) => (int64 n) {
    s = SequenceConstruct (a, b)
    n = SequenceLength (s)
}"""
    )
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 2
    assert "different ranks" in reasons(report)


def test_opset_below_14_stays():
    model = parse(
        """
agraph (float[2] a, float[3] b, int64 p) => (float[?] y) {
    s = SequenceConstruct (a, b)
    y = SequenceAt (s, p)
}""",
        opset=13,
    )
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 2
    assert "opset 14" in reasons(report)


# -- properties ------------------------------------------------------------------------


def test_deterministic_and_idempotent():
    model = _grown_in_loop()
    first, _ = lower_tensor_form(model)
    second, _ = lower_tensor_form(model)
    assert first.SerializeToString() == second.SerializeToString()
    again, report = seqlower.optimize(first, rules=ONLY_TENSOR_FORM, target="portable")
    assert report.rules_fired == {}
    assert again.SerializeToString() == first.SerializeToString()
    # the whole rule set makes the shape table the loop grows (one row a step) a scan output
    # (loop-concat-to-scan), once: the tier runs before it in one lowering
    whole, report = seqlower.optimize(first, target="portable")
    assert set(report.rules_fired) <= {"loop-concat-to-scan"}
    assert sequence_op_count(whole) == 0
    _, report = seqlower.optimize(whole, target="portable")
    assert report.rules_fired == {}


def test_whole_lowering_prefers_the_pattern_rules():
    """With every rule on, a list the rules lower never reaches the tensor form."""
    model = parse(
        """
agraph (float[4,3] x) => (float[4,3] y) {
    parts = SplitToSequence <axis=0> (x)
    y = ConcatFromSequence <axis=0> (parts)
}"""
    )
    _, report = seqlower.optimize(model, target="portable")
    assert "tensor-list" not in report.rules_fired


def test_whole_lowering_reaches_lists_of_run_time_length():
    model = parse(
        """
agraph (float[N,4] x, int64 p, int64 q) => (float[?,4] y, int64 n) {
    two = Constant <value=int64 {2}> ()
    s = SplitToSequence <axis=0> (x, two)
    s2 = SequenceInsert (s, x, p)
    s3 = SequenceErase (s2, q)
    y = ConcatFromSequence <axis=0> (s3)
    n = SequenceLength (s3)
}"""
    )
    lowered, report = seqlower.optimize(model, target="portable")
    assert sequence_op_count(lowered) == 0
    assert report.rules_fired.get("tensor-list", 0) > 0
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    for p, q in ((-1, 0), (0, -1), (3, 2), (-3, -4)):
        assert_same_outputs(model, lowered, {"x": x, "p": np.array(p), "q": np.array(q)})


# -- regressions found by the fuzzer ------------------------------------------------------


def test_an_overridable_initializer_is_no_static_position():
    """Fuzz seed 542: an erase position that is an initializer and also a graph input may be
    fed another value; it is read at run time."""
    model = parse(
        """
agraph (float[N] x, int64 q) => (float[?] y) <int64 q = {1}> {
    s = SplitToSequence <axis=0> (x)
    s2 = SequenceErase (s, q)
    y = ConcatFromSequence <axis=-1> (s2)
}"""
    )
    lowered, _ = lower_tensor_form(model)
    x = np.arange(5, dtype=np.float32)
    for q in (1, -1, 0, 4):
        assert_same_outputs(model, lowered, {"x": x, "q": np.array(q)})


def test_rows_unbound_and_rows_inserted_take_the_flat_layout():
    """Fuzz seed 29: an unbind (keepdims=0) feeds a list whose other elements differ in their
    first dim; the ragged layout takes only splits that keep axis 0."""
    model = parse(
        """
agraph (float[3,2] x, float[4] z, int64 p) => (float[?] y, float[?] at) {
    s = SplitToSequence <axis=1, keepdims=0> (x)
    s2 = SequenceInsert (s, z, p)
    y = ConcatFromSequence <axis=0> (s2)
    at = SequenceAt (s2, p)
}"""
    )
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    z = np.ones(4, np.float32)
    for p in (-2, -1, 0, 1):  # insert takes [-2, 2], the read after it [-3, 2]
        assert_same_outputs(model, lowered, {"x": x, "z": z, "p": np.array(p)})


def test_the_package_imports_on_its_own():
    """`import seqlower.lists` first, in a fresh interpreter: the driver imports this package,
    and this package must not import the driver's package at import time."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import seqlower.lists"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


# x.unbind(0) of a dynamic N, then the first, the last or no position erased: a stacked list
ERASE_END = """
agraph (float[N,3] x) => (float[?,3] y, int64 n) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    {position}
    s2 = SequenceErase (s{argument})
    y = ConcatFromSequence <axis=0, new_axis=1> (s2)
    n = SequenceLength (s2)
}}"""


@pytest.mark.parametrize(
    ("position", "kept"), [(None, slice(None, -1)), (-1, slice(None, -1)), (0, slice(1, None))]
)
def test_erasing_an_end_of_a_stacked_list_is_one_split(position, kept):
    declared = "" if position is None else f"p = Constant <value=int64 {{{position}}}> ()"
    text = ERASE_END.format(position=declared, argument="" if position is None else ", p")
    model = parse(text)
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    counts = op_counts(lowered)
    # Split(data, [1, n - 1]) or [n - 1, 1] keeps the rest and checks the position (a size of
    # -1 on an empty list fails): one Concat (of the two sizes), no Slice, no Range
    assert counts["Split"] == 1 and counts["Concat"] == 1
    assert "Slice" not in counts and "Range" not in counts
    rng = np.random.default_rng(3)
    for rows in (2, 3, 5):  # (one row leaves none, whose concat fails in onnxruntime only)
        x = rng.standard_normal((rows, 3)).astype(np.float32)
        y, n = assert_same_outputs(model, lowered, {"x": x})
        np.testing.assert_array_equal(y, x[kept])
        assert int(n) == rows - 1
    assert_both_fail(model, lowered, {"x": np.zeros((0, 3), np.float32)})  # nothing to erase


# the same list after one insert (at the front) holds at least one element: no check needed
ERASE_AFTER_INSERT = """
agraph (float[N,3] x, float[3] r) => (float[?,3] y, float[3] last) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    zero = Constant <value=int64 {{0}}> ()
    s1 = SequenceInsert (s, r, zero)
    {inserts}
    p = Constant <value=int64 {{{position}}}> ()
    last = SequenceAt (s2, p)
    s3 = SequenceErase (s2, p)
    y = ConcatFromSequence <axis=0, new_axis=1> (s3)
}}"""


@pytest.mark.parametrize(
    ("inserts", "position"),
    [(1, -1), (1, 0), (2, -2), (2, 1)],
    ids=["pop-after-one", "first-after-one", "second-last-after-two", "second-after-two"],
)
def test_erasing_a_position_an_insert_proved_needs_no_check(inserts, position):
    lines = "s2 = Identity (s1)" if inserts == 1 else "s2 = SequenceInsert (s1, r)"
    model = parse(ERASE_AFTER_INSERT.format(inserts=lines, position=position))
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert "Range" not in op_counts(lowered)  # no Gather(Range(n), p): the position exists
    rng = np.random.default_rng(5)
    r = rng.standard_normal(3).astype(np.float32)
    for rows in (0, 1, 4):  # the split may be empty: the inserts alone hold the position
        x = rng.standard_normal((rows, 3)).astype(np.float32)
        if rows + inserts == 1:
            continue  # nothing is left to concatenate, which fails in onnxruntime only
        assert_same_outputs(model, lowered, {"x": x, "r": r})


def test_a_position_beyond_what_the_inserts_prove_is_checked_by_the_read_there():
    """The read at -2 (a model output) is a Gather that fails unless the list holds two
    elements: the erase at -2 that follows needs no check of its own (Slices, no mask);
    with an empty split the read fails, as the original's SequenceAt does."""
    model = parse(ERASE_AFTER_INSERT.format(inserts="s2 = Identity (s1)", position=-2))
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    assert "ScatterElements" not in counts and "Split" not in counts and counts["Gather"] == 1
    r = np.ones(3, np.float32)
    assert_same_outputs(model, lowered, {"x": np.ones((3, 3), np.float32), "r": r})
    assert_both_fail(model, lowered, {"x": np.zeros((0, 3), np.float32), "r": r})


# a ragged list (first dims of run-time size, proved equal nowhere) concatenated on another axis
RAGGED_CONCAT = """
agraph ({t}[N,3,2] a, {t}[M,3,2] b, {t}[K,3,2] c, int64 p) => ({t} y) {{
    s = SequenceConstruct (a, b)
    s2 = SequenceInsert (s, c, p)
    y = ConcatFromSequence <axis={axis}> (s2)
}}"""


@pytest.mark.parametrize(
    ("dtype", "axis"), [("float", 1), ("float", -1), ("int64", 2), ("bool", -2)]
)
def test_a_ragged_list_concatenated_on_another_axis_is_one_reshape_no_loop(dtype, axis):
    """Concat on an axis other than 0 needs every first dim equal: the data is reshaped to
    [n, first, 3, 2], the list axis moved before `axis` and merged with it (no Loop over the
    elements). First dims that differ fail in both models."""
    model = parse(RAGGED_CONCAT.format(t=dtype, axis=axis))
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    counts = op_counts(lowered)
    assert "Loop" not in counts and counts["Transpose"] == 1, counts
    assert {node.tier for node in report.nodes if node.op_type.startswith("Sequence")} == {"ragged"}
    rng = np.random.default_rng(axis + 7)
    numpy_type = {"float": np.float32, "int64": np.int64, "bool": np.bool_}[dtype]

    def feeds(n: int, m: int, k: int, p: int) -> dict:
        made = {
            name: rng.integers(0, 5, (rows, 3, 2)).astype(numpy_type)
            for name, rows in zip("abc", (n, m, k))
        }
        return {**made, "p": np.array(p, np.int64)}

    for p in (-2, 0, 2):  # the inserted element first, in the middle, last
        for rows in (0, 1, 4):
            assert_same_outputs(model, lowered, feeds(rows, rows, rows, p))
    assert_both_fail(model, lowered, feeds(2, 3, 2, 1))  # first dims differ: no concatenation
    assert_both_fail(model, lowered, feeds(2, 2, 2, 3))  # a position past the end
