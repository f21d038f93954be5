"""Lists whose elements have a dim of one (`[1, 3]` states, `x[i:i+1]` rows) keep the list axis
in that dim's place (`seqlower.lists.unit_rows`): a push is one Concat (no Unsqueeze), a read
one Gather at `[p]` (no Squeeze), `torch.cat(xs, 0)` the data itself (no Reshape). Each model
is lowered by the tensor form alone (no pattern rule), and run against the original under
onnxruntime: empty lists, loops that run no iteration, negative and out-of-range positions,
int64 and float16 elements. Dims that are not provably one keep the list axis first."""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    lower_tensor_form,
    op_counts,
    parse,
    proto_graphs,
    rules_without,
    run_ort,
    stored_data_sets,
)

from seqlower.lists import find_lists
from seqlower.passes import NormalizePass

_TYPES = {"float": np.float32, "float16": np.float16, "int64": np.int64}


def _appends(elem: str = "float", row: str = "[1,3]", stack: str = "axis = 0") -> onnx.ModelProto:
    """`xs = [x[[0]]]; for i in range(m): xs.append(x[[i]] * 2)` (rows [1, 3] by a Gather at a
    1-D index: shape inference proves the dim of one); then `xs[p]`, `len(xs)` and the
    concatenation (or stack) of xs."""
    return parse(
        f"""g (int64 m, int64 p, {elem}[N,3] x) => ({elem} y, {elem}[?,?] at, int64 n) {{
    t = Constant<value = bool {{1}}>()
    zero1 = Constant<value = int64[1] {{0}}>()
    first = Gather(x, zero1)
    s0 = SequenceConstruct(first)
    s = Loop(m, t, s0) <body = build (int64 i, bool c, seq({elem}) acc)
                              => (bool c1, seq({elem}) grown) {{
        c1 = Identity(c)
        axes = Constant<value = int64[1] {{0}}>()
        b = Unsqueeze(i, axes)
        piece = Gather(x, b)
        twice = Add(piece, piece)
        grown = SequenceInsert(acc, twice)
    }}>
    y = ConcatFromSequence<{stack}>(s)
    at = SequenceAt(s, p)
    n = SequenceLength(s)
}}"""
    )


def _body(model: onnx.ModelProto | onnx.GraphProto) -> onnx.GraphProto:
    graph = model.graph if isinstance(model, onnx.ModelProto) else model
    loop = next(n for n in graph.node if n.op_type == "Loop")
    return next(a.g for a in loop.attribute if a.name == "body")


def _units(model: onnx.ModelProto) -> list[int | None]:
    """The unit axis of each list `find_lists` plans (None: the list axis is a new axis 0),
    on the model as normalized (shapes inferred)."""
    normalized = ir.from_proto(model)
    NormalizePass()(normalized)
    plans = find_lists(normalized, 18)
    return [plan.layout.unit for plan in plans if plan.layout is not None]


def _feeds(dtype: type, m: int, p: int, rows: int = 6) -> dict[str, np.ndarray]:
    x = (np.arange(rows * 3) - 4).reshape(rows, 3).astype(dtype)
    return {"m": np.array(m, np.int64), "p": np.array(p, np.int64), "x": x}


def test_a_push_is_one_concat_and_the_concatenation_is_the_data():
    lowered, _ = lower_tensor_form(_appends())
    assert _units(_appends()) == [0]
    body = [n.op_type for n in _body(lowered).node]
    assert body[body.index("Gather") :] == ["Gather", "Add", "Concat"]  # no Unsqueeze
    loop = next(n for n in lowered.graph.node if n.op_type == "Loop")
    assert loop.output[0] == "y"  # the concatenation is the data: no Reshape
    counts = op_counts(lowered)
    assert counts["Squeeze"] == 0 and counts["Loop"] == 1
    # the read keeps the dim of one: a Gather at [p] (one Reshape of p) along the list axis
    (read,) = [n for n in lowered.graph.node if n.op_type == "Gather" and "at" in n.output]
    index = next(n for n in lowered.graph.node if read.input[1] in n.output)
    assert read.input[0] == "y" and index.op_type == "Reshape" and index.input[0] == "p"


@pytest.mark.parametrize("elem", list(_TYPES))
@pytest.mark.parametrize(("m", "p"), [(4, 2), (4, -1), (4, -5), (0, 0), (0, -1), (1, 1)])
def test_appended_rows_read_counted_and_concatenated(elem, m, p):
    model = _appends(elem)
    lowered, _ = lower_tensor_form(model)
    got = assert_same_outputs(model, lowered, _feeds(_TYPES[elem], m, p))
    assert got[0].shape == (m + 1, 3) and got[1].shape == (1, 3) and got[2] == m + 1


@pytest.mark.parametrize(("m", "p"), [(4, 5), (4, -6), (0, 1), (0, -2)])
def test_a_read_outside_the_list_fails_in_both(m, p):
    model = _appends()
    lowered, _ = lower_tensor_form(model)
    assert_both_fail(model, lowered, _feeds(np.float32, m, p))


@pytest.mark.parametrize(
    ("stack", "emitted", "shape"),
    [
        ("axis = 1", "Reshape", (1, 15)),  # [1, 3] rows joined along their 3s
        ("axis = 0, new_axis = 1", "Unsqueeze", (5, 1, 3)),  # torch.stack(xs, 0)
        ("axis = 1, new_axis = 1", "Unsqueeze", (1, 5, 3)),  # torch.stack(xs, 1)
        ("axis = -1, new_axis = 1", "Transpose", (1, 3, 5)),  # torch.stack(xs, -1)
        ("axis = -2", "Reshape", (5, 3)),
    ],
)
def test_stacks_and_joins_along_other_axes(stack, emitted, shape):
    model = _appends(stack=stack)
    lowered, _ = lower_tensor_form(model)
    assert emitted in [n.op_type for n in lowered.graph.node]
    assert "Transpose" not in [n.op_type for n in lowered.graph.node] or emitted == "Transpose"
    got = assert_same_outputs(model, lowered, _feeds(np.float32, 4, 0))
    assert got[0].shape == shape


# rows [2, 1, 3] (`x[:, [i]]` of a [2, N, 3] input) joined along axis 1: the list axis is 1
COLUMNS = parse(
    """g (int64 m, float[2,N,3] x) => (float[2,?,3] y) {
    t = Constant<value = bool {1}>()
    s0 = SequenceEmpty<dtype = 1>()
    s = Loop(m, t, s0) <body = build (int64 i, bool c, seq(float) acc)
                              => (bool c1, seq(float) grown) {
        c1 = Identity(c)
        axes = Constant<value = int64[1] {0}>()
        b = Unsqueeze(i, axes)
        piece = Gather<axis = 1>(x, b)
        grown = SequenceInsert(acc, piece)
    }>
    y = ConcatFromSequence<axis = 1>(s)
}"""
)


@pytest.mark.parametrize("m", [0, 1, 3])
def test_a_dim_of_one_inside_the_element_takes_the_list_axis(m):
    lowered, _ = lower_tensor_form(COLUMNS)
    assert _units(COLUMNS) == [1]
    assert not {"Reshape", "Unsqueeze", "Transpose"} & {n.op_type for n in lowered.graph.node}
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    (got,) = run_ort(lowered, {"m": np.array(m), "x": x})
    np.testing.assert_array_equal(got, x[:, :m])
    if m:  # the original's concatenation of no element fails
        assert_same_outputs(COLUMNS, lowered, {"m": np.array(m), "x": x})


# `xs[2] = xs[2] * 3` on the rows of `x.split(1)` (chunks [1, 3] kept): the split is its input
ASSIGN = parse(
    """g (float[N,3] x) => (float[?,3] y) {
    s = SplitToSequence<axis = 0>(x)
    p = Constant<value = int64 {2}>()
    e = SequenceAt(s, p)
    three = Constant<value = float {3}>()
    f = Mul(e, three)
    r = SequenceErase(s, p)
    w = SequenceInsert(r, f, p)
    y = ConcatFromSequence<axis = 0>(w)
}"""
)


def test_an_assignment_is_one_scatter_into_the_split_input():
    lowered, _ = lower_tensor_form(ASSIGN)
    assert _units(ASSIGN) == [0]
    kinds = [n.op_type for n in lowered.graph.node]
    assert kinds.count("ScatterND") == 1 and "Unsqueeze" not in kinds and "Split" not in kinds
    scatter = next(n for n in lowered.graph.node if n.op_type == "ScatterND")
    assert scatter.input[0] == "x"


@pytest.mark.parametrize("rows", [3, 5])
def test_an_assignment_gives_the_same_rows(rows):
    lowered, _ = lower_tensor_form(ASSIGN)
    x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    assert_same_outputs(ASSIGN, lowered, {"x": x})


@pytest.mark.parametrize("rows", [0, 2])
def test_an_assignment_outside_the_list_fails_in_both(rows):
    lowered, _ = lower_tensor_form(ASSIGN)
    x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    assert_both_fail(ASSIGN, lowered, {"x": x})


# the rows built in a loop are a sequence-typed output: one SplitToSequence along the list axis
RETURNED = parse(
    """g (int64 m, float[N,3] x) => (seq(float) s) {
    t = Constant<value = bool {1}>()
    zero1 = Constant<value = int64[1] {0}>()
    first = Gather(x, zero1)
    s0 = SequenceConstruct(first)
    s = Loop(m, t, s0) <body = build (int64 i, bool c, seq(float) acc)
                              => (bool c1, seq(float) grown) {
        c1 = Identity(c)
        axes = Constant<value = int64[1] {0}>()
        b = Unsqueeze(i, axes)
        piece = Gather(x, b)
        grown = SequenceInsert(acc, piece)
    }>
}"""
)


@pytest.mark.parametrize("m", [0, 1, 3])
def test_returned_rows_are_split_into_chunks_of_one(m):
    assert _units(RETURNED) == [0]
    lowered, _ = lower_tensor_form(RETURNED)
    counts = op_counts(lowered)
    assert counts["SplitToSequence"] == 1 and counts["SequenceInsert"] == 0
    x = np.arange(18, dtype=np.float32).reshape(6, 3)
    (got,) = assert_same_outputs(RETURNED, lowered, {"m": np.array(m), "x": x})
    assert [g.shape for g in got] == [(1, 3)] * (m + 1)


# -- refusals -------------------------------------------------------------------------------

# rows [B, 3] of a [N, B, 3] input: B may be 1 at run time, but is not provably 1
UNPROVED = parse(
    """g (int64 m, float[N,B,3] x) => (float[?,?] y) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = int64 {0}>()
    first = Gather(x, zero)
    s0 = SequenceConstruct(first)
    s = Loop(m, t, s0) <body = build (int64 i, bool c, seq(float) acc)
                              => (bool c1, seq(float) grown) {
        c1 = Identity(c)
        row = Gather(x, i)
        grown = SequenceInsert(acc, row)
    }>
    y = ConcatFromSequence<axis = 0>(s)
}"""
)


@pytest.mark.parametrize("b", [1, 2])
def test_a_dim_not_provably_one_keeps_the_list_axis_first(b):
    lowered, _ = lower_tensor_form(UNPROVED)
    assert _units(UNPROVED) == [None]
    assert "Unsqueeze" in [n.op_type for n in _body(lowered).node]  # [n, B, 3]
    x = np.arange(4 * b * 3, dtype=np.float32).reshape(4, b, 3)
    assert_same_outputs(UNPROVED, lowered, {"m": np.array(3), "x": x})


# `hs` is pushed once per outer iteration and read at j in a loop over the nodes before: each
# read would cost a [j] per inner iteration, more than the push saves
READ_IN_A_DEEPER_LOOP = parse(
    """g (int64 m, float[N,3] x) => (float[?,3] y, float[1,3] z) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = float[1,3] {0, 0, 0}>()
    s0 = SequenceEmpty<dtype = 1>()
    s, z = Loop(m, t, s0, zero) <body = outer (int64 i, bool c, seq(float) hs, float[1,3] z0)
                              => (bool c1, seq(float) hs2, float[1,3] total) {
        c1 = Identity(c)
        total = Loop(i, t, zero) <body = inner (int64 j, bool d, float[1,3] acc)
                                         => (bool d1, float[1,3] more) {
            d1 = Identity(d)
            h = SequenceAt(hs, j)
            more = Add(acc, h)
        }>
        axes = Constant<value = int64[1] {0}>()
        b = Unsqueeze(i, axes)
        xi = Gather(x, b)
        hs2 = SequenceInsert(hs, xi)
    }>
    y = ConcatFromSequence<axis = 0>(s)
}"""
)


def test_reads_in_a_deeper_loop_than_the_pushes_keep_the_list_axis_first():
    assert _units(READ_IN_A_DEEPER_LOOP) == [None]
    lowered, _ = lower_tensor_form(READ_IN_A_DEEPER_LOOP)
    inner = _body(_body(lowered))
    assert [n.op_type for n in inner.node].count("Gather") == 1  # Gather(data, j): no [j]
    assert "Reshape" not in [n.op_type for n in inner.node]
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    for m in (1, 5):  # (none: the original's concatenation of no element fails)
        assert_same_outputs(READ_IN_A_DEEPER_LOOP, lowered, {"m": np.array(m), "x": x})


STRINGS = parse(
    """g (int64 p, string[N,1] x) => (string[1,1] y) {
    s = SplitToSequence<axis = 0>(x)
    y = SequenceAt(s, p)
}"""
)


def test_strings_keep_the_list_axis_first():
    assert _units(STRINGS) == [None]


def test_a_split_that_squeezes_its_chunks_keeps_the_list_axis_first():
    squeezed = parse(
        """g (int64 p, float[N,1,3] x) => (float[1,3] y) {
    s = SplitToSequence<axis = 0, keepdims = 0>(x)
    y = SequenceAt(s, p)
}"""
    )
    assert _units(squeezed) == [None]


def test_every_graph_of_a_lowering_is_free_of_sequence_ops():
    lowered, _ = lower_tensor_form(READ_IN_A_DEEPER_LOOP)
    for graph in proto_graphs(lowered.graph):
        assert not any(n.op_type.startswith("Sequence") for n in graph.node)


# -- an export --------------------------------------------------------------------------------

TREE = pathlib.Path(__file__).parent.parent / "fixtures" / "torch_wild" / "child_sum_tree_lstm"


def test_a_tree_lstm_pushes_its_children_s_states_without_unsqueeze():
    """dasguptar's child-sum tree LSTM: the children's lists (`[zeros(1, 3)]`, pushed from the
    states of the nodes done, summed by `torch.cat(..., 0)`) take unit rows; the lists of the
    states, read at j in the loop over the nodes before, keep the list axis first. The carried
    rows of the inner loop keep their 3 columns in the outer loop (shape inference declares a
    nested Loop's carried outputs). (By default the inner loop goes: the states it reads are
    proved in range, so `loop-concat-to-scan` makes its appends one Compress; it is kept here to
    see the lists' form.)"""
    model = onnx.load(TREE / "model.onnx")
    by_default, _ = lower(model, target="generic")
    assert "Loop" not in [n.op_type for n in _body(by_default).node]
    lowered, _ = lower(model, target="generic", rules=rules_without("loop-concat-to-scan"))
    outer = _body(lowered)
    inner = _body(outer)
    branch = next(a.g for n in inner.node if n.op_type == "If" for a in n.attribute)
    assert [n.op_type for n in branch.node] == ["Gather", "Concat", "Gather", "Concat"]
    assert "Reshape" not in [n.op_type for n in outer.node]  # the cat is the carried rows
    carried = list(inner.input[2:])
    assert all(
        [d.dim_value or None for d in v.type.tensor_type.shape.dim] == [None, 3] for v in carried
    )
    for name, feeds, want in stored_data_sets(TREE, model):
        got = assert_same_outputs(model, lowered, feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5, err_msg=name)
