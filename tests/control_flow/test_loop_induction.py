"""loop-induction: a Loop whose only work is counters (`x = x + d` per iteration, scanned) is
Range arithmetic; the Loop disappears."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower_and_compare, op_counts, parse


def _counter(
    step: str = "d = Constant<value = float {1}>()",
    scanned: str = "nx",
    dtype: str = "float",
    extra: str = "",
    x_type: str = "float[2,3]",
    v_type: str = "[2,3]",
) -> str:
    return f"""g ({x_type} x, int64 m, {dtype} o) => ({dtype}[2,3] last, {dtype}[?,2,3] all) {{
        t = Constant<value = bool {{1}}>()
        last, all = Loop(m, t, x) <body = body (int64 i, bool c, {dtype}{v_type} v)
                                            => (bool c2, {dtype}{v_type} nx, {dtype}{v_type} out) {{
            c2 = Identity(c)
            {step}
            nx = Add(v, d)
            out = Identity({scanned})
            {extra}
        }}>
    }}"""


X = np.arange(6, dtype=np.float32).reshape(2, 3) / 4


def _expected(x: np.ndarray, m: int, step, after: bool):
    values, v = [], x
    for _ in range(max(m, 0)):
        nx = v + step
        values.append(nx if after else v)
        v = nx
    stacked = np.stack(values) if values else np.zeros((0, *x.shape), x.dtype)
    return v, stacked


@pytest.mark.parametrize("m", [-1, 0, 1, 5])
@pytest.mark.parametrize("scanned", ["nx", "v"], ids=["after", "before"])
def test_a_counter_loop_is_range_arithmetic(m, scanned):
    model = parse(_counter(scanned=scanned))
    feeds = {"x": X, "m": np.array(m), "o": np.array(0, np.float32)}
    lowered, report, (last, everything) = lower_and_compare(model, feeds)
    want_last, want_all = _expected(X, m, np.float32(1), scanned == "nx")
    np.testing.assert_allclose(last, want_last, rtol=1e-6)
    np.testing.assert_allclose(everything, want_all, rtol=1e-6)
    assert report.rules_fired == {"loop-induction": 1}
    assert op_counts(lowered)["Loop"] == 0


def test_a_step_from_outside_the_loop_and_integer_counters():
    model = parse(_counter(step="d = Identity(o)", dtype="int64", x_type="int64[2,3]"))
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    feeds = {"x": x, "m": np.array(4), "o": np.array(-3, np.int64)}
    lowered, _, (last, everything) = lower_and_compare(model, feeds)
    want_last, want_all = _expected(x, 4, -3, True)
    np.testing.assert_array_equal(last, want_last)
    np.testing.assert_array_equal(everything, want_all)
    assert op_counts(lowered)["Loop"] == 0


@pytest.mark.parametrize(
    ("step", "x_type", "reason"),
    [
        ("d = Cast<to = 1>(i)", "float[2,3]", "the body computes more than counters"),
        ("d = Identity(v)", "float[2,3]", "changes between iterations"),
    ],
    ids=["iteration-number", "not-invariant"],
)
def test_other_loops_are_refused_with_the_reason(step, x_type, reason):
    from seqlower.analysis import Facts
    from seqlower.options import Options
    from seqlower.passes import NormalizePass
    from seqlower.rewriter import Rewriter
    from seqlower.rule import Context, Refusal
    from seqlower.rules import loop_induction

    model = ir.from_proto(parse(_counter(step=step, x_type=x_type)))
    NormalizePass(Options())(model)
    (loop,) = [node for node in model.graph if node.op_type == "Loop"]
    refusal = loop_induction.RULES.rules[0].check(
        loop, Context(Facts(model), Rewriter(model), Options())
    )
    assert isinstance(refusal, Refusal) and reason in refusal.reason


@pytest.mark.parametrize(
    ("step", "value", "keeps"),
    [
        ((), ("N", 3), True),
        ((1, 3), ("N", 3), True),
        ((2, 3), ("N", 3), False),
        ((1, 1, 3), (2, 3), False),
    ],
)
def test_a_step_must_not_broadcast_the_counter_to_another_shape(step, value, keeps):
    from seqlower.rules.loop_induction import _no_larger

    def typed(shape):  # type: ignore[no-untyped-def]
        return ir.Value(name="v", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(shape))

    assert _no_larger(typed(step), typed(value)) is keeps


@pytest.mark.parametrize("m", [-2, 0, 3])
def test_scans_alone_need_no_clamp_of_the_trip_count(m):
    """Range(1, M + 1) has max(M, 0) entries by itself: only the final counter reads Max(M, 0)."""
    text = _counter(scanned="nx").replace("(float[2,3] last, ", "(")
    model = parse(text.replace("last, all = Loop", "unused, all = Loop"))  # no final read
    feeds = {"x": X, "m": np.array(m), "o": np.array(0, np.float32)}
    lowered, report, (everything,) = lower_and_compare(model, feeds)
    np.testing.assert_allclose(everything, _expected(X, m, np.float32(1), True)[1], rtol=1e-6)
    assert report.rules_fired == {"loop-induction": 1}
    assert "Max" not in op_counts(lowered) and op_counts(lowered)["Range"] == 1


REPEAT = """g (float[2] pad, int64 m) => (float[?,2] rows, float[?,3] consts) {{
    t = Constant<value = bool {{1}}>()
    rows, consts = Loop(m, t) <body = body (int64 i, bool c) => (bool c2, float[2] r, float[3] k) {{
        c2 = Identity(c)
        r = Identity({row})
        k = Constant<value = float[3] {{1, 2, 3}}>()
    }}>
}}"""


@pytest.mark.parametrize("m", [-2, 0, 1, 4])
def test_a_value_the_same_in_every_iteration_is_repeated(m):
    # `for _ in range(m): out.append(pad)`: an outer value and a body Constant, scanned
    model = parse(REPEAT.format(row="pad"))
    pad = np.array([0.5, -1], np.float32)
    lowered, report, (rows, consts) = lower_and_compare(model, {"pad": pad, "m": np.array(m)})
    np.testing.assert_array_equal(rows, np.tile(pad, (max(m, 0), 1)))
    np.testing.assert_array_equal(consts, np.tile(np.float32([1, 2, 3]), (max(m, 0), 1)))
    assert report.rules_fired == {"loop-induction": 1}
    assert op_counts(lowered)["Loop"] == 0 and op_counts(lowered)["Expand"] == 2


def test_a_scanned_body_input_is_not_the_same_in_every_iteration():
    from seqlower.analysis import Facts
    from seqlower.options import Options
    from seqlower.passes import NormalizePass
    from seqlower.rewriter import Rewriter
    from seqlower.rule import Context, Refusal
    from seqlower.rules import loop_induction

    text = REPEAT.format(row="pad").replace("float[2] r,", "bool r,").replace(
        "r = Identity(pad)", "r = Identity(c)"
    ).replace("float[?,2] rows", "bool[?] rows")  # fmt: skip
    model = ir.from_proto(parse(text))
    NormalizePass(Options())(model)
    (loop,) = [node for node in model.graph if node.op_type == "Loop"]
    refusal = loop_induction.RULES.rules[0].check(
        loop, Context(Facts(model), Rewriter(model), Options())
    )
    assert isinstance(refusal, Refusal)
    assert "neither a counter nor the same in every iteration" in refusal.reason
