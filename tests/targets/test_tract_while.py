"""`--target tract`: a bounded while loop becomes a masked Scan (`tract-while-to-masked-scan`),
a Loop whose body does not read its iteration number masks its carried values with it, and
declared intermediate shapes are dropped. What each emits, what each refuses and why, the same
results as the original under onnxruntime (no iteration, an exit after the first, a run to the
bound) and, where tract is installed, in tract."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import lower, op_counts, parse, run_ort

from seqlower.analysis import Facts
from seqlower.options import Options
from seqlower.passes import NormalizePass
from seqlower.rewriter import Rewriter
from seqlower.rule import Context, Refusal
from seqlower.rules import target_tract, tract_while


def _refusal(model, check) -> Refusal:
    """What `check` says about the only Loop of `model` (normalized first)."""
    model = ir.from_proto(model)
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options(target="tract"))
    (node,) = [n for n in model.graph if n.op_type == "Loop"]
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


RUN_TIME_TRIPS = """g (float[4] x, int64 m) => (float[4] total, float[4] same, float[?,4] steps) {
    go = Constant<value = bool {1}>()
    total, same, steps = Loop(m, go, x, x) <body = body (int64 i, bool c, float[4] v, float[4] k)
                                      => (bool c2, float[4] w, float[4] k, float[4] step) {
        c2 = Identity(c)
        f = Cast<to = 1>(i)
        step = Mul(x, f)
        w = Add(v, step)
    }>
}"""

# halves x while its sum of magnitudes exceeds 1, at most m times; also carries a flag that
# flips, a counter, and stacks each step plus its iteration number
HALVE = """g (float[4] x, int64 m, bool go) => (float[4] h, bool f, int64 k, float[?,4] ys) {
    no = Constant<value = bool {0}>()
    zero = Constant<value = int64 {0}>()
    h, f, k, ys = Loop(m, go, x, no, zero) <body = body (int64 i, bool cond, float[4] v,
                                                       bool flag, int64 n)
                    => (bool more, float[4] next, bool flipped, int64 n2, float[4] out) {
        half = Constant<value = float {0.5}>()
        next = Mul(v, half)
        flipped = Not(flag)
        two = Constant<value = int64 {2}>()
        n2 = Add(n, two)
        fi = Cast<to = 1>(i)
        out = Add(next, fi)
        a = Abs(next)
        total = ReduceSum<keepdims = 0>(a)
        one = Constant<value = float {1}>()
        more = Greater(total, one)
    }>
}"""

# sums the rows of x until the sum reaches 3: the trip count is the number of rows
ROWS = """g (float[T,4] x) => (float[4] h) {
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

X_CASES = {
    "runs to the bound": np.array([8, -8, 8, 8], np.float32),
    "exits after the first iteration": np.array([1, -1, 0.5, 0], np.float32),
    "exits after a few": np.array([2, -1, 0.5, 0], np.float32),
}


def _halve_feeds(x, m, go):
    return {"x": x, "m": np.array(m, np.int64), "go": np.array(go)}


@pytest.mark.parametrize("go", [True, False])
@pytest.mark.parametrize("m", [-1, 0, 1, 3, 40])
@pytest.mark.parametrize("x", list(X_CASES.values()), ids=list(X_CASES))
def test_a_bounded_while_loop_becomes_a_masked_scan(x, m, go):
    model = parse(HALVE)
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-while-to-masked-scan": 1}
    counts = op_counts(lowered)
    assert counts["Loop"] == 0 and counts["Scan"] == 1
    # float and int64 masked, the count kept; a bool masked by logic
    assert counts["Where"] == 3 and counts["Or"] == 1
    _same_as_original(model, lowered, _halve_feeds(x, m, go))


def test_the_scan_stops_counting_at_the_exit():
    model = parse(HALVE)
    lowered, _ = lower(model, target="tract")
    x = X_CASES["exits after a few"]  # |x| sums to 3.5: halved twice to 0.875
    h, flag, k, ys = _same_as_original(model, lowered, _halve_feeds(x, 40, True))
    assert ys.shape == (2, 4) and int(k) == 4 and not bool(flag)
    np.testing.assert_array_equal(h, x / 4)


@pytest.mark.parametrize("rows", [1, 2, 6])
@pytest.mark.parametrize("value", [5.0, 1.0, 0.1])
def test_a_while_loop_over_the_rows_of_a_tensor(rows, value):
    """The trip count is the number of rows; the body reads row i, which the masked Scan reads
    too (the exit comes at the first row for 5.0, later for 1.0, never for 0.1)."""
    model = parse(ROWS)
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-while-to-masked-scan": 1}
    assert op_counts(lowered)["Loop"] == 0
    assert any("must not be 0" in warning for warning in report.warnings)
    _same_as_original(model, lowered, {"x": np.full((rows, 4), value, np.float32)})


def test_the_default_target_keeps_the_while_loop():
    for text in (HALVE, ROWS):
        lowered, report = lower(parse(text), target="generic")
        assert op_counts(lowered)["Loop"] == 1 and "tract-while-to-masked-scan" not in (
            report.rules_fired
        )


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            ("Loop(m, go,", "Loop(, go,"),
            "a while loop with no trip count: there is no bound to scan over",
        ),
        (
            ("h, f, k, ys = Loop(m,", "big = Constant<value = int64 {9223372036854775807}>()\n"
             "h, f, k, ys = Loop(big,"),
            "a while loop whose only bound is its trip count 9223372036854775807: too many "
            "iterations to run each one masked (at most 65536)",
        ),
        (
            ("out = Add(next, fi)", "row = Gather(x, n) out = Add(next, row)"),
            "the body computes Gather '' at positions or sizes that change between iterations "
            "(input 'n'), which may fail after the loop would have stopped",
        ),
        (
            ("n2 = Add(n, two)", "n2 = Div(two, n)"),
            "the body computes Div '' of integers by a value that changes between iterations, "
            "which may fail after the loop would have stopped",
        ),
        (
            ("out = Add(next, fi)", "s = Shape(next) z = ConstantOfShape(s) out = Add(z, fi)"),
            "the body computes ConstantOfShape '' at positions or sizes that change between "
            "iterations (input 's'), which may fail after the loop would have stopped",
        ),
        (
            ("a = Abs(next)", "a0 = Abs(next) a = LpNormalization(a0)"),
            "the body computes LpNormalization '', which may fail after the loop would have "
            "stopped",
        ),
    ],
    ids=["no trip count", "unbounded", "gather", "integer div", "shape", "unknown op"],
)  # fmt: skip
def test_what_is_refused_and_why(edit, reason):
    model = parse(HALVE.replace(*edit))
    refusal = _refusal(model, tract_while._check_masked_scan)
    assert refusal.reason == reason
    lowered, report = lower(model, target="tract")
    assert op_counts(lowered)["Loop"] == 1 and "tract-while-to-masked-scan" not in (
        report.rules_fired
    )


def test_a_carried_value_that_grows_is_refused():
    model = parse(
        HALVE.replace("float[4] v,", "float[?] v,")
        .replace("next = Mul(v, half)", "h2 = Mul(v, half) next = Concat<axis = 0>(h2, h2)")
        .replace("=> (float[4] h,", "=> (float[?] h,")
        .replace("out = Add(next, fi)", "out = Add(h2, fi)")
    )
    refusal = _refusal(model, tract_while._check_masked_scan)
    assert refusal.reason == (
        "the carried value 'v' may change shape between iterations: a Scan's state keeps one shape"
    )


def test_a_loop_that_cannot_stop_early_is_left_to_the_other_rules():
    refusal = _refusal(parse(RUN_TIME_TRIPS), tract_while._check_masked_scan)
    assert refusal.reason.startswith("the loop cannot stop early")


@pytest.mark.parametrize("m", [0, 1, 3, 40])
@pytest.mark.parametrize("go", [True, False])
def test_tract_runs_the_masked_scan(m, go):
    tract = pytest.importorskip("tract", reason="the tract oracle: pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = parse(HALVE)
    lowered, _ = lower(model, target="tract")
    for x in X_CASES.values():
        feeds = _halve_feeds(x, m, go)
        got = run_in_runtime("tract", lowered, feeds)
        for g, want in zip(got, run_ort(model, feeds)):
            assert np.asarray(g).shape == want.shape, tract.version()
            np.testing.assert_array_equal(g, want)


# -- a Loop whose body does not read its iteration number ----------------------------------------

UNREAD = RUN_TIME_TRIPS.replace("f = Cast<to = 1>(i)", "f = Constant<value = float {2}>()")


@pytest.mark.parametrize("m", [-1, 0, 1, 3])
def test_a_loop_that_does_not_read_its_iteration_number_masks_its_carried_values(m):
    model = parse(UNREAD)
    lowered, report = lower(model, target="tract")
    # x * 2, the same in every iteration, leaves the Scan's body
    assert report.rules_fired == {"tract-loop-to-range-scan": 1, "hoist-loop-invariant": 1}
    counts = op_counts(lowered)
    assert counts["Loop"] == 0 and counts["Scan"] == 1 and counts["Where"] == 2
    x = np.array([1, -2, 0.5, 3], np.float32)
    _total, same, steps = _same_as_original(model, lowered, {"x": x, "m": np.array(m)})
    assert steps.shape == (max(m, 0), 4)
    np.testing.assert_array_equal(same, x)


@pytest.mark.parametrize("m", [0, 1, 3])
def test_tract_runs_a_scan_whose_body_did_not_read_the_iteration_number(m):
    pytest.importorskip("tract", reason="the tract oracle: pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = parse(UNREAD)
    lowered, _ = lower(model, target="tract")
    feeds = {"x": np.array([1, -2, 0.5, 3], np.float32), "m": np.array(m)}
    for got, want in zip(run_in_runtime("tract", lowered, feeds), run_ort(model, feeds)):
        assert np.asarray(got).shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_loop_with_nothing_to_mask_is_refused():
    model = parse("""g (float[4] x, int64 m) => (float[?,4] steps) {
        go = Constant<value = bool {1}>()
        steps = Loop(m, go) <body = body (int64 i, bool c) => (bool c2, float[4] step) {
            c2 = Identity(c)
            f = Constant<value = float {2}>()
            step = Mul(x, f)
        }>
    }""")
    refusal = _refusal(model, target_tract._check_loop_to_range_scan)
    assert refusal.reason.startswith(
        "the body does not read the iteration number and carries no value of a type Where takes"
    )


# -- declared intermediate shapes ----------------------------------------------------------------

DECLARED = """<ir_version: 9, opset_import: ["" : 17]>
g (float[N,3] x) => (float[N,3] y) <float[N,3] a> {
    a = Relu(x)
    y = Neg(a)
}"""


def _value_info(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    return {v.name: v for v in model.graph.value_info}


def _dims(value: onnx.ValueInfoProto) -> list[int | str | None]:
    return [
        d.dim_param or (d.dim_value if d.HasField("dim_value") else None)
        for d in value.type.tensor_type.shape.dim
    ]


def test_tract_makes_named_dims_of_intermediate_shapes_unknown_and_keeps_the_interface():
    model = onnx.parser.parse_model(DECLARED)
    lowered, _ = lower(model, target="tract")
    assert _dims(_value_info(lowered)["a"]) == [None, 3]
    for value in (*lowered.graph.input, *lowered.graph.output):
        assert _dims(value) == ["N", 3]
    kept, _ = lower(model, target="generic")
    assert _dims(_value_info(kept)["a"]) == ["N", 3]


def test_subgraph_inputs_and_outputs_keep_their_rank_and_static_dims_for_tract():
    lowered, _ = lower(parse(HALVE.replace("float[4]", "float[N]")), target="tract")
    (scan,) = [n for n in lowered.graph.node if n.op_type == "Scan"]
    body = next(a.g for a in scan.attribute if a.name == "body")
    assert [_dims(v) for v in body.output] == [[], [], [None], [], [], [None]]
    assert all(None in _dims(v) or not _dims(v) for v in body.input)
    assert not any(isinstance(d, str) for v in body.value_info for d in _dims(v))
    static, _ = lower(parse(HALVE), target="tract")
    (scan,) = [n for n in static.graph.node if n.op_type == "Scan"]
    body = next(a.g for a in scan.attribute if a.name == "body")
    assert _dims(body.output[-1]) == [4]


def test_tract_runs_with_concrete_input_facts_once_the_hints_are_gone():
    tract = pytest.importorskip("tract", reason="the tract oracle: pip install tract")
    import tempfile

    model = onnx.parser.parse_model(DECLARED)
    lowered, _ = lower(model, target="tract")
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    with tempfile.TemporaryDirectory() as folder:
        results = {}
        for name, proto in (("declared", model), ("lowered", lowered)):
            path = f"{folder}/{name}.onnx"
            onnx.save(proto, path)
            try:
                loaded = tract.onnx().load(path)
                loaded.set_input_fact(0, "4,3,f32")
                runnable = loaded.into_model().into_runnable()
                results[name] = runnable.run([x])[0].to_numpy()
            except Exception as error:
                results[name] = error
    np.testing.assert_array_equal(results["lowered"], -np.maximum(x, 0))
    if not isinstance(results["declared"], Exception):
        pytest.skip(f"tract {tract.version()} takes the declared shape N,3 with concrete facts")
    assert "Impossible to unify" in str(results["declared"])


# -- a while loop that counts ------------------------------------------------------------------

# dynamo's form of `while k < n`: no trip count, the condition checked before and in the body
COUNTED = """g (float[4] x, int64 n) => (int64 k, float[4] h, float[?,4] ys) {
    start = Constant<value = int64 {START}>()
    first = Less(start, n)
    k, h, ys = Loop(, first, start, x) <body = body (int64 i, bool cond, int64 k0, float[4] v)
                                       => (bool more, int64 k1, float[4] w, float[4] out) {
        step = Constant<value = int64 {STEP}>()
        like = CastLike(step, k0)
        k1 = Add(k0, like)
        more = Less(k1, n)
        half = Constant<value = float {0.5}>()
        w = Mul(v, half)
        fk = Cast<to = 1>(k0)
        out = Add(w, fk)
    }>
}"""


def _counted(start: int, step: int) -> onnx.ModelProto:
    return parse(COUNTED.replace("START", str(start)).replace("STEP", str(step)))


@pytest.mark.parametrize(("start", "step"), [(0, 1), (2, 3), (-1, 2)])
@pytest.mark.parametrize("n", [-3, 0, 1, 2, 7])
def test_a_counting_while_loop_takes_its_trip_count(start, step, n):
    model = _counted(start, step)
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-counted-while": 1, "tract-loop-to-range-scan": 1}
    assert op_counts(lowered)["Loop"] == 0
    x = np.array([1, -2, 0.5, 3], np.float32)
    k, _h, ys = _same_as_original(model, lowered, {"x": x, "n": np.array(n)})
    assert ys.shape[0] == max(0, -(-(n - start) // step))
    assert int(k) == start + step * ys.shape[0]


def test_a_first_iteration_without_a_check_runs_once_at_least():
    model = parse(
        COUNTED.replace("START", "5").replace("STEP", "1").replace("Loop(, first,", "Loop(, ,")
    )
    lowered, report = lower(model, target="tract")
    assert "tract-counted-while" in report.rules_fired
    x = np.array([1, -2, 0.5, 3], np.float32)
    for n in (0, 5, 6, 9):
        _k, _h, ys = _same_as_original(model, lowered, {"x": x, "n": np.array(n)})
        assert ys.shape[0] == max(1, n - 5)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (("more = Less(k1, n)", "more = Equal(k1, n)"), "the body's condition is not"),
        (("more = Less(k1, n)", "e = Equal(k1, n) more = And(e, e)"), "the body's condition"),
        (("k1 = Add(k0, like)", "k1 = Sub(k0, like)"), "the counter is not a carried value"),
        (("STEP", "0"), "the counter's step is not a static positive integer"),
        (("more = Less(k1, n)", "m2 = Add(n, k0) more = Less(k1, m2)"), "the bound of the"),
    ],
)
def test_what_the_counter_rule_refuses(edit, reason):
    model = parse(COUNTED.replace(*edit).replace("START", "0").replace("STEP", "1"))
    refusal = _refusal(model, tract_while._check_counted)
    assert refusal.reason.startswith(reason)


def test_tract_runs_the_counting_loop():
    pytest.importorskip("tract", reason="the tract oracle: pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = _counted(2, 3)
    lowered, _ = lower(model, target="tract")
    x = np.array([1, -2, 0.5, 3], np.float32)
    for n in (0, 3, 10):
        feeds = {"x": x, "n": np.array(n)}
        for got, want in zip(run_in_runtime("tract", lowered, feeds), run_ort(model, feeds)):
            assert np.asarray(got).shape == want.shape
            np.testing.assert_array_equal(got, want)


# -- Compress ------------------------------------------------------------------------------------

COMPRESS = """g (float[N,3] x, bool[K] c) => (float[?,?] y) {
    y = Compress<axis = AXIS>(x, c)
}"""


@pytest.mark.parametrize(
    ("axis", "shape", "mask"),
    [
        ("0", (4, 3), [True, False, True, True]),
        ("0", (4, 3), [False, False, False, False]),
        ("0", (4, 3), [False, True]),  # shorter than the axis
        ("0", (0, 3), []),
        ("-1", (4, 3), [True, False, True]),
        ("1", (4, 3), [False, True, True]),
    ],
)
def test_compress_becomes_a_gather_at_nonzero_for_tract(axis, shape, mask):
    text = COMPRESS.replace("AXIS", axis)
    if axis != "0":
        text = text.replace("bool[K]", "bool[3]")
    model = parse(text)
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-compress-to-gather": 1}
    counts = op_counts(lowered)
    assert counts["Compress"] == 0 and counts["NonZero"] == 1 and counts["Gather"] == 1
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    _same_as_original(model, lowered, {"x": x, "c": np.array(mask, bool)})
    default, _ = lower(model, target="generic")
    assert op_counts(default)["Compress"] == 1


def test_compress_without_an_axis_flattens_first():
    model = parse("""g (float[2,3] x, bool[5] c) => (float[?] y) { y = Compress(x, c) }""")
    lowered, _ = lower(model, target="tract")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = _same_as_original(model, lowered, {"x": x, "c": np.array([1, 0, 0, 1, 1], bool)})
    np.testing.assert_array_equal(y, [0, 3, 4])


def test_tract_runs_the_gather_it_cannot_run_as_compress():
    tract = pytest.importorskip("tract", reason="the tract oracle: pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = parse(COMPRESS.replace("AXIS", "0"))
    lowered, _ = lower(model, target="tract")
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "c": np.array([1, 0, 1, 1], bool)}
    (got,) = run_in_runtime("tract", lowered, feeds)
    np.testing.assert_array_equal(got, run_ort(model, feeds)[0])
    try:
        run_in_runtime("tract", model, feeds)
    except Exception as error:
        assert "Compress" in str(error)
    else:
        pytest.skip(f"tract {tract.version()} runs Compress: the rewrite is no longer needed")


@pytest.mark.parametrize(("limit", "kept"), [(9223372036854775807, False), (100000, True)])
def test_a_large_trip_count_is_kept_as_a_limit(limit, kept):
    """2**63 - 1 (TorchScript's `while`) bounds nothing; another large trip count stays."""
    model = parse(
        COUNTED.replace("START", "0")
        .replace("STEP", "1")
        .replace("Loop(, first,", "Loop(big, first,")
        .replace(
            "first = Less(start, n)",
            f"first = Less(start, n)\n    big = Constant<value = int64 {{{limit}}}>()",
        )
    )
    lowered, report = lower(model, target="tract")
    assert "tract-counted-while" in report.rules_fired
    assert op_counts(lowered)["Min"] == int(kept)
    x = np.array([1, -2, 0.5, 3], np.float32)
    for n in (0, 4):
        _same_as_original(model, lowered, {"x": x, "n": np.array(n)})


# -- Split with run-time sizes -------------------------------------------------------------------

SPLIT = """g (float[6,4] x, int64[3] s) => (float[?,?] a, float[?,?] b, float[?,?] c) {
    a, b, c = Split<axis = AXIS>(x, s)
}"""


@pytest.mark.parametrize(
    ("axis", "sizes"),
    [("0", [1, 2, 3]), ("0", [0, 6, 0]), ("0", [6, 0, 0]), ("1", [2, 1, 1]), ("-1", [0, 0, 4])],
)
def test_a_split_with_run_time_sizes_becomes_gathers_for_tract(axis, sizes):
    model = parse(SPLIT.replace("AXIS", axis))
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-split-to-gathers": 1}
    counts = op_counts(lowered)
    assert counts["Split"] == 0 and counts["Range"] == 3 and counts["CumSum"] == 0
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    _same_as_original(model, lowered, {"x": x, "s": np.array(sizes, np.int64)})
    default, _ = lower(model, target="generic")
    assert op_counts(default)["Split"] == 1


def test_a_split_with_static_sizes_is_left_to_tract():
    model = parse("""g (float[6,4] x) => (float[2,4] a, float[4,4] b) {
        s = Constant<value = int64[2] {2, 4}>()
        a, b = Split<axis = 0>(x, s)
    }""")
    lowered, report = lower(model, target="tract")
    assert "tract-split-to-gathers" not in report.rules_fired and op_counts(lowered)["Split"] == 1


def test_tract_runs_the_gathers_of_a_split():
    tract = pytest.importorskip("tract", reason="the tract oracle: pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = parse(SPLIT.replace("AXIS", "0"))
    lowered, _ = lower(model, target="tract")
    feeds = {"x": np.arange(24, dtype=np.float32).reshape(6, 4), "s": np.array([1, 2, 3])}
    for got, want in zip(run_in_runtime("tract", lowered, feeds), run_ort(model, feeds)):
        np.testing.assert_array_equal(got, want)
    try:
        run_in_runtime("tract", model, feeds)
    except Exception as error:
        assert "Need splits to be a constant" in str(error)
    else:
        pytest.skip(f"tract {tract.version()} runs Split with run-time sizes")


def test_a_body_that_reads_its_condition_input_reads_whether_it_runs():
    """In an iteration the loop runs, the condition input is true; the masked Scan gives the
    body `run`, true exactly then."""
    model = parse(HALVE.replace("flipped = Not(flag)", "flipped = Xor(flag, cond)"))
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-while-to-masked-scan": 1}
    for x in X_CASES.values():
        for m, go in ((0, True), (5, True), (5, False)):
            _same_as_original(model, lowered, _halve_feeds(x, m, go))


IF_BODY = HALVE.replace(
    "out = Add(next, fi)",
    """zero_f = Constant<value = float {0}>()
        big = Greater(fi, zero_f)
        out = If(big) <then_branch = t () => (float[4] p) { p = Add(next, fi) },
                       else_branch = e () => (float[4] q) { q = Neg(next) }>""",
)


def test_an_if_with_safe_branches_may_stay_in_the_masked_body():
    model = parse(IF_BODY)
    lowered, report = lower(model, target="tract")
    assert "tract-while-to-masked-scan" in report.rules_fired
    for x in X_CASES.values():
        _same_as_original(model, lowered, _halve_feeds(x, 6, True))


def test_an_if_with_an_unsafe_branch_is_refused():
    model = parse(IF_BODY.replace("q = Neg(next)", "k = Cast<to = 7>(fi) q = Gather(x, k)"))
    refusal = _refusal(model, tract_while._check_masked_scan)
    assert refusal.reason == (
        "the body computes Gather '' at positions or sizes that change between iterations "
        "(input 'k'), which may fail after the loop would have stopped"
    )


@pytest.mark.parametrize(
    ("body_condition", "first_condition", "strict"),
    [
        ("more = Greater(n, k1)", "first = Greater(n, start)", True),
        ("more = LessOrEqual(k1, n)", "first = LessOrEqual(start, n)", False),
        ("more = GreaterOrEqual(n, k1)", "first = GreaterOrEqual(n, start)", False),
        (
            "m0 = Less(k1, n) more = Cast<to = 9>(m0)",
            "f0 = Less(start, n) first = Cast<to = 9>(f0)",
            True,
        ),
    ],
)
def test_the_counter_may_be_compared_either_way_and_cast(body_condition, first_condition, strict):
    """TorchScript's `while k < n` (or <=): an unbounded trip count, conditions cast to bool."""
    model = parse(
        COUNTED.replace("START", "1")
        .replace("STEP", "2")
        .replace("more = Less(k1, n)", body_condition)
        .replace(
            "first = Less(start, n)",
            first_condition + "\n    big = Constant<value = int64 {9223372036854775807}>()",
        )
        .replace("Loop(, first,", "Loop(big, first,")
    )
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-counted-while": 1, "tract-loop-to-range-scan": 1}
    x = np.array([1, -2, 0.5, 3], np.float32)
    for n in (-1, 0, 1, 2, 3, 8):
        _k, _h, ys = _same_as_original(model, lowered, {"x": x, "n": np.array(n)})
        rows = max(0, -(-(n - 1 + (0 if strict else 1)) // 2))
        assert ys.shape[0] == rows


@pytest.mark.parametrize(
    "edit",
    [
        ("first = Less(start, n)", "first = Less(n, start)"),  # a first test of its own
        (
            "more = Less(k1, n)",
            "k2 = Less(k1, n) a0 = Abs(v) t0 = ReduceSum<keepdims = 0>(a0) "
            "lim = Constant<value = float {4}>() small = Less(t0, lim) more = And(k2, small)",
        ),
    ],
    ids=["first condition", "counter and data"],
)
def test_a_condition_that_tests_more_than_the_counter_stays_under_the_bound(edit):
    """`for i in range(n): ... if ...: break` (TorchScript: an unbounded Loop whose condition
    is And(i + 1 < n, not broken)): the count bounds it, the masked Scan runs it."""
    model = parse(COUNTED.replace("START", "0").replace("STEP", "1").replace(*edit))
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-counted-while": 1, "tract-while-to-masked-scan": 1}
    for x in (*X_CASES.values(), np.full(4, 0.5, np.float32), np.full(4, 3, np.float32)):
        for n in (-1, 0, 1, 2, 9):
            _same_as_original(model, lowered, {"x": x, "n": np.array(n)})


# -- If outputs that are constants in both branches ----------------------------------------------

IF_MIXED = """g (float[N,3] x, int64 i, bool c) => (bool taken, float[3] row, float k) {
    taken, row, k = If(c) <
        then_branch = t () => (bool a, float[3] r, float ka) {
            a = Constant<value = bool {1}>()
            r = Gather(x, i)
            ka = Constant<value = float {1}>()
        },
        else_branch = e () => (bool b, float[3] s, float kb) {
            b = Constant<value = bool {0}>()
            ax = Constant<value = int64[1] {0}>()
            s = ReduceSum<keepdims = 0>(x, ax)
            kb = Constant<value = float {2}>()
        }>
}"""


def _if_mixed():
    return onnx.parser.parse_model('<ir_version: 9, opset_import: ["" : 17]>\n' + IF_MIXED)


@pytest.mark.parametrize("c", [True, False])
def test_constant_outputs_of_an_if_leave_it_as_where(c):
    """The Gather runs only when taken (i may be out of range otherwise): the If stays, with
    the row only; the flag and the scale become a logical choice and a Where."""
    model = _if_mixed()
    lowered, report = lower(model, target="tract")
    assert report.rules_fired == {"tract-if-constants-to-where": 1}
    counts = op_counts(lowered)
    assert counts["If"] == 1 and counts["Where"] == 1 and counts["Or"] == 1
    (if_node,) = [n for n in lowered.graph.node if n.op_type == "If"]
    assert len(if_node.output) == 1
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    _same_as_original(model, lowered, {"x": x, "i": np.array(9 if not c else 2), "c": np.array(c)})
    default, _ = lower(model, target="generic")
    assert op_counts(default)["Where"] == 0


def test_an_if_without_plain_outputs_is_refused():
    from seqlower.rules import tract_if

    model = onnx.parser.parse_model(
        '<ir_version: 9, opset_import: ["" : 17]>\n'
        + IF_MIXED.replace("=> (bool taken, float[3] row, float k)", "=> (float[3] row)")
        .replace("taken, row, k = If(c)", "row = If(c)")
        .replace("(bool a, float[3] r, float ka)", "(float[3] r)")
        .replace("(bool b, float[3] s, float kb)", "(float[3] s)")
        .replace("a = Constant<value = bool {1}>()", "")
        .replace("b = Constant<value = bool {0}>()", "")
        .replace("ka = Constant<value = float {1}>()", "")
        .replace("kb = Constant<value = float {2}>()", "")
    )
    refusal = _refusal_if(model, tract_if._check)
    assert refusal.reason == "no output is a constant or an outer value in both branches"


def _refusal_if(model, check) -> Refusal:
    model = ir.from_proto(model)
    NormalizePass()(model)
    ctx = Context(Facts(model), Rewriter(model), Options(target="tract"))
    (node,) = [n for n in model.graph if n.op_type == "If"]
    result = check(node, ctx)
    assert isinstance(result, Refusal), result
    return result


def test_tract_runs_the_if_with_its_constants_taken_out():
    tract = pytest.importorskip("tract", reason="the tract oracle: pip install tract")
    from seqlower.verification.runtimes import run_in_runtime

    model = _if_mixed()
    lowered, _ = lower(model, target="tract")
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "i": np.array(1)}
    for c in (True, False):
        feeds["c"] = np.array(c)
        got = run_in_runtime("tract", lowered, feeds)
        for g, want in zip(got, run_ort(model, feeds)):
            np.testing.assert_array_equal(g, want)
    assert tract is not None


def test_a_compress_or_a_split_of_strings_is_left_for_tract():
    """onnxruntime's Gather copies only the first string of each row of more than one element
    (quirk string-gather), so strings are never gathered: the Compress and the Split stay (tract
    then says it cannot run them) and the model computes what the original does."""
    compress = parse(COMPRESS.replace("AXIS", "0").replace("float", "string"))
    lowered, report = lower(compress, target="tract")
    assert "tract-compress-to-gather" not in report.rules_fired
    assert op_counts(lowered)["Compress"] == 1
    x = np.array([[f"{r}{c}" for c in range(3)] for r in range(4)], dtype=object)
    (y,) = _same_as_original(compress, lowered, {"x": x, "c": np.array([1, 0, 1, 1], bool)})
    assert y.tolist() == [["00", "01", "02"], ["20", "21", "22"], ["30", "31", "32"]]
    split = parse(
        """g (string[N,3] x, int64[2] s) => (string[?,3] a, string[?,3] b) {
        a, b = Split<axis = 0>(x, s)
    }"""
    )
    lowered, report = lower(split, target="tract")
    assert "tract-split-to-gathers" not in report.rules_fired
    _same_as_original(split, lowered, {"x": x, "s": np.array([1, 3], np.int64)})
