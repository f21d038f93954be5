"""loop-batch: a Loop whose iterations are independent is batched like a SequenceMap.

Three ways: what it emits (no Loop, no sequence op), what it refuses (and why), and the same
outputs as the original under onnxruntime, including an empty list, negative axes, a `zip` of
lists of different lengths and integer elements.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_same_or_both_fail,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    run_ort,
    sequence_op_count,
)

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes.normalize import infer_shapes
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import loop_batching

RNG = np.random.default_rng(12)

# for t in x.unbind(0): out.append(relu(t @ w + b)); stack(out)   (TorchScript's form)
UNBIND_LOOP = """g (float[N,4] x) => (float[N,3] y) {
    w = Constant<value = float[4,3] {1,2,3,4,5,6,7,8,9,10,11,12}>()
    b = Constant<value = float[3] {-20, 0, 20}>()
    t = Constant<value = bool {1}>()
    xs = SplitToSequence<axis = 0, keepdims = 0>(x)
    n = SequenceLength(xs)
    empty = SequenceEmpty<dtype = 1>()
    out = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                     => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        e = SequenceAt(xs, i)
        m = MatMul(e, w)
        a = Add(m, b)
        r = Relu(a)
        grown = SequenceInsert(acc, r)
    }>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(out)
}"""


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def assert_loop_batched(
    model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]
) -> onnx.ModelProto:
    __tracebackhide__ = True
    lowered = None
    for feed in feeds:
        lowered, report, _ = lower_and_compare(model, feed)
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert lowered is not None
    assert sequence_op_count(lowered) == 0
    assert "Loop" not in op_counts(lowered)
    return lowered


def refusal(model: onnx.ModelProto) -> str:
    """Why loop-batch refuses the (first) Loop of the main graph."""
    proto = onnx.shape_inference.infer_shapes(model)
    graph_model = ir.from_proto(proto)
    infer_shapes(graph_model)
    loop = next(node for node in graph_model.graph if node.op_type == "Loop")
    ctx = Context(Facts(graph_model), Rewriter(graph_model), Options())
    found = loop_batching._check(loop, ctx)
    assert isinstance(found, Refusal), "loop-batch accepts the loop"
    return found.reason


# -- what it emits ------------------------------------------------------------------------------


def test_unbind_loop_becomes_one_batched_matmul():
    lowered = assert_loop_batched(parse(UNBIND_LOOP), [{"x": floats(5, 4)}, {"x": floats(1, 4)}])
    counts = op_counts(lowered)
    assert counts["MatMul"] == 1 and counts["Relu"] == 1


def test_split_one_loop_concatenated_keeps_the_split_axis():
    # for s in x.split(1, 0): out.append(s * 2 + s.sum()); cat(out, 0)
    model = parse(
        """g (float[N,3] x) => (float[N,3] y) {
        one = Constant<value = int64 {1}>()
        two = Constant<value = float {2}>()
        t = Constant<value = bool {1}>()
        xs = SplitToSequence<axis = 0>(x, one)
        n = SequenceLength(xs)
        empty = SequenceEmpty<dtype = 1>()
        out = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                         => (bool c2, seq(float) grown) {
            c2 = Identity(c)
            e = SequenceAt(xs, i)
            d = Mul(e, two)
            s = ReduceSum<keepdims = 0>(e)
            r = Add(d, s)
            grown = SequenceInsert(acc, r)
        }>
        y = ConcatFromSequence<axis = 0>(out)
    }"""
    )
    assert_loop_batched(model, [{"x": floats(4, 3)}, {"x": floats(1, 3)}])


def test_gather_at_the_iteration_number_with_a_negative_axis():
    # for j in range(x.size(1)): out.append(x[:, j].exp()) as scan outputs; M = dim 1 of x
    model = parse(
        """g (float[B,T] x) => (float[T,B] y) {
        t = Constant<value = bool {1}>()
        shape = Shape(x)
        one = Constant<value = int64 {1}>()
        n = Gather(shape, one)
        y = Loop(n, t) <body = body (int64 j, bool c) => (bool c2, float[B] r) {
            c2 = Identity(c)
            col = Gather<axis = -1>(x, j)
            r = Exp(col)
        }>
    }"""
    )
    assert_loop_batched(model, [{"x": floats(2, 5)}, {"x": floats(3, 1)}])


def test_zip_of_lists_of_different_lengths_is_cut_to_the_shorter():
    # for a, b in zip(x.unbind(0), z.unbind(0)): out.append(a * b); stack(out)
    model = parse(
        """g (float[N,4] x, float[K,4] z) => (float[M,4] y) {
        t = Constant<value = bool {1}>()
        xs = SplitToSequence<axis = 0, keepdims = 0>(x)
        zs = SplitToSequence<axis = 0, keepdims = 0>(z)
        nx = SequenceLength(xs)
        nz = SequenceLength(zs)
        n = Min(nx, nz)
        empty = SequenceEmpty<dtype = 1>()
        out = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                         => (bool c2, seq(float) grown) {
            c2 = Identity(c)
            a = SequenceAt(xs, i)
            b = SequenceAt(zs, i)
            p = Mul(a, b)
            grown = SequenceInsert(acc, p)
        }>
        y = ConcatFromSequence<axis = 0, new_axis = 1>(out)
    }"""
    )
    assert_loop_batched(
        model,
        [
            {"x": floats(5, 4), "z": floats(3, 4)},
            {"x": floats(2, 4), "z": floats(6, 4)},
            {"x": floats(3, 4), "z": floats(3, 4)},
        ],
    )


# TorchScript's trip count of `zip(xs, zs)` / `enumerate(xs)`: ReduceMin over the stacked lengths
# (enumerate's counter is bounded by the largest int64)
TORCH_MIN = """g (float[N,4] x, float[K,4] z) => (float[M,4] y) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = int64[1] {0}>()
    xs = SplitToSequence<axis = 0, keepdims = 0>(x)
    zs = SplitToSequence<axis = 0, keepdims = 0>(z)
    nx = SequenceLength(xs)
    nz = SequenceLength(zs)
    ux = Unsqueeze(nx, zero)
    uz = Unsqueeze(nz, zero)
    both = Concat<axis = 0>(ux, uz)
    n = ReduceMin<keepdims = 0>(both)
    empty = SequenceEmpty<dtype = 1>()
    out = Loop(n, t, empty) <body = body (int64 i, bool c, seq(float) acc)
                                     => (bool c2, seq(float) grown) {
        c2 = Identity(c)
        a = SequenceAt(xs, i)
        b = SequenceAt(zs, i)
        p = Sub(a, b)
        grown = SequenceInsert(acc, p)
    }>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(out)
}"""


def test_torchscript_zip_takes_the_minimum_of_the_lengths():
    feeds = [{"x": floats(5, 4), "z": floats(2, 4)}, {"x": floats(1, 4), "z": floats(3, 4)}]
    assert_loop_batched(parse(TORCH_MIN, opset=17), feeds)


def test_torchscript_enumerate_bound_is_no_bound():
    text = TORCH_MIN.replace(
        "uz = Unsqueeze(nz, zero)", "uz = Constant<value = int64[1] {9223372036854775807}>()"
    ).replace("b = SequenceAt(zs, i)", "b = Abs(a)")
    model = parse(text, opset=17)
    lowered = assert_loop_batched(model, [{"x": floats(3, 4), "z": floats(3, 4)}])
    assert "Slice" not in op_counts(lowered)  # nothing to cut: the list is read whole


def test_value_carried_unchanged_is_read_as_it_is():
    model = parse(
        """g (int32[N,2] x, int32[2] bias) => (int32[N,2] y, int32[2] bias_out) {
        t = Constant<value = bool {1}>()
        xs = SplitToSequence<axis = 0, keepdims = 0>(x)
        n = SequenceLength(xs)
        empty = SequenceEmpty<dtype = 6>()
        bias_out, out = Loop(n, t, bias, empty) <body = body (int64 i, bool c, int32[2] kept,
                                                              seq(int32) acc)
                                         => (bool c2, int32[2] kept2, seq(int32) grown) {
            c2 = Identity(c)
            kept2 = Identity(kept)
            e = SequenceAt(xs, i)
            s = Add(e, kept)
            grown = SequenceInsert(acc, s)
        }>
        y = ConcatFromSequence<axis = 0, new_axis = 1>(out)
    }"""
    )
    feeds = [
        {"x": RNG.integers(-50, 50, (4, 2)).astype(np.int32), "bias": np.array([7, -7], np.int32)},
        {"x": RNG.integers(-50, 50, (1, 2)).astype(np.int32), "bias": np.array([1, 2], np.int32)},
    ]
    assert_loop_batched(model, feeds)


def test_an_empty_list_gives_an_empty_stack_that_keeps_its_element_dims():
    # zero iterations: the spec leaves the element dims of a scan output unsaid (onnx.reference
    # fails to concatenate nothing; onnxruntime 1.20-1.32 answers [0, 0]); the batched form
    # answers [0, B], also with no element
    model = parse(
        """g (float[B,T] x) => (float[T,B] y) {
        t = Constant<value = bool {1}>()
        shape = Shape(x)
        one = Constant<value = int64 {1}>()
        n = Gather(shape, one)
        y = Loop(n, t) <body = body (int64 j, bool c) => (bool c2, float[B] r) {
            c2 = Identity(c)
            col = Gather<axis = 1>(x, j)
            r = Neg(col)
        }>
    }"""
    )
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1
    assert "Loop" not in op_counts(lowered)
    x = floats(3, 0)
    (original,) = run_ort(model, {"x": x})
    (batched,) = run_ort(lowered, {"x": x})
    assert original.size == batched.size == 0
    assert batched.shape == (0, 3)
    lower_and_compare(model, {"x": floats(3, 2)})


# -- what it refuses ----------------------------------------------------------------------------


def _variant(old: str, new: str) -> onnx.ModelProto:
    assert old in UNBIND_LOOP
    return parse(UNBIND_LOOP.replace(old, new))


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        (
            "r = Relu(a)",
            "r = Unique(a)",
            "body op Unique has no batching rule",
        ),
        (
            "out = Loop(n, t, empty)",
            "k = Constant<value = int64 {2}>()\n    out = Loop(k, t, empty)",
            "the trip count is not known to be the length of what the body reads",
        ),
        (
            "c2 = Identity(c)",
            "s0 = ReduceSum<keepdims = 0>(r)\n        z0 = Constant<value = float {0}>()\n"
            "        c2 = Greater(s0, z0)",
            "the condition may end the loop early",
        ),
    ],
    ids=["no-batching-rule", "trip-count", "early-exit"],
)
def test_refuses(old: str, new: str, why: str):
    assert refusal(_variant(old, new)) == why


def test_refuses_below_opset_14_and_still_computes_the_same():
    model = parse(UNBIND_LOOP, opset=13)
    assert refusal(model) == "batching needs Reshape with allowzero (opset 14 or newer)"
    _, report, _ = lower_and_compare(model, {"x": floats(3, 4)})
    assert "loop-batch" not in report.rules_fired


RUNNING = """g (DTYPE[N,3] x) => (DTYPE[3] last, DTYPE[N,3] y) {
    t = Constant<value = bool {1}>()
    shape = Shape(x)
    zero = Constant<value = int64 {0}>()
    n = Gather(shape, zero)
    start = Constant<value = DTYPE[3] {1, 2, 3}>()
    last, y = Loop(n, t, start) <body = body (int64 i, bool c, DTYPE[3] running)
                                       => (bool c2, DTYPE[3] next, DTYPE[3] r) {
        c2 = Identity(c)
        row = Gather<axis = 0>(x, i)
        term = UPDATE
        next = Add(running, term)
        r = Identity(next)
    }>
}"""


@pytest.mark.parametrize("dtype", ["float", "int64"])
def test_a_running_sum_becomes_a_cumsum_and_a_reduce_sum(dtype):
    # running = running + 2 * x[i]; out.append(running): prefix sums, and the last one
    model = parse(RUNNING.replace("DTYPE", dtype).replace("UPDATE", "Add(row, row)"))
    numpy_type = np.float32 if dtype == "float" else np.int64
    feeds = [{"x": (floats(n, 3) * 10).astype(numpy_type)} for n in (4, 1, 0)]
    lowered = assert_loop_batched(model, feeds)
    counts = op_counts(lowered)
    assert counts["CumSum"] == 1 and counts["ReduceSum"] == 1 and "Loop" not in counts
    (last, prefixes) = run_ort(lowered, {"x": np.zeros((0, 3), numpy_type)})
    np.testing.assert_array_equal(last, [1, 2, 3])  # no iteration: the initial value
    assert prefixes.shape == (0, 3)


@pytest.mark.parametrize(
    "update",
    [
        "ReduceSum<keepdims = 0>(row)",  # a scalar term added to a [3] sum
        "ReduceSum<keepdims = 1>(row)",  # a [1] term: the same rank, broadcast
        "Cast<to = 1>(i)",  # the iteration number itself
    ],
    ids=["scalar", "one-element", "iteration-number"],
)
def test_a_running_sum_of_terms_that_broadcast_into_it(update):
    """running = running + s with s of lower rank or a dim of one: the batched terms [n] are
    lined up with the sum's last dims ([n, 1]), not added along its first dim (which gave a
    [3] result where 3 rows were summed, and failed otherwise)."""
    model = parse(RUNNING.replace("DTYPE", "float").replace("UPDATE", update))
    feeds = [{"x": floats(n, 3)} for n in (3, 4, 1, 0)]
    lowered = assert_loop_batched(model, feeds)
    last, prefixes = run_ort(lowered, {"x": np.ones((3, 3), np.float32)})
    assert prefixes.shape == (3, 3) and last.shape == (3,)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_refuses_a_running_maximum_of_terms_that_broadcast_into_it(op):
    body = f"term = Gather<axis = 0>(row, zero)\n        next = {op}(running, term)"
    model = parse(EXTREMUM.replace("DTYPE", "float").replace("next = OP(running, row)", body))
    assert refusal(model) == f"a running {op.lower()} whose term may differ in shape from its value"
    lower_and_compare(model, {"x": floats(4, 3)})


def test_refuses_a_value_carried_otherwise_and_still_computes_the_same():
    # running = running + running * x[i]: the term reads the last iteration's value
    model = parse(RUNNING.replace("DTYPE", "float").replace("UPDATE", "Mul(running, row)"))
    assert refusal(model) == "loop-carried value 0 feeds the next iteration"
    lowered, report, _ = lower_and_compare(model, {"x": floats(4, 3)})
    assert "loop-batch" not in report.rules_fired
    assert "Loop" in op_counts(lowered)


TWO_HEADS = """g (float[B,8] x) => (float[B,8] y) {
    t = Constant<value = bool {1}>()
    head = Constant<value = int64 {4}>()
    heads = SplitToSequence<axis = -1>(x, head)
    n = SequenceLength(heads)
    empty = SequenceEmpty<dtype = 1>()
    out = Loop(n, t, empty) <body = body (int64 h, bool cond, seq(float) acc)
                                         => (bool c2, seq(float) grown) {
        c2 = Identity(cond)
        e = SequenceAt(heads, h)
        s = Softmax<axis = -1>(e)
        grown = SequenceInsert(acc, s)
    }>
    y = ConcatFromSequence<axis = -1>(out)
}"""


def test_refuses_two_iterations_over_chunks_of_a_dynamic_shape_in_favour_of_unrolling():
    model = parse(TWO_HEADS)
    assert refusal(model) == ("unrolling 2 iterations takes about 5 nodes, fewer than batching (9)")
    lowered, report, _ = lower_and_compare(model, {"x": floats(3, 8)})
    assert report.rules_fired.get("loop-unroll") == 1
    assert sequence_op_count(lowered) == 0 and "Loop" not in op_counts(lowered)


def test_batches_more_iterations_over_the_same_chunks():
    model = parse(TWO_HEADS.replace("float[B,8]", "float[B,24]"))
    assert_loop_batched(model, [{"x": floats(3, 24)}, {"x": floats(1, 24)}])


def test_refuses_a_list_that_does_not_start_empty():
    model = _variant("empty = SequenceEmpty<dtype = 1>()", "empty = SequenceConstruct(b)")
    assert refusal(model) == (
        "the list carried as value 0 does not start empty, and is read otherwise than "
        "concatenated (ConcatFromSequence, new_axis=0)"
    )
    lower_and_compare(model, {"x": floats(3, 4)})


# -- a value carried one element late: `prev = x[t]` ------------------------------------------

LAGGED = """g (DTYPE[N,3] x) => (DTYPE[N,3] d, DTYPE[3] last) {
    t = Constant<value = bool {1}>()
    shape = Shape(x)
    zero = Constant<value = int64 {0}>()
    n = Gather(shape, zero)
    start = Constant<value = DTYPE[3] {1, 2, 3}>()
    last, d = Loop(n, t, start) <body = body (int64 i, bool c, DTYPE[3] prev)
                                       => (bool c2, DTYPE[3] cur, DTYPE[3] diff) {
        c2 = Identity(c)
        cur = Gather<axis = 0>(x, i)
        diff = Sub(cur, prev)
    }>
}"""


@pytest.mark.parametrize("dtype", ["float", "int64"])
def test_a_value_carried_one_element_late_is_the_stack_shifted_by_one(dtype):
    """`prev = x[t]` at the end of an iteration: the next reads element t, the first the initial
    value. The differences are x minus x shifted down one row; `last` is x[-1] or, with no
    iteration, the initial value."""
    model = parse(LAGGED.replace("DTYPE", dtype))
    numpy_type = np.float32 if dtype == "float" else np.int64
    feeds = [{"x": (floats(n, 3) * 10).astype(numpy_type)} for n in (4, 1, 0)]
    lowered = assert_loop_batched(model, feeds)
    x = feeds[0]["x"]
    d, last = run_ort(lowered, feeds[0])
    np.testing.assert_array_equal(d, x - np.concatenate([[[1, 2, 3]], x[:-1]]).astype(numpy_type))
    np.testing.assert_array_equal(last, x[-1])
    _, last = run_ort(lowered, feeds[2])
    np.testing.assert_array_equal(last, [1, 2, 3])


def test_refuses_a_late_value_whose_initial_shape_differs():
    """A [1, 3] initial value broadcasts in the first iteration but cannot head the stack."""
    model = parse(
        LAGGED.replace("DTYPE", "float")
        .replace("float[3] {1, 2, 3}", "float[1,3] {1, 2, 3}")
        .replace("float[3] prev", "float[?,3] prev")
        .replace("float[3] diff", "float[?,3] diff")
        .replace("=> (float[N,3] d", "=> (float[N,?,3] d")
    )
    assert refusal(model) == "loop-carried value 0 feeds the next iteration"
    _, report, _ = lower_and_compare(model, {"x": floats(3, 3)})
    assert "loop-batch" not in report.rules_fired


# -- the iteration number used as a number: Range(0, M) ---------------------------------------


def test_the_iteration_number_as_a_number_is_a_range():
    """`out.append(x[i] * i)`: the element read and the number itself, batched together."""
    model = _variant(
        "m = MatMul(e, w)", "f = Cast<to = 1>(i)\n        g = Mul(e, f)\n        m = MatMul(g, w)"
    )
    lowered = assert_loop_batched(model, [{"x": floats(n, 4)} for n in (5, 1)])
    assert op_counts(lowered)["Range"] == 1


COUNTED = """g (int64 m, float[3] x) => (float[?,3] y, int64[?] ids) {
    t = Constant<value = bool {1}>()
    y, ids = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[3] row, int64 id) {
        c2 = Identity(c)
        one = Constant<value = int64 {1}>()
        next = Add(i, one)
        scale = Cast<to = 1>(next)
        row = Mul(x, scale)
        id = Mul(i, i)
    }>
}"""


@pytest.mark.parametrize("trips", [0, 1, 4, -2])
def test_a_loop_that_reads_nothing_but_its_iteration_number(trips):
    """`for i in range(m): rows.append(x * (i + 1))`: no element read, any trip count (a
    negative one runs no iteration, and Range(0, M) is then empty)."""
    model = parse(COUNTED)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    lowered = assert_loop_batched(model, [{"m": np.array(trips), "x": x}])
    y, ids = run_ort(lowered, {"m": np.array(trips), "x": x})
    count = max(trips, 0)
    np.testing.assert_array_equal(y, np.array([x * (i + 1) for i in range(count)]).reshape(-1, 3))
    np.testing.assert_array_equal(ids, np.arange(count) ** 2)


# -- a running maximum or minimum, read after the loop ----------------------------------------

EXTREMUM = """g (DTYPE[N,3] x) => (DTYPE[3] best) {
    t = Constant<value = bool {1}>()
    shape = Shape(x)
    zero = Constant<value = int64 {0}>()
    n = Gather(shape, zero)
    start = Constant<value = DTYPE[3] {-5, 0, 5}>()
    best = Loop(n, t, start) <body = body (int64 i, bool c, DTYPE[3] running)
                                    => (bool c2, DTYPE[3] next) {
        c2 = Identity(c)
        row = Gather<axis = 0>(x, i)
        next = OP(running, row)
    }>
}"""


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize(("dtype", "numpy_type"), [("float", np.float32), ("int64", np.int64)])
def test_a_running_maximum_is_one_reduction_over_the_initial_value_and_the_terms(
    op, dtype, numpy_type
):
    """`best = max(best, x[i])`: ReduceMax over [best0, x[0], x[1], ...], never an empty
    reduction (no iteration gives the initial value)."""
    model = parse(EXTREMUM.replace("DTYPE", dtype).replace("OP", op))
    feeds = [{"x": (floats(n, 3) * 10).astype(numpy_type)} for n in (4, 1, 0)]
    lowered = assert_loop_batched(model, feeds)
    assert op_counts(lowered)[f"Reduce{op}"] == 1
    reduce = np.max if op == "Max" else np.min
    for feed in feeds:
        (best,) = run_ort(lowered, feed)
        start = np.array([-5, 0, 5], numpy_type)
        np.testing.assert_array_equal(best, reduce(np.concatenate([[start], feed["x"]]), 0))


def test_refuses_a_running_maximum_read_in_every_iteration():
    """Its prefix maxima would need a running maximum op, which ONNX lacks."""
    model = parse(
        EXTREMUM.replace("DTYPE", "float")
        .replace("OP", "Max")
        .replace("=> (float[3] best)", "=> (float[3] best, float[N,3] prefix)")
        .replace("best = Loop", "best, prefix = Loop")
        .replace("=> (bool c2, float[3] next)", "=> (bool c2, float[3] next, float[3] seen)")
        .replace(
            "next = Max(running, row)", "next = Max(running, row)\n        seen = Identity(next)"
        )
    )
    assert refusal(model) == "loop-carried value 0 feeds the next iteration"
    lower_and_compare(model, {"x": floats(3, 3)})


OVERRIDABLE = """g (int64[3] x, int64 m) => (int64[3] total) <int64 m = {5}> {
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 7>()
    rows = Loop(m, t, empty) <body = body (int64 i, bool c, seq(int64) acc)
                                       => (bool c2, seq(int64) grown) {
        c2 = Identity(c)
        row = Add(x, i)
        grown = SequenceInsert(acc, row)
    }>
    five = Constant<value = int64 {5}>()
    start = Constant<value = int64[3] {0, 0, 0}>()
    total = Loop(five, t, start) <body = sum (int64 j, bool d, int64[3] acc)
                                       => (bool d2, int64[3] more) {
        d2 = Identity(d)
        row = SequenceAt(rows, j)
        more = Add(acc, row)
    }>
}"""


def test_an_overridable_trip_count_is_not_read_as_its_default():
    """The first loop's trip count is an initializer that is also a model input (default 5);
    the second loop sums the first 5 rows. Fed m = 7, the batched rows are 7, not 5: ONNX
    inference would compute Range(0, 5) from the default, and the sum would then read all the
    rows as if they were the first 5 (seqlower hides overridable defaults from inference)."""
    model = parse(OVERRIDABLE)
    x = np.array([1, -2, 3], np.int64)
    for trips in (5, 7):
        _, report, (total,) = lower_and_compare(model, {"x": x, "m": np.array(trips)})
        np.testing.assert_array_equal(total, 5 * x + sum(range(5)))
    assert report.rules_fired.get("loop-batch", 0) >= 1


# -- a trip count that may be negative: the loop runs no iteration ------------------------------

READ_M_ROWS = """g (int64 m, float[3] x0, float[3] x1, float[3] x2, float[3] x3)
        => (float[3] total, float[?,3] doubled, float[?,3] halves) {
    t = Constant<value = bool {1}>()
    zeros = Constant<value = float[3] {0, 0, 0}>()
    xs = SequenceConstruct(x0, x1, x2, x3)
    empty = SequenceEmpty<dtype = 1>()
    total, out, doubled = Loop(m, t, zeros, empty) <body = body (int64 i, bool c,
            float[3] acc, seq(float) s) => (bool c2, float[3] acc2, seq(float) s2, float[3] row) {
        c2 = Identity(c)
        cur = SequenceAt(xs, i)
        acc2 = Add(acc, cur)
        two = Constant<value = float {2}>()
        row = Mul(cur, two)
        half = Div(cur, two)
        s2 = SequenceInsert(s, half)
    }>
    halves = ConcatFromSequence<axis = 0, new_axis = 1>(out)
}"""

# the same loop also carrying the element it read (prev' = xs[i]): the stack of the list is
# built inside the body, so the element is no read of an outer stack
LAGGED_CONSTRUCT = (
    READ_M_ROWS.replace("=> (float[3] total,", "=> (float[3] last, float[3] total,")
    .replace(
        "total, out, doubled = Loop(m, t, zeros, empty)",
        "last, total, out, doubled = Loop(m, t, start, zeros, empty)",
    )
    .replace("(int64 i, bool c,", "(int64 i, bool c, float[3] prev,")
    .replace("=> (bool c2,", "=> (bool c2, float[3] cur,")
    .replace(
        "    empty = SequenceEmpty",
        "    start = Constant<value = float[3] {7, 8, 9}>()\n    empty = SequenceEmpty",
    )
)


@pytest.mark.parametrize("trips", [-1, -3, 0, 2, 4])
def test_a_negative_trip_count_reads_no_element(trips):
    """`for i in range(m)` reading xs[i] (a list of four) with m a model input: a negative m runs
    no iteration. As a Slice end or a Gather position -1 would count from the end, and
    onnxruntime's optimizer reads Gather(x, Range(0, m)) as Slice(x, 0, m): the batched form
    runs max(m, 0) times. (With
    no iteration, onnxruntime cannot stack the empty list of the original: numpy says what the
    loop gives then.)"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    feeds = {"m": np.array(trips), **{f"x{k}": x[k] for k in range(4)}}
    if trips > 0:
        lowered = assert_loop_batched(parse(READ_M_ROWS), [feeds])
    else:
        lowered, report = lower(parse(READ_M_ROWS))
        assert report.rules_fired.get("loop-batch") == 1, report.rules_fired
    assert op_counts(lowered)["Max"] == 1
    total, doubled, halves = run_ort(lowered, feeds)
    runs = max(trips, 0)
    np.testing.assert_array_equal(total, x[:runs].sum(axis=0))
    np.testing.assert_array_equal(doubled, (x[:runs] * 2).reshape(-1, 3))
    np.testing.assert_array_equal(halves, (x[:runs] / 2).reshape(-1, 3))


def test_a_trip_count_never_negative_is_taken_as_it_is():
    """A count made from a length needs no Max."""
    model = parse(
        READ_M_ROWS.replace("(int64 m, float[3] x0", "(float[3] x0").replace(
            "    empty = SequenceEmpty", "    m = SequenceLength(xs)\n    empty = SequenceEmpty"
        )
    )
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    lowered = assert_loop_batched(model, [{f"x{k}": x[k] for k in range(4)}])
    assert "Max" not in op_counts(lowered)


@pytest.mark.parametrize("trips", [4, 2])
def test_an_element_carried_to_the_next_iteration_from_a_list_built_in_the_body(trips):
    """The list's stack is built inside the body (it reads nothing of the loop, but it is there
    when the loop is checked): the carried element is no read of an outer stack. It was taken
    for one, and the lowering failed; it is lowered otherwise and computes the same."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    feeds = {"m": np.array(trips), **{f"x{k}": x[k] for k in range(4)}}
    lowered, _, outputs = lower_and_compare(parse(LAGGED_CONSTRUCT), feeds)
    assert sequence_op_count(lowered) == 0
    np.testing.assert_array_equal(outputs[0], x[trips - 1])


def test_the_least_of_lengths_is_never_negative():
    """TorchScript's zip(xs, ks): min(4, len(ks)) as ReduceMin(Concat(...)) needs no Max."""
    model = parse(
        READ_M_ROWS.replace("(int64 m, float[3] x0", "(float[K] ks, float[3] x0").replace(
            "    empty = SequenceEmpty",
            "    four = Constant<value = int64[1] {4}>()\n"
            "    k = Shape(ks)\n"
            "    both = Concat<axis = 0>(four, k)\n"
            "    m = ReduceMin<keepdims = 0>(both)\n"
            "    empty = SequenceEmpty",
        )
    )
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    feeds = [{"ks": np.zeros(n, np.float32), **{f"x{k}": x[k] for k in range(4)}} for n in (2, 6)]
    lowered = assert_loop_batched(model, feeds)
    assert "Max" not in op_counts(lowered)


# a tensor's rows mapped by a Loop whose trip count is one entry of a Shape: how the length of
# a list stacked as one tensor reads (`Reshape(Shape(x, end=1), [])`, the tensor form of
# SequenceLength), and `Squeeze(Gather(Shape(x), [0]))` as exporters write `x.size(0)`
SHAPE_ENTRY_COUNT = """g (float[N,4] x) => (float[N,3] y) {{
    w = Constant<value = float[4,3] {{1,2,3,4,5,6,7,8,9,10,11,12}}>()
    t = Constant<value = bool {{1}}>()
    scalar = Constant<value = int64[0] {{}}>()
    zero1 = Constant<value = int64[1] {{0}}>()
    entry = Constant<value = int64[1] {{{entry}}}>()
    {count}
    y = Loop(n, t) <body = body (int64 i, bool c) => (bool c2, float[3] r) {{
        c2 = Identity(c)
        e = Gather<axis = 0>(x, i)
        m = MatMul(e, w)
        r = Relu(m)
    }}>
}}"""
SLICED = "first = Shape<start = {start}, end = {end}>({measured})\n    n = Reshape(first, scalar)"
PICKED = (
    "dims = Shape({measured})\n    one = Gather<axis = 0>(dims, entry)\n    n = Squeeze(one, zero1)"
)


def entry_count(form: str, measured: str = "x", start: int = 0, end: int = 1, entry: int = 0):
    count = form.format(start=start, end=end, measured=measured)
    return parse(SHAPE_ENTRY_COUNT.format(entry=entry, count=count))


@pytest.mark.parametrize(
    ("form", "start", "end", "entry"),
    [(SLICED, 0, 1, 0), (SLICED, -2, -1, 0), (PICKED, 0, 1, 0), (PICKED, 0, 1, -2)],
    ids=["shape-end-1", "shape-negative-bounds", "squeezed-gather", "squeezed-gather-negative"],
)
def test_a_trip_count_read_as_one_entry_of_a_shape_is_the_length_read(form, start, end, entry):
    model = entry_count(form, start=start, end=end, entry=entry)
    assert_loop_batched(model, [{"x": floats(5, 4)}, {"x": floats(1, 4)}, {"x": floats(0, 4)}])


@pytest.mark.parametrize(
    ("form", "measured", "start", "end", "entry", "why"),
    [
        (SLICED, "x", 1, 2, 0, "the second dim of x, not the rows read"),
        (SLICED, "w", 0, 1, 0, "the rows of another tensor"),
        (PICKED, "x", 0, 1, 1, "the second dim of x"),
    ],
)
def test_a_trip_count_from_another_dim_is_not_the_length_read(
    form, measured, start, end, entry, why
):
    """The trip count is 4 (x's second dim, or w's rows), not x's rows: x is cut to 4 rows with
    a check (tests/rules/test_loop_batching_lengths.py), and fails where the loop reads past
    its rows."""
    model = entry_count(form, measured=measured, start=start, end=end, entry=entry)
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1, why
    assert "Loop" not in op_counts(lowered) and op_counts(lowered)["Max"] == 1, why
    for rows in (6, 4, 3, 0):
        assert_same_or_both_fail(model, lowered, {"x": floats(rows, 4)})
