"""loop-ragged-pad: a Loop that pads each element of a list held as flat rows and a sizes table
(what the list tier leaves) to one length, as a scan output, is one padded Gather of the rows."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import lower, lower_and_compare, op_counts, parse, rule_check, run_ort

from seqlower import runtime_quirks
from seqlower.rule import Refusal
from seqlower.rules import loop_ragged_pads

RNG = np.random.default_rng(11)

# element i is x[starts[i]:ends[i]], the running sums of Abs(raw); the padded length is the
# length of w (a value the same in every iteration); `rows` is the element's rows as a [1]
PADS = """g ({dtype}[T{cols}] x, int64[K] raw, int64[W] w) => ({dtype}[?,?{out_cols}] y) {{
    zero = Constant<value = int64 {{0}}>()
    one = Constant<value = int64[1] {{1}}>()
    sizes = Abs(raw)
    ends = CumSum(sizes, zero)
    starts = Sub(ends, sizes)
    su = Unsqueeze(starts, one)
    eu = Unsqueeze(ends, one)
    n = Size(sizes)
    t = Constant<value = bool {{1}}>()
    ws = Shape(w)
    y = Loop(n, t) <body = b (int64 i, bool c) => (bool c2, {dtype}[?{cols}] r) {{
        c2 = Identity(c)
        s = Gather(su, i)
        e = Gather(eu, i)
        el = Slice(x, s, e)
        z1 = Constant<value = int64[1] {{0}}>()
        {rows}
        rest = Sub(ws, rows)
        {pads}
        r = Pad({pad_inputs})
    }}>
}}"""

SHAPE_ROWS = "sh = Shape(el)\n        rows = Gather(sh, z1)"
SIZE_ROWS = "sz = Size(el)\n        rows = Unsqueeze(sz, z1)"

# the begin and end pads of the rows, as the body computes them (`rest` = W - rows), and the
# begin pad of element i of n rows padded to W
FORMS = {
    "end": ("pads = Concat<axis = 0>(z1, rest)", lambda i, n, w: 0),
    "begin": ("pads = Concat<axis = 0>(rest, z1)", lambda i, n, w: w - n),
    "both": (
        "b1 = Constant<value = int64[1] {2}>()\n        r1 = Sub(rest, b1)\n"
        "        pads = Concat<axis = 0>(b1, r1)",
        lambda i, n, w: 2,
    ),
    "crop": (
        "b1 = Constant<value = int64[1] {-1}>()\n        r1 = Sub(rest, b1)\n"
        "        pads = Concat<axis = 0>(b1, r1)",
        lambda i, n, w: -1,
    ),
    "iteration": (
        "iu = Unsqueeze(i, z1)\n        r1 = Sub(rest, iu)\n"
        "        pads = Concat<axis = 0>(iu, r1)",
        lambda i, n, w: i,
    ),
}


def _model(form="end", *, dtype="float", rows=SHAPE_ROWS, value=True, extra="", opset=18):
    pads, _ = FORMS[form]
    inputs = "el, pads, v" if value else "el, pads"
    if value:
        literal = {"float": "float {-1.5}", "int64": "int64 {-1}", "bool": "bool {1}"}[dtype]
        pads += f"\n        v = Constant<value = {literal}>()"
    text = PADS.format(
        dtype=dtype, cols="", out_cols="", rows=rows, pads=pads + extra, pad_inputs=inputs
    )
    return parse(text, opset=opset)


def _expected(x, sizes, width, begin, value):
    """numpy: each element x[s:e] (clamped to x's rows) put at `begin(i)` in a row of `width`."""
    ends = np.cumsum(sizes).astype(np.int64)
    starts = ends - np.asarray(sizes, np.int64)
    out = np.full((len(sizes), width, *x.shape[1:]), value, x.dtype)
    for i, (s, e) in enumerate(zip(starts, ends)):
        element = x[s:e]
        b = begin(i, len(element))
        for j in range(width):
            if 0 <= j - b < len(element):
                out[i, j] = element[j - b]
    return out


SIZES = {
    "ragged": [2, 0, 3],
    "one": [4],
    "all-empty": [0, 0],
    "ones": [1, 1, 1, 1, 1],
    "past-the-rows": [3, 4],  # x holds 5 rows: the second element is cut to 2 by its Slice
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("sizes", sorted(SIZES))
@pytest.mark.parametrize("width", [0, 3, 6])
def test_each_element_padded_to_one_length_is_one_gather(form, sizes, width):
    sizes = SIZES[sizes]
    model = _model(form)
    total = 5 if sum(sizes) > 5 else sum(sizes) + 2  # rows past the last element, or too few
    x = RNG.standard_normal(total).astype(np.float32)
    feeds = {"x": x, "raw": -np.array(sizes, np.int64), "w": np.zeros(width, np.int64)}
    begin = FORMS[form][1]
    want = _expected(x, sizes, width, lambda i, n: begin(i, n, width), -1.5)
    if runtime_quirks.holds("pad-crop-and-pad"):  # the original's Pad may be wrong or fail
        lowered, report = lower(model)
        (y,) = run_ort(lowered, feeds)
    else:
        lowered, report, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, want)
    assert report.rules_fired["loop-ragged-pad"] == 1
    counts = op_counts(lowered)
    assert "Loop" not in counts and "Pad" not in counts
    assert counts["Gather"] == 1 and counts["Where"] == 1  # one padded Gather


def test_no_element_gives_no_row_and_both_models_hold_no_value():
    """onnxruntime's scan output of no iteration is [0, 0]; the padded Gather's is [0, W]."""
    model = _model("end")
    feeds = {
        "x": np.ones(3, np.float32),
        "raw": np.zeros(0, np.int64),
        "w": np.zeros(4, np.int64),
    }
    lowered, report = lower(model)
    assert report.rules_fired["loop-ragged-pad"] == 1
    (want,), (got,) = run_ort(model, feeds), run_ort(lowered, feeds)
    assert want.shape == (0, 0) and got.shape == (0, 4) and got.dtype == want.dtype


@pytest.mark.parametrize(
    "dtype,np_dtype,value", [("int64", np.int64, -1), ("bool", np.bool_, True)]
)
def test_integer_and_bool_elements_and_the_value_read_from_size(dtype, np_dtype, value):
    model = _model("end", dtype=dtype, rows=SIZE_ROWS)
    x = RNG.integers(0, 2 if dtype == "bool" else 50, 7).astype(np_dtype)
    sizes = [3, 0, 1, 2]
    feeds = {"x": x, "raw": np.array(sizes, np.int64), "w": np.zeros(4, np.int64)}
    lowered, report, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, _expected(x, sizes, 4, lambda i, n: 0, value))
    assert report.rules_fired["loop-ragged-pad"] == 1 and "Loop" not in op_counts(lowered)


def test_no_pad_value_pads_with_zeros():
    model = _model("both", value=False)
    x = RNG.standard_normal(6).astype(np.float32)
    feeds = {"x": x, "raw": np.array([2, 4], np.int64), "w": np.zeros(7, np.int64)}
    lowered, report, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, _expected(x, [2, 4], 7, lambda i, n: 2, 0))
    assert report.rules_fired["loop-ragged-pad"] == 1 and "Loop" not in op_counts(lowered)


# rows of 3 columns; the pads of the columns are static (1 before, 2 after) or, with `axes`,
# absent
ROWS_2D = PADS.format(
    dtype="float",
    cols=",3",
    out_cols=",?",
    rows=SHAPE_ROWS,
    pads="q1 = Constant<value = int64[1] {1}>()\n        q2 = Constant<value = int64[1] {2}>()\n"
    "        pads = Concat<axis = 0>(z1, q1, rest, q2)\n"
    "        v = Constant<value = float {7}>()",
    pad_inputs="el, pads, v",
).replace("{dtype}[?{cols}] r", "float[?,?] r")

AXES_2D = PADS.format(
    dtype="float",
    cols=",3",
    out_cols=",3",
    rows=SHAPE_ROWS,
    pads="pads = Concat<axis = 0>(rest, z1)\n        v = Constant<value = float {7}>()\n"
    "        axes = Constant<value = int64[1] {0}>()",
    pad_inputs="el, pads, v, axes",
)


@pytest.mark.parametrize("sizes", [[2, 0, 3], [1], []])
def test_rows_of_several_columns_with_static_pads_of_the_columns(sizes):
    model = parse(ROWS_2D)
    x = RNG.standard_normal((sum(sizes) + 1, 3)).astype(np.float32)
    feeds = {"x": x, "raw": np.array(sizes, np.int64), "w": np.zeros(4, np.int64)}
    lowered, report = lower(model)
    assert report.rules_fired["loop-ragged-pad"] == 1 and "Loop" not in op_counts(lowered)
    (y,) = run_ort(lowered, feeds)
    want = np.pad(
        _expected(x, sizes, 4, lambda i, n: 0, 7), ((0, 0), (0, 0), (1, 2)), constant_values=7
    )
    np.testing.assert_array_equal(y, want)
    if sizes:
        np.testing.assert_array_equal(run_ort(model, feeds)[0], y)


@pytest.mark.parametrize("sizes", [[2, 0, 3], [3]])
def test_pads_given_for_the_rows_only_by_axes(sizes):
    model = parse(AXES_2D)
    x = RNG.standard_normal((sum(sizes), 3)).astype(np.float32)
    feeds = {"x": x, "raw": np.array(sizes, np.int64), "w": np.zeros(3, np.int64)}
    lowered, report, (y,) = lower_and_compare(model, feeds)
    np.testing.assert_array_equal(y, _expected(x, sizes, 3, lambda i, n: 3 - n, 7))
    assert report.rules_fired["loop-ragged-pad"] == 1 and "Loop" not in op_counts(lowered)


@pytest.mark.parametrize("form", ["end", "iteration"])
def test_opsets_before_shape_slices(form):
    """Opset 13: Shape has no start and end, dims are read by a Slice of it."""
    model = _model(form, opset=13)
    x = RNG.standard_normal(6).astype(np.float32)
    feeds = {"x": x, "raw": np.array([2, 0, 3], np.int64), "w": np.zeros(4, np.int64)}
    if runtime_quirks.holds("pad-crop-and-pad") and form == "iteration":
        lowered, report = lower(model)
        (y,) = run_ort(lowered, feeds)
    else:
        lowered, report, (y,) = lower_and_compare(model, feeds)
    begin = FORMS[form][1]
    np.testing.assert_array_equal(y, _expected(x, [2, 0, 3], 4, lambda i, n: begin(i, n, 4), -1.5))
    assert report.rules_fired["loop-ragged-pad"] == 1 and "Loop" not in op_counts(lowered)


def test_below_opset_12_is_refused():
    """Opset 11 (Unsqueeze's axes an attribute): no Max or Min of integers for the clamps."""
    text = PADS.format(
        dtype="float", cols="", out_cols="", rows=SHAPE_ROWS,
        pads="pads = Concat<axis = 0>(z1, rest)\n        v = Constant<value = float {-1.5}>()",
        pad_inputs="el, pads, v",
    )  # fmt: skip
    text = text.replace("Unsqueeze(starts, one)", "Unsqueeze<axes = [1]>(starts)")
    text = text.replace("Unsqueeze(ends, one)", "Unsqueeze<axes = [1]>(ends)")
    model = parse(text, opset=11)
    onnx.checker.check_model(model, full_check=True)
    assert "below opset 12" in _refusal(model)


def test_the_lowering_is_deterministic():
    first, _ = lower(_model("iteration"))
    second, _ = lower(_model("iteration"))
    assert first.SerializeToString() == second.SerializeToString()


# hypotheses of different lengths collected in a list (inserted at the front where longer than
# one token), then each padded with -1 to the width of the batch: the list tier makes the list
# rows and a table of sizes whose sum is the rows (no clamp), and the pads read that table
HYPOTHESES = """g (int64[N,L] x, int64[N] lens) => (int64[?,?] y) {
    t = Constant<value = bool {1}>()
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    shx = Shape(x)
    n = Gather<axis = 0>(shx, zero)
    l1 = Constant<value = int64[1] {1}>()
    width = Gather<axis = 0>(shx, l1)
    empty = SequenceEmpty<dtype = 7>()
    hyps = Loop(n, t, empty) <body = b (int64 c, bool cc, seq(int64[?]) acc)
                                  => (bool co, seq(int64[?]) acc2) {
        co = Identity(cc)
        k = Gather<axis = 0>(lens, c)
        row = Gather<axis = 0>(x, c)
        pos = Range(zero, k, one)
        h = Gather<axis = 0>(row, pos)
        keep = Greater(k, one)
        acc2 = If(keep) <
            then_branch = tb () => (seq(int64[?]) a1) { a1 = SequenceInsert(acc, h, zero) },
            else_branch = eb () => (seq(int64[?]) a2) { a2 = Identity(acc) }>
    }>
    m = SequenceLength(hyps)
    y = Loop(m, t) <body = pb (int64 i, bool pc) => (bool po, int64[?] padded) {
        po = Identity(pc)
        el = SequenceAt(hyps, i)
        sh = Shape(el)
        z1 = Constant<value = int64[1] {0}>()
        s0 = Gather<axis = 0>(sh, z1)
        rest = Sub(width, s0)
        pads = Concat<axis = 0>(z1, rest)
        v = Constant<value = int64 {-1}>()
        padded = Pad(el, pads, v)
    }>
}"""


@pytest.mark.parametrize("lens", [[2, 4, 0], [3, 0, 0], [1, 4, 2, 3]])
def test_a_list_the_list_tier_made_is_padded_from_its_table(lens):
    model = parse(HYPOTHESES)
    x = RNG.integers(1, 9, (len(lens), 4)).astype(np.int64)
    feeds = {"x": x, "lens": np.array(lens, np.int64)}
    lowered, report, (y,) = lower_and_compare(model, feeds)
    kept = [x[c, :k] for c, k in enumerate(lens) if k > 1][::-1]
    np.testing.assert_array_equal(y, [np.pad(h, (0, 4 - len(h)), constant_values=-1) for h in kept])
    assert report.rules_fired["loop-ragged-pad"] == 1
    assert op_counts(lowered)["Loop"] == 1  # the loop that builds the list only


def test_the_list_tier_form_with_no_element():
    model = parse(HYPOTHESES)
    feeds = {"x": np.ones((2, 4), np.int64), "lens": np.array([1, 0], np.int64)}
    lowered, _ = lower(model)
    (want,), (got,) = run_ort(model, feeds), run_ort(lowered, feeds)
    assert want.size == 0 and got.shape == (0, 4)


# -- refused ----------------------------------------------------------------------------------


def _refusal(model) -> str:
    found = rule_check(model, loop_ragged_pads._check, "Loop")
    assert isinstance(found, Refusal), found
    return found.reason


def _lowered_alike(model, sizes=(2, 0, 3), width=4):
    x = RNG.standard_normal(sum(sizes) + 1).astype(np.float32)
    feeds = {"x": x, "raw": np.array(sizes, np.int64), "w": np.zeros(width, np.int64)}
    _, report, _ = lower_and_compare(model, feeds)
    assert "loop-ragged-pad" not in report.rules_fired


def _with_pads(
    pads: str, *, value: str = "v = Constant<value = float {-1.5}>()", inputs="el, pads, v"
):
    text = PADS.format(
        dtype="float", cols="", out_cols="", rows=SHAPE_ROWS, pads=pads + "\n        " + value,
        pad_inputs=inputs,
    )  # fmt: skip
    return parse(text)


def test_pads_that_give_elements_of_different_lengths_are_refused():
    """pads [0, rows]: every element twice its length; the original fails to stack them."""
    model = _with_pads("pads = Concat<axis = 0>(z1, rows)")
    assert "not proved to give every element one length" in _refusal(model)
    lowered, report = lower(model)
    assert "loop-ragged-pad" not in report.rules_fired
    x = RNG.standard_normal(4).astype(np.float32)
    feeds = {"x": x, "raw": np.array([2, 2], np.int64), "w": np.zeros(1, np.int64)}
    np.testing.assert_array_equal(run_ort(model, feeds)[0], run_ort(lowered, feeds)[0])


def test_pads_read_from_the_element_values_are_refused():
    pads = (
        "mx = ReduceMax<keepdims = 1>(el)\n        mi = Cast<to = 7>(mx)\n"
        "        q = Sub(rest, mi)\n        pads = Concat<axis = 0>(mi, q)"
    )
    model = _with_pads(pads)
    assert "the pads read the element's values" in _refusal(model)


def test_pads_through_a_narrower_integer_are_refused():
    """A Cast to int8 may wrap: (L - n) through int8 is not proved to be L - n."""
    pads = (
        "narrow = Cast<to = 3>(rest)\n        wide = Cast<to = 7>(narrow)\n"
        "        pads = Concat<axis = 0>(z1, wide)"
    )
    model = _with_pads(pads)
    assert "the pads are computed by Cast" in _refusal(model)
    _lowered_alike(model, sizes=(2, 1, 3))


def test_a_pad_mode_other_than_constant_is_refused():
    text = _with_pads("pads = Concat<axis = 0>(z1, rest)")
    for node in text.graph.node:
        if node.op_type == "Loop":
            for body_node in node.attribute[0].g.node:
                if body_node.op_type == "Pad":
                    body_node.attribute.append(onnx.helper.make_attribute("mode", "edge"))
    assert "another mode than constant" in _refusal(text)
    _lowered_alike(text, sizes=(2, 1, 3))


def test_pads_from_a_table_whose_rows_may_run_out_are_refused():
    """The table says 4 rows where x holds 2: the Slice gives 2, the pads count 4."""
    rows = "p1 = Reshape(i, one)\n        size = Gather(sizes, p1)\n        rows = Identity(size)"
    text = PADS.format(
        dtype="float", cols="", out_cols="", rows=rows,
        pads="pads = Concat<axis = 0>(z1, rest)\n        v = Constant<value = float {-1.5}>()",
        pad_inputs="el, pads, v",
    )  # fmt: skip
    model = parse(text)
    assert "x may hold fewer rows than it says" in _refusal(model)
    _lowered_alike(model)


def test_pads_of_the_columns_computed_at_run_time_are_refused():
    text = ROWS_2D.replace("q1 = Constant<value = int64[1] {1}>()", "q1 = Identity(ws)")
    model = parse(text)
    assert "another axis than the rows are computed at run time" in _refusal(model)


def test_a_carried_value_that_changes_is_refused():
    text = PADS.format(
        dtype="float", cols="", out_cols="", rows=SHAPE_ROWS,
        pads="pads = Concat<axis = 0>(z1, rest)\n        v = Constant<value = float {-1.5}>()\n"
        "        k2 = Add(k, one)",
        pad_inputs="el, pads, v",
    )  # fmt: skip
    text = text.replace(
        "y = Loop(n, t)", "k0 = Constant<value = int64[1] {0}>()\n    kk, y = Loop(n, t, k0)"
    )
    text = text.replace("(int64 i, bool c)", "(int64 i, bool c, int64[1] k)")
    text = text.replace("=> (bool c2,", "=> (bool c2, int64[1] k2,")
    text = text.replace("=> (float[?] y)", "=> (float[?,?] y)")
    model = parse(text)
    assert "changes in the loop" in _refusal(model)
