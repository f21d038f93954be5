"""`LoopShapes`: which Loop-body values keep one shape in every iteration (what a scan output
needs), and which carried tensors keep the shape of their initial value."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import (
    assert_both_fail,
    assert_same_outputs,
    lower,
    parse,
    sequence_op_count,
    torch_pad_nodes,
)

from seqlower.analysis import symbolic as sym
from seqlower.analysis.loop_shapes import INVARIANT, LoopShapes
from seqlower.analysis.static_values import StaticValues
from seqlower.analysis.symbolic import symbol
from seqlower.passes import NormalizePass


def _analyse(body: str, inputs: str, before: str = "", carried: str = "") -> LoopShapes:
    text = f"""g ({inputs}) => (float y) {{
        m = Constant<value = int64 {{3}}>()
        t = Constant<value = bool {{1}}>()
        {before}
        y{", h" if carried else ""} = Loop(m, t{", " + carried if carried else ""}) <body = body (
                int64 i, bool cond{", float h_in" if carried else ""})
                => (bool c2{", float h_out" if carried else ""}, float out) {{
            c2 = Identity(cond)
            {body}
        }}>
    }}"""
    model = ir.from_proto(parse(text))
    NormalizePass()(model)
    (loop,) = [n for n in model.graph if n.op_type == "Loop"]
    return LoopShapes(loop, StaticValues())


def _value(shapes: LoopShapes, name: str) -> ir.Value:
    for node in shapes.body:
        for output in node.outputs:
            if output.name == name:
                return output
    raise KeyError(name)


def test_a_recurrent_state_keeps_its_shape():
    """h0 = zeros([B, 6]) computed from x's shape; h = tanh(x[t] @ W + h @ U)."""
    shapes = _analyse(
        inputs="float[T,B,4] x, float[4,6] w, float[6,6] u",
        before="""shape_x = Shape(x)
        one = Constant<value = int64[1] {1}>()
        b = Gather(shape_x, one)
        six = Constant<value = int64[1] {6}>()
        dims = Concat<axis = 0>(b, six)
        h0 = ConstantOfShape(dims)""",
        carried="h0",
        body="""xt = Gather<axis = 0>(x, i)
            a = MatMul(xt, w)
            r = MatMul(h_in, u)
            s = Add(a, r)
            h_out = Tanh(s)
            out = Identity(h_out)""",
    )
    assert shapes.shape(_value(shapes, "out")) == (symbol(("param", "B")), 6)
    assert [v.name for v in shapes.invariant_carried()] == ["h_in"]


def test_a_growing_carried_tensor_is_not_invariant():
    shapes = _analyse(
        inputs="float[2] x",
        carried="x",
        body="""h_out = Concat<axis = 0>(h_in, x)
            out = Neg(h_out)""",
    )
    out = _value(shapes, "out")
    assert shapes.shape(out) == (None,)  # its rank stays; its length grows
    assert shapes.reason(out) == "the loop-carried value 'h_in' may change shape between iterations"
    assert shapes.invariant_carried() == []


def test_a_carried_tensor_whose_rows_change_keeps_its_rank_and_columns():
    """A decoder's state: h = emb(prompt) of shape [T, 6], then h = emb(token) of [1, 6] in
    every later step: the assumption (T, 6) is widened to (None, 6), not dropped, so what is
    computed from h keeps its static dims."""
    shapes = _analyse(
        inputs="float[T,6] x, float[6,4] w",
        carried="x",
        body="""axes = Constant<value = int64[1] {0}>()
            h_out = ReduceSum<keepdims = 1>(h_in, axes)
            out = MatMul(h_in, w)""",
    )
    h_in = shapes.body.inputs[2]
    assert shapes.assumed[h_in] == (None, 6)
    assert shapes.shape(_value(shapes, "out")) == (None, 4)
    assert shapes.shape(_value(shapes, "h_out")) == (1, 6)
    assert shapes.invariant_carried() == []  # its rows change: no one shape
    assert not shapes.is_invariant(_value(shapes, "out"))
    assert shapes.reason(_value(shapes, "out")) == (
        "the loop-carried value 'h_in' may change shape between iterations"
    )


def test_a_carried_tensor_whose_rank_changes_has_no_shape():
    shapes = _analyse(
        inputs="float[T,6] x",
        carried="x",
        body="""axes = Constant<value = int64[1] {0}>()
            h_out = Unsqueeze(h_in, axes)
            out = Neg(h_in)""",
    )
    assert shapes.assumed[shapes.body.inputs[2]] is None
    assert shapes.shape(_value(shapes, "out")) is None
    assert shapes.invariant_carried() == []


def test_uneven_chunks_of_an_outer_split_are_not_invariant():
    shapes = _analyse(
        inputs="float[N,3] x",
        before="""two = Constant<value = int64 {2}>()
        parts = SplitToSequence<axis = 0>(x, two)""",
        body="""e = SequenceAt(parts, i)
            out = Relu(e)""",
    )
    out = _value(shapes, "out")
    # the chunks share their columns; their rows differ (the last chunk is smaller)
    assert shapes.shape(out) == (None, 3)
    assert not shapes.is_invariant(out)
    assert "'e' is an element of a sequence whose elements may differ in shape" in shapes.reason(
        out
    )


def test_even_chunks_and_unbound_rows_are_invariant():
    shapes = _analyse(
        inputs="float[6,3] x, float[N,3] z",
        before="""two = Constant<value = int64 {2}>()
        parts = SplitToSequence<axis = 0>(x, two)
        rows = SplitToSequence<axis = 0, keepdims = 0>(z)""",
        body="""e = SequenceAt(parts, i)
            r = SequenceAt(rows, i)
            out = Add(e, r)""",
    )
    assert shapes.shape(_value(shapes, "e")) == (2, 3)
    assert shapes.shape(_value(shapes, "r")) == (3,)
    assert shapes.shape(_value(shapes, "out")) == (2, 3)


def test_shapes_computed_from_the_iteration_number_vary_but_loop_invariant_code_does_not():
    shapes = _analyse(
        inputs="float[8] x, int64[1] k",
        body="""zero = Constant<value = int64[1] {0}>()
            axes = Constant<value = int64[1] {0}>()
            fixed = Slice(x, zero, k, axes)
            one = Constant<value = int64 {1}>()
            end = Add(i, one)
            stop = Unsqueeze(end, axes)
            moving = Slice(x, zero, stop, axes)
            out = Identity(moving)""",
    )
    fixed = shapes.shape(_value(shapes, "fixed"))
    assert isinstance(fixed, tuple) and len(fixed) == 1 and not isinstance(fixed[0], int)
    assert shapes.shape(_value(shapes, "moving")) == (None,)  # one dim, its size changes
    assert not shapes.is_invariant(_value(shapes, "moving"))


def test_unknown_operators_on_invariant_values_are_invariant():
    shapes = _analyse(
        inputs="float[4] x",
        body="""positive = Greater(x, x)
            where = NonZero(positive)
            out = Identity(x)""",
    )
    assert shapes.shape(_value(shapes, "where")) == INVARIANT


def test_constants_in_the_body_keep_a_carried_shape():
    """x = x * 0.5: the Constant has a known shape, so the carry keeps x's shape."""
    shapes = _analyse(
        inputs="float[A,3] x",
        carried="x",
        body="""half = Constant<value = float {0.5}>()
            h_out = Mul(h_in, half)
            out = Identity(h_out)""",
    )
    assert shapes.shape(_value(shapes, "out")) == (symbol(("param", "A")), 3)
    assert [v.name for v in shapes.invariant_carried()] == ["h_in"]


def test_slice_bounds_are_symbolic_and_bounded_by_the_trip_count():
    """With i < M = 3 = dim 0 of x: Slice(x, i, i + 1) has one row; Slice(x, i, i + 2) may have
    one or two."""
    shapes = _analyse(
        inputs="float[3,4] x",
        body="""axes = Constant<value = int64[1] {0}>()
            one = Constant<value = int64 {1}>()
            two = Constant<value = int64 {2}>()
            start = Unsqueeze(i, axes)
            next = Add(i, one)
            end1 = Unsqueeze(next, axes)
            after = Add(i, two)
            end2 = Unsqueeze(after, axes)
            row = Slice(x, start, end1, axes)
            rows = Slice(x, start, end2, axes)
            out = Identity(row)""",
    )
    assert shapes.shape(_value(shapes, "row")) == (1, 4)
    assert shapes.shape(_value(shapes, "rows")) == (None, 4)
    assert not shapes.is_invariant(_value(shapes, "rows"))
    assert "depends on 'start', whose value changes" in shapes.reason(_value(shapes, "rows"))


def test_positions_read_from_a_range_are_bounded_by_its_limit():
    """What at-of-chunks emits for chunks of 1 along a symbolic dim N."""
    shapes = _analyse(
        inputs="float[N,4] x",
        body="""zero = Constant<value = int64 {0}>()
            one = Constant<value = int64 {1}>()
            shape = Shape(x)
            n = Gather(shape, zero)
            table = Range(zero, n, one)
            q = Gather(table, i)
            end = Add(q, one)
            axes = Constant<value = int64[1] {0}>()
            one_dim = Constant<value = int64[1] {1}>()
            starts = Reshape(q, one_dim)
            ends = Reshape(end, one_dim)
            out = Slice(x, starts, ends, axes)""",
    )
    assert shapes.shape(_value(shapes, "out")) == (1, 4)


def test_a_slice_of_an_unknown_shape_with_moving_bounds_may_change():
    """Fuzz seed 1076: the sliced value's shape is not known at all (INVARIANT), and the Slice
    ends at i + 1: its shape changes between iterations."""
    shapes = _analyse(
        inputs="float[] u",
        body="""zero = Constant<value = int64[1] {0}>()
            one = Constant<value = int64 {1}>()
            next = Add(i, one)
            stop = Unsqueeze(next, zero)
            out = Slice(u, zero, stop, zero)""",
    )
    u = (
        next(n for n in shapes.body.graph if n.op_type == "Identity" and n.inputs[0].name == "x")
        if False
        else None
    )
    assert u is None
    out = _value(shapes, "out")
    assert not shapes.is_invariant(out)
    assert "depends on 'stop', whose value changes" in shapes.reason(out)


def test_a_broadcast_with_a_moving_dim_may_change():
    """Expand(x, [i + 1, 1]) with x [N, 3]: the first dim is broadcast(N, i + 1), which moves."""
    shapes = _analyse(
        inputs="float[N,3] x",
        body="""one = Constant<value = int64 {1}>()
            next = Add(i, one)
            axes = Constant<value = int64[1] {0}>()
            rows = Unsqueeze(next, axes)
            ones = Constant<value = int64[1] {1}>()
            target = Concat<axis = 0>(rows, ones)
            out = Expand(x, target)""",
    )
    assert shapes.shape(_value(shapes, "out")) == (None, 3)


# `F.pad(e, (0, 0, 0, L - e.size(0)))` as TorchScript exports it
_TORCH_PAD = """e = SequenceAt(parts, i)
            shape_e = Shape(e)
            zero = Constant<value = int64 {0}>()
            rows = Gather<axis = 0>(shape_e, zero)
            extra = Sub(length, rows)
            """ + torch_pad_nodes("e", "extra", "out")


def test_padding_each_uneven_chunk_to_a_fixed_length_keeps_one_shape():
    """The rows of an element differ from one iteration to the next, but `rows + (L - rows)`
    does not: the padded elements can be stacked."""
    shapes = _analyse(
        inputs="float[N,3] x, int64 length",
        before="""two = Constant<value = int64 {2}>()
        parts = SplitToSequence<axis = 0>(x, two)""",
        body=_TORCH_PAD,
    )
    assert shapes.content(_value(shapes, "reversed")) == (0, _only_content(shapes, "extra"), 0, 0)
    assert shapes.content(_value(shapes, "flattened")) == (0, 0, _only_content(shapes, "extra"), 0)
    out = _value(shapes, "out")
    assert shapes.shape(out) == (symbol(("value", id(_input(shapes, "length")), 0)), 3)
    assert shapes.is_invariant(out)


def test_padding_each_uneven_chunk_by_a_fixed_amount_does_not():
    shapes = _analyse(
        inputs="float[N,3] x, int64 length",
        before="""two = Constant<value = int64 {2}>()
        parts = SplitToSequence<axis = 0>(x, two)""",
        body=_TORCH_PAD.replace("extra = Sub(length, rows)", "extra = Identity(length)"),
    )
    out = _value(shapes, "out")
    assert shapes.shape(out) == (None, 3)
    assert not shapes.is_invariant(out)


def _only_content(shapes: LoopShapes, name: str):  # type: ignore[no-untyped-def]
    (content,) = shapes.content(_value(shapes, name))  # type: ignore[misc]
    return content


def _input(shapes: LoopShapes, name: str) -> ir.Value:
    """An outer value the body reads."""
    for node in shapes.body:
        for value in node.inputs:
            if value is not None and value.name == name:
                return value
    raise KeyError(name)


def test_elements_of_a_list_another_loop_builds_share_what_every_append_shares():
    """`seqs.append(x[s:s + n])` in one loop; in a second loop, each element keeps 3 columns,
    and `longest` (carried out of another loop as a scalar) is fixed for the whole loop."""
    text = """g (float[T,3] x, int64[B] lengths) => (float[?,?] y) {
        t = Constant<value = bool {1}>()
        zero = Constant<value = int64 {0}>()
        shape_l = Shape(lengths)
        b = Gather<axis = 0>(shape_l, zero)
        empty = SequenceEmpty<dtype = 1>()
        end, seqs = Loop(b, t, zero, empty) <body = build (int64 i, bool c, int64 s,
                seq(float) acc) => (bool c1, int64 s2, seq(float) grown) {
            c1 = Identity(c)
            n = Gather<axis = 0>(lengths, i)
            s2 = Add(s, n)
            axis = Constant<value = int64[1] {0}>()
            from = Unsqueeze(s, axis)
            to = Unsqueeze(s2, axis)
            piece = Slice(x, from, to, axis)
            grown = SequenceInsert(acc, piece)
        }>
        longest = Loop(b, t, zero) <body = longest (int64 j, bool c, int64 m)
                => (bool c2, int64 m2) {
            c2 = Identity(c)
            e = SequenceAt(seqs, j)
            shape_e = Shape(e)
            rows = Gather<axis = 0>(shape_e, zero)
            m2 = Max(m, rows)
        }>
        y = Loop(b, t) <body = read (int64 k, bool c) => (bool c3, float[?,?] out) {
            c3 = Identity(c)
            f = SequenceAt(seqs, k)
            shape_f = Shape(f)
            rows_f = Gather<axis = 0>(shape_f, zero)
            extra = Sub(longest, rows_f)
            out = Relu(f)
        }>
    }"""
    model = ir.from_proto(parse(text))
    NormalizePass()(model)
    read = [n for n in model.graph if n.op_type == "Loop"][-1]
    shapes = LoopShapes(read, StaticValues())
    f = _value(shapes, "f")
    assert shapes.shape(f) == (None, 3)
    assert shapes.input_shape(f)[1] == 3 and shapes.varies(shapes.input_shape(f)[0])
    # `longest` is a scalar: the Loop that carries it keeps the shape of its initial 0
    extra = _value(shapes, "extra")
    assert shapes.shape(extra) == ()
    (padding,) = shapes.content(extra)  # type: ignore[misc]
    assert padding == sym.sub(
        symbol(("value", id(_input(shapes, "longest")), 0)), shapes.input_shape(f)[0]
    )


def test_resize_to_sizes_top_k_and_split_keep_one_shape_when_their_sizes_do():
    """A mask resized to a fixed size, the k best of a row and the halves of a fixed-width row
    keep one shape, whatever the element they come from; Resize by scales is not analysed."""
    shapes = _analyse(
        inputs="float[N,6] x, int64[2] hw, int64[1] k",
        before="""two = Constant<value = int64 {2}>()
        parts = SplitToSequence<axis = 0>(x, two)""",
        body="""e = SequenceAt(parts, i)
            axes01 = Constant<value = int64[2] {0, 1}>()
            e4 = Unsqueeze(e, axes01)
            lead = Constant<value = int64[2] {1, 1}>()
            sizes = Concat<axis = 0>(lead, hw)
            resized = Resize<mode = "linear">(e4, , , sizes)
            scales = Constant<value = float[4] {1, 1, 2, 2}>()
            scaled = Resize(e4, , scales)
            best, where = TopK<axis = 1>(e, k)
            halves = Constant<value = int64[2] {3, 3}>()
            left, right = Split<axis = 1>(e, halves)
            out = Relu(right)""",
    )
    param = lambda v: symbol(("value", id(_input(shapes, "hw")), v))  # noqa: E731
    assert shapes.shape(_value(shapes, "resized")) == (1, 1, param(0), param(1))
    assert shapes.is_invariant(_value(shapes, "resized"))
    assert shapes.shape(_value(shapes, "scaled")) is None
    k = symbol(("value", id(_input(shapes, "k")), 0))
    assert shapes.shape(_value(shapes, "best")) == (None, k)
    assert shapes.shape(_value(shapes, "where")) == (None, k)
    assert shapes.shape(_value(shapes, "right")) == (None, 3)


def test_rows_picked_by_changing_indices_keep_the_data_s_other_dims():
    """Gather(x, idx) with idx of a size that changes (the rows above a threshold): the picked
    dim changes, the columns of x stay; indices of unknown rank give no shape."""
    shapes = _analyse(
        inputs="float[N,4] x, float[N] score",
        body="""fi = Cast<to = 1>(i)
            above = Greater(score, fi)
            picked = NonZero(above)
            flat = Constant<value = int64[1] {-1}>()
            idx = Reshape(picked, flat)
            out = Gather<axis = 0>(x, idx)
            cols = Gather<axis = 1>(x, idx)""",
    )
    assert shapes.shape(_value(shapes, "out")) == (None, 4)
    assert not shapes.is_invariant(_value(shapes, "out"))
    assert shapes.shape(_value(shapes, "cols")) == (symbol(("param", "N")), None)


def test_rows_kept_by_a_changing_mask_keep_the_data_s_other_dims():
    """Compress(x, m, axis=k) with m computed in the body: dim k changes, the others stay;
    without an axis the result is 1-D of a size that changes."""
    shapes = _analyse(
        inputs="float[N,4] x, float[N] score, float[4] weight",
        body="""fi = Cast<to = 1>(i)
            above = Greater(score, fi)
            out = Compress<axis = 0>(x, above)
            heavy = Greater(weight, fi)
            cols = Compress<axis = -1>(x, heavy)
            flat = Compress(x, above)""",
    )
    assert shapes.shape(_value(shapes, "out")) == (None, 4)
    assert not shapes.is_invariant(_value(shapes, "out"))
    assert shapes.shape(_value(shapes, "cols")) == (symbol(("param", "N")), None)
    assert shapes.shape(_value(shapes, "flat")) == (None,)


def _branching(cond: str) -> LoopShapes:
    """An If whose branches give [N, 4] and [N + P, 4]: the rows alone, or past rows before
    them (a cache: fresh on the first step, grown after it), on condition `cond`."""
    return _analyse(
        inputs="float[N,4] x, float[P,4] past, int64 start",
        before="zero = Constant<value = int64 {0}>()\n        fresh_run = LessOrEqual(start, zero)",
        body=f"""{cond}
            out = If(fresh) <then_branch = fresh_rows () => (float[N,4] rows) {{
                rows = Identity(x)
            }}, else_branch = grown_rows () => (float[?,4] grown) {{
                grown = Concat<axis = 0>(past, x)
            }}>""",
    )


def test_an_if_on_a_fixed_condition_keeps_the_shape_of_the_branch_it_takes():
    """The same branch runs in every iteration: a dim the branches differ on is one symbol,
    fixed for the loop; a dim they share stays."""
    shapes = _branching("fresh = Identity(fresh_run)")
    out = _value(shapes, "out")
    assert shapes.is_invariant(out)
    first, second = shapes.shape(out)  # type: ignore[misc]
    assert second == 4
    assert not isinstance(first, int) and not shapes.varies(first)


def test_an_if_on_a_changing_condition_may_change_its_shape():
    shapes = _branching("at_i = Max(start, i)\n            fresh = LessOrEqual(at_i, i)")
    out = _value(shapes, "out")
    assert shapes.shape(out) == (None, 4)
    assert "whose value changes between iterations" in shapes.reason(out)


def test_a_concat_takes_the_static_dims_any_input_shows():
    """Concat's other dims are equal in every input (else it fails): a static one wins over a
    symbol, so `cat([past_i, rows])` with `past_i` of unknown dims keeps the rows' width."""
    shapes = _analyse(
        inputs="float[N,4] x, float[A,B] past",
        body="out = Concat<axis = 0>(past, x)",
    )
    rows, width = shapes.shape(_value(shapes, "out"))  # type: ignore[misc]
    assert width == 4
    assert rows == sym.add(symbol(("param", "A")), symbol(("param", "N")))


# for i in range(H // 2): for j in range(W // 2): x[2i : 2i+2, 2j : 2j+2] (Swin's windows)
WINDOWS = """
g (float[H,W,4] x) => (float[?,2,2,4] y) {
    dims = Shape(x)
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    two = Constant<value = int64 {2}>()
    h = Gather(dims, zero)
    w = Gather(dims, one)
    nh = Div(h, two)
    nw = Div(w, two)
    t = Constant<value = bool {1}>()
    y = Loop(nh, t) <body = outer (int64 i, bool c) => (bool c1, float[?,2,2,4] rows) {
        c1 = Identity(c)
        rows = Loop(nw, c) <body = inner (int64 j, bool d) => (bool d1, float[2,2,4] win) {
            d1 = Identity(d)
            axes = Constant<value = int64[2] {0, 1}>()
            i2 = Mul(i, two)
            i3 = Add(i2, two)
            j2 = Mul(j, two)
            j3 = Add(j2, two)
            zero1 = Constant<value = int64[1] {0}>()
            i2u = Unsqueeze(i2, zero1)
            i3u = Unsqueeze(i3, zero1)
            j2u = Unsqueeze(j2, zero1)
            j3u = Unsqueeze(j3, zero1)
            starts = Concat<axis = 0>(i2u, j2u)
            ends = Concat<axis = 0>(i3u, j3u)
            win = Slice(x, starts, ends, axes)
        }>
    }>
}"""


def test_the_iteration_number_of_an_enclosing_loop_is_bounded_by_its_trip_count():
    """Given the node that holds each body, the inner loop's analysis bounds the outer
    iteration number i by `[0, H // 2 - 1]`, so the window is 2 x 2; without it, the cut of
    H is not proved to fit."""
    model = ir.from_proto(parse(WINDOWS))
    NormalizePass()(model)
    (outer,) = [n for n in model.graph if n.op_type == "Loop"]
    outer_body = outer.attributes["body"].as_graph()
    (inner,) = [n for n in outer_body if n.op_type == "Loop"]
    owners = {id(outer_body): outer, id(inner.attributes["body"].as_graph()): inner}
    proved = LoopShapes(inner, StaticValues(), owners=owners)
    window = _value(proved, "win")
    assert proved.shape(window) == (2, 2, 4)
    alone = LoopShapes(inner, StaticValues())
    shape = alone.shape(window)
    assert isinstance(shape, tuple) and shape[1:] == (2, 4) and shape[0] != 2


def test_a_concat_prefers_a_dim_over_the_size_of_a_list_element():
    """`cat([cache[i], rows])`: the width is the rows' (a dim of the model), not a size of the
    element read, which says less (it may change between iterations)."""
    shapes = _analyse(
        inputs="seq(float[A,B]) past, float[N,W] x",
        body="old = SequenceAt(past, i)\n            out = Concat<axis = 0>(old, x)",
    )
    rows, width = shapes.shape(_value(shapes, "out"))  # type: ignore[misc]
    assert width == symbol(("param", "W"))
    assert rows is None  # the element's rows may change between iterations


# -- shapes from a static target, where the data's shape is not known -----------------------------

# h_in gains a dim every iteration: its rank is not known; k is a fixed table whose row i (two
# entries, read by a changing index) has no known content
_UNRANKED = """zero = Constant<value = int64[1] {0}>()
            h_out = Unsqueeze(h_in, zero)
            flat = Constant<value = int64[1] {-1}>()
            r = Reshape(h_in, flat)
            t3 = Constant<value = int64[3] {2, 0, -1}>()
            r3 = Reshape(h_in, t3)
            tz = Constant<value = int64[2] {0, 3}>()
            rz = Reshape<allowzero = 1>(h_in, tz)
            twice = Constant<value = int64[2] {-1, -1}>()
            bad = Reshape(h_in, twice)
            row = Gather<axis = 0>(k, i)
            rr = Reshape(h_in, row)
            e = Expand(x, row)
            c = ConstantOfShape(row)
            one = Constant<value = int64 {1}>()
            start = Constant<value = int64 {0}>()
            g = Range(start, i, one)
            out = ReduceSum(r)"""


def test_a_reshape_to_a_static_target_has_its_rank_whatever_the_data():
    """Reshape(x, T) of an x of unknown rank: len(T) dims, T's positive entries (a 0 is x's
    dim, a -1 the rest of x's size: neither known); allowzero=1 keeps a 0."""
    shapes = _analyse(inputs="float[2] x, int64[4,2] k", carried="x", body=_UNRANKED)
    assert shapes.shape(_value(shapes, "h_out")) is None  # the rank changes
    assert shapes.shape(_value(shapes, "r")) == (None,)
    assert shapes.shape(_value(shapes, "r3")) == (2, None, None)
    assert shapes.shape(_value(shapes, "rz")) == (0, 3)
    assert shapes.shape(_value(shapes, "bad")) is None  # two -1: not a valid target
    assert not shapes.is_invariant(_value(shapes, "r"))


def test_shape_producers_with_a_target_of_static_length_have_its_rank():
    """A target whose entries change between iterations but whose length is static gives
    Reshape and ConstantOfShape its length as rank, Expand max(rank(x), its length); a Range
    is 1-D whatever its bounds."""
    shapes = _analyse(inputs="float[3] x, int64[4,2] k", carried="x", body=_UNRANKED)
    assert shapes.shape(_value(shapes, "rr")) == (None, None)
    assert shapes.shape(_value(shapes, "e")) == (None, None)
    assert shapes.shape(_value(shapes, "c")) == (None, None)
    assert shapes.shape(_value(shapes, "g")) == (None,)


def test_a_fixed_reshape_of_a_value_of_unknown_rank_keeps_one_shape():
    """w has a rank known at run time only, fixed for the loop: Reshape(w, [3, -1]) is 2-D,
    its -1 a size of its own, the same in every iteration."""
    shapes = _analyse(
        inputs="float[V] v, int64[R] s",
        before="w = Reshape(v, s)",
        body="""t = Constant<value = int64[2] {3, -1}>()
            r = Reshape(w, t)
            out = ReduceSum(r)""",
    )
    three, rest = shapes.shape(_value(shapes, "r"))  # type: ignore[misc]
    assert three == 3 and isinstance(rest, sym.Expr)
    assert shapes.is_invariant(_value(shapes, "r"))


def test_a_reshape_to_a_target_of_unknown_entries_does_not_take_them_as_its_dims():
    """An entry of an unknown target may be 0 (x's dim) or -1 (the rest of x's size): x[6] and
    z[12] reshaped to one T are (2, 3) and (4, 3) for T = [-1, 3], so an If choosing between
    them by the iteration changes shape; each alone keeps one shape, a symbol of its own."""
    shapes = _analyse(
        inputs="float[6] x, float[12] z, int64[2] T",
        body="""one = Constant<value = int64 {1}>()
            first = Less(i, one)
            out = If(first) <then_branch = a () => (float[?,?] ra) {
                ra = Reshape(x, T)
            }, else_branch = b () => (float[?,?] rb) {
                rb = Reshape(z, T)
            }>
            rx = Reshape(x, T)
            rz = Reshape(z, T)""",
    )
    assert not shapes.is_invariant(_value(shapes, "out"))
    rx, rz = shapes.shape(_value(shapes, "rx")), shapes.shape(_value(shapes, "rz"))
    assert shapes.is_invariant(_value(shapes, "rx")) and shapes.is_invariant(_value(shapes, "rz"))
    assert len(rx) == len(rz) == 2 and not set(rx) & set(rz)  # type: ignore[arg-type]


def test_a_reshape_target_entry_that_is_the_dim_it_would_copy_is_that_dim():
    """`x.view(x.shape[0], -1)`: the entry is x's dim 0, so even a 0 there copies that same
    dim; with it known, the -1 is the rest of x's size (6N // N: N may be 0)."""
    shapes = _analyse(
        inputs="float[N,2,3] x",
        body="""s = Shape(x)
            zero = Constant<value = int64[1] {0}>()
            n = Gather(s, zero)
            rest = Constant<value = int64[1] {-1}>()
            t = Concat<axis = 0>(n, rest)
            r = Reshape(x, t)
            out = ReduceSum(r)""",
    )
    n, rest = shapes.shape(_value(shapes, "r"))  # type: ignore[misc]
    assert n == symbol(("param", "N"))
    assert rest == sym.floordiv(sym.mul(6, n), n)
    assert shapes.is_invariant(_value(shapes, "r"))


# A Loop whose trip count is read from an element of a list another Loop built, the elements of
# unequal lengths (the LLaVA export's loop over the text pieces of a sample: its count comes from
# the positions of the image tokens): deriving the count analyses the Loop that built the list.
_COUNT_FROM_A_BUILT_LIST = """g (int64 n, float[3] x) => (float[N] y) {
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 7>()
    ranges = Loop(n, t, empty) <body = build (int64 i, bool c, seq(int64) s_in)
            => (bool c2, seq(int64) s_out) {
        c2 = Identity(c)
        z = Constant<value = int64 {0}>()
        u = Constant<value = int64 {1}>()
        r = Range(z, i, u)
        s_out = SequenceInsert(s_in, r)
    }>
    last = Constant<value = int64 {-1}>()
    newest = SequenceAt(ranges, last)
    trip = Size(newest)
    fempty = SequenceEmpty<dtype = 1>()
    pieces = Loop(trip, t, fempty) <body = grow (int64 j, bool d, seq(float) p_in)
            => (bool d2, seq(float) p_out) {
        d2 = Identity(d)
        jf = Cast<to = 1>(j)
        piece = Mul(x, jf)
        p_out = SequenceInsert(p_in, piece)
    }>
    y = ConcatFromSequence<axis = 0>(pieces)
}"""


def test_a_trip_count_read_from_a_list_another_loop_built_is_derived():
    """The count is the size of the newest element (i elements in iteration i): its analysis
    reads the building Loop's body before the rest of the analysis is set up (it failed with
    an AttributeError there, a bug exit)."""
    model = ir.from_proto(parse(_COUNT_FROM_A_BUILT_LIST))
    NormalizePass()(model)
    second = [n for n in model.graph if n.op_type == "Loop"][1]
    shapes = LoopShapes(second, StaticValues())
    assert shapes.shape(_value(shapes, "piece")) == (3,)
    (last,) = shapes.bounds.values()
    assert last[0] == 0 and last[1] is not None  # the iteration number is bounded by the count


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
def test_a_trip_count_read_from_a_built_list_lowers_to_the_same_numbers(target):
    model = parse(_COUNT_FROM_A_BUILT_LIST)
    lowered, report = lower(model, target=target)
    x = np.array([1.0, -2.0, 0.5], dtype=np.float32)
    for n in (3, 4):  # counts 2 and 3
        y = assert_same_outputs(model, lowered, {"n": np.array(n, np.int64), "x": x})[0]
        assert y.shape == (3 * (n - 1),)
    # no element to read: both fail alike
    assert_both_fail(model, lowered, {"n": np.array(0, np.int64), "x": x})
    if target == "generic":
        assert sequence_op_count(lowered) == 0, report.remaining
    else:
        assert all(op.reason for op in report.remaining)
