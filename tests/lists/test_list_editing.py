"""Editing a stacked list at a position: insert, erase and assign (`xs[p] = x`, which PyTorch
exports as an erase then an insert at p) as one Split and one Concat, or one ScatterND.

Each form is checked three ways: what it emits (operator counts), what it does not take and why
(the fallback it leaves to: negative positions, strings, old opsets), and the numbers against
the original under onnxruntime, positions out of range (both fail), empty lists and dtypes.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as NotImplementedError_
from support import (
    assert_both_fail,
    assert_same_or_both_fail,
    assert_same_outputs,
    lower_tensor_form,
    op_counts,
    parse,
    run_ort,
    sequence_op_count,
)

from seqlower.analysis.static_values import StaticValues
from seqlower.lists.signs import never_negative

# x.unbind(0) of a dynamic N, edited at a run-time position p
EDIT = """
agraph ({dtype}[N,3] x, {dtype}[3] r, int64 p) => ({dtype}[?,3] y, int64 n) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    {position}
    s2 = {edit}
    y = ConcatFromSequence <axis=0, new_axis=1> (s2)
    n = SequenceLength (s2)
}}"""


def edit_model(edit: str, position: str = "", dtype: str = "float") -> onnx.ModelProto:
    return parse(EDIT.format(edit=edit, position=position, dtype=dtype))


def feeds(rows: int, p: int, dtype: type = np.float32) -> dict:
    rng = np.random.default_rng(abs(rows + 7 * p))
    x = (rng.standard_normal((rows, 3)) * 10).astype(dtype)
    return {"x": x, "r": np.arange(3).astype(dtype), "p": np.array(p, np.int64)}


def check_every_position(model: onnx.ModelProto, lowered: onnx.ModelProto, valid, dtype=np.float32):
    """Every position from -n-2 to n+2 for n in 0, 1, 4: equal where `valid(p, n)`, both
    failing where it is False (None: a valid edit that leaves an empty list, whose
    concatenation fails in onnxruntime only, as the module docstring of seqlower.lists.forms
    says)."""
    for rows in (0, 1, 4):
        for p in range(-rows - 2, rows + 3):
            fed = feeds(rows, p, dtype)
            verdict = valid(p, rows)
            if verdict:
                assert_same_outputs(model, lowered, fed)
            elif verdict is not None:
                assert_both_fail(model, lowered, fed)


# -- insert ---------------------------------------------------------------------------------


def test_an_insert_at_a_run_time_position_is_one_split_and_one_concat():
    model = edit_model("SequenceInsert (s, r, p)")
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    counts = op_counts(lowered)
    # the sizes [p, n - p], the pieces, and the pieces around the new row: no Range of slots
    assert counts["Split"] == 1 and counts["Concat"] == 2
    assert "Range" not in counts and "Slice" not in counts
    assert counts["Where"] == 1  # p < 0 counts from the end
    check_every_position(model, lowered, lambda p, n: -n <= p <= n)


@pytest.mark.parametrize("position", [2, -1, -3])
def test_an_insert_at_a_constant_position_gathers_the_rows_it_needs(position):
    """The |p| rows on p's side of the cut are one Gather of constant indices, which fails
    where the insert does; the rest one Slice: no Split by sizes made from n, no count from
    the end."""
    model = edit_model("SequenceInsert (s, r, q)", f"q = Constant <value=int64 {{{position}}}> ()")
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    assert counts["Gather"] == 1 and counts["Slice"] == 1 and counts["Concat"] == 1
    assert "Split" not in counts and "Where" not in counts and "Range" not in counts
    for rows in (0, 1, 2, 3, 5):
        fed = feeds(rows, 0)
        if -rows <= position <= rows:
            assert_same_outputs(model, lowered, fed)
        else:
            assert_both_fail(model, lowered, fed)


def test_a_position_made_from_a_shape_is_not_counted_from_the_end():
    """`k = x.size(0) // 2` can never be negative: no Where(p < 0, p + n, p)."""
    position = """dims = Shape (x)
    zero = Constant <value=int64 {0}> ()
    n0 = Gather <axis=0> (dims, zero)
    two = Constant <value=int64 {2}> ()
    k = Div (n0, two)"""
    model = edit_model("SequenceInsert (s, r, k)", position)
    lowered, _ = lower_tensor_form(model)
    assert "Where" not in op_counts(lowered) and op_counts(lowered)["Split"] == 1
    for rows in (0, 1, 4, 5):
        assert_same_outputs(model, lowered, feeds(rows, 0))


@pytest.mark.parametrize(
    ("dtype", "numpy_type"),
    [("int32", np.int32), ("bool", np.bool_), ("float16", np.float16), ("double", np.float64)],
)
def test_edits_keep_every_dtype(dtype, numpy_type):
    model = edit_model("SequenceInsert (s, r, p)", dtype=dtype)
    lowered, _ = lower_tensor_form(model)
    assert op_counts(lowered)["Split"] == 1
    try:  # probed: onnxruntime 1.20 has no SplitToSequence for bool
        run_ort(model, feeds(4, 0, numpy_type))
    except NotImplementedError_ as error:
        pytest.skip(f"onnxruntime {onnxruntime.__version__} cannot run the original: {error}")
    check_every_position(model, lowered, lambda p, n: -n <= p <= n, numpy_type)


# -- erase ----------------------------------------------------------------------------------


def test_an_erase_at_a_run_time_position_is_one_compress():
    """The rows a mask keeps, n trues with a false scattered at p: ScatterElements reads a
    negative p from the end and fails outside [-n, n-1] as the original does."""
    model = edit_model("SequenceErase (s, p)")
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    counts = op_counts(lowered)
    assert counts["Compress"] == 1 and counts["ScatterElements"] == 1
    assert "Split" not in counts and "Where" not in counts and "Range" not in counts
    check_every_position(model, lowered, lambda p, n: (-n <= p < n) and (n > 1 or None))


@pytest.mark.parametrize("position", [1, -2, 3])
def test_an_erase_at_a_constant_position_fails_where_the_original_does(position):
    model = edit_model("SequenceErase (s, q)", f"q = Constant <value=int64 {{{position}}}> ()")
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    # the mask with a false scattered at the constant position: checked as at run time
    assert counts["Compress"] == 1 and counts["ScatterElements"] == 1
    assert "Split" not in counts and "Where" not in counts and "Range" not in counts
    for rows in (0, 1, 2, 3, 4, 6):
        fed = feeds(rows, 0)
        if -rows <= position < rows and rows > 1:  # (one row leaves none to concatenate)
            assert_same_outputs(model, lowered, fed)
        elif not -rows <= position < rows:
            assert_both_fail(model, lowered, fed)


# -- assign: erase then insert at the same position -------------------------------------------


def test_an_assignment_at_a_constant_position_is_one_scatter():
    """`xs[2] = r` exports as SequenceErase(s, 2) then SequenceInsert(., r, 2)."""
    model = edit_model(
        "SequenceInsert (e, r, q)",
        "q = Constant <value=int64 {2}> ()\n    e = SequenceErase (s, q)",
    )
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    assert counts["ScatterND"] == 1 and "Split" not in counts and "Concat" not in counts
    # the update is r itself: one index of one coordinate, no row made of it
    assert "Unsqueeze" not in counts
    for rows in (0, 1, 2, 3, 5):
        fed = feeds(rows, 0)
        if rows > 2:
            assert_same_outputs(model, lowered, fed)
        else:  # no element 2 to replace: the erase fails, and so does the ScatterND
            assert_both_fail(model, lowered, fed)


def test_an_erase_and_insert_at_different_positions_stay_two_checked_edits():
    """Different positions are no assignment (an erase at 1, an insert at 2)."""
    model = edit_model(
        "SequenceInsert (e, r, q2)",
        "q = Constant <value=int64 {1}> ()\n    e = SequenceErase (s, q)\n"
        "    q2 = Constant <value=int64 {2}> ()",
    )
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    assert "ScatterND" not in counts, "two positions"
    # each checks its position: the erase's mask, the insert's Gather of the rows before it
    assert counts["Compress"] == 1 and counts["Gather"] == 1
    for rows in (0, 1, 2, 3, 5):
        fed = feeds(rows, 0)
        assert_same_or_both_fail(model, lowered, fed)


# `xs[len(xs) - 1] = r`: TorchScript writes `xs[-1] = r` as an erase and an insert at -1 (which
# puts r before the last element), so model code that replaces the last entry writes this
LAST = """
agraph (float[N,3] x, float[3] r) => (float[?,3] y, int64 n) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    {grow}
    k = SequenceLength ({measured})
    c = Constant <value=int64 {{{minus}}}> ()
    q = Sub (k, c)
    e = SequenceErase (s1, q)
    s2 = SequenceInsert (e, r, q)
    y = ConcatFromSequence <axis=0, new_axis=1> (s2)
    n = SequenceLength (s2)
}}"""


@pytest.mark.parametrize(
    "grow",
    ["s1 = Identity (s)", "s1 = SequenceInsert (s, r)"],
    ids=["length-of-the-split", "length-of-an-edited-list"],
)
def test_an_assignment_at_the_length_minus_one_is_one_scatter_at_the_last_row(grow):
    """The position is `len(s1) - 1`: >= 0 wherever the erase succeeds (an empty list fails),
    so the erase and insert replace the last row: ScatterND at [-1], with no Compress, Split or
    Sub left (the position's arithmetic is dead)."""
    model = parse(LAST.format(grow=grow, measured="s1", minus=1))
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    assert counts["ScatterND"] == 1, counts
    assert not {"Compress", "Split", "Sub", "ScatterElements"} & set(counts), counts
    for rows in (0, 1, 2, 5):
        fed = feeds(rows, 0)
        del fed["p"]
        if rows > 0 or grow != "s1 = Identity (s)":
            assert_same_outputs(model, lowered, fed)
        else:  # erase at -1 of an empty list: both fail
            assert_both_fail(model, lowered, fed)


@pytest.mark.parametrize(
    ("measured", "minus", "why"),
    [
        ("s1", 2, "len - 2 may be negative where the erase succeeds (n = 1: position -1)"),
        ("s", 1, "the length of another list (s1 has one more element)"),
    ],
)
def test_a_length_minus_one_that_is_not_the_last_element_is_no_scatter_at_the_last_row(
    measured, minus, why
):
    model = parse(LAST.format(grow="s1 = SequenceInsert (s, r)", measured=measured, minus=minus))
    lowered, _ = lower_tensor_form(model)
    # the assignment of either sign (`stacked._assign_signed`: a position counted from the
    # end moves the element before it), not the one ScatterND at the last row
    counts = op_counts(lowered)
    assert counts["ScatterND"] == 2 and counts["GatherND"] == 1 and counts["Clip"] == 1, why
    for rows in (0, 1, 2, 5):
        fed = feeds(rows, 0)
        del fed["p"]
        assert_same_or_both_fail(model, lowered, fed)


# -- positions an earlier edit checked ------------------------------------------------------


@pytest.mark.parametrize(
    ("erase_at", "insert_at", "checks", "why"),
    [
        (-2, -1, 1, "the erase at -2 proves two elements before it, one after: -1 is there"),
        (2, 1, 1, "the erase at 2 proves three elements before it, two after: 1 is there"),
        (-1, -2, 2, "the erase at -1 proves one element before it, none after: -2 is checked"),
        (1, 2, 2, "the erase at 1 proves two elements before it, one after: 2 is checked"),
    ],
)
def test_an_insert_where_an_earlier_edit_proved_the_list_long_enough_is_slices(
    erase_at, insert_at, checks, why
):
    """`del xs[-2]; xs.insert(-1, r)`: the erase's Split fails unless the list holds two
    elements, and the insert is made from its result, so the insert needs no check of its
    own (Slices and one Concat); an insert beyond what the erase proved keeps its Split."""
    model = edit_model(
        "SequenceInsert (e, r, q2)",
        f"q = Constant <value=int64 {{{erase_at}}}> ()\n    e = SequenceErase (s, q)\n"
        f"    q2 = Constant <value=int64 {{{insert_at}}}> ()",
    )
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    # the checks: the erase's Split or mask, the insert's Gather of the rows it cuts off
    assert counts["Split"] + counts["Compress"] + counts["Gather"] == checks, why
    for rows in (0, 1, 2, 3, 5):
        fed = feeds(rows, 0)
        need = max(-erase_at if erase_at < 0 else erase_at + 1, abs(insert_at) + 1)
        if rows >= need:
            assert_same_outputs(model, lowered, fed)
        else:
            assert_both_fail(model, lowered, fed)


# -- what keeps the Slice forms ----------------------------------------------------------------


STRINGS = """
agraph (string[3] a, string[3] b, int64 p) => (string[3] first, int64 n) {
    s = SequenceConstruct (a, b, a, b)
    s2 = SequenceErase (s, p)
    zero = Constant <value=int64 {0}> ()
    first = SequenceAt (s2, zero)
    n = SequenceLength (s2)
}"""


def test_string_lists_keep_the_slice_forms():
    """Strings keep Gather(Range(n), p) and Slices: the Split and ScatterND forms are for
    numbers (onnxruntime's Gather mis-copies strings: seqlower.runtime_quirks)."""
    model = parse(STRINGS)
    lowered, _ = lower_tensor_form(model)
    counts = op_counts(lowered)
    assert "Split" not in counts and counts["Range"] == 1
    a, b = np.array(["a", "bb", ""], object), np.array(["x", "y", "zz"], object)
    for p in range(-6, 6):
        fed = {"a": a, "b": b, "p": np.array(p, np.int64)}
        if -4 <= p < 4:
            assert_same_outputs(model, lowered, fed)
        else:
            assert_both_fail(model, lowered, fed)


# -- never_negative ------------------------------------------------------------------------------


def test_never_negative_follows_shapes_and_refuses_what_may_be_negative():
    model = parse("""
g (float[N,3] x, int64 p) => (int64 a, int64 b, int64 c, int64 d, int64 e) {
    dims = Shape (x)
    zero = Constant <value=int64 {0}> ()
    n = Gather <axis=0> (dims, zero)
    two = Constant <value=int64 {2}> ()
    a = Div (n, two)
    b = Sub (n, two)
    c = Add (n, p)
    m = Constant <value=int64 {-1}> ()
    d = Mod (p, n)
    e = Mod <fmod=1> (p, n)
}""")
    graph = ir.serde.deserialize_model(model).graph
    out = {v.name: v for v in graph.outputs}
    values = StaticValues()
    assert never_negative(out["a"], values)  # a dim halved
    assert not never_negative(out["b"], values)  # a dim minus 2 may be negative
    assert not never_negative(out["c"], values)  # p is anything
    assert never_negative(out["d"], values)  # Mod takes the divisor's sign
    assert not never_negative(out["e"], values)  # fmod=1 takes the dividend's


def test_never_negative_follows_indices_and_their_copies():
    """NonZero, ArgMax and TopK's indices are positions; a Gather, Compress, Transpose or Concat
    of positions holds positions. TopK's values, and a Gather of what may be negative, may be
    negative."""
    model = parse("""
g (float[N] x, int64[M] q) => (int64 a, int64 b, int64 c, int64 d, int64 e, float f, int64 g,
                               int64 h) {
    zero = Constant <value=float {0}> ()
    keep = Greater (x, zero)
    nz = NonZero (keep)
    axes = Constant <value=int64[1] {0}> ()
    pos = Squeeze (nz, axes)
    three = Constant <value=int64[1] {3}> ()
    f, idx = TopK (x, three)
    a = Gather <axis=0> (pos, idx)
    b = ArgMax <axis=0> (x)
    c = Compress <axis=0> (pos, keep)
    d = Concat <axis=0> (pos, idx)
    e = Transpose (nz)
    g = Gather <axis=0> (q, idx)
    h = Concat <axis=0> (pos, q)
}""")
    graph = ir.serde.deserialize_model(model).graph
    out = {v.name: v for v in graph.outputs}
    values = StaticValues()
    for name in "abcde":
        assert never_negative(out[name], values), name
    assert not never_negative(out["f"], values)  # TopK's values are x's
    assert not never_negative(out["g"], values)  # entries of q, which may be negative
    assert not never_negative(out["h"], values)  # q joined in


def test_never_negative_picks_between_two_that_are():
    """Where(c, a, b) gives entries of a or b: never negative when both are, whatever c (a
    Loop's trip count Where(c0, runs, 0), say); not when either may be negative."""
    model = parse("""
g (float[N] x, int64 p, bool c) => (int64 a, int64 b, int64 d, int64 e) {
    dims = Shape (x)
    zero = Constant <value=int64 {0}> ()
    n = Gather <axis=0> (dims, zero)
    first = ArgMax <axis=0, keepdims=0> (x)
    a = Where (c, n, zero)
    b = Where (c, first, n)
    d = Where (c, n, p)
    e = Where (c, p, zero)
}""")
    graph = ir.serde.deserialize_model(model).graph
    out = {v.name: v for v in graph.outputs}
    values = StaticValues()
    assert never_negative(out["a"], values)
    assert never_negative(out["b"], values)
    assert not never_negative(out["d"], values)  # p may be negative
    assert not never_negative(out["e"], values)  # as a


# -- assignment at a Loop's iteration number, reads of what was just put ------------------------

# for i in range(len(xs)): xs[i] = xs[i] * 2 + r ; then xs[i] read back (HRNet's branches)
LOOP_ASSIGN = """
agraph ({dtype}[N,3] x, {dtype}[3] r) => ({dtype}[?,3] y, {dtype}[3] last) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    n = SequenceLength (s)
    t = Constant <value=bool {{1}}> ()
    zero = Constant <value={dtype} {{0}}> ()
    s2, last = Loop (n, t, s, r) <body = g (int64 i, bool c, seq({dtype}) xs, {dtype}[3] prev)
                                              => (bool c2, seq({dtype}) xs3, {dtype}[3] got) {{
        e = SequenceAt (xs, i)
        twice = Add (e, e)
        v = Add (twice, prev)
        xs2 = SequenceErase (xs, i)
        xs3 = SequenceInsert (xs2, v, i)
        got = SequenceAt (xs3, i)
        c2 = Identity (c)
    }}>
    y = ConcatFromSequence <axis=0, new_axis=1> (s2)
}}"""


@pytest.mark.parametrize(("dtype", "numpy_type"), [("float", np.float32), ("int64", np.int64)])
def test_an_assignment_at_the_iteration_number_is_one_scatter(dtype, numpy_type):
    model = parse(LOOP_ASSIGN.format(dtype=dtype))
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    body = next(n for n in lowered.graph.node if n.op_type == "Loop").attribute[0].g
    counts = Counter(node.op_type for node in body.node)
    # one Gather reads xs[i]; the read after the assignment is the value put, no Gather; the
    # ScatterND's update is v itself (index [i], not [[i]]): no Unsqueeze per iteration
    assert counts["ScatterND"] == 1 and counts["Gather"] == 1 and "Unsqueeze" not in counts
    assert "Split" not in counts and "Where" not in counts  # i is never negative
    for rows in (1, 2, 5):
        fed = feeds(rows, 0, numpy_type)
        del fed["p"]
        assert_same_outputs(model, lowered, fed)


# a read at the position just inserted at: the value put, when the position is >= 0 (after an
# insert at -1 the element at -1 is the old last one)
READ_BACK = """
agraph (float[N,3] x, float[3] r) => (float[3] got, float[?,3] y) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    q = Constant <value=int64 {{{position}}}> ()
    s2 = SequenceInsert (s, r{insert_at})
    got = SequenceAt (s2, q)
    y = ConcatFromSequence <axis=0, new_axis=1> (s2)
}}"""


@pytest.mark.parametrize(
    ("position", "insert_at", "read_is_put"),
    [(1, ", q", True), (0, ", q", True), (-1, "", True), (-1, ", q", False), (-2, "", False)],
    ids=["at-1", "at-0", "appended-read-last", "inserted-at-minus-1", "appended-read-minus-2"],
)
def test_a_read_of_what_was_just_put_is_the_value(position, insert_at, read_is_put):
    model = parse(READ_BACK.format(position=position, insert_at=insert_at))
    lowered, _ = lower_tensor_form(model)
    got_producer = {o: n.op_type for n in lowered.graph.node for o in n.output}.get("got")
    assert (got_producer in (None, "Identity")) == read_is_put, got_producer
    for rows in (0, 1, 3):
        fed = feeds(rows, 0)
        del fed["p"]
        total = rows + 1
        if -total <= position < total and (insert_at == "" or -rows <= position <= rows):
            assert_same_outputs(model, lowered, fed)
        else:
            assert_both_fail(model, lowered, fed)


# -- assignment in the two-tensor layouts (ragged: elements that differ in their first dim) ---

RAGGED_ASSIGN = """
agraph (float[N,2,3] x, float[K,3] r, int64 p) => (float[?,3] y, int64 n, float[?,3] first) {{
    s = SplitToSequence <axis=0, keepdims=0> (x)
    {position}
    e = SequenceErase (s, q)
    s2 = SequenceInsert (e, r, q)
    y = ConcatFromSequence <axis=0> (s2)
    n = SequenceLength (s2)
    zero = Constant <value=int64 {{0}}> ()
    first = SequenceAt (s2, zero)
}}"""


@pytest.mark.parametrize(
    "position",
    ["q = Constant <value=int64 {1}> ()", "q = Identity (p)"],
    ids=["constant", "run-time"],
)
def test_a_ragged_assignment_splices_the_data_and_scatters_the_sizes(position):
    """`xs[1] = r` on a list of [2, 3] elements, r of [K, 3]: the unbind is ragged (rows of
    one [N * 2, 3] tensor), the assignment one splice and one ScatterElements on the sizes
    (the 1-D table); a run-time position that may be negative is an erase and an insert."""
    model = parse(RAGGED_ASSIGN.format(position=position))
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} == {"ragged"}
    counts = op_counts(lowered)
    assert ("ScatterElements" in counts) == position.startswith("q = Constant")
    assert "ScatterND" not in counts
    rng = np.random.default_rng(11)
    for rows in (0, 1, 2, 4):
        for k in (0, 1, 3):
            for p in (-3, -1, 0, 1, 2):
                fed = {
                    "x": rng.standard_normal((rows, 2, 3)).astype(np.float32),
                    "r": rng.standard_normal((k, 3)).astype(np.float32),
                    "p": np.array(p, np.int64),
                }
                assert_same_or_both_fail(model, lowered, fed)


# -- a pop from a ragged or flat list: the last element from the total back ----------------------


def _pop_model(kind: str) -> onnx.ModelProto:
    if kind == "flat":  # elements that differ in both dims
        return parse(
            """
agraph (float[2,2] x, float[1,3] y, float[3,1] z, int64 pops) => (float[?] got) {
    s = SequenceConstruct (x, y, z)
    t = Constant <value=bool {1}> ()
    acc0 = Constant <value=float[1] {0}> ()
    s2, got = Loop (pops, t, s, acc0) <body = g (int64 i, bool c, seq(float[?,?]) xs, float[?] a)
                                              => (bool c2, seq(float[?,?]) xs2, float[?] a2) {
        minus_one = Constant <value=int64 {-1}> ()
        e = SequenceAt (xs, minus_one)
        xs2 = SequenceErase (xs)
        flat_shape = Constant <value=int64[1] {-1}> ()
        row = Reshape (e, flat_shape)
        a2 = Concat <axis=0> (a, row)
        c2 = Identity (c)
    }>
}"""
        )
    return parse(
        """
agraph (float[2,3] x, float[1,3] y, float[K,3] z, int64 pops) => (float[?,3] got) {
    s = SequenceConstruct (x, y, z)
    t = Constant <value=bool {1}> ()
    acc0 = Constant <value=float[1,3] {0, 0, 0}> ()
    s2, got = Loop (pops, t, s, acc0) <body = g (int64 i, bool c, seq(float[?,3]) xs,
                                                 float[?,3] a)
                                              => (bool c2, seq(float[?,3]) xs2, float[?,3] a2) {
        minus_one = Constant <value=int64 {-1}> ()
        e = SequenceAt (xs, minus_one)
        xs2 = SequenceErase (xs)
        a2 = Concat <axis=0> (a, e)
        c2 = Identity (c)
    }>
}"""
    )


@pytest.mark.parametrize("kind", ["flat", "ragged"])
def test_a_pop_reads_the_last_element_without_a_cumsum(kind):
    model = _pop_model(kind)
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes if node.op_type == "SequenceErase"} == {kind}
    body = next(n for n in lowered.graph.node if n.op_type == "Loop").attribute[0].g
    assert "CumSum" not in {node.op_type for node in body.node}
    rng = np.random.default_rng(2)
    if kind == "flat":
        shapes = (("x", (2, 2)), ("y", (1, 3)), ("z", (3, 1)))
        fed = {n: rng.standard_normal(k).astype(np.float32) for n, k in shapes}
    else:
        fed = {
            "x": rng.standard_normal((2, 3)).astype(np.float32),
            "y": rng.standard_normal((1, 3)).astype(np.float32),
            "z": np.zeros((0, 3), np.float32),  # an empty element among them
        }
    for pops in (0, 1, 2, 3):
        assert_same_outputs(model, lowered, {**fed, "pops": np.array(pops, np.int64)})
    assert_both_fail(model, lowered, {**fed, "pops": np.array(4, np.int64)})  # popped empty


# a cache per layer grown by one row each step (GPT-2's past keys): xs[i] = cat(xs[i], r)
GROW_EACH = """
agraph (float[L,P,3] past, float[1,3] r) => (float[?,3] y, int64 n) {
    s = SplitToSequence <axis=0, keepdims=0> (past)
    n0 = SequenceLength (s)
    t = Constant <value=bool {1}> ()
    s2 = Loop (n0, t, s) <body = g (int64 i, bool c, seq(float[?,3]) xs)
                                  => (bool c2, seq(float[?,3]) xs3) {
        e = SequenceAt (xs, i)
        grown = Concat <axis=0> (e, r)
        xs2 = SequenceErase (xs, i)
        xs3 = SequenceInsert (xs2, grown, i)
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis=0> (s2)
    n = SequenceLength (s2)
}"""


def test_a_grown_cache_reads_and_splices_each_element_at_bounds_found_once():
    model = parse(GROW_EACH)
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} - {"direct"} == {"ragged"}
    body = next(n for n in lowered.graph.node if n.op_type == "Loop").attribute[0].g
    counts = Counter(node.op_type for node in body.node)
    # the read and the splice share Gather(starts, [i]) and Gather(ends, [i]), and the sizes'
    # ScatterElements the same [i]: one Reshape of i per iteration, no Unsqueeze of the table
    # (made in every iteration: the list is carried)
    assert counts["Gather"] == 2 and counts["ScatterElements"] == 1 and "Split" not in counts
    assert counts["Reshape"] == 1 and "Unsqueeze" not in counts and "ScatterND" not in counts
    rng = np.random.default_rng(4)
    for layers, rows in ((0, 2), (1, 0), (3, 2)):
        fed = {
            "past": rng.standard_normal((layers, rows, 3)).astype(np.float32),
            "r": rng.standard_normal((1, 3)).astype(np.float32),
        }
        if layers == 0:  # nothing to concatenate: fails in onnxruntime only (see forms.py)
            continue
        assert_same_outputs(model, lowered, fed)


# a cache updated the way transformers' DynamicCache.update does it, per layer i: append while
# the list is shorter (the prompt's step), else grow element i; attention reads element i
CACHE_UPDATE = """
agraph (float[L,P,3] past, float[1,3] r, int64 layers) => (float[?,3] y, int64 n) {
    s = SplitToSequence <axis=0, keepdims=0> (past)
    t = Constant <value=bool {1}> ()
    z = Constant <value=float[1,3] {0,0,0}> ()
    s2, acc = Loop (layers, t, s, z) <body = g (int64 i, bool c, seq(float[?,3]) xs,
                                                   float[1,3] a) => (bool c2,
                                                   seq(float[?,3]) xs3, float[1,3] a2) {
        n0 = SequenceLength (xs)
        short = LessOrEqual (n0, i)
        xs3 = If (short) <
            then_branch = th () => (seq(float[?,3]) appended) {
                appended = SequenceInsert (xs, r)
            },
            else_branch = el () => (seq(float[?,3]) assigned) {
                e = SequenceAt (xs, i)
                grown = Concat <axis=0> (e, r)
                xs2 = SequenceErase (xs, i)
                assigned = SequenceInsert (xs2, grown, i)
            }>
        k = SequenceAt (xs3, i)
        zero1 = Constant <value=int64[1] {0}> ()
        summed = ReduceSum <keepdims=1> (k, zero1)
        a2 = Add (a, summed)
        c2 = Identity (c)
    }>
    cat = ConcatFromSequence <axis=0> (s2)
    y = Concat <axis=0> (cat, acc)
    n = SequenceLength (s2)
}"""


def test_a_cache_updated_in_a_branch_reads_at_the_iteration_number_without_columns():
    """The list is carried, so its table is made in every iteration (in the body, or in the
    branch after an append): its bounds at i are Gathers at one Reshape of i shared by the
    reads and the sizes' ScatterElements, not [n, 1] columns made by two Unsqueezes each time."""
    model = parse(CACHE_UPDATE)
    lowered, _report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    kinds = op_counts(lowered)
    assert "Unsqueeze" not in kinds and "ScatterND" not in kinds, kinds
    assert kinds["ScatterElements"] == 1, kinds
    rng = np.random.default_rng(5)
    for layers, rows, steps in ((0, 2, 2), (2, 1, 2), (2, 0, 3), (3, 2, 1), (1, 2, 3)):
        fed = {
            "past": rng.standard_normal((layers, rows, 3)).astype(np.float32),
            "r": rng.standard_normal((1, 3)).astype(np.float32),
            "layers": np.array(steps, np.int64),
        }
        assert_same_or_both_fail(model, lowered, fed)


# -- two lists over one tensor -------------------------------------------------------------------

# x split into chunks of k (x itself with a table of chunk sizes) and into its scalars (x itself
# stacked): one data tensor, two lists of different lengths, each edited at a run-time position
TWO_LISTS_OF_ONE_TENSOR = """
agraph ({dtype}[N] x, int64 k, {dtype}[2] a, int64 p, {dtype} v, int64 q) => ({dtype}[?,?] chunks,
                                                                         {dtype}[?] scalars) {{
    s1 = SplitToSequence <axis=-1> (x, k)
    s1b = SequenceInsert (s1, a, p)
    chunks = ConcatFromSequence <axis=-1, new_axis=1> (s1b)
    s2 = SplitToSequence <axis=-1, keepdims=0> (x)
    s2b = SequenceInsert (s2, v, q)
    scalars = ConcatFromSequence <axis=-1, new_axis=1> (s2b)
}}"""


@pytest.mark.parametrize("dtype", ["float", "int32", "double"])
def test_two_lists_over_one_tensor_keep_their_own_lengths(dtype):
    """Each list's length (its table) is its own, though both lists' data is x: the scalars'
    insert cut x by the chunks' count and failed where the original runs."""
    model = parse(TWO_LISTS_OF_ONE_TENSOR.format(dtype=dtype))
    lowered, _ = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    np_type = {"float": np.float32, "int32": np.int32, "double": np.float64}[dtype]
    fixed = {"k": np.array(2), "a": np.array([4, 5], np_type), "p": np.array(1)}
    for n in (0, 5, 6):  # 5: chunks of 2 and 1, which the original cannot stack either
        x = np.arange(n).astype(np_type) - 3
        for q in (-n - 1, -n, -1, 0, 2, n, n + 1):  # -n - 1 and n + 1 out of range: both fail
            feeds = {"x": x, "v": np.array(9, np_type), "q": np.array(q), **fixed}
            assert_same_or_both_fail(model, lowered, feeds)
    for q in (-6, -1, 0, 3, 6):  # the scalars' own positions, past the chunks' count of 3
        x = np.array([-1, -7, 2, -2, 3, 8], np_type)
        assert_same_outputs(
            model, lowered, {"x": x, "v": np.array(9, np_type), "q": np.array(q), **fixed}
        )
