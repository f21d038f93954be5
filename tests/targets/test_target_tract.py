"""The `--target tract` rewrites: what each emits, what each refuses and why, and that the result
computes the same under onnxruntime (and, where tract is installed, in tract). The default
target never runs them."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, op_counts, parse, run_ort, sequence_op_count

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes import NormalizePass
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import loops, target_tract

RNG = np.random.default_rng(0)


def _refusal(model, op_type: str, check, **options) -> Refusal:
    """What `check` says about the only `op_type` node of `model` (normalized first)."""
    model = ir.from_proto(model)
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options(target="tract", **options))
    (node,) = [n for n in model.graph if n.op_type == op_type]
    result = check(node, ctx)
    assert isinstance(result, Refusal), result
    return result


def _same_as_original(model, lowered, feeds) -> list:
    expected, actual = run_ort(model, feeds), run_ort(lowered, feeds)
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    return actual


# -- If -> Where ---------------------------------------------------------------------------------

IF_CONSTANTS = """g (float[4,3] x, bool c) => (float[4,3] y) {
    k = If(c) <then_branch = t () => (float a) { a = Constant<value = float {1}>() },
               else_branch = e () => (float b) { b = Constant<value = float {2}>() }>
    y = Mul(x, k)
}"""

IF_TENSORS = """g (float[N,3] x) => (float[N,3] y, int64[2] s) {
    r = ReduceSum<keepdims = 0>(x)
    zero = Constant<value = float {0}>()
    c0 = Greater(r, zero)
    one = Constant<value = int64[1] {1}>()
    c = Reshape(c0, one)
    y, s = If(c) <then_branch = t () => (float[N,3] a, int64[2] sa) { a = Relu(x) sa = Shape(x) },
                  else_branch = e () => (float[N,3] b, int64[2] sb) {
                      h = Constant<value = float {0.5}>()
                      b = Mul(x, h)
                      sb = Shape(x)
                  }>
}"""


@pytest.mark.parametrize("condition", [True, False])
def test_an_if_with_constant_branches_becomes_where(condition):
    model = parse(IF_CONSTANTS)
    lowered, report = lower(model, target="tract")
    assert op_counts(lowered)["If"] == 0 and op_counts(lowered)["Where"] == 1
    assert report.rules_fired == {"tract-if-to-where": 1}
    _same_as_original(
        model, lowered, {"x": RNG.standard_normal((4, 3), np.float32), "c": np.array(condition)}
    )


@pytest.mark.parametrize("rows", [0, 1, 5])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_one_element_condition_and_symbolic_shapes(rows, sign):
    model = parse(IF_TENSORS)
    lowered, _ = lower(model, target="tract")
    assert op_counts(lowered)["If"] == 0 and op_counts(lowered)["Where"] == 2
    x = (sign * np.abs(RNG.standard_normal((rows, 3)))).astype(np.float32)
    y, s = _same_as_original(model, lowered, {"x": x})
    assert s.tolist() == [rows, 3] and y.shape == (rows, 3)


def test_the_default_target_keeps_the_if():
    lowered, report = lower(parse(IF_CONSTANTS))
    assert op_counts(lowered)["If"] == 1 and op_counts(lowered)["Where"] == 0
    assert report.rules_fired == {}
    model = ir.from_proto(parse(IF_CONSTANTS))
    ctx = Context(Facts(model), Rewriter(model), Options())
    (node,) = [n for n in model.graph if n.op_type == "If"]
    assert target_tract._check_if_to_where(node, ctx) == Refusal(
        "a rewrite for --target tract only"
    )


@pytest.mark.parametrize(
    ("branch", "shape", "reason"),
    [
        (
            "i = Constant<value = int64 {7}>() a = Gather(x, i)",
            "float[3]",
            "branch 't' computes Gather, which may fail or differ when the branch is not taken",
        ),
        ("a = Concat<axis = 0>(x, x)", "float[8,3]", "output 0 may differ in shape or type"),
    ],
)
def test_unsafe_or_differently_shaped_branches_are_refused(branch, shape, reason):
    model = parse(f"""g (float[4,3] x, bool c) => (float[?] y) {{
        y = If(c) <then_branch = t () => ({shape} a) {{ {branch} }},
                   else_branch = e () => (float[4,3] b) {{ b = Neg(x) }}>
    }}""")
    refusal = _refusal(model, "If", target_tract._check_if_to_where)
    assert refusal.reason.startswith(reason)
    lowered, _ = lower(model, target="tract")
    assert op_counts(lowered)["If"] == 1


def test_a_static_condition_is_left_to_the_runtime():
    model = parse("""g (float[4,3] x) => (float[4,3] y) {
        c = Constant<value = bool {1}>()
        y = If(c) <then_branch = t () => (float[4,3] a) { a = Relu(x) },
                   else_branch = e () => (float[4,3] b) { b = Neg(x) }>
    }""")
    refusal = _refusal(model, "If", target_tract._check_if_to_where)
    assert refusal.reason == "the condition is static: tract takes the branch itself"


def test_too_many_branch_nodes_are_refused():
    chain = " ".join(f"a{k + 1} = Neg(a{k})" for k in range(target_tract.MAX_BRANCH_NODES + 1))
    model = parse(f"""g (float[4] x, bool c) => (float[4] y) {{
        y = If(c) <then_branch = t () => (float[4] z) {{
                       a0 = Identity(x) {chain} z = Identity(a0)
                   }},
                   else_branch = e () => (float[4] b) {{ b = Neg(x) }}>
    }}""")
    refusal = _refusal(model, "If", target_tract._check_if_to_where)
    assert refusal.reason.startswith("branch 't' has 35 nodes (at most 32)")


# -- Loop -> Scan --------------------------------------------------------------------------------

RNN = """g (float[T,B,4] x, float[B,4] h0) => (float[B,4] h, float[T,B,4] ys) {
    shape = Shape(x)
    axis = Constant<value = int64 {AXIS}>()
    n = Gather(shape, axis)
    go = Constant<value = bool {1}>()
    h, ys = Loop(n, go, h0) <body = body (int64 i, bool cond, float[B,4] state)
                                    => (bool cond_out, float[B,4] next, float[B,4] out) {
        cond_out = Identity(cond)
        row = Gather<axis = AXIS>(x, i)
        mixed = Add(row, state)
        next = Tanh(mixed)
        out = Identity(next)
    }>
}"""


@pytest.mark.parametrize("steps", [1, 4])
def test_a_loop_over_the_rows_of_a_tensor_becomes_scan(steps):
    model = parse(RNN.replace("AXIS", "0"))
    lowered, report = lower(model, target="tract")
    assert op_counts(lowered)["Loop"] == 0 and op_counts(lowered)["Scan"] == 1
    assert report.rules_fired == {"tract-loop-to-scan": 1}
    x = RNG.standard_normal((steps, 2, 4)).astype(np.float32)
    h0 = RNG.standard_normal((2, 4)).astype(np.float32)
    _, ys = _same_as_original(model, lowered, {"x": x, "h0": h0})
    assert ys.shape == (steps, 2, 4)


def test_an_empty_walked_axis_is_warned_about():
    """The Loop runs zero times; a Scan over an empty axis fails in onnxruntime (probed with
    1.32), hence the warning."""
    model = parse(RNN.replace("AXIS", "0"))
    lowered, report = lower(model, target="tract")
    (warning,) = [w for w in report.warnings if "Scan" in w]
    assert "dim 0 of 'x', which must not be empty" in warning
    feeds = {"x": np.zeros((0, 2, 4), np.float32), "h0": np.ones((2, 4), np.float32)}
    h, _ = run_ort(model, feeds)
    np.testing.assert_array_equal(h, feeds["h0"])
    with pytest.raises(Exception, match="Dimension 0 is 0"):
        run_ort(lowered, feeds)


def test_a_static_walked_axis_is_not_warned_about():
    model = parse(RNN.replace("AXIS", "0").replace("float[T,B,4]", "float[3,B,4]"))
    _, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-loop-to-scan": 1}
    assert not [w for w in report.warnings if "Scan" in w]


def test_a_loop_over_another_axis_scans_that_axis():
    model = parse(
        RNN.replace("AXIS", "1")
        .replace("float[T,B,4] x", "float[B,T,4] x")
        .replace("float[T,B,4] ys", "float[T,B,4] ys")
    )
    lowered, _ = lower(model, target="tract")
    (scan,) = [n for n in lowered.graph.node if n.op_type == "Scan"]
    assert {a.name: list(a.ints) for a in scan.attribute if a.ints} == {"scan_input_axes": [1]}
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    _same_as_original(model, lowered, {"x": x, "h0": np.ones((2, 4), np.float32)})


def test_the_default_target_keeps_the_loop():
    lowered, report = lower(parse(RNN.replace("AXIS", "0")))
    assert op_counts(lowered)["Loop"] == 1 and report.rules_fired == {}


def test_a_state_that_grows_is_refused_and_the_lowering_fails_the_target_cleanly():
    """Rows appended to a carried tensor change its shape each iteration: a Scan's state keeps
    one shape (its declared shape would contradict inference), so the Loop stays."""
    model = parse(
        RNN.replace("AXIS", "0")
        .replace("float[B,4] h)", "float[?,4] h)")
        .replace("float[B,4] state)", "float[?,4] state)")
        .replace("=> (bool cond_out, float[B,4] next,", "=> (bool cond_out, float[?,4] next,")
        .replace("mixed = Add(row, state)", "mixed = Concat<axis = 0>(state, row)")
        .replace("out = Identity(next)", "out = Tanh(row)")
    )
    refusal = _refusal(model, "Loop", target_tract._check_loop_to_scan)
    assert refusal.reason == (
        "the carried value 'state' may change shape between iterations: a Scan's state keeps "
        "one shape"
    )
    lowered, report = lower(model, target="tract")  # checked: full_check passes
    assert op_counts(lowered)["Loop"] == 1 and "tract-loop-to-scan" not in report.rules_fired
    assert not report.fits_target  # tract has no Loop: a target problem, not a broken model
    x = RNG.standard_normal((3, 2, 4)).astype(np.float32)
    _same_as_original(model, lowered, {"x": x, "h0": np.ones((2, 4), np.float32)})


WHILE = """g (float[T,4] x) => (float[4] h) {
    shape = Shape(x)
    axis = Constant<value = int64 {0}>()
    n = Gather(shape, axis)
    go = Constant<value = bool {1}>()
    h0 = Constant<value = float[4] {0, 0, 0, 0}>()
    h = Loop(n, go, h0) <body = body (int64 i, bool cond, float[4] state)
                                => (bool more, float[4] next) {
        row = Gather(x, i)
        next = Add(row, state)
        total = ReduceSum<keepdims = 0>(next)
        limit = Constant<value = float {3}>()
        more = Less(total, limit)
    }>
}"""


def test_a_data_dependent_while_loop_is_refused_with_that_reason():
    refusal = _refusal(parse(WHILE), "Loop", target_tract._check_loop_to_scan)
    assert refusal.reason == (
        "the body computes its condition: a data-dependent while loop, which tract cannot run"
    )
    model = parse(WHILE)
    lowered, report = lower(model, target="tract")  # a masked Scan (test_tract_while.py)
    assert op_counts(lowered)["Loop"] == 0
    assert report.rules_fired == {"tract-while-to-masked-scan": 1}
    _same_as_original(model, lowered, {"x": np.ones((5, 4), np.float32)})


def test_the_iteration_number_read_otherwise_is_refused():
    model = parse(
        RNN.replace("AXIS", "0").replace(
            "out = Identity(next)", "fi = Cast<to = 1>(i) out = Add(next, fi)"
        )
    )
    refusal = _refusal(model, "Loop", target_tract._check_loop_to_scan)
    assert refusal.reason == "the iteration number is read by Cast, not only Gather"


def test_a_trip_count_that_is_not_the_walked_dim_is_refused():
    model = parse(
        RNN.replace("AXIS", "0")
        .replace("n = Gather(shape, axis)", "n = Gather(shape, axis)\n    m = Identity(n)")
        .replace("Loop(n,", "Loop(m,")
    )
    refusal = _refusal(model, "Loop", target_tract._check_loop_to_scan)
    assert refusal.reason == "the trip count is not the size of dim 0 of 'x'"


# -- unrolling within a budget -------------------------------------------------------------------

STATIC = """g (float[4] x) => (float[4] y, float[3,4] ys) {
    m = Constant<value = int64 {3}>()
    go = Constant<value = bool {1}>()
    y, ys = Loop(m, go, x) <body = body (int64 i, bool cond, float[4] v)
                                    => (bool cond_out, float[4] w, float[4] u) {
        cond_out = Identity(cond)
        w = Add(v, v)
        u = Identity(w)
    }>
}"""


def test_a_static_tensor_loop_is_unrolled_for_tract():
    model = parse(STATIC)
    lowered, report = lower(model, target="tract")
    assert op_counts(lowered)["Loop"] == 0
    assert report.rules_fired == {"tract-loop-unroll": 1, "unsqueezed-stack": 1}  # rows: a stack
    _same_as_original(model, lowered, {"x": np.array([1, -2, 0.5, 3], np.float32)})


def test_a_loop_over_the_budget_is_refused_with_the_numbers():
    refusal = _refusal(parse(STATIC), "Loop", target_tract._check_unroll, unroll_budget=5)
    assert refusal.reason == (
        "unrolling 3 iterations of 3 nodes adds 9 nodes, over the unroll budget of 5 "
        "(unroll_budget= in Python)"
    )
    lowered, report = lower(parse(STATIC), target="tract", unroll_budget=5)
    # a Scan over the iteration numbers, which mask the carried value (the body does not read
    # them: test_tract_while.py)
    assert op_counts(lowered)["Loop"] == 0
    assert report.rules_fired == {"tract-loop-to-range-scan": 1}


def test_the_default_target_does_not_unroll_tensor_loops():
    lowered, _ = lower(parse(STATIC))
    assert op_counts(lowered)["Loop"] == 1


RAGGED = """g (float[2] a, float[3] b) => (float[?] cat) {
    m = Constant<value = int64 {TRIPS}>()
    t = Constant<value = bool {1}>()
    parts = SequenceConstruct(a, b)
    empty = SequenceEmpty<dtype = 1>()
    s = Loop(m, t, empty) <body = body (int64 i, bool cond, seq(float) acc)
                                       => (bool c2, seq(float) grown) {
        c2 = Identity(cond)
        two = Constant<value = int64 {2}>()
        j = Mod(i, two)
        e = SequenceAt(parts, j)
        ne = Neg(e)
        grown = SequenceInsert(acc, ne)
    }>
    cat = ConcatFromSequence<axis = 0>(s)
}"""


def test_a_sequence_loop_past_loop_unroll_limits_is_unrolled_for_tract_only():
    trips = loops.MAX_UNROLL + 8
    model = parse(RAGGED.replace("TRIPS", str(trips)))
    a, b = np.array([1, 2], np.float32), np.array([3, 4, 5], np.float32)
    generic, _ = lower(model)
    assert op_counts(generic)["Loop"] == 1  # the elements differ in shape: no scan output
    lowered, report = lower(model, target="tract")
    assert op_counts(lowered)["Loop"] == 0 and sequence_op_count(lowered) == 0
    assert report.rules_fired["tract-loop-unroll"] == 1
    (cat,) = _same_as_original(model, lowered, {"a": a, "b": b})
    assert cat.shape == (trips // 2 * 5,)


def test_a_sequence_loop_over_the_budget_keeps_its_loop():
    model = parse(RAGGED.replace("TRIPS", str(loops.MAX_UNROLL + 8)))
    refusal = _refusal(model, "Loop", target_tract._check_unroll, unroll_budget=100)
    assert refusal.reason.startswith(f"{loops.MAX_UNROLL + 8} iterations of ")
    assert refusal.reason.endswith(
        "too many to unroll (the unroll budget is 100 nodes; unroll_budget= in Python)"
    )


def test_a_branch_valid_only_when_taken_keeps_its_if():
    """`x + bias if x.size(1) == 4 else -x`: the then-branch fails for other widths, so
    computing it unconditionally would turn a working model into a failing one."""
    model = parse("""g (float[N,K] x) => (float[N,K] y) {
        s = Shape(x)
        one = Constant<value = int64 {1}>()
        k = Gather(s, one)
        four = Constant<value = int64 {4}>()
        c = Equal(k, four)
        y = If(c) <then_branch = t () => (float[N,K] a) {
                       bias = Constant<value = float[4] {1, 2, 3, 4}>()
                       a = Add(x, bias)
                   },
                   else_branch = e () => (float[N,K] b) { b = Neg(x) }>
    }""")
    refusal = _refusal(model, "If", target_tract._check_if_to_where)
    assert refusal.reason == (
        "branch 't' computes Add on shapes not known to fit, which may fail when the branch is "
        "not taken"
    )
    lowered, _ = lower(model, target="tract")
    assert op_counts(lowered)["If"] == 1
    for width in (3, 4):
        _same_as_original(model, lowered, {"x": np.ones((2, width), np.float32)})


@pytest.mark.parametrize(
    ("a", "b", "op", "fits"),
    [
        ("float[N,3]", "float[3]", "Add", True),
        ("float[N,3]", "float[N,1]", "Mul", True),
        ("float[N,3]", "float[M,3]", "Sub", False),
        ("float[N,K]", "float[K,2]", "MatMul", True),
        ("float[N,K]", "float[3,2]", "MatMul", False),
        ("float[N,3]", "float[M,3]", "Concat", True),
        ("float[N,3]", "float[N,4]", "Concat", False),
    ],
)
def test_broadcasting_ops_are_safe_only_when_their_shapes_fit(a, b, op, fits):
    attrs = "<axis = 0>" if op == "Concat" else ""
    model = parse(f"""g ({a} p, {b} q, bool c) => (float[?,?] y) {{
        y = If(c) <then_branch = t () => (float[?,?] r) {{ r = {op}{attrs}(p, q) }},
                   else_branch = e () => (float[?,?] r2) {{ r2 = {op}{attrs}(p, q) }}>
    }}""")
    ir_model = ir.from_proto(model)
    (node,) = [n for n in ir_model.graph if n.op_type == "If"]
    (inner,) = list(node.attributes["then_branch"].as_graph())
    assert target_tract._always_compatible(inner) is fits


@pytest.mark.parametrize("dtype", ["bool", "int16", "uint16", "uint64"])
def test_types_without_an_onnxruntime_where_keep_their_if(dtype):
    """Found by fuzzing with --target tract (seeds 369, 493): onnxruntime has no Where kernel
    for these element types, so the If stays (the lowered model must load where the original
    does)."""
    model = parse(f"""g ({dtype}[3] a, {dtype}[3] b, bool c) => ({dtype}[3] y) {{
        y = If(c) <then_branch = t () => ({dtype}[3] p) {{ p = Identity(a) }},
                   else_branch = e () => ({dtype}[3] q) {{ q = Identity(b) }}>
    }}""")
    refusal = _refusal(model, "If", target_tract._check_if_to_where)
    assert refusal.reason == f"output 0: onnxruntime has no Where for {dtype}"
    lowered, _ = lower(model, target="tract")
    a, b = np.array([1, 0, 1]).astype(dtype), np.array([0, 1, 1]).astype(dtype)
    for c in (True, False):
        _same_as_original(model, lowered, {"a": a, "b": b, "c": np.array(c)})


# -- Loop -> Scan over the iteration numbers -----------------------------------------------------

RUN_TIME_TRIPS = """g (float[4] x, int64 m) => (float[4] total, float[4] same, float[?,4] steps) {
    go = Constant<value = bool {1}>()
    total, same, steps = Loop(m, go, x, x) <body = body (int64 i, bool c, float[4] v, float[4] k)
                                      => (bool c2, float[4] w, float[4] k, float[4] step) {
        c2 = Identity(c)
        f = Cast<to = 1>(i)
        step = Mul(x, f)
        decayed = Mul(v, x)
        w = Add(decayed, step)
    }>
}"""  # w = v * x + x * i: a state no batching can take (loop-batch would take a running sum)


@pytest.mark.parametrize("m", [-1, 0, 1, 3])
def test_a_run_time_trip_count_becomes_a_scan_over_the_iteration_numbers(m):
    """States, a state passed through unchanged and a scan output; for m <= 0 the Scan runs
    once and drops what it gave."""
    model = parse(RUN_TIME_TRIPS)
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-loop-to-range-scan": 1}
    assert op_counts(lowered)["Loop"] == 0 and op_counts(lowered)["Scan"] == 1
    x = np.array([1, -2, 0.5, 3], np.float32)
    _total, same, steps = _same_as_original(model, lowered, {"x": x, "m": np.array(m)})
    assert steps.shape == (max(m, 0), 4)
    np.testing.assert_array_equal(same, x)


def test_tract_runs_the_scan_over_the_iteration_numbers():
    tract = pytest.importorskip("tract", reason="pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    lowered, _ = lower(parse(RUN_TIME_TRIPS), target="tract")
    feeds = {"x": np.array([1, -2, 0.5, 3], np.float32), "m": np.array(3)}
    for got, want in zip(run_in_runtime("tract", lowered, feeds), run_ort(lowered, feeds)):
        np.testing.assert_allclose(got, want)
    assert tract is not None


def test_a_carried_value_that_grows_keeps_its_loop():
    model = parse("""g (float[4] x, int64 m) => (float[?] y) {
        go = Constant<value = bool {1}>()
        y = Loop(m, go, x) <body = body (int64 i, bool c, float[?] v) => (bool c2, float[?] w) {
            c2 = Identity(c)
            f = Cast<to = 1>(i)
            p = Mul(x, f)
            w = Concat<axis = 0>(v, p)
        }>
    }""")
    refusal = _refusal(model, "Loop", target_tract._check_loop_to_range_scan)
    assert refusal.reason == (
        "the carried value 'v' may change shape between iterations: a Scan's state keeps one shape"
    )


ROWS_AT_TRIPS = """g (DTYPE[?,4] x, int64 m) => (DTYPE[4] total) {
    go = Constant<value = bool {1}>()
    z = Constant<value = DTYPE[4] {0, 0, 0, 0}>()
    total = Loop(m, go, z) <body = body (int64 i, bool c, DTYPE[4] v) => (bool c2, DTYPE[4] w) {
        c2 = Identity(c)
        [read_row] row = Gather(x, i)
        d = Mul(v, row)
        w = Add(d, row)
    }>
}"""  # x[i] with a run-time trip count m that is not x's dim: m = 0 where x has no row


ROW_EDGES = ((3, 3), (3, 0), (3, -1), (1, 1), (0, 0), (0, -2), (5, 2))  # rows of x, m


@pytest.mark.parametrize("dtype", ["float", "int64"])
def test_a_body_that_may_fail_at_the_iteration_number_runs_only_in_an_if_on_the_trip_count(
    dtype,
):
    """A Scan runs the body at least once; for m <= 0, x[0] of an x with no row would fail
    where the Loop ran zero times (the fuzzer's seeds 1160241, 1050531, 1060188, 1060399, a
    list read at i). With no scan output read, the Scan sits in If(m > 0) and the else-branch
    gives the initial carried value: no iteration runs, no warning."""
    model = parse(ROWS_AT_TRIPS.replace("DTYPE", dtype))
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-loop-to-range-scan": 1} and not report.warnings
    ops = [n.op_type for n in lowered.graph.node]
    assert ops == ["Constant", "Constant", "Greater", "If"]
    guard = lowered.graph.node[-1]
    then_ops = [n.op_type for n in guard.attribute[0].g.node]
    assert then_ops == ["Constant", "Constant", "Range", "Scan"]  # Range(0, m): no Max
    assert [n.op_type for n in guard.attribute[1].g.node] == ["Identity"]
    numpy_type = np.float32 if dtype == "float" else np.int64
    for rows, m in ROW_EDGES:
        x = np.arange(rows * 4).reshape(rows, 4).astype(numpy_type)
        _same_as_original(model, lowered, {"x": x, "m": np.array(m)})


def test_tract_runs_the_scan_guarded_by_the_trip_count():
    pytest.importorskip("tract", reason="pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = parse(ROWS_AT_TRIPS.replace("DTYPE", "float"))
    lowered, _ = lower(model, target="tract")
    for rows, m in ROW_EDGES:
        feeds = {"x": np.arange(rows * 4, dtype=np.float32).reshape(rows, 4), "m": np.array(m)}
        (got,), (want,) = run_in_runtime("tract", lowered, feeds), run_ort(model, feeds)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


ROWS_AND_STEPS_AT_TRIPS = """g (float[?,4] x, int64 m) => (float[4] total, float[?,4] steps) {
    go = Constant<value = bool {1}>()
    z = Constant<value = float[4] {0, 0, 0, 0}>()
    total, steps = Loop(m, go, z) <body = body (int64 i, bool c, float[4] v)
                                   => (bool c2, float[4] w, float[4] step) {
        c2 = Identity(c)
        [read_row] row = Gather(x, i)
        step = Mul(v, row)
        w = Add(step, row)
    }>
}"""


def test_a_body_that_may_fail_with_scan_outputs_of_static_shape_runs_in_an_if_in_the_scan():
    """tract types an If only when both branches give outputs of one shape, so an If around
    the Scan cannot give its scan outputs ([m, 4] beside the [0, 4] of no iteration: probed).
    The Scan over Range(0, Max(m, 1)) stays, and its body runs in If(i < m), the else-branch
    giving the carried values and zeros of the scan outputs' static shape, dropped as before:
    nothing fails for m <= 0, no warning."""
    model = parse(ROWS_AND_STEPS_AT_TRIPS)
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-loop-to-range-scan": 1} and not report.warnings
    (scan,) = [n for n in lowered.graph.node if n.op_type == "Scan"]
    body_ops = [n.op_type for n in scan.attribute[0].g.node]
    assert body_ops == ["Constant", "Reshape", "Less", "If"], body_ops
    branches = {
        a.name: [n.op_type for n in a.g.node] for a in scan.attribute[0].g.node[-1].attribute
    }
    assert branches == {
        "then_branch": ["Gather", "Mul", "Add"],
        "else_branch": ["Identity", "Constant"],
    }
    for rows, m in ROW_EDGES:
        x = np.arange(rows * 4).reshape(rows, 4).astype(np.float32)
        _same_as_original(model, lowered, {"x": x, "m": np.array(m)})


def test_tract_runs_the_scan_whose_body_runs_in_an_if():
    pytest.importorskip("tract", reason="pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = parse(ROWS_AND_STEPS_AT_TRIPS)
    lowered, _ = lower(model, target="tract")
    for rows, m in ROW_EDGES:
        feeds = {"x": np.arange(rows * 4, dtype=np.float32).reshape(rows, 4), "m": np.array(m)}
        for got, want in zip(run_in_runtime("tract", lowered, feeds), run_ort(model, feeds)):
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_a_body_that_may_fail_with_a_scan_output_of_unknown_shape_is_warned_about():
    """A scan output of a dim known only at run time (a row of y[?, ?]) has no zeros to give
    in an If's else-branch that tract would type as the then-branch's: the Scan runs the body
    once for m <= 0, unguarded, and the rewrite warns that it may fail then (x with no row);
    where x and y have the row the one iteration reads, the results are the Loop's."""
    model = parse(
        ROWS_AND_STEPS_AT_TRIPS.replace("int64 m) =>", "int64 m, float[?,?] y) =>")
        .replace("float[?,4] steps)", "float[?,?] steps)")
        .replace("float[4] step)", "float[?] step)")
        .replace("step = Mul(v, row)", "step = Gather(y, i)\n        d = Mul(v, row)")
        .replace("w = Add(step, row)", "w = Add(d, row)")
    )
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-loop-to-range-scan": 1}
    assert op_counts(lowered)["If"] == 0 and op_counts(lowered)["Scan"] == 1
    (warning,) = report.warnings
    assert "runs the body once even where the trip count is 0" in warning
    assert "Gather 'read_row' at positions or sizes that change between iterations" in warning
    assert "no If on the trip count guards it" in warning
    y = np.arange(15, dtype=np.float32).reshape(3, 5)
    for rows, m in ((3, 3), (3, 0), (3, -1), (1, 1)):
        feeds = {"x": np.arange(rows * 4, dtype=np.float32).reshape(rows, 4), "m": np.array(m)}
        (total, steps), (want_total, want_steps) = (
            run_ort(lowered, {**feeds, "y": y}),
            run_ort(model, {**feeds, "y": y}),
        )
        np.testing.assert_array_equal(total, want_total)
        # no iteration: onnxruntime gives the unknown dim of the Loop's empty stack as 0
        assert steps.shape == (max(m, 0), 5) and want_steps.shape[0] == max(m, 0)
        np.testing.assert_array_equal(steps, want_steps.reshape(steps.shape))
    with pytest.raises(Exception, match="out of"):  # what the warning says: no row 0
        run_ort(lowered, {"x": np.zeros((0, 4), np.float32), "m": np.array(0), "y": y})


@pytest.mark.parametrize("m", [-1, 0, 2])
def test_a_body_that_cannot_fail_is_not_warned_about(m):
    """RUN_TIME_TRIPS reads i only through Cast and arithmetic: no warning."""
    model = parse(RUN_TIME_TRIPS)
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-loop-to-range-scan": 1} and not report.warnings
    _same_as_original(model, lowered, {"x": np.ones(4, np.float32), "m": np.array(m)})


def test_a_static_positive_trip_count_needs_no_first_iteration_check():
    """The same body with m = 3 (over the unrolling budget of 0) still becomes a Scan: it runs
    only the iterations the Loop runs."""
    model = parse(
        ROWS_AT_TRIPS.replace("DTYPE", "float")
        .replace("int64 m) =>", "int64 unused) =>")
        .replace("go = Constant", "m = Constant<value = int64 {3}>()\n    go = Constant")
    )
    lowered, report = lower(model, target="tract", unroll_budget=0)
    assert report.rules_fired == {"tract-loop-to-range-scan": 1} and not report.warnings
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    _same_as_original(model, lowered, {"x": x, "unused": np.array(0)})
