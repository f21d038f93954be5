"""`never_negative_across`: a table of sizes proved never negative through the control flow a
list's table passes (an If's branches, a Loop's carried values and scan outputs, reshapes,
ScatterElements), which `never_negative` alone does not follow. loop-ragged-rows asks it of
the table it reads (a Slice between running sums of a negative size reads what no element
holds)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, lower_and_compare, op_counts, parse, run_ort

from seqlower.analysis.static_values import StaticValues
from seqlower.lists.signs import never_negative, never_negative_across

_BRANCHES = """g (int64[K] raw, bool flag) => (int64[K] y) {{
    y = If(flag) <then_branch = th () => (int64[K] r) {{ r = {then} }},
                  else_branch = el () => (int64[K] r) {{ r = {other} }}>
}}"""

_CARRIED = """g (int64[K] raw, int64 m) => (int64[K] y, int64[?,K] scans) {{
    t = Constant<value = bool {{1}}>()
    start = {start}
    y, scans = Loop(m, t, start) <body = b (int64 i, bool c, int64[K] v)
                                      => (bool c2, int64[K] v2, int64[K] s) {{
        c2 = Identity(c)
        a = Abs(raw)
        v2 = {step}
        s = {scan}
    }}>
}}"""

_SCATTER = """g (int64[K] raw, int64[J] at, int64[J] upd) => (int64[K] y) {{
    d = Abs(raw)
    u = {updates}
    y = ScatterElements<reduction = "{reduction}">(d, at, u)
}}"""


def _proved(text: str, output: int = 0) -> tuple[bool, bool]:
    """(never_negative, never_negative_across) of the main graph's output `output`."""
    model = ir.from_proto(parse(text))
    values = StaticValues(model.opset_imports.get(""))
    value = model.graph.outputs[output]
    return never_negative(value, values), never_negative_across(value, values)


@pytest.mark.parametrize(
    "then,other,expected",
    [("Abs(raw)", "Abs(raw)", True), ("Abs(raw)", "Neg(raw)", False),
     ("Identity(raw)", "Abs(raw)", False)],
    ids=["both-never-negative", "one-branch-negated", "one-branch-the-input"],
)  # fmt: skip
def test_an_if_is_never_negative_when_both_branches_are(then, other, expected):
    assert _proved(_BRANCHES.format(then=then, other=other)) == (False, expected)


@pytest.mark.parametrize(
    "start,step,expected",
    [("Abs(raw)", "Add(v, v)", True), ("Abs(raw)", "Sub(v, v)", False),
     ("Identity(raw)", "Add(v, v)", False), ("Abs(raw)", "Identity(v)", True),
     ("Abs(raw)", "Neg(v)", False)],
    ids=["doubled", "subtracted", "starts-as-the-input", "passed-on", "negated"],
)  # fmt: skip
def test_a_carried_value_is_never_negative_by_induction(start, step, expected):
    text = _CARRIED.format(start=start, step=step, scan="Identity(v)")
    assert _proved(text, 0) == (False, expected)
    # the scan output of the value carried in is not proved: the induction is made for the
    # carried result asked for, not for the body's input seen from a scan (conservative)
    assert _proved(text, 1) == (False, False)


@pytest.mark.parametrize(
    "scan,expected",
    [("Expand(i, raw)", True), ("Abs(raw)", True), ("Add(raw, raw)", False),
     ("Mul(raw, raw)", False)],
    ids=["iteration-number-expanded", "abs", "sum-of-inputs", "square-not-proved"],
)  # fmt: skip
def test_a_scan_output_is_never_negative_when_the_body_value_is(scan, expected):
    text = _CARRIED.format(start="Abs(raw)", step="Identity(v)", scan=scan)
    assert _proved(text, 1) == (False, expected)


def test_the_iteration_number_is_never_negative_in_the_body():
    """`Add(a, i)`, a = Abs(raw), is never negative only because i is: the body's iteration number,
    which the walk knows when it enters the body from the Loop (not from the body alone)."""
    text = _CARRIED.format(start="Abs(raw)", step="Identity(v)", scan="Add(a, i)")
    assert _proved(text, 1) == (False, True)
    model = ir.from_proto(parse(text))
    loop = next(n for n in model.graph if n.op_type == "Loop")
    scan = loop.attributes["body"].as_graph().outputs[2]
    assert not never_negative_across(scan, StaticValues(model.opset_imports.get("")))


@pytest.mark.parametrize(
    "updates,reduction,expected",
    [("Abs(upd)", "none", True), ("Abs(upd)", "add", True), ("Abs(upd)", "max", True),
     ("Abs(upd)", "min", True), ("Abs(upd)", "mul", True), ("Identity(upd)", "none", False),
     ("Identity(upd)", "max", False)],
    ids=["none", "add", "max", "min", "mul", "updates-may-be-negative", "max-of-negatives"],
)  # fmt: skip
def test_a_scatter_is_never_negative_when_its_data_and_updates_are(updates, reduction, expected):
    """min and mul are refused where sound too: the proof is not asked for them (a minimum
    or product of values never negative is never negative, but the rule's tables do not come
    from them)."""
    text = _SCATTER.format(updates=updates, reduction=reduction)
    proved = _proved(text)[1]
    assert proved == (expected and reduction in ("none", "add", "max"))


def test_a_graph_input_and_an_other_domain_are_not_proved():
    assert _proved("g (int64[K] raw) => (int64[K] y) { y = Identity(raw) }") == (False, False)
    model = ir.from_proto(
        parse(
            "g (int64[K] raw) => (int64[K] y) { a = Abs(raw)\n y = custom.Keep(a) }",
            domains={"custom": 1},
        )
    )
    values = StaticValues(model.opset_imports.get(""))
    assert not never_negative_across(model.graph.outputs[0], values)


def test_the_walk_is_bounded():
    """Each step of the walk tries `never_negative` (DEPTH steps of its own) before one step
    of its own (DEPTH of them): past forty Identities the Abs is out of reach, so not proved
    (no answer is "may be negative"); nine are within reach."""
    assert _proved(_identities(9))[1] is True
    assert _proved(_identities(40))[1] is False


def _identities(count: int) -> str:
    lines = ["v0 = Abs(raw)"] + [f"v{k + 1} = Identity(v{k})" for k in range(count)]
    lines.append(f"y = Reshape(v{count}, shape)")
    body = "\n    ".join(lines)
    return f"""g (int64[K] raw) => (int64[K] y) {{
    shape = Constant<value = int64[1] {{-1}}>()
    {body}
}}"""


# loop-ragged-rows reading a table an If chooses (DETR's lists pass through such branches)
_ROWS = """g (float[T,3] x, int64[K] raw, bool flag) => (float[?,4] y) {{
    zero = Constant<value = int64 {{0}}>()
    one = Constant<value = int64[1] {{1}}>()
    sizes = If(flag) <then_branch = th () => (int64[K] r) {{ r = Abs(raw) }},
                      else_branch = el () => (int64[K] r) {{ q = Abs(raw)
                                                           r = {other} }}>
    ends = CumSum(sizes, zero)
    starts = Sub(ends, sizes)
    su = Unsqueeze(starts, one)
    eu = Unsqueeze(ends, one)
    n = Size(sizes)
    t = Constant<value = bool {{1}}>()
    shape0 = Constant<value = int64[2] {{0, 4}}>()
    acc0 = ConstantOfShape<value = float[1] {{0}}>(shape0)
    y = Loop(n, t, acc0) <body = b (int64 i, bool c, float[?,4] acc)
                              => (bool c2, float[?,4] grown) {{
        c2 = Identity(c)
        s = Gather(su, i)
        e = Gather(eu, i)
        el = Slice(x, s, e)
        b0 = Constant<value = int64[1] {{0}}>()
        b1 = Constant<value = int64[1] {{1}}>()
        col = Slice(el, b0, b1, b1)
        sh = Shape(col)
        zs = ConstantOfShape<value = float[1] {{0}}>(sh)
        fi = Cast<to = 1>(i)
        full = Add(zs, fi)
        r = Concat<axis = 1>(el, full)
        grown = Concat<axis = 0>(acc, r)
    }}>
}}"""


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("raw", [[-2, 0, 3], [], [0, 0]], ids=["negative-entry", "none", "empty"])
def test_loop_ragged_rows_batches_a_table_both_branches_keep_never_negative(flag, raw):
    model = parse(_ROWS.format(other="Add(q, q)"))
    x = np.random.default_rng(3).standard_normal((12, 3)).astype(np.float32)
    feeds = {"x": x, "raw": np.array(raw, np.int64), "flag": np.array(flag)}
    lowered, report, (y,) = lower_and_compare(model, feeds)
    assert report.rules_fired["loop-ragged-rows"] == 1
    assert "Loop" not in op_counts(lowered)
    sizes = np.abs(np.array(raw, np.int64)) * (1 if flag else 2)
    ids = np.repeat(np.arange(len(raw)), sizes).astype(np.float32)
    np.testing.assert_array_equal(y, np.concatenate([x[: int(sizes.sum())], ids[:, None]], 1))


def test_loop_ragged_rows_refuses_a_table_one_branch_may_make_negative_and_both_agree():
    model = parse(_ROWS.format(other="Neg(raw)"))
    lowered, report = lower(model)
    assert "loop-ragged-rows" not in report.rules_fired
    assert "Loop" in op_counts(lowered)
    x = np.random.default_rng(4).standard_normal((6, 3)).astype(np.float32)
    feeds = {"x": x, "raw": np.array([2, -1, 3], np.int64), "flag": np.array(False)}
    np.testing.assert_array_equal(run_ort(model, feeds)[0], run_ort(lowered, feeds)[0])
