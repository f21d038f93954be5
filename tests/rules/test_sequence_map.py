"""SequenceMap: unrolled when the length is static (no sequence op left), a Loop otherwise.

The operator-doc examples run in two forms: (a) over sequences built inside the model with a
fixed length, read back into tensors, which must end with zero sequence ops; (b) over
sequence-typed model inputs of length 0, 1 and 3, which must end without SequenceMap.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import (
    assert_outputs_equal,
    lower,
    lower_and_compare,
    op_counts,
    parse,
    reasons,
    run_ort,
    sequence_op_count,
)

RNG = np.random.default_rng(3)
OPSET = 17  # SequenceMap exists from opset 17


def floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# The bodies of the operator-doc examples.
IDENTITY_1 = "b (float[4] e) => (float[4] f) { f = Identity(e) }"
IDENTITY_2 = """b (float[4] e0, float[4] e1) => (float[4] f0, float[4] f1) {
    f0 = Identity(e0)
    f1 = Identity(e1)
}"""
ADD = "b (float[4] e0, float[4] e1) => (float[4] f) { f = Add(e0, e1) }"
SHAPE = "b (float[H,W,C] e) => (int64[3] f) { f = Shape(e) }"

# Form (a): the sequences are built inside the model with three elements, and every mapped
# sequence is read back as one tensor. Inputs named t* are split into the sequences.
STATIC = {
    "identity_1_sequence": f"""g (float[3,4] t) => (float y) {{
        x = SplitToSequence<axis = 0, keepdims = 0>(t)
        m = SequenceMap<body = {IDENTITY_1}>(x)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
    }}""",
    "identity_2_sequences": f"""g (float[3,4] t0, float[3,4] t1) => (float y0, float y1) {{
        x0 = SplitToSequence<axis = 0, keepdims = 0>(t0)
        x1 = SplitToSequence<axis = 0, keepdims = 0>(t1)
        m0, m1 = SequenceMap<body = {IDENTITY_2}>(x0, x1)
        y0 = ConcatFromSequence<axis = 0, new_axis = 1>(m0)
        y1 = ConcatFromSequence<axis = 0, new_axis = 1>(m1)
    }}""",
    "identity_1_sequence_1_tensor": f"""g (float[3,4] t0, float[4] x1) => (float y0, float y1) {{
        x0 = SplitToSequence<axis = 0, keepdims = 0>(t0)
        m0, m1 = SequenceMap<body = {IDENTITY_2}>(x0, x1)
        y0 = ConcatFromSequence<axis = 0, new_axis = 1>(m0)
        y1 = ConcatFromSequence<axis = 0, new_axis = 1>(m1)
    }}""",
    "add_2_sequences": f"""g (float[3,4] t0, float[3,4] t1) => (float y) {{
        x0 = SplitToSequence<axis = 0, keepdims = 0>(t0)
        x1 = SplitToSequence<axis = 0, keepdims = 0>(t1)
        m = SequenceMap<body = {ADD}>(x0, x1)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
    }}""",
    "add_1_sequence_1_tensor": f"""g (float[3,4] t0, float[4] x1) => (float y) {{
        x0 = SplitToSequence<axis = 0, keepdims = 0>(t0)
        m = SequenceMap<body = {ADD}>(x0, x1)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
    }}""",
    "extract_shapes": f"""g (float[2,3,4] a, float[1,5,2] b, float[3,1,1] c) => (int64 y) {{
        x = SequenceConstruct(a, b, c)
        m = SequenceMap<body = {SHAPE}>(x)
        y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
    }}""",
}

# Form (b): the sequences are model inputs (any length); the outputs are sequences.
DYNAMIC = {
    "identity_1_sequence": f"""g (seq(float[4]) x) => (seq(float[4]) y) {{
        y = SequenceMap<body = {IDENTITY_1}>(x)
    }}""",
    "identity_2_sequences": f"""g (seq(float[4]) x0, seq(float[4]) x1)
                                 => (seq(float[4]) y0, seq(float[4]) y1) {{
        y0, y1 = SequenceMap<body = {IDENTITY_2}>(x0, x1)
    }}""",
    "identity_1_sequence_1_tensor": f"""g (seq(float[4]) x0, float[4] x1)
                                         => (seq(float[4]) y0, seq(float[4]) y1) {{
        y0, y1 = SequenceMap<body = {IDENTITY_2}>(x0, x1)
    }}""",
    "add_2_sequences": f"""g (seq(float[4]) x0, seq(float[4]) x1) => (seq(float[4]) y) {{
        y = SequenceMap<body = {ADD}>(x0, x1)
    }}""",
    "add_1_sequence_1_tensor": f"""g (seq(float[4]) x0, float[4] x1) => (seq(float[4]) y) {{
        y = SequenceMap<body = {ADD}>(x0, x1)
    }}""",
    "extract_shapes": f"""g (seq(float[H,W,C]) x) => (seq(int64[3]) y) {{
        y = SequenceMap<body = {SHAPE}>(x)
    }}""",
}


def feeds_for(model, length: int = 3) -> dict[str, object]:
    """Random feeds: a list of `length` elements for each sequence input (of different shapes
    where the declared element shape is symbolic), a float[4] or float[3,4] for tensors."""
    shapes = {"a": (2, 3, 4), "b": (1, 5, 2), "c": (3, 1, 1)}
    feeds: dict[str, object] = {}
    for value in model.graph.input:
        if value.type.HasField("sequence_type"):
            dims = value.type.sequence_type.elem_type.tensor_type.shape.dim
            symbolic = any(d.dim_param for d in dims)
            element_shapes = list(shapes.values()) if symbolic else [(4,)] * 3
            feeds[value.name] = [floats(*s) for s in element_shapes[:length]]
        else:
            dims = value.type.tensor_type.shape.dim
            feeds[value.name] = floats(*shapes.get(value.name, [d.dim_value for d in dims]))
    return feeds


@pytest.mark.parametrize("name", STATIC)
def test_static_length_leaves_zero_sequence_ops(name):
    model = parse(STATIC[name], opset=OPSET)
    lowered, report, _ = lower_and_compare(model, feeds_for(model))
    assert sequence_op_count(lowered) == 0, report.remaining


@pytest.mark.parametrize("name", DYNAMIC)
def test_dynamic_length_becomes_a_loop(name):
    model = parse(DYNAMIC[name], opset=OPSET)
    lowered, report = lower(model)
    assert op_counts(lowered)["SequenceMap"] == 0
    assert op_counts(lowered)["Loop"] == 1
    for length in (0, 1, 3):
        feeds = feeds_for(model, length)
        assert_outputs_equal(run_ort(model, feeds), run_ort(lowered, feeds))
    assert "sequence-typed model input" in reasons(report)


# -- bodies ------------------------------------------------------------------------------------


def test_body_reading_an_outer_scope_value():
    static = parse(
        """g (float[3,4] t, float[4] w) => (float y) {
            s = SplitToSequence<axis = 0, keepdims = 0>(t)
            m = SequenceMap<body = b (float[4] x) => (float[4] z) { z = Mul(x, w) }>(s)
            y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
        }""",
        opset=OPSET,
    )
    t, w = floats(3, 4), floats(4)
    lowered, _, (y,) = lower_and_compare(static, {"t": t, "w": w})
    np.testing.assert_allclose(y, t * w, rtol=1e-6)
    assert sequence_op_count(lowered) == 0

    dynamic = parse(
        """g (seq(float[4]) s, float[4] w) => (seq(float[4]) m) {
            m = SequenceMap<body = b (float[4] x) => (float[4] z) { z = Mul(x, w) }>(s)
        }""",
        opset=OPSET,
    )
    for length in (0, 1, 3):
        lowered, _, _ = lower_and_compare(dynamic, {"s": [floats(4)] * length, "w": w})
        assert op_counts(lowered)["SequenceMap"] == 0


def test_several_outputs_of_different_types():
    model = parse(
        """g (float[2,3] a, float[4,3] b) => (float y, int64 n) {
            s = SequenceConstruct(a, b)
            m, k = SequenceMap<body = b (float[?,3] x) => (float[?,3] z, int64[2] shape) {
                z = Neg(x)
                shape = Shape(x)
            }>(s)
            y = ConcatFromSequence<axis = 0>(m)
            n = ConcatFromSequence<axis = 0>(k)
        }""",
        opset=OPSET,
    )
    a, b = floats(2, 3), floats(4, 3)
    lowered, _, (y, n) = lower_and_compare(model, {"a": a, "b": b})
    np.testing.assert_array_equal(y, -np.concatenate([a, b]))
    np.testing.assert_array_equal(n, [2, 3, 4, 3])
    assert sequence_op_count(lowered) == 0


IF_BODY = """b (float[4] x) => (float[4] z) {
    total = ReduceSum<keepdims = 0>(x)
    zero = Constant<value = float {0}>()
    positive = Greater(total, zero)
    z = If(positive) <
        then_branch = then_g () => (float[4] p) { p = Identity(x) },
        else_branch = else_g () => (float[4] q) { q = Neg(x) }
    >
}"""


def test_body_containing_an_if():
    t = np.array([[1, 2, 3, 4], [-1, -2, -3, -4], [1, -5, 1, 1]], dtype=np.float32)
    static = parse(
        f"""g (float[3,4] t) => (float y) {{
            s = SplitToSequence<axis = 0, keepdims = 0>(t)
            m = SequenceMap<body = {IF_BODY}>(s)
            y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
        }}""",
        opset=OPSET,
    )
    lowered, _, (y,) = lower_and_compare(static, {"t": t})
    np.testing.assert_array_equal(y, np.where(t.sum(axis=1, keepdims=True) > 0, t, -t))
    assert sequence_op_count(lowered) == 0
    # the map runs once over the stacked rows, each branch on the rows whose condition picks it
    counts = op_counts(lowered)
    assert "If" not in counts and "Loop" not in counts and counts["Compress"] == 2, counts

    dynamic = parse(
        f"""g (seq(float[4]) s) => (seq(float[4]) m) {{
            m = SequenceMap<body = {IF_BODY}>(s)
        }}""",
        opset=OPSET,
    )
    for length in (0, 1, 3):
        lowered, _, _ = lower_and_compare(dynamic, {"s": list(t[:length])})
        assert op_counts(lowered)["SequenceMap"] == 0


NESTED_BODY = """outer (float[2,3] x) => (float[2,3] z) {
    rows = SplitToSequence<axis = 0, keepdims = 0>(x)
    negated = SequenceMap<body = inner (float[3] r) => (float[3] n) { n = Neg(r) }>(rows)
    z = ConcatFromSequence<axis = 0, new_axis = 1>(negated)
}"""


def test_nested_sequence_map_static():
    """onnxruntime cannot run a nested SequenceMap (design.md trap 11): numpy is the oracle."""
    model = parse(
        f"""g (float[2,2,3] t) => (float y) {{
            s = SplitToSequence<axis = 0, keepdims = 0>(t)
            m = SequenceMap<body = {NESTED_BODY}>(s)
            y = ConcatFromSequence<axis = 0, new_axis = 1>(m)
        }}""",
        opset=OPSET,
    )
    t = floats(2, 2, 3)
    lowered, _ = lower(model)
    assert_outputs_equal([-t], run_ort(lowered, {"t": t}))
    assert sequence_op_count(lowered) == 0


def test_nested_sequence_map_dynamic():
    model = parse(
        f"""g (seq(float[2,3]) s) => (seq(float[2,3]) m) {{
            m = SequenceMap<body = {NESTED_BODY}>(s)
        }}""",
        opset=OPSET,
    )
    lowered, _ = lower(model)
    assert op_counts(lowered)["SequenceMap"] == 0
    for length in (0, 1, 3):
        elements = [floats(2, 3) for _ in range(length)]
        assert_outputs_equal([[-e for e in elements]], run_ort(lowered, {"s": elements}))


# -- refusals and corner cases -----------------------------------------------------------------


def test_zipped_sequences_of_different_static_lengths_are_refused_with_a_reason():
    model = parse(
        """g (float[2,4] a, float[3,4] b) => (seq(float[4]) m) {
            s = SplitToSequence<axis = 0, keepdims = 0>(a)
            t = SplitToSequence<axis = 0, keepdims = 0>(b)
            m = SequenceMap<body = b (float[4] x, float[4] u) => (float[4] z) {
                z = Add(x, u)
            }>(s, t)
        }""",
        opset=OPSET,
    )
    lowered, report = lower(model)
    assert "different lengths [2, 3]" in reasons(report, "SequenceMap")
    assert op_counts(lowered)["SequenceMap"] == 1


def test_map_over_an_empty_sequence():
    model = parse(
        """g (float[4] w) => (int64 n, seq(float[4]) m) {
            e = SequenceEmpty<dtype = 1>()
            m = SequenceMap<body = b (float[4] x) => (float[4] z) { z = Mul(x, w) }>(e)
            n = SequenceLength(m)
        }""",
        opset=OPSET,
    )
    lowered, report, (n, m) = lower_and_compare(model, {"w": floats(4)})
    assert (int(n), m) == (0, [])
    assert op_counts(lowered)["SequenceMap"] == 0
    assert set(report.sequence_ops_after) == {"SequenceEmpty"}  # kept for the output 'm'
    assert "feeds the sequence-typed output 'm'" in reasons(report, "SequenceEmpty")


def test_map_over_a_dynamic_sequence_with_symbolic_element_shapes():
    model = parse(
        """g (seq(float[N]) s, float[N] t) => (seq(float[N]) m) {
            m = SequenceMap<body = b (float[N] x, float[N] u) => (float[N] z) {
                z = Add(x, u)
            }>(s, t)
        }""",
        opset=OPSET,
    )
    for length in (0, 1, 3):
        feeds = {"s": [floats(5) for _ in range(length)], "t": floats(5)}
        lowered, _, _ = lower_and_compare(model, feeds)
        assert op_counts(lowered)["SequenceMap"] == 0


@pytest.mark.parametrize("body", ["z = Identity(x)", "z = Neg(x)"])
def test_an_int8_list_the_model_returns_is_not_split_back_from_a_tensor(body):
    """onnxruntime (1.20 to 1.32) has no SplitToSequence for int8: a mapped list the model
    returns is collected by SequenceInsert (the loop form) and not batched (fuzz seed
    1000454), so the lowered model still loads."""
    model = parse(
        f"""g (int8 a, int8 b, bool c, int64 p) => (int8 y, seq(int8) ys) {{
            s = If(c) <
                then_branch = t () => (seq(int8) st) {{ st = SequenceConstruct(a, b, a) }},
                else_branch = e () => (seq(int8) se) {{ se = SequenceConstruct(b) }}
            >
            ys = SequenceMap<body = f (int8 x) => (int8 z) {{ {body} }}>(s)
            y = SequenceAt(ys, p)
        }}""",
        opset=OPSET,
    )
    lowered, report = lower(model, target="generic")  # the returned list stays a sequence
    assert "SplitToSequence" not in op_counts(lowered), reasons(report)
    for c, p in ((True, -1), (True, 1), (False, 0)):
        feeds = {"a": np.array(1, np.int8), "b": np.array(-2, np.int8), "c": np.array(c),
                 "p": np.array(p)}  # fmt: skip
        assert_outputs_equal(run_ort(model, feeds), run_ort(lowered, feeds))
