"""Every ONNX conformance case that uses sequences, every PyTorch fixture and every example,
lowered with the matching `--target`, runs in OpenVINO and in tract and matches the expected
outputs (ONNX's test data, PyTorch's outputs), or is skipped with an explicit reason that the
test asserts. A sequence-typed interface, which neither runtime takes, is flattened
(`--flatten-sequence-io`, the sequence inputs given the lengths of the data); what stays
skipped is an optional-typed interface or a sequence of run-time length, or a known limit listed
in KNOWN with the runtime's own message. A listed case that starts to pass fails
the test, so that the list shrinks.

The runtimes' own faults that the README's Portability section shows are probed here with
minimal models: each test skips, not fails, once a newer release fixes the fault.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import COUNTED_ADDS, ROWS_OF_A_RUN_TIME_COUNT, parse

openvino = pytest.importorskip("openvino", reason="the OpenVINO oracle: pip install openvino")
tract = pytest.importorskip("tract", reason="the tract oracle: pip install tract")

from bench.portability import (  # noqa: E402 (after the importorskip guards)
    all_cases,
    evaluate_lowered,
    lower_for,
    probe,
    run_model,
    runtime_versions,
    why_not_runnable,
)
from seqlower.targets import PROFILES  # noqa: E402

CASES = {f"{case.source}:{case.name}": case for case in all_cases()}
INTERFACE = ("sequence-typed interface", "optional-typed interface", "string tensor")

# (case, runtime) -> (status, text in the runtime's message, why it cannot pass)
KNOWN = {
    ("onnx:test_sequence_model1", "tract"): (
        "load",
        "in output_facts invocation for If",
        "the insert position is an overridable initializer and the elements differ in shape, so "
        "it is lowered to an If chain whose branches differ in shape, which tract cannot type",
    ),
    ("torch:split_sum_scripted", "tract"): (
        "load",
        "Unimplemented(Loop)",
        "the Loop adds up the chunks of x.split(2, 1), the last of which may be narrower: the "
        "sum's shape is not proved the same in every iteration, so the Loop is not a Scan",
    ),
    ("while:count_while", "tract"): (
        "run",
        'Evaluating #11 "/Mod" Rem',
        "the loop reads x[i % N] and may run zero times, so its Scan runs in an If on the trip "
        "count; tract 0.23.9 does not carry the sizes SetSymbols binds (this harness's first "
        "plan) into an If's branches, so the Scan's Mod by N fails there. The model's own "
        "facts (as `seqlower optimize --target tract --verify` plans it) or concrete ones run it",
    ),
    ("torch:len_of_split", "tract"): (
        "run",
        "Unsupported DatumType in the public API TDim",
        "tract's Python API cannot return an output computed from shapes only",
    ),
    **{
        (f"onnx:test_sequence_map_extract_shapes{suffix}", "tract"): (
            "run",
            "Unsupported DatumType in the public API TDim",
            "tract's Python API cannot return an output computed from shapes only",
        )
        for suffix in ("", "_expanded")
    },
    **{
        (f"onnx:{case}", runtime): (
            "lowering fails",
            "have no declared shape, not even a rank",
            "the sequence input's elements declare no shape, so --flatten-sequence-io cannot "
            "type the tensors that replace it (refused in one line)",
        )
        for case in (
            "test_identity_sequence",
            "test_sequence_insert_at_back",
            "test_sequence_insert_at_front",
        )
        for runtime in ("openvino", "tract")
    },
    **{
        (f"accumulator:{case}", "tract"): (
            "load",
            # keypoints: the body runs in an If on the trip count, whose Resize the message,
            # cut short, names no more
            ("Resize", '"past/run" If ToTypedTranslator'),
            "the loop becomes a Scan over the detections, but its body resizes each mask to its "
            "box, sizes computed at run time, which tract's Resize does not take",
        )
        for case in ("keypoints", "paste_masks")
    },
    ("loop:split_k", "tract"): (
        "load",
        "Unimplemented(Loop)",
        "the pieces appended change shape from one iteration to the next, so the list is "
        "a Concat accumulator and the Loop cannot be a Scan (whose state keeps one shape)",
    ),
    ("loop:while_halve", "tract"): (
        "load",
        "Unimplemented(Loop)",
        "a while loop with no bound but its trip count 2**63 - 1: not a masked Scan",
    ),
    ("idiom:detection_postprocess", "tract"): (
        "load",
        "Unimplemented(Loop)",
        "each image keeps a number of boxes known at run time only: the boxes kept are a list "
        "whose pieces change size, carried by the Loop, which therefore cannot be a Scan",
    ),
    ("idiom:greedy_decode", "tract"): (
        "load",
        "Unimplemented(Loop)",
        "a decoder loop that stops at the end token: a masked Scan would go on embedding tokens "
        "after the stop, and the embedding's Gather could then fail, so the loop stays a Loop",
    ),
    ("idiom:pad_batch", "tract"): (
        "load",
        "Unimplemented(Loop)",
        "the loop that cuts the row ranges grows the rows cut so far by a Concat each iteration, "
        "a state that changes shape, which a Scan cannot carry: the loop stays a Loop",
    ),
    **{
        (f"dynamo:embedding_bag_{mode}", "tract"): (
            "load",
            ("Translating node #26", "Eq ToTypedTranslator", "If ToTypedTranslator"),
            "the loop becomes a Scan over the bags, but its body slices the offsets at run-time "
            "positions and tests the slices with an If, which tract cannot type",
        )
        for mode in ("max", "mean", "sum")
    },
}


def test_every_case_is_collected():
    sources = [name.split(":")[0] for name in CASES]
    assert sources.count("onnx") >= 32 and sources.count("torch") == 22
    assert sources.count("example") == 1 and sources.count("accumulator") == 7
    assert sources.count("loop") == 9 and sources.count("dynamo") == 3
    assert sources.count("while") == 2
    assert {name for name, _ in KNOWN} <= set(CASES), "a listed case is no longer collected"


def _opset(model) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


# onnx before 1.19 ships this conformance case at opset 12, where a Split takes no run-time sizes
# (opset 13): its chunks become Slices at run-time bounds, which tract cannot run
if _opset(CASES["onnx:test_split_to_sequence_2"].model) < 13:
    KNOWN[("onnx:test_split_to_sequence_2", "tract")] = (
        "run",
        "SymbolScope",
        "at opset 12 (onnx's copy of the case before 1.19) a Split takes no run-time sizes, so "
        "the chunks are Slices at run-time bounds, which tract 0.23.9 cannot run",
    )


@pytest.mark.parametrize("runtime", ["openvino", "tract"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_lowered_case_runs_and_matches(name, runtime):
    case = CASES[name]
    outcome = evaluate_lowered(case, runtime)  # a sequence interface is flattened if it can be
    if outcome.status == "skipped":
        assert outcome.detail.startswith(INTERFACE), outcome
        assert why_not_runnable(case.model, runtime) == outcome.detail, "the interface is kept"
        pytest.skip(outcome.detail)
    known = KNOWN.get((name, runtime))
    if known:
        status, message, why = known
        statuses = status if isinstance(status, tuple) else (status,)
        messages = message if isinstance(message, tuple) else (message,)
        assert outcome.status in statuses and any(m in outcome.detail for m in messages), (
            f"{outcome}: no longer the known failure; update KNOWN and the README"
        )
        pytest.skip(why)
    assert outcome.status == "correct", outcome


# -- the runtimes' own faults, each with a minimal model ---------------------------------------

IF_CONSTANTS = """g (float[4,3] x, bool c) => (float[4,3] y) {
    k = If(c) <then_branch = t () => (float a) { a = Constant<value = float {1}>() },
               else_branch = e () => (float b) { b = Constant<value = float {2}>() }>
    y = Mul(x, k)
}"""

SCAN_EMPTY = """g (float[T,3] x) => (float[3] y, float[T,3] ys) {
    z = Constant<value = float[3] {1, 1, 1}>()
    y, ys = Scan<num_scan_inputs = 1, body = b (float[3] acc, float[3] row)
                                              => (float[3] acc2, float[3] out) {
        acc2 = Add(acc, row)
        out = Identity(acc2)
    }>(z, x)
}"""

SHAPE_OUTPUT = """g (float[N,3] x) => (int64 n) {
    s = Shape(x)
    i = Constant<value = int64 {0}>()
    n = Gather(s, i)
}"""


def test_tract_takes_the_then_branch_of_an_if_with_constant_branches():
    """tract 0.23.9 folds `If(c, 1, 2)` to the then-branch's constant: `x * 1` for c false."""
    model = parse(IF_CONSTANTS)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    feeds = {"x": x, "c": np.array(False)}
    (got,) = run_model("tract", model, feeds)
    if np.array_equal(got, 2 * x):
        pytest.skip(f"fixed in tract {tract.version()}: update the README")
    np.testing.assert_array_equal(got, x)  # the then-branch's value
    (lowered,) = run_model("tract", lower_for(model, "tract"), feeds)  # If -> Where
    np.testing.assert_array_equal(lowered, 2 * x)


def test_tract_returns_a_scalar_state_from_a_scan_over_an_empty_axis():
    """tract 0.23.9: the final state of a Scan that runs zero times is a scalar, not the
    initial state (shape [3]); onnxruntime 1.32 and OpenVINO 2026.4 raise instead."""
    model = parse(SCAN_EMPTY)
    feeds = {"x": np.zeros((0, 3), np.float32)}
    state, stacked = run_model("tract", model, feeds)
    if state.shape == (3,):
        pytest.skip(f"fixed in tract {tract.version()}: update the README")
    assert state.shape == () and stacked.shape == (0, 3)
    with pytest.raises(Exception, match="Dimension 0 is 0"):
        run_model("onnxruntime", model, feeds)


def test_tract_python_api_cannot_return_an_output_computed_from_shapes():
    model = parse(SHAPE_OUTPUT)
    feeds = {"x": np.zeros((5, 3), np.float32)}
    try:
        (n,) = run_model("tract", model, feeds)
    except Exception as error:
        assert "Unsupported DatumType in the public API TDim" in str(error)
    else:
        assert int(n) == 5
        pytest.skip(f"fixed in tract {tract.version()}: update the README")
    assert int(run_model("openvino", model, feeds)[0]) == 5


def test_the_profiles_agree_with_the_probes():
    """seqlower/targets.py's support lists are what `python -m bench.portability --probe`
    shows, for the versions they were probed with."""
    versions = runtime_versions()
    if (versions["openvino"], versions["tract"]) != ("2026.4.1", "0.23.9"):
        pytest.skip(f"the profiles were probed with OpenVINO 2026.4.1 and tract 0.23.9: {versions}")
    openvino_results, tract_results = probe("openvino"), probe("tract")
    openvino_fails = {name for name, o in openvino_results.items() if o.status != "correct"}
    run_time_ranks = {
        "Reshape to a shape of run-time length",
        "A list of elements of run-time rank, as tensors",
    }
    assert openvino_fails == {"SequenceMap", "Loop carrying a constant of size 0", *run_time_ranks}
    for name in run_time_ranks:  # so the list of such elements stays, and the reason says why
        assert "shape.rank().is_dynamic()" in openvino_results[name].detail
        assert "shape input is variable" in tract_results[name].detail
    assert "dynamic rank" in PROFILES["openvino"].runtime_ranks
    assert "shape input is variable" in PROFILES["tract"].runtime_ranks
    assert set(PROFILES["openvino"].unsupported_ops) == {"SequenceMap"}
    assert "a Loop that carries a constant of size 0" in PROFILES["openvino"].source
    tract_loads = {name for name, o in tract_results.items() if o.status != "load"}
    assert tract_loads == {
        "Scan",
        "If (run-time condition)",
        "If (different constant per branch)",
        "Where",
    }
    assert "branches give different shapes fails to load" in PROFILES["tract"].source
    assert tract_results["If (different constant per branch)"].status == "wrong"
    assert set(PROFILES["tract"].unsupported_ops) == {"Loop"}
    assert PROFILES["tract"].sequence_ops == "error" and "If" in PROFILES["tract"].doubtful_ops


SCAN_PASSED_THROUGH = """g (float[3] x, int64[2] steps) => (float[3] y) {
    y = Scan<num_scan_inputs = 1, body = b (float[3] kept, int64 i) => (float[3] kept) {}>(x, steps)
}"""

SCAN_OUTPUT_READ = """g (float[4] x, int64[3] steps) => (float[4] total, float[3,4] all) {
    total, all = Scan<num_scan_inputs = 1, body = b (float[4] v, int64 i)
                                                   => (float[4] w, float[4] step) {
        f = Cast<to = 1>(i)
        step = Mul(x, f)
        w = Add(v, step)
    }>(x, steps)
}"""


def test_onnxruntime_gives_zeros_for_a_scan_state_passed_through():
    """onnxruntime 1.32: a Scan body whose state output is its state input gives zeros (memory
    never written); the tract rules copy such a state with an Identity, which works."""
    model = parse(SCAN_PASSED_THROUGH)
    x = np.array([1, -2, 3], np.float32)
    feeds = {"x": x, "steps": np.array([0, 1])}
    (got,) = run_model("onnxruntime", model, feeds)
    if np.array_equal(got, x):
        pytest.skip("fixed in this onnxruntime: the Identity copies are no longer needed")
    copied = parse(SCAN_PASSED_THROUGH.replace("{}", "{ out = Identity(kept) }").replace(
        "=> (float[3] kept)", "=> (float[3] out)"))  # fmt: skip
    (got,) = run_model("onnxruntime", copied, feeds)
    np.testing.assert_array_equal(got, x)


def test_tract_cannot_read_a_scan_output_inside_the_body():
    """tract 0.23.9 gives a body value that is also a scan output the stacked shape [1, 4]
    inside the body ("Unifying shapes 4 and 1,4"); the tract rules scan an Identity of it."""
    model = parse(SCAN_OUTPUT_READ)
    feeds = {"x": np.array([1, -2, 0.5, 3], np.float32), "steps": np.arange(3)}
    try:
        run_model("tract", model, feeds)
    except Exception as error:
        assert "Unifying shapes 4 and 1,4" in str(error)
    else:
        pytest.skip(f"fixed in tract {tract.version()}: the Identity copies are not needed")


def test_openvino_reads_an_empty_shape_from_a_shape_slice_of_an_empty_constant():
    """OpenVINO 2026.4.1: Shape(start=1, end=3) of a constant of shape (0, 24, 32) gives [];
    loop-concat-to-scan writes such dims as constants when they are static."""
    model = parse("""g (float[2] x) => (int64[?] s) {
        e = Constant<value = float[0,24,32] {}>()
        s = Shape<start = 1, end = 3>(e)
    }""")
    (got,) = run_model("openvino", model, {"x": np.zeros(2, np.float32)})
    if got.tolist() == [24, 32]:
        pytest.skip("fixed in this OpenVINO: the constant dims are no longer needed")
    assert got.size == 0


def test_onnxruntime_empties_a_gather_of_a_descending_range():
    """onnxruntime 1.32 (all optimizations on) empties Gather(x, Range(n - 1, -1, -1)): it reads
    the limit -1 as "the end", as Slice would. For tract, loop-concat-to-scan reverses with
    Gather(x, (n - 1) - Range(0, n)) instead, which it leaves alone."""
    text = """g (float[N,3] x) => (float[?,3] y, float[?,3] z) {
        s = Shape<start = 0, end = 1>(x)
        ax = Constant<value = int64[1] {0}>()
        n = Squeeze(s, ax)
        one = Constant<value = int64 {1}>()
        zero = Constant<value = int64 {0}>()
        down = Constant<value = int64 {-1}>()
        last = Sub(n, one)
        order = Range(last, down, down)
        y = Gather<axis = 0>(x, order)
        up = Range(zero, n, one)
        order2 = Sub(last, up)
        z = Gather<axis = 0>(x, order2)
    }"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y, z = run_model("onnxruntime", parse(text), {"x": x})
    np.testing.assert_array_equal(z, x[::-1])
    if np.array_equal(y, x[::-1]):
        pytest.skip("fixed in this onnxruntime: a Range of step -1 would do")
    assert y.shape == (0, 3)


def test_tract_cannot_plan_a_scan_whose_body_does_not_read_its_input():
    """tract 0.23.9 drops a Scan input its body does not read, then fails ("No scan input"):
    tract-loop-to-range-scan leaves a Loop that does not read its iteration number."""
    model = parse("""g (float[3] x, int64[2] steps) => (float[3] y) {
        y = Scan<num_scan_inputs = 1, body = b (float[3] v, int64 i) => (float[3] w) {
            w = Add(v, v)
        }>(x, steps)
    }""")
    feeds = {"x": np.ones(3, np.float32), "steps": np.arange(2)}
    try:
        (got,) = run_model("tract", model, feeds)
    except Exception as error:
        assert "No scan input" in str(error) or "declutter" in str(error)
    else:
        np.testing.assert_array_equal(got, 4 * feeds["x"])
        pytest.skip(f"fixed in tract {tract.version()}: tract-loop-to-range-scan may take it")


def _decoder_loop(w: np.ndarray, wt: np.ndarray) -> str:
    """A greedy decoder's loop in the ragged tensor form of `tokens[-1]` (the lowered
    tests/fixtures/torch_idioms/greedy_decode): the tokens and a table of their sizes are
    carried; the last is read by a Slice at bounds from a CumSum of the table."""

    def values(a: np.ndarray) -> str:
        return ",".join(repr(float(v)) for v in a.ravel())

    return f"""g (int64 n, float[1,5] h) => (int64[?] y, float[?,?] hh) {{
    big = Constant <value = int64 {{9223372036854775807}}> ()
    zero = Constant <value = int64 {{0}}> ()
    init = Constant <value = int64[1] {{0}}> ()
    table0 = Shape <end = 1> (init)
    w = Constant <value = float[7,5] {{{values(w)}}}> ()
    wt = Constant <value = float[5,7] {{{values(wt)}}}> ()
    c0 = Greater (n, zero)
    hh, y, sizes = Loop (big, c0, h, init, table0) <body = b (int64 i, bool c, float[?,?] hc,
            int64[?] acc, int64[?] tbl) => (bool co, float[?,?] h2, int64[?] acc2, int64[?] tbl2) {{
        m1 = Constant <value = int64[1] {{-1}}> ()
        z = Constant <value = int64 {{0}}> ()
        ends = CumSum (tbl, z)
        starts = Sub (ends, tbl)
        s = Gather (starts, m1)
        e = Gather (ends, m1)
        last = Slice (acc, s, e)
        emb = Gather (w, last)
        ad = Add (emb, hc)
        h2 = Tanh (ad)
        lg = MatMul (h2, wt)
        am = ArgMax <axis = -1, keepdims = 0> (lg)
        acc2 = Concat <axis = 0> (acc, am)
        fd = Shape <end = 1> (am)
        tbl2 = Concat <axis = 0> (tbl, fd)
        one = Constant <value = int64 {{1}}> ()
        i1 = Add (i, one)
        co = Less (i1, n)
    }}>
}}"""


def test_openvino_loses_a_decoder_loop_that_reads_the_last_of_a_ragged_list():
    """OpenVINO 2026.4.1 fails this loop ("Eltwise shape infer" at the Add, or, compiled
    without input shapes, an empty hidden state and fewer tokens), where onnxruntime and the
    loop run in numpy agree; the same loop reading the last token with a Gather runs correctly
    in OpenVINO."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((7, 5)).astype(np.float32)
    wt = rng.standard_normal((5, 7)).astype(np.float32)
    feeds = {"n": np.array(6), "h": rng.standard_normal((1, 5)).astype(np.float32)}
    tokens, h = [0], feeds["h"]
    for _ in range(6):
        h = np.tanh(w[[tokens[-1]]] + h)
        tokens.append(int(np.argmax(h @ wt, -1)[0]))
    model = parse(_decoder_loop(w, wt))
    want_tokens, want_h = run_model("onnxruntime", model, feeds)
    assert want_tokens.tolist() == tokens
    np.testing.assert_allclose(want_h, h, rtol=1e-5)
    try:
        got_tokens, got_h = run_model("openvino", model, feeds)
    except RuntimeError as error:  # compiled for these input shapes: its shape inference fails
        assert "Eltwise shape infer" in str(error)
        return
    if got_tokens.tolist() == tokens and got_h.shape == h.shape:
        pytest.skip("fixed in this OpenVINO: update the README and the notes in tests/lists")
    assert got_h.size == 0 or got_tokens.tolist() != tokens


def test_openvino_fails_on_a_branch_reading_a_value_its_loop_body_returns():
    """OpenVINO 2026.4.1, reading a model from a file, fails on an If of two outputs in a Loop
    body whose branch reads a value the body also returns ("then_results.size() ==
    else_results.size()"); every lowering returns a copy instead (seqlower/passes/
    workarounds.py), which it converts."""
    from test_workarounds import RETURNED_AND_READ

    model = parse(RETURNED_AND_READ)
    feeds = {"x": np.array([1, 0, 2, 0, 3]), "n": np.array(5)}
    want = run_model("onnxruntime", model, feeds)
    try:
        run_model("openvino", model, feeds)
    except Exception as error:  # any failure to convert is the quirk
        assert "then_results.size() == else_results.size()" in str(error)
    else:
        pytest.skip("fixed in this OpenVINO: the copy in seqlower/passes/workarounds.py can go")
    got = run_model("openvino", lower_for(model, "openvino"), feeds)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(w, g)


def test_openvino_fails_on_an_if_whose_branch_reads_an_empty_constant():
    """OpenVINO 2026.4.1 cannot compile an If whose branch reads a constant of size 0 ("CPU
    plug-in doesn't support If operation with dynamic rank"); every lowering makes such a
    constant with ConstantOfShape (seqlower/passes/workarounds.py), which it compiles."""
    from test_workarounds import EMPTY_IN_A_BRANCH

    model = parse(EMPTY_IN_A_BRANCH)
    boxes = np.arange(8, dtype=np.float32).reshape(2, 4)
    try:
        run_model("openvino", model, {"boxes": boxes, "n": np.array(0)})
    except Exception as error:  # any failure to compile is the quirk
        assert "dynamic rank" in str(error)
    else:
        pytest.skip("fixed in this OpenVINO: the empty constants' workaround can go")
    lowered = lower_for(model, "openvino")
    for n in (0, 3):
        feeds = {"boxes": boxes, "n": np.array(n)}
        want = run_model("onnxruntime", model, feeds)
        got = run_model("openvino", lowered, feeds)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(w, g)


def test_openvino_refuses_an_if_condition_of_rank_2():
    """OpenVINO 2026.4.1: "Rank of If condition input must be equal to 0 or 1"; every portable
    lowering squeezes such a condition to a scalar (seqlower/passes/workarounds.py)."""
    from test_workarounds import CONDITION_OF_RANK_2

    model = parse(CONDITION_OF_RANK_2)
    y = np.array([1, -2, 3], np.float32)
    try:
        run_model("openvino", model, {"x": np.ones((1, 1), np.float32), "y": y})
    except Exception as error:  # any failure to convert is the quirk
        assert "Rank of If condition" in str(error)
    else:
        pytest.skip("fixed in this OpenVINO: the condition's Squeeze can go")
    lowered = lower_for(model, "openvino")
    for x in (-1.0, 2.0):
        feeds = {"x": np.full((1, 1), x, np.float32), "y": y}
        want = run_model("onnxruntime", model, feeds)
        got = run_model("openvino", lowered, feeds)
        np.testing.assert_array_equal(want[0], got[0])


ZERO_TRIP_KEPT_ROWS = """g (float[A,4] x, int64 m) => (float[?,A,4] y) {
    c = Constant<value = bool {1}>()
    z = Constant<value = int64[1] {0}>()
    s, k = Loop(m, c) <body = b (int64 i, bool ci) => (bool co, float[A,4] e, bool kk) {
        co = Identity(ci)
        e = Relu(x)
        two = Constant<value = int64 {2}>()
        zero = Constant<value = int64 {0}>()
        md = Mod(i, two)
        kk = Equal(md, zero)
    }>
    kept = Compress<axis = 0>(s, k)
    u = Unsqueeze(x, z)
    dims = Shape<start = 1, end = 3>(u)
    %s
    shape = Concat<axis = 0>(count, dims)
    r = Reshape<allowzero = 1>(kept, shape)
    y = Concat<axis = 0>(u, r)
}"""


def test_openvino_drops_the_reshape_that_gives_a_zero_trip_scan_output_its_dims():
    """OpenVINO 2026.4.1 gives the scan output of a Loop that runs zero times the dims 0 where
    the element's are symbolic ((0, 0, 4), not (0, 3, 4)), and drops a Reshape of it to
    Concat(Shape(it)[:1], the element's dims read outside the loop) as a Reshape to the shape it
    has (the same symbols), so the Concat after it fails. loop-concat-to-scan counts the rows
    a mask keeps from the mask for a portable target, which OpenVINO keeps."""
    counted = ZERO_TRIP_KEPT_ROWS % "count = Shape<end = 1>(kept)"
    feeds = {"x": np.ones((3, 4), np.float32), "m": np.array(0)}
    (want,) = run_model("onnxruntime", parse(counted), feeds)
    assert want.shape == (1, 3, 4)
    try:
        (got,) = run_model("openvino", parse(counted), feeds)
    except Exception as error:  # any failure to run is the quirk
        assert "Concat" in str(error)
    else:
        assert got.shape == (1, 3, 4)
        pytest.skip("fixed in this OpenVINO: loop-concat-to-scan may read the count from the rows")
    from_mask = (
        ZERO_TRIP_KEPT_ROWS % "ints = Cast<to = 7>(k)\n count = ReduceSum<keepdims = 1>(ints)"
    )
    for m in (0, 1, 3):
        feeds["m"] = np.array(m)
        (want,) = run_model("onnxruntime", parse(counted), feeds)
        (got,) = run_model("openvino", parse(from_mask), feeds)
        np.testing.assert_array_equal(want, got)


IF_IN_A_GROWING_LOOP = """g (float[N,5] x, bool[N] cs) => (float[?,5] y) {
    n = Shape<start = 0, end = 1>(x)
    ax = Constant<value = int64[1] {0}>()
    k = Squeeze(n, ax)
    c = Constant<value = bool {1}>()
    s0 = Constant<value = float[1,5] {0, 0, 0, 0, 0}>()
    last, y = Loop(k, c, s0) <body = b (int64 i, bool ci, float[?,5] a)
                                       => (bool co, float[?,5] a2, float[5] e) {
        co = Identity(ci)
        m1 = Constant<value = int64 {-1}>()
        z0 = Constant<value = int64 {0}>()
        ax2 = Constant<value = int64[1] {0}>()
        ci2 = Gather<axis = 0>(cs, i)
        row = Gather<axis = 0>(x, i)
        r1 = Unsqueeze(row, ax2)
        e = If(ci2) <then_branch = tb () => (float[5] p1) { p1 = Gather<axis = 0>(a, m1) },
                     else_branch = eb () => (float[5] p2) { p2 = Gather<axis = 0>(a, z0) }>
        a2 = Concat<axis = 0>(a, r1)
    }>
}"""


def test_openvino_fails_on_an_if_reading_a_growing_value_of_a_loop_whose_final_value_is_unread():
    """OpenVINO 2026.4.1 fails on an If in a Loop body that reads a carried value whose shape
    changes between iterations, when nothing reads the Loop's final value of it ("Can not clone
    with new dims"; reading it after the loop, even its Shape, avoids it; copies or other ops
    between the carried value and the If do not, and some forms give wrong values instead). No
    rewrite that keeps the model's outputs avoids it: a stack a parser keeps (`stack.append`,
    `stack.pop()` under a condition) lowered so fails in OpenVINO."""
    model = parse(IF_IN_A_GROWING_LOOP)
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    feeds = {"x": x, "cs": np.array([True, False, True, False])}
    (want,) = run_model("onnxruntime", model, feeds)
    zeros = np.zeros(5, np.float32)  # a[-1] when cs[i], else a[0]: a starts as one row of zeros
    np.testing.assert_array_equal(want, [zeros, zeros, x[1], zeros])
    try:
        (got,) = run_model("openvino", model, feeds)
    except Exception as error:  # any failure to run is the quirk
        assert "Can not clone with new dims" in str(error)
    else:
        if np.array_equal(got, want):
            pytest.skip("fixed in this OpenVINO: update docs/portability.md")
    read = model.__class__()
    read.CopyFrom(model)
    read.graph.output.append(
        onnx.helper.make_tensor_value_info("last", onnx.TensorProto.FLOAT, None)
    )
    got, _ = run_model("openvino", read, feeds)
    np.testing.assert_array_equal(got, want)


def test_openvino_computes_a_cast_to_float16_and_back_in_float32():
    """OpenVINO 2026.4.1 (CPU, f32 precision) does not round a value cast to float16 and back:
    outputs that went through float16 differ from onnxruntime's and PyTorch's by up to half a
    float16 step (a relative 2**-11); bench.torch_portability compares them with rtol 1e-3."""
    model = parse("g (float[4] x) => (float[4] y) { h = Cast<to = 10>(x)\n y = Cast<to = 1>(h) }")
    x = np.array([0.1, 1 / 3, 0.7771, 1.0001], np.float32)
    (got,) = run_model("openvino", model, {"x": x})
    want = x.astype(np.float16).astype(np.float32)
    if np.array_equal(got, want):
        pytest.skip("fixed in this OpenVINO: float16 outputs may be compared exactly")
    np.testing.assert_array_equal(got, x)
    np.testing.assert_allclose(got, want, rtol=2**-11)


def test_openvino_gives_a_row_to_a_filled_tensor_of_zero_rows_plus_a_scalar():
    """OpenVINO 2026.4.1: ConstantOfShape(Shape(x)) + f for x of shape (0, 1) has shape (1, 1),
    not (0, 1) (ConstantOfShape alone, or x + f, is right). PyTorch exports
    `torch.full_like(b[:, :1], i)` so: torchvision's `_convert_to_roi_format` for an image
    without boxes (tests/fixtures/torch_wild/roi_levels) gets a row too many in OpenVINO."""
    model = parse("""g (float[N,1] x, float f) => (float[?,1] y) {
        s = Shape(x)
        z = ConstantOfShape(s)
        y = Add(z, f)
    }""")
    feeds = {"x": np.zeros((0, 1), np.float32), "f": np.array(3, np.float32)}
    (want,) = run_model("onnxruntime", model, feeds)
    assert want.shape == (0, 1)
    (got,) = run_model("openvino", model, feeds)
    if got.shape == (0, 1):
        pytest.skip("fixed in this OpenVINO: update docs/portability.md")
    assert got.shape == (1, 1)


def _rows_in_one_compiled_model(model: onnx.ModelProto, counts: list[int], tmp_path) -> list:
    """The shape of the output for each count in turn, run by one compiled OpenVINO model."""
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    return [compiled({"x": x, "m": np.array(m)})[compiled.outputs[0]].shape for m in counts]


def test_openvino_gives_a_loop_of_no_iteration_the_rows_of_the_run_before(tmp_path):
    """OpenVINO 2026.4.1 gives a Loop that runs no iteration the scan output of the last
    inference of the same compiled model that ran one: 5 rows, then 0 rows asked, 5 rows
    given. `--target openvino` carries a count of the iterations and cuts each scan output to
    it (`RuntimeWorkaroundsPass`), which OpenVINO computes right."""
    import onnx_ir as ir

    from seqlower.passes.workarounds import RuntimeWorkaroundsPass

    counts = [5, 0, 2, 0]
    want = [(5, 3), (0, 3), (2, 3), (0, 3)]
    original = parse(ROWS_OF_A_RUN_TIME_COUNT)
    if _rows_in_one_compiled_model(original, counts, tmp_path) == want:
        pytest.skip("fixed in this OpenVINO: a Loop's scan outputs need no count")
    counted = ir.from_proto(original)
    RuntimeWorkaroundsPass(openvino_loops=True)(counted)
    assert _rows_in_one_compiled_model(ir.to_proto(counted), counts, tmp_path) == want


LIST_OF_A_RUN_TIME_COUNT = """g (float[N, 3] x, int64 m) => (float[M, 3] rows) {
    c = Constant<value = bool {1}>()
    h0 = Constant<value = float[3] {0, 0, 0}>()
    empty = SequenceEmpty<dtype = 1>()
    h, s = Loop(m, c, h0, empty) <body = b (int64 i, bool ci, float[3] hi, seq(float) acc)
                                        => (bool co, float[3] ho, seq(float) acc2) {
        co = Identity(ci)
        row = Gather<axis = 0>(x, i)
        sum = Add(row, hi)
        ho = Tanh(sum)
        acc2 = SequenceInsert(acc, ho)
    }>
    rows = ConcatFromSequence<axis = 0, new_axis = 1>(s)
}"""


def test_a_list_grown_by_a_loop_of_run_time_count_is_right_in_openvino_run_after_run(tmp_path):
    """The list of a recurrence's states becomes a scan output; for --target openvino it is
    cut to a count of the iterations, so the same compiled model gives 0 rows after a run
    that gave 5."""
    import seqlower

    original = parse(LIST_OF_A_RUN_TIME_COUNT)
    lowered, _ = seqlower.optimize(original, target="openvino")
    generic, _ = seqlower.optimize(original)
    ops = [node.op_type for node in lowered.graph.node]
    assert ops.count("Loop") == 1 and "Range" in ops and "SequenceInsert" not in ops
    assert "Range" not in {node.op_type for node in generic.graph.node}  # no cost by default
    counts = [5, 0, 2, 0]
    assert _rows_in_one_compiled_model(lowered, counts, tmp_path) == [
        (5, 3),
        (0, 3),
        (2, 3),
        (0, 3),
    ]


def test_openvino_runs_a_loop_of_negative_trip_count_without_end():
    """OpenVINO 2026.4.1 runs a Loop whose trip count is negative without end (the
    specification and onnxruntime: no iteration); `--target openvino` gives it `Max(M, 0)`."""
    import onnx_ir as ir

    from seqlower.passes.workarounds import RuntimeWorkaroundsPass
    from seqlower.verification.runner import IsolatedRunner

    original = parse(COUNTED_ADDS)
    feeds = {"x": np.zeros(3, np.float32), "m": np.array(-1)}
    with IsolatedRunner("openvino", original.SerializeToString(), timeout=10.0) as runner:
        outcome = runner.run(feeds)
    if outcome.ok:
        pytest.skip("fixed in this OpenVINO: a negative trip count needs no clamp")
    assert "did not finish" in (outcome.error or "")
    clamped = ir.from_proto(original)
    RuntimeWorkaroundsPass(openvino_loops=True)(clamped)
    with IsolatedRunner("openvino", ir.to_proto(clamped).SerializeToString()) as runner:
        outcome = runner.run(feeds)
    assert outcome.ok, outcome.error
    np.testing.assert_array_equal(outcome.outputs["acc"], np.zeros(3, np.float32))


def _with_openvino_workarounds(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` (its shapes inferred, as a lowering has them) after `--target openvino`'s
    runtime workarounds."""
    import onnx_ir as ir

    from seqlower.passes.workarounds import RuntimeWorkaroundsPass

    rewritten = ir.from_proto(onnx.shape_inference.infer_shapes(model))
    RuntimeWorkaroundsPass(openvino_loops=True)(rewritten)
    return ir.to_proto(rewritten)


def test_openvino_runs_a_range_backwards():
    """OpenVINO 2026.4.1 gives Range(start, limit, delta) |ceil((limit - start) / delta)|
    elements (the specification: max(ceil(..), 0), none once the limit is behind the start):
    Range(5, 2, 1) is [5, 6, 7]. A segment of negative length (`torch.arange(s, s + n)`,
    tests/fixtures/torch_novel/detr_permutation_idx) gathers rows. `--target openvino` gives a
    Range of constant step the limit Max(limit, start) (seqlower/passes/workarounds.py)."""
    from test_workarounds import SEGMENT

    model = parse(SEGMENT)
    x = np.arange(10, 18, dtype=np.int64)
    feeds = {"x": x, "s": np.array(5), "n": np.array(-3)}
    (want,) = run_model("onnxruntime", model, feeds)
    assert want.shape == (0,)
    (got,) = run_model("openvino", model, feeds)
    if got.shape == (0,):
        pytest.skip("fixed in this OpenVINO: a Range needs no clamp (update docs/portability.md)")
    assert got.tolist() == [15, 16, 17]
    clamped = _with_openvino_workarounds(model)
    for s, n in ((5, -3), (3, -1), (3, 0), (2, 4), (0, 8)):
        feeds = {"x": x, "s": np.array(s), "n": np.array(n)}
        (want,) = run_model("onnxruntime", model, feeds)
        (got,) = run_model("openvino", clamped, feeds)
        np.testing.assert_array_equal(got, want)


def test_openvino_mistakes_a_product_of_dims_beside_a_static_zero():
    """OpenVINO 2026.4.1: `ReduceProd(Shape(x)[0:2])` for x of shape [B, 0, 6] (the 0 static)
    is taken for B, so the Reshape of x to [that product, 6] (allowzero=1) fails: "the shape of
    input data (3.0.6) conflicts with the reshape pattern (0.6)" (in a larger model the readers
    compute with B rows instead: tests/fixtures/torch_novel/yolov5_nms_per_image). `--target
    openvino` multiplies the dims with Mul (seqlower/passes/workarounds.py), which it computes
    right."""
    from test_workarounds import DIMS_PRODUCT

    model = parse(DIMS_PRODUCT)
    feeds = {"x": np.zeros((3, 0, 6), np.float32)}
    want = run_model("onnxruntime", model, feeds)
    assert want[0].shape == (0, 6) and want[1].tolist() == [0]
    try:
        got = run_model("openvino", model, feeds)
    except Exception as error:  # at run time: the reshape's check
        assert "conflicts with the reshape pattern" in str(error)
    else:
        if got[0].shape == (0, 6):
            pytest.skip("fixed in this OpenVINO: a ReduceProd of dims may stay (update the docs)")
    got = run_model("openvino", _with_openvino_workarounds(model), feeds)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(g, w)


def test_openvino_gives_a_row_to_a_filled_column_of_no_box_plus_its_image_index():
    """OpenVINO 2026.4.1: `ConstantOfShape([n, 1]) + i` (`bboxes.new_full((n, 1), img_id)`, as
    mmdetection's `bbox2roi` joins boxes with their image index) has one row where n is 0, so
    the Concat beside the boxes fails (tests/fixtures/torch_later/mmdet_roi2bbox). `--target
    openvino` writes it `Expand(i, [n, 1])` (seqlower/passes/filled_arithmetic.py)."""
    from test_openvino_empty_forms import IMAGE_INDEX

    model = parse(IMAGE_INDEX)
    feeds = {"boxes": np.zeros((0, 4), np.float32), "i": np.array(2, np.int64)}
    (want,) = run_model("onnxruntime", model, feeds)
    assert want.shape == (0, 5)
    try:
        run_model("openvino", model, feeds)
    except Exception as error:  # the Concat of a (1, 1) column and (0, 4) boxes
        assert "Concat" in str(error)
    else:
        pytest.skip("fixed in this OpenVINO: a filled tensor plus a scalar may stay")
    rewritten = _with_openvino_workarounds(model)
    for rows in (0, 1, 3):
        feeds["boxes"] = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)
        (want,) = run_model("onnxruntime", model, feeds)
        (got,) = run_model("openvino", rewritten, feeds)
        np.testing.assert_array_equal(got, want)


def test_openvino_fails_on_a_unique_of_no_element():
    """OpenVINO 2026.4.1 fails at run time on a Unique of an empty input ("Cannot get dims for
    non static shape"); `torch.unique` of the image index of no box at all
    (tests/fixtures/torch_later/mmdet_roi2bbox) comes to it. `--target openvino` runs the
    Unique in the else-branch of an If on its input being empty
    (seqlower/passes/empty_unique.py)."""
    from test_openvino_empty_forms import IMAGE_IDS

    model = parse(IMAGE_IDS)
    feeds = {"ids": np.zeros(0, np.float32)}
    want = run_model("onnxruntime", model, feeds)
    assert [w.shape for w in want] == [(0,), (0,), (0,), (0,), ()]
    try:
        run_model("openvino", model, feeds)
    except Exception as error:
        assert "non static shape" in str(error)
    else:
        pytest.skip("fixed in this OpenVINO: a Unique needs no If")
    rewritten = _with_openvino_workarounds(model)
    for ids in ([], [2.0, 1.0, 2.0], [4.0]):
        feeds = {"ids": np.array(ids, np.float32)}
        want = run_model("onnxruntime", model, feeds)
        got = run_model("openvino", rewritten, feeds)
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(g, w)


def test_openvino_starts_a_float_maximum_at_the_lowest_finite_float():
    """OpenVINO 2026.4.1: a float32 ReduceMax of an empty axis or of -inf alone gives
    -3.4028235e38, not -inf (ReduceMin: 3.4028235e38, not +inf). The lists' masked form pads
    chunks with -inf, so an empty chunk's maximum comes out finite
    (tests/fixtures/torch_wild/pyg_unbatch). `--target openvino` corrects it
    (seqlower/passes/reduced_extrema.py)."""
    from test_openvino_empty_forms import EMPTY_AXES_RUN, PADDED_MAX, _padded

    model = parse(PADDED_MAX, opset=17)
    feeds = _padded([[1.0, 2.0], [], [-np.inf]])
    (want,) = run_model("onnxruntime", model, feeds)
    assert want.tolist() == [2.0, -np.inf, -np.inf]
    (got,) = run_model("openvino", model, feeds)
    if np.array_equal(got, want):
        pytest.skip("fixed in this OpenVINO: a maximum needs no correction")
    assert got[1] == np.finfo(np.float32).min
    corrected = _with_openvino_workarounds(model)
    lowest = float(np.finfo(np.float32).min)
    for rows in ([[1.0, 2.0], [], [-np.inf]], [[], []], [[lowest], [lowest, -np.inf], [3.0]]):
        feeds = _padded(rows)
        if not EMPTY_AXES_RUN and feeds["x"].shape[1] == 0:
            continue  # onnxruntime 1.20 fails on a maximum of an axis of size 0
        (want,) = run_model("onnxruntime", model, feeds)
        (got,) = run_model("openvino", corrected, feeds)
        np.testing.assert_array_equal(got, want)


def _reference(model: onnx.ModelProto, feeds: dict) -> list:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, feeds)


def test_openvino_divides_by_a_run_time_scalar_other_than_ieee_rounds():
    """OpenVINO 2026.4.1 (CPU, f32 precision): a float32 Div by a run-time scalar is not the
    correctly rounded quotient: 9 / 0.6 gives 15.0, not 14.999999, so a Floor after it gives 15,
    not 14 (onnx.reference, onnxruntime and PyTorch: 14). MTCNN's box corners,
    `((stride * bb + 1) / scale).floor()` (tests/fixtures/torch_holdout/mtcnn_pyramid), come out
    one pixel larger in some rows, on PyTorch's own data too. Not worked around: a Floor of a
    quotient near an integer is as exact as the runtime's division."""
    model = parse("g (float[N] x, float s) => (float[N] y) { q = Div(x, s)\n y = Floor(q) }")
    feeds = {"x": np.array([9.0, 15.0, 33.0, 4.0], np.float32), "s": np.array(0.6, np.float32)}
    want = np.floor(feeds["x"] / feeds["s"])
    assert want.tolist() == [14.0, 24.0, 54.0, 6.0]
    np.testing.assert_array_equal(_reference(model, feeds)[0], want)
    np.testing.assert_array_equal(run_model("onnxruntime", model, feeds)[0], want)
    (got,) = run_model("openvino", model, feeds)
    if np.array_equal(got, want):
        pytest.skip("fixed in this OpenVINO: update docs/portability.md")
    assert got.tolist() == [15.0, 25.0, 55.0, 6.0]


def test_openvino_orders_the_ties_of_a_topk_otherwise_than_by_index():
    """OpenVINO 2026.4.1: TopK of equal values does not put the lower index first, as the ONNX
    specification says (the 3 largest of 12 zeros: indices [1, 2, 0], not [0, 1, 2]). RT-DETR's
    query selection (tests/fixtures/torch_holdout/rtdetr_encoder_decoder) picks other anchors
    where an image of exact zeros gives equal scores, and its boxes differ."""
    model = parse(
        "g (float[1,N] x) => (float[1,3] v, int64[1,3] i) "
        "{ k = Constant<value = int64[1] {3}>()\n v, i = TopK<axis = 1>(x, k) }"
    )
    feeds = {"x": np.zeros((1, 12), np.float32)}
    assert _reference(model, feeds)[1].tolist() == [[0, 1, 2]]
    assert run_model("onnxruntime", model, feeds)[1].tolist() == [[0, 1, 2]]
    _, got = run_model("openvino", model, feeds)
    if got.tolist() == [[0, 1, 2]]:
        pytest.skip("fixed in this OpenVINO: update docs/portability.md")
    assert sorted(got.ravel().tolist()) != got.ravel().tolist()
    assert set(got.ravel().tolist()) <= set(range(12))


def test_openvino_fails_on_a_reflect_pad_of_an_empty_batch():
    """OpenVINO 2026.4.1: Pad (mode reflect) of x of shape (0, 1, 3) by one on the last axis
    fails its shape check ("pads ... must be not greater than data_shape[D] - 1", read on the
    empty batch axis, which is not padded); onnx.reference and onnxruntime give shape (0, 1, 4).
    HiFi-GAN's period discriminator (tests/fixtures/torch_holdout/hifigan_period_feature_loss)
    reflect-pads so: on a batch of none OpenVINO fails, or, run by seqlower verify's settings
    (one thread), returns values it never computed (its losses are not 0)."""
    model = parse(
        "g (float[B,1,T] x) => (float[B,1,U] y) "
        "{ p = Constant<value = int64[6] {0, 0, 0, 0, 0, 1}>()\n"
        ' y = Pad<mode = "reflect">(x, p) }'
    )
    feeds = {"x": np.zeros((0, 1, 3), np.float32)}
    assert _reference(model, feeds)[0].shape == (0, 1, 4)
    assert run_model("onnxruntime", model, feeds)[0].shape == (0, 1, 4)
    try:
        (got,) = run_model("openvino", model, feeds)
    except Exception as error:
        assert "REFLECT padding mode" in str(error)
        return
    if got.shape == (0, 1, 4):
        pytest.skip("fixed in this OpenVINO: update docs/portability.md")
    raise AssertionError(f"OpenVINO gave shape {got.shape}")


def test_tract_overflows_a_softplus_of_a_large_value():
    """tract 0.23.9: Softplus(x) is inf from x = 89 on (log(1 + exp(x)) with exp overflowing
    float32), where onnxruntime and onnx 1.23.2's onnx.reference give ln(exp(x) + 1) without
    overflow, about x (PyTorch's softplus: x above its threshold 20; onnx 1.18.0's reference
    overflows as tract does). Mamba's `softplus(dt)`
    (tests/fixtures/torch_holdout/mamba_selective_scan_ref) becomes inf on inputs of large
    magnitude, and the scan's state -inf. Not worked around."""
    model = parse("g (float[N] x) => (float[N] y) { y = Softplus(x) }")
    feeds = {"x": np.array([0.0, 20.0, 89.0, 1000.0], np.float32)}
    want = np.logaddexp(np.float32(0), feeds["x"])
    np.testing.assert_allclose(want, [np.log(2.0), 20.0, 89.0, 1000.0], rtol=1e-6)
    np.testing.assert_allclose(run_model("onnxruntime", model, feeds)[0], want, rtol=1e-6)
    (got,) = run_model("tract", model, feeds)
    if np.isfinite(got).all():
        pytest.skip("fixed in this tract: update docs/portability.md")
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-6)
    assert np.isinf(got[2:]).all()


def test_openvino_on_one_thread_gives_a_failed_inference_the_outputs_of_the_run_before(tmp_path):
    """OpenVINO 2026.4.1 (CPU) compiled with INFERENCE_NUM_THREADS 1, as `seqlower verify` and
    the `--target openvino` check compile it (seqlower/verification/runtimes.py), does not raise
    when an inference fails: it returns the outputs of the run before (uninitialised memory on
    a first run). With the default threads the same inference raises. The reflect Pad of an
    empty batch above fails so; verify then reports values or shapes that differ where the
    candidate failed (hifigan_period_feature_loss at B=0; mamba_selective_scan_ref at L=0, where
    OpenVINO fails inside the lowered model and returns the last trial's outputs)."""
    model = parse(
        "g (float[B,1,T] x) => (float[B,1,U] y) "
        "{ p = Constant<value = int64[6] {0, 0, 0, 0, 0, 1}>()\n"
        ' y = Pad<mode = "reflect">(x, p) }'
    )
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    first = np.arange(6, dtype=np.float32).reshape(2, 1, 3)
    empty = np.zeros((0, 1, 3), np.float32)
    core = openvino.Core()
    default = core.compile_model(core.read_model(path), "CPU").create_infer_request()
    default.infer({"x": first})
    try:
        (fixed,) = default.infer({"x": empty}).values()
    except RuntimeError:
        pass
    else:
        assert fixed.shape == (0, 1, 4), fixed.shape
        pytest.skip("fixed in this OpenVINO: the empty batch runs")
    single = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_NUM_THREADS": 1})
    request = single.create_infer_request()
    before = np.array(next(iter(request.infer({"x": first}).values())), copy=True)
    try:
        (got,) = request.infer({"x": empty}).values()
    except RuntimeError:
        pytest.skip("fixed in this OpenVINO: a failed inference raises on one thread too")
    np.testing.assert_array_equal(got, before)
    assert got.shape == (2, 1, 4)


def test_an_inference_that_fails_in_openvino_fails_in_seqlowers_session(tmp_path):
    # seqlower's OpenVINO session (verify, the --target openvino check) is not compiled for one
    # thread, where OpenVINO hands a failed inference the previous run's outputs (above)
    from seqlower.verification.runtimes import open_session

    model = parse(
        "g (float[B,1,T] x) => (float[B,1,U] y) "
        "{ p = Constant<value = int64[6] {0, 0, 0, 0, 0, 1}>()\n"
        ' y = Pad<mode = "reflect">(x, p) }'
    )
    session = open_session("openvino", model)
    first = np.arange(6, dtype=np.float32).reshape(2, 1, 3)
    (padded,) = session.run({"x": first})
    np.testing.assert_array_equal(padded, np.pad(first, [(0, 0), (0, 0), (0, 1)], "reflect"))
    try:
        (got,) = session.run({"x": np.zeros((0, 1, 3), np.float32)})
    except RuntimeError:
        return  # the failure is seen, not someone else's outputs
    assert got.shape == (0, 1, 4), got.shape  # or a release that runs the empty batch
