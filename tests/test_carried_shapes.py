"""Shapes of loop-carried tensors (passes/carried_shapes.py): declared on the body input where
every iteration ends with the shape it started with; a dim that changes becomes unknown (the
rest kept), a rank that changes is not declared at all. The body declares [7, 7, 7], a lie
of the kind real exports tell: it is never trusted."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from seqlower.passes.normalize import infer_shapes

LOOP = """<ir_version: 8, opset_import: ["" : 18]>
g (float[N,5] h0, int64 m) => (float[?] y) {{
    y0 = Loop (m, , h0) <body = b (int64 i, bool c, float[7,7,7] h)
                                => (bool co, float[7,7,7] out) {{
        co = Identity (c)
        {update}
    }}>
    y = ReduceSum <keepdims = 0> (y0)
}}"""


def body_input_shape(update: str) -> list | None:
    model = ir.from_proto(onnx.parser.parse_model(LOOP.format(update=update)))
    infer_shapes(model)
    loop = next(node for node in model.graph if node.op_type == "Loop")
    shape = loop.attributes["body"].as_graph().inputs[2].shape
    return None if shape is None else [d if isinstance(d, int) else d.value for d in shape]


@pytest.mark.parametrize(
    ("update", "shape"),
    [
        ("out = Tanh (h)", ["N", 5]),
        ("two = Constant <value = int64[2] {2, 1}> ()\n out = Tile (h, two)", [None, 5]),
        ("out = Concat <axis = 0> (h, h)", [None, 5]),
        ("t = Transpose (h)\n out = MatMul (h, t)", ["N", None]),  # [N, 5], then [N, N]
    ],
)
def test_what_every_iteration_gives_back_is_declared(update, shape):
    assert body_input_shape(update) == shape


@pytest.mark.parametrize(
    "update",
    [
        "zero = Constant <value = int64[1] {0}> ()\n out = Unsqueeze (h, zero)",  # rank grows
        "out = ReduceSum <keepdims = 0> (h)",  # rank 0 after one iteration
    ],
)
def test_a_rank_that_changes_is_not_declared(update):
    assert body_input_shape(update) is None


def _loop_result_shapes(update: str) -> tuple[list | None, list | None]:
    """The shapes of the Loop's result and of a Neg of it, after inference."""
    text = LOOP.format(update=update).replace("ReduceSum <keepdims = 0> (y0)", "Neg (y0)")
    model = ir.from_proto(onnx.parser.parse_model(text))
    infer_shapes(model)
    loop, negate = list(model.graph)

    def dims(value: ir.Value) -> list | None:
        shape = value.shape
        if shape is None:
            return None
        return [d if isinstance(d, int) else d.value for d in shape]

    return dims(loop.outputs[0]), dims(negate.outputs[0])


@pytest.mark.parametrize(
    ("update", "result"),
    [
        ("out = Tanh (h)", ["N", 5]),
        ("out = Concat <axis = 0> (h, h)", [None, 5]),  # the rows grow: dim 0 unknown
    ],
)
def test_a_loop_result_has_the_dims_its_initial_value_and_the_body_agree_on(update, result):
    """ONNX inference gives a Loop's carried result no shape at all; it is the initial value
    or the body's last output, so it has the dims both give, and what reads it a rank."""
    found, negated = _loop_result_shapes(update)
    assert found == result
    assert negated is not None and len(negated) == 2 and negated[1] == 5


def test_a_loop_result_whose_rank_changes_has_no_shape():
    zero = "zero = Constant <value = int64[1] {0}> ()\n out = Unsqueeze (h, zero)"
    assert _loop_result_shapes(zero) == (None, None)


# -- a list that starts empty: its elements' dims from what the body puts into it -----------------

# a decoder's cache: `k = h @ W` appended each step, attention over the cache read back
# (`h + softmax(h @ last.T) @ last`): h keeps its 4 columns only when the cache's elements are
# known to have them, and they have them only when h does
CACHE = """<ir_version: 8, opset_import: ["" : 18]>
g ({t}[T,4] x, int64 m) => ({t}[?,4] y, {t}[T,4] h_last) {{
    w = Constant <value = {t}[4,4] {{{w}}}> ()
    e = SequenceEmpty <dtype = {code}> ()
    h_last, s = Loop (m, , x, e) <body = b (int64 i, bool c, {t}[?,?] h, seq({t}[?,?]) s_in)
                                     => (bool co, {t}[?,?] h2, seq({t}[?,?]) s_out) {{
        co = Identity (c)
        k = MatMul (h, w)
        {put}
        minus_one = Constant <value = int64 {{-1}}> ()
        last = SequenceAt (s_out, minus_one)
        lt = Transpose (last)
        a = MatMul (h, lt)
        p = {attend}
        v = MatMul (p, last)
        h2 = Add (h, v)
    }}>
    y = ConcatFromSequence <axis = 0> (s)
}}"""
_W = ", ".join(str(v) for v in [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1])
_TYPES = {"float": (np.float32, 1, "Softmax (a)"), "int64": (np.int64, 7, "Identity (a)")}
APPEND = "s_out = SequenceInsert (s_in, k)"


def _cache(t: str = "float", put: str = APPEND) -> onnx.ModelProto:
    _, code, attend = _TYPES[t]
    w = _W if t == "int64" else ", ".join(f"{v}.0" for v in _W.split(", "))
    return onnx.parser.parse_model(CACHE.format(t=t, code=code, w=w, put=put, attend=attend))


def _list_input_shape(model: onnx.ModelProto) -> list | None:
    graph = ir.from_proto(model)
    infer_shapes(graph)
    loop = next(node for node in graph.graph if node.op_type == "Loop")
    shape = loop.attributes["body"].as_graph().inputs[3].shape
    return None if shape is None else [d if isinstance(d, int) else d.value for d in shape]


def test_a_list_that_starts_empty_takes_the_dims_of_what_is_put_into_it():
    assert _list_input_shape(_cache()) == ["T", 4]


def test_puts_of_different_ranks_give_no_dims():
    put = (
        "zero = Constant <value = int64[1] {0}> ()\n"
        "        ku = Unsqueeze (k, zero)\n"
        "        s_mid = SequenceInsert (s_in, k)\n"
        "        s_out = SequenceInsert (s_mid, ku)"
    )
    assert _list_input_shape(_cache(put=put)) in (None, [None, None])


@pytest.mark.parametrize("t", sorted(_TYPES))
def test_a_cache_that_starts_empty_lowers_to_the_same_numbers(t):
    from support import lower_and_compare, op_counts, run_ort

    dtype = _TYPES[t][0]
    model = _cache(t)
    x = (np.arange(8).reshape(2, 4) % 3).astype(dtype)
    for m in (3, 1):
        lowered, report, (y, h) = lower_and_compare(model, {"x": x, "m": np.array(m)})
        assert y.shape == (2 * m, 4)
        assert "ReduceProd" not in op_counts(lowered)  # not the flat layout (a table of shapes)
        assert not report.remaining
    # no step: onnxruntime fails the original's concatenation of nothing, the tensor form
    # gives an empty tensor (docs/design.md); h is x either way
    y, h = run_ort(lowered, {"x": x, "m": np.array(0)})
    assert y.shape == (0, 4)
    np.testing.assert_array_equal(h, x)
