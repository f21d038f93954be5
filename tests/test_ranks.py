"""Ranks where ONNX shape inference gives none (seqlower.analysis.ranks, rank_rules).

Each rule of the table is checked against ONNX's own inference of the same node with shaped
inputs; the walk is checked through Loop, Scan, If and SequenceMap bodies and lists; and a list
whose elements' rank is proved this way lowers to tensors that compute what the original did.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_same_or_both_fail,
    assert_same_outputs,
    lower,
    parse,
    reasons,
    sequence_op_count,
)

from seqlower.analysis.rank_rules import OUTPUT_RANKS, RANK_RULES, RankQuery, unknown_rank_cause
from seqlower.analysis.ranks import Ranks
from seqlower.analysis.static_values import StaticValues

_X = "float[2,3,4] x"
# op (ONNX text), the inputs' declared types: ONNX infers the output's rank, the rule must agree
_NODES = [
    ("y = Softmax <axis = 1> (x)", "float[2,3,4] x"),
    ("y = Conv (x, w)", "float[1,2,5,5] x, float[3,2,3,3] w"),
    ("y = Transpose <perm = [2, 0, 1]> (x)", "float[2,3,4] x"),
    ("y = Transpose (x)", "float[2,3,4] x"),
    ("y = Add (x, w)", "float[2,3,4] x, float[4] w"),
    ("y = Where (c, x, w)", "bool[3,1] c, float[2,3,4] x, float[4] w"),
    ("y = MatMul (x, w)", "float[4] x, float[4] w"),
    ("y = MatMul (x, w)", "float[4] x, float[2,4,5] w"),
    ("y = MatMul (x, w)", "float[2,3,4] x, float[4] w"),
    ("y = MatMul (x, w)", "float[3,4] x, float[7,4,5] w"),
    ("y = Gather <axis = 1> (x, i)", "float[2,3,4] x, int64[5,6] i"),
    ("y = Gather (x, i)", "float[2,3,4] x, int64 i"),
    ("y = GatherElements (x, i)", "float[2,3] x, int64[2,1] i"),
    ("y = GatherND (x, i)", "float[2,3,4] x, int64[5,2] i"),
    ("k = Constant <value = int64[2] {1, 3}> ()\n y = Unsqueeze (x, k)", "float[2,3] x"),
    ("k = Constant <value = int64[1] {-2}> ()\n y = Squeeze (x, k)", "float[2,1,3] x"),
    ("k = Constant <value = int64[3] {0, 2, -1}> ()\n y = Reshape (x, k)", "float[2,3,4] x"),
    ("y = Reshape (x, s)", "float[2,3,4] x, int64[2] s"),
    ("y = Expand (x, s)", "float[3,1] x, int64[3] s"),
    ("y = ConstantOfShape (s)", "int64[3] s"),
    ("y = Shape (x)", "float[2,3] x"),
    ("y = Size (x)", "float[2,3] x"),
    ("y = NonZero (x)", "float[2,3,4] x"),
    ("y = Flatten <axis = 2> (x)", "float[2,3,4] x"),
    ("y = ReduceSum <keepdims = 0> (x)", "float[2,3,4] x"),
    (
        "k = Constant <value = int64[1] {1}> ()\n y = ReduceSum <keepdims = 0> (x, k)",
        "float[2,3,4] x",
    ),
    ("y = ReduceMean <axes = [0, 2], keepdims = 0> (x)", "float[2,3,4] x"),
    ("y = ReduceMax <axes = [1]> (x)", "float[2,3,4] x"),
    ("y = ArgMax <axis = 1, keepdims = 0> (x)", "float[2,3,4] x"),
    ("y = Concat <axis = 0> (x, w)", "float[2,3] x, float[1,3] w"),
    ("y, z = Split <axis = 1, num_outputs = 2> (x)", "float[2,4] x"),
    ("y, z = TopK <axis = -1> (x, k)", "float[2,5] x, int64[1] k"),
    ('y = Einsum <equation = "bij,bjk->bik"> (x, w)', "float[2,3,4] x, float[2,4,5] w"),
    ('y = Einsum <equation = "ij,jk"> (x, w)', "float[3,4] x, float[4,5] w"),
    ("y = OneHot (i, d, v)", "int64[2,3] i, int64 d, float[2] v"),
    ("y = Compress (x, c)", "float[2,3] x, bool[3] c"),
    ("y = Compress <axis = 1> (x, c)", "float[2,3] x, bool[3] c"),
    ("y = Slice (x, s, e)", "float[2,3,4] x, int64[1] s, int64[1] e"),
    ("y = Pad (x, p)", "float[2,3] x, int64[4] p"),
    ("y = Tile (x, r)", "float[2,3] x, int64[2] r"),
    ("y = Range (s, e, d)", "int64 s, int64 e, int64 d"),
    ("y = Cast <to = 7> (x)", "float[2,3] x"),
    ("y = MaxPool <kernel_shape = [2, 2]> (x)", "float[1,2,4,4] x"),
    ("y = GlobalAveragePool (x)", "float[1,2,4,4] x"),
    ("y = Gemm (x, w)", "float[2,3] x, float[3,4] w"),
    ("y = LayerNormalization (x, s)", "float[2,3,4] x, float[4] s"),
    # fixed by the operator, whatever the inputs' ranks (`OUTPUT_RANKS` for several outputs)
    (
        "y, h, c = LSTM <hidden_size = 2> (x, w, r)",
        "float[5,1,3] x, float[1,8,3] w, float[1,8,2] r",
    ),
    ("y, h = GRU <hidden_size = 2> (x, w, r)", "float[5,1,3] x, float[1,6,3] w, float[1,6,2] r"),
    ("y, h = RNN <hidden_size = 2> (x, w, r)", "float[5,1,3] x, float[1,2,3] w, float[1,2,2] r"),
    ("y, s, z = DynamicQuantizeLinear (x)", "float[2,3,4] x"),
    ("y, i, v, c = Unique (x)", "float[2,3] x"),
    ("y, i, v, c = Unique <axis = 1> (x)", "float[2,3,4] x"),
    ("n = Constant <value = int64 {8}> ()\n y = HannWindow (n)", "float x"),
    (
        "a = Constant <value = int64 {8}> ()\n b = Constant <value = int64 {16}> ()\n"
        " c = Constant <value = int64 {8000}> ()\n"
        " y = MelWeightMatrix (a, b, c, d, e)",
        "float d, float e",
    ),
    ("s = Constant <value = int64 {8}> ()\n y = STFT (x, s, w)", "float[1,64,1] x, float[16] w"),
    ("y = DFT (x)", "float[1,8,1] x"),
    ("y = RoiAlign (x, r, i)", "float[1,2,8,8] x, float[3,4] r, int64[3] i"),
    ("y = MaxRoiPool <pooled_shape = [2, 2]> (x, r)", "float[1,2,8,8] x, float[3,5] r"),
    (
        "s = Constant <value = int64[3] {2, 3, 4}> ()\n y = CenterCropPad (x, s)",
        "float[4,5,6] x",
    ),
    (
        "y = QLinearMatMul (a, sa, za, b, sb, zb, sy, zy)",
        "uint8[2,3] a, float sa, uint8 za, uint8[3,4] b, float sb, uint8 zb, float sy, uint8 zy",
    ),
    ("y = Col2Im (x, i, b)", "float[1,4,9] x, int64[2] i, int64[2] b"),
    ('y = NegativeLogLikelihoodLoss <reduction = "none"> (x, t)', "float[2,3,4] x, int64[2,4] t"),
    ("y = NegativeLogLikelihoodLoss (x, t)", "float[2,3,4] x, int64[2,4] t"),
    ('y, p = SoftmaxCrossEntropyLoss <reduction = "none"> (x, t)', "float[2,3,4] x, int64[2,4] t"),
    ("y, p = SoftmaxCrossEntropyLoss (x, t)", "float[2,3] x, int64[2] t"),
]


# operators of later opsets (the oldest onnx supported, 1.18, knows opset 23)
_NEWER_NODES = [
    ("y = AffineGrid (t, s)", "float[2,2,3] t, int64[4] s", 20),
    ("y = AffineGrid (t, s)", "float[2,3,4] t, int64[5] s", 20),
    ("y = DeformConv (x, w, o)", "float[1,2,5,5] x, float[3,2,3,3] w, float[1,18,3,3] o", 19),
    ("y = RMSNormalization (x, s)", "float[2,3,4] x, float[4] s", 23),
    (
        "y = RotaryEmbedding <num_heads = 2> (x, c, s, p)",
        "float[1,3,8] x, float[5,2] c, float[5,2] s, int64[1,3] p",
        23,
    ),
]


def _node_model(text: str, inputs: str, opset: int = 18) -> onnx.ModelProto:
    """One node of `text` over `inputs`; its outputs, typed by inference alone."""
    output = text.split("\n")[-1].split("=")[0].split(",")[0].strip()
    model = parse(f"g ({inputs}) => (float {output}) {{\n {text}\n}}", opset=opset)
    del model.graph.output[:]
    return model


@pytest.mark.parametrize(
    ("text", "inputs", "opset"),
    [(t, i, 18) for t, i in _NODES] + _NEWER_NODES,
    ids=[t.split("\n")[-1] for t, *_ in _NODES + _NEWER_NODES],
)
def test_a_rank_rule_agrees_with_onnx_inference(text, inputs, opset):
    model = _node_model(text, inputs, opset)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {v.name: v.type for v in (*inferred.graph.value_info, *inferred.graph.input)}
    ir_model = ir.serde.deserialize_model(model)
    node = ir_model.graph.node(-1)
    values = StaticValues()
    ranks = tuple(None if v is None or v.shape is None else len(v.shape) for v in node.inputs)
    query = RankQuery(node, ranks, values)
    if node.op_type in OUTPUT_RANKS:
        got = OUTPUT_RANKS[node.op_type](query)
    else:
        got = (RANK_RULES[node.op_type](query),) * len(node.outputs)
    assert len(got) >= len(node.outputs)
    for output, rank in zip(node.outputs, got):
        want = shapes[output.name]
        assert want.tensor_type.HasField("shape"), "ONNX itself gives no rank"
        assert rank == len(want.tensor_type.shape.dim), output.name


def test_no_rule_guesses_where_the_rank_depends_on_dims_or_data():
    """Squeeze without axes drops the dims of size 1, Reshape to a shape of run-time length
    has that length: neither rank is known from ranks alone."""
    model = ir.serde.deserialize_model(
        parse(
            "g (float[2,1,3] x, int64[n] s) => (float y, float z) {\n"
            " y = Squeeze (x)\n z = Reshape (x, s)\n}"
        )
    )
    squeeze, reshape = model.graph.node(0), model.graph.node(1)
    values = StaticValues()
    assert RANK_RULES["Squeeze"](RankQuery(squeeze, (3,), values)) is None
    assert RANK_RULES["Reshape"](RankQuery(reshape, (3, 1), values)) is None


_LOOP_OVER_A_LIST = """
g (float[1,C,3,4] x, float[2,2,1,1] w) => (float[?] y) {
    two = Constant <value = int64 {2}> ()
    maps = SplitToSequence <axis = 1> (x, two)
    n = SequenceLength (maps)
    cond = Constant <value = bool {1}> ()
    done = Loop (n, cond, maps) <body = body (int64 i, bool c, seq(float) acc)
                                          => (bool c_out, seq(float) acc_out) {
        e = SequenceAt (acc, i)
        conv = Conv (e, w)
        soft = Softmax <axis = 1> (conv)
        one = Constant <value = int64[1] {1}> ()
        big = Constant <value = int64[1] {100}> ()
        three = Constant <value = int64[1] {3}> ()
        cut = Slice (soft, one, big, three)
        perm = Transpose <perm = [0, 1, 3, 2]> (cut)
        erased = SequenceErase (acc, i)
        acc_out = SequenceInsert (erased, perm, i)
        c_out = Identity (c)
    }>
    flat = ConcatFromSequence <axis = 3> (done)
    minus = Constant <value = int64[1] {-1}> ()
    y = Reshape (flat, minus)
}
"""


def _unranked(model: onnx.ModelProto, body_tensors: bool = False) -> onnx.ModelProto:
    """`model` with no shape declared anywhere but on its inputs and outputs (the text syntax
    cannot say "rank unknown": `float` is a scalar): what ONNX inference leaves in a body.
    A body's tensor inputs keep theirs unless `body_tensors` (onnxruntime wants a Loop's
    counter declared)."""

    def forget(info: onnx.ValueInfoProto) -> None:
        tensor = info.type.tensor_type
        if info.type.HasField("sequence_type"):
            tensor = info.type.sequence_type.elem_type.tensor_type
        tensor.ClearField("shape")

    def walk(graph: onnx.GraphProto, main: bool) -> None:
        inputs = [
            i
            for i in ([] if main else graph.input)
            if body_tensors or i.type.HasField("sequence_type")
        ]
        for info in (*inputs, *([] if main else graph.output), *graph.value_info):
            forget(info)
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    walk(attribute.g, False)

    walk(model.graph, True)
    return model


def _loop_model() -> ir.Model:
    return ir.serde.deserialize_model(_unranked(parse(_LOOP_OVER_A_LIST)))


def test_ranks_flow_through_a_loop_carried_list_by_induction():
    model = _loop_model()
    ranks = Ranks(model)
    loop = next(n for n in model.graph if n.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    by_name = {o.name: o for n in body for o in n.outputs}
    for name in ("e", "conv", "soft", "cut", "perm", "acc_out"):
        assert ranks.rank(by_name[name]) == 4, name
    assert ranks.rank(body.inputs[2]) == 4
    assert ranks.rank(loop.outputs[0]) == 4


def test_a_list_whose_elements_gain_a_dim_each_iteration_has_no_rank():
    """`acc[i] = Unsqueeze(acc[i])` in a loop that may stop early (`while i < n`): the elements
    are rank 4 then 5 then ...; no induction holds, the rank is unknown, and the list stays
    with that reason. (A loop that surely visits every element once is a map: its list is
    appended to instead, `loop-map-assign`.)"""
    text = (
        _LOOP_OVER_A_LIST.replace(
            "perm = Transpose <perm = [0, 1, 3, 2]> (cut)",
            "zero = Constant <value = int64[1] {0}> ()\n        perm = Unsqueeze (cut, zero)",
        )
        .replace("c_out = Identity (c)", "c_out = Less (i, n)")
        .replace(
            "flat = ConcatFromSequence <axis = 3> (done)",
            "flat = ConcatFromSequence <axis = 0> (done)",
        )
    )
    model = ir.serde.deserialize_model(_unranked(parse(text)))
    ranks = Ranks(model)
    loop = next(n for n in model.graph if n.op_type == "Loop")
    assert ranks.rank(loop.outputs[0]) is None
    lowered, report = lower(_unranked(parse(text)), load_ort=False)
    assert sequence_op_count(lowered) > 0
    assert "rank" in reasons(report)


def test_a_list_of_ranks_proved_in_the_loop_lowers_and_computes_the_same():
    model = _unranked(parse(_LOOP_OVER_A_LIST))
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0, reasons(report)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal((1, 6, 3, 4)).astype(np.float32),
        "w": rng.standard_normal((2, 2, 1, 1)).astype(np.float32),
    }
    assert_same_outputs(model, lowered, feeds)


def test_ranks_through_if_scan_and_sequence_map_bodies():
    text = """
g (float[2,3] x, bool b) => (float[?] y) {
    s = SequenceConstruct (x, x)
    m = SequenceMap (s) <body = f (float e) => (float r) {
        t = Transpose (e)
        r = Softmax (t)
    }>
    picked = If (b) <then_branch = t () => (float a) {
        zero = Constant <value = int64 {0}> ()
        a = SequenceAt (m, zero)
    }, else_branch = e () => (float a2) {
        one = Constant <value = int64 {1}> ()
        a2 = SequenceAt (m, one)
    }>
    st, sc = Scan (picked, picked) <num_scan_inputs = 1,
                                    body = sb (float h, float row) => (float h2, float row2) {
        h2 = Add (h, row)
        row2 = Relu (row)
    }>
    minus = Constant <value = int64[1] {-1}> ()
    y = Reshape (sc, minus)
}
"""
    model = ir.serde.deserialize_model(_unranked(parse(text), body_tensors=True))
    ranks = Ranks(model)
    found = {n.op_type: n for n in model.graph}
    assert ranks.rank(found["SequenceMap"].outputs[0]) == 2  # elements transposed: rank 2
    assert ranks.rank(found["If"].outputs[0]) == 2  # an element, from either branch
    assert ranks.rank(found["Scan"].outputs[0]) == 2  # the state keeps its rank (induction)
    assert ranks.rank(found["Scan"].outputs[1]) == 2  # rows of rank 1, stacked


_SHRINKING_APPENDS = """
g (float[T,3] x, int64 n) => (float[?,3] y) {
    empty = SequenceEmpty <dtype = 1> ()
    cond = Constant <value = bool {1}> ()
    last, outs = Loop (n, cond, x, empty) <body = body (int64 i, bool c, float cur, seq(float) acc)
                                             => (bool c_out, float cut, seq(float) acc_out) {
        one = Constant <value = int64[1] {1}> ()
        big = Constant <value = int64[1] {1000}> ()
        zero = Constant <value = int64[1] {0}> ()
        cut = Slice (cur, one, big, zero)
        soft = Softmax <axis = -1> (cut)
        acc_out = SequenceInsert (acc, soft)
        c_out = Identity (c)
    }>
    y = ConcatFromSequence <axis = 0> (outs)
}
"""


def test_an_appended_tensor_that_changes_shape_is_a_ragged_list():
    """`cur = cur[1:]; outs.append(softmax(cur))`: the appended tensor has one row fewer in
    each iteration (no scan output holds it), and ONNX inference gives it no rank (the carried
    value's is unknown to it). Its rank is the carried value's, 2, by induction: the list is
    rows of a tensor and their counts, and computes what the original does."""
    model = _unranked(parse(_SHRINKING_APPENDS), body_tensors=False)
    for info in model.graph.node[2].attribute[0].g.input[2:3]:
        info.type.tensor_type.ClearField("shape")  # the carried tensor: rank unknown
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0, reasons(report)
    assert "appended tensor" not in reasons(report)
    x = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
    for n in (1, 3, 5):  # none: the original fails (a concatenation of no tensor)
        assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, dtype=np.int64)})


def test_a_rank_no_rule_gives_is_refused_with_its_cause():
    """An element of run-time rank keeps its list, and the reason names what made it so."""
    model = parse(
        """
g (float[N,3] x, float[12] V, int64[R] shape, int64 p) => (float[?] b) {
   s = SplitToSequence <axis = 0, keepdims = 0> (x)
   W = Reshape (V, shape)
   t = SequenceInsert (s, W)
   last = SequenceAt (t, p)
   minus = Constant <value = int64[1] {-1}> ()
   b = Reshape (last, minus)
}""",
        opset=17,
    )
    lowered, report = lower(model, load_ort=False)
    assert sequence_op_count(lowered) > 0
    assert (
        "the rank of 'W', put into it, is unknown (made by Reshape to a shape of run-time "
        "length: a rank known only at run time)"
    ) in reasons(report)
    squeeze = ir.serde.deserialize_model(parse("g (float[2,1] x) => (float y) { y = Squeeze (x) }"))
    (value,) = squeeze.graph.node(0).outputs
    assert (
        unknown_rank_cause(value) == "made by Squeeze without axes, which drops the dims of size 1"
    )


def test_the_length_of_an_empty_list_is_a_scalar_not_a_value_never_made():
    """An empty list holds no element (no rank to join), but its length is a tensor of rank 0:
    an If returning it from one branch and a vector from the other has no one rank."""
    text = """
g (bool b, float[3] v) => (float[?] y) {
    picked = If (b) <then_branch = t () => (int64 n) {
        empty = SequenceEmpty <dtype = 1> ()
        n = SequenceLength (empty)
    }, else_branch = e () => (int64 m) {
        m = Shape (v)
    }>
    y = Cast <to = 1> (picked)
}
"""
    model = ir.serde.deserialize_model(_unranked(parse(text)))
    ranks = Ranks(model)
    found = {n.op_type: n for n in model.graph}
    then = found["If"].attributes["then_branch"].as_graph()
    assert ranks.rank(then.node(1).outputs[0]) == 0
    assert ranks.rank(found["If"].outputs[0]) is None


_MAP_OVER_A_LOOP_BUILT_LIST = """
g (float[T,3] x, int64 n) => (float[?,3] y) {
    empty = SequenceEmpty <dtype = 1> ()
    cond = Constant <value = bool {1}> ()
    last, outs = Loop (n, cond, x, empty) <body = body (int64 i, bool c, float cur, seq(float) acc)
                                             => (bool c_out, float cut, seq(float) acc_out) {
        one = Constant <value = int64[1] {1}> ()
        big = Constant <value = int64[1] {1000}> ()
        zero = Constant <value = int64[1] {0}> ()
        cut = Slice (cur, one, big, zero)
        acc_out = SequenceInsert (acc, cut)
        c_out = Identity (c)
    }>
    mapped = SequenceMap (outs) <body = f (float e) => (float r) {
        t = Transpose <perm = [1, 0]> (e)
        s = Softmax <axis = 0> (t)
        r = Transpose <perm = [1, 0]> (s)
    }>
    y = ConcatFromSequence <axis = 0> (mapped)
}
"""


def test_a_map_over_a_loop_built_list_of_ranks_onnx_does_not_know():
    """The loop appends `cur[1:]` of a carried value of unknown rank; a SequenceMap transposes
    and softmaxes each: the body's element has the carried value's rank, 2, by induction."""
    model = _unranked(parse(_MAP_OVER_A_LOOP_BUILT_LIST))
    loop, mapped = model.graph.node[2], model.graph.node[3]
    loop.attribute[0].g.input[2].type.tensor_type.ClearField("shape")  # the carried value
    mapped.attribute[0].g.input[0].type.tensor_type.ClearField("shape")  # the element
    ir_model = ir.serde.deserialize_model(model)
    body = ir_model.graph.node(3).attributes["body"].as_graph()
    assert Ranks(ir_model).rank(body.inputs[0]) == 2
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0, reasons(report)
    x = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
    for n in (1, 3, 5):  # none: the original fails (a concatenation of no tensor)
        assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, dtype=np.int64)})


def test_the_cause_of_an_unknown_rank_is_found_where_it_arises():
    model = ir.serde.deserialize_model(
        parse(
            "g (float[12] v, int64[R] s) => (float y) {\n"
            " w = Reshape (v, s)\n r = Relu (w)\n y = Softmax (r)\n}"
        )
    )
    for node in model.graph:
        for value in node.outputs:
            value.shape = None  # as inference leaves them
    y = model.graph.node(2).outputs[0]
    assert unknown_rank_cause(y) == (
        "made from 'w', made by Reshape to a shape of run-time length: a rank known only at "
        "run time"
    )


# `a_out = a + zeros_like(a)`-style carried tensor (TorchScript exports `zeros_like` as
# ConstantOfShape(Shape(a))), appended to a list every iteration; ONNX gives the carried `a` no
# shape, so only the rank of `Shape(a)`'s input gives the ConstantOfShape its rank
_CARRIED_ZEROS_LIKE = """
g (float[2,3] x, int64 n) => (float[?,3] y) {
    empty = SequenceEmpty <dtype = 1> ()
    cond = Constant <value = bool {1}> ()
    last, made = Loop (n, cond, x, empty) <body = body (int64 i, bool c, float[2,3] a,
                                                       seq(float) l)
                                                => (bool c_out, float a_out, seq(float) l_out) {
        s = Shape (a)
        z = ConstantOfShape <value = float[1] {0.5}> (s)
        tail = Shape <start = -1> (a)
        w = ConstantOfShape <value = float[1] {1}> (tail)
        b = Add (a, z)
        a_out = Add (b, w)
        l_out = SequenceInsert (l, a_out)
        c_out = Identity (c)
        e = Expand (w, s)
        r = Reshape (b, s)
        head = Shape <end = 1> (a)
        v = Reshape (b, head)
    }>
    y = ConcatFromSequence <axis = 0> (made)
}
"""


def _carried_unshaped(text: str) -> onnx.ModelProto:
    """`text`'s model with its Loop bodies' carried values and outputs declared without a
    shape, as ONNX inference leaves them (the counters and conditions keep theirs)."""
    model = parse(text)

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            if node.op_type != "Loop":
                continue
            body = node.attribute[0].g
            for value in [*body.input[2:], *body.output]:
                if value.type.HasField("sequence_type"):
                    value.type.sequence_type.elem_type.tensor_type.ClearField("shape")
                else:
                    value.type.tensor_type.ClearField("shape")
            walk(body)

    walk(model.graph)
    return model


# the same list, its element the sum of `zeros_like(a)` and `a` added twice by an inner Loop
# (the ConstantOfShape is the inner Loop's initial carried value, as a running `total =
# torch.zeros_like(sample)` over a list of coefficients exports)
_NESTED_ZEROS_LIKE = """
g (float[2,3] x, int64 n) => (float[?,3] y) {
    empty = SequenceEmpty <dtype = 1> ()
    cond = Constant <value = bool {1}> ()
    two = Constant <value = int64 {2}> ()
    last, made = Loop (n, cond, x, empty) <body = body (int64 i, bool c, float[2,3] a,
                                                       seq(float) l)
                                                => (bool c_out, float a_out, seq(float) l_out) {
        s = Shape (a)
        z = ConstantOfShape <value = float[1] {0.5}> (s)
        total = Loop (two, c, z) <body = inner (int64 j, bool c2, float t)
                                         => (bool c2_out, float t_out) {
            t_out = Add (t, a)
            c2_out = Identity (c2)
        }>
        a_out = Sub (total, a)
        l_out = SequenceInsert (l, a_out)
        c_out = Identity (c)
    }>
    y = ConcatFromSequence <axis = 0> (made)
}
"""


def test_the_length_of_a_shape_is_the_rank_of_its_input_in_a_loop_body():
    """ConstantOfShape(Shape(a)) has a's rank and ConstantOfShape(Shape<start=-1>(a)) rank
    1 (as have Expand and Reshape to them), though `a` is a carried value ONNX gives no shape;
    the carried value and the list it fills then have rank 2 by induction."""
    model = ir.serde.deserialize_model(_carried_unshaped(_CARRIED_ZEROS_LIKE))
    ranks = Ranks(model)
    loop = next(n for n in model.graph if n.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    by_name = {o.name: o for n in body for o in n.outputs}
    assert [ranks.rank(by_name[k]) for k in ("s", "z", "tail", "w", "a_out")] == [1, 2, 1, 1, 2]
    assert [ranks.rank(by_name[k]) for k in ("e", "r", "head", "v")] == [2, 2, 1, 1]
    assert ranks.rank(body.inputs[2]) == 2
    assert ranks.rank(loop.outputs[1]) == 2


def test_the_length_of_a_shape_of_a_value_of_unknown_rank_is_not_guessed():
    """Shape of a Reshape to a shape of run-time length: its length (and a ConstantOfShape of
    it) stays unknown."""
    model = ir.serde.deserialize_model(
        parse(
            "g (float[12] x, int64[R] shape) => (float[?] out) {\n"
            " r = Reshape (x, shape)\n s = Shape (r)\n y = ConstantOfShape (s)\n"
            " minus = Constant <value = int64[1] {-1}> ()\n out = Reshape (y, minus)\n}"
        )
    )
    (y,) = model.graph.node(2).outputs
    assert Ranks(model).rank(y) is None


def test_a_list_of_a_carried_zeros_like_sum_lowers_for_a_target_that_needs_ranks():
    """With the rank of `Shape(a)`'s input, the list the Loop fills has elements of rank 2 (a
    sum started from `zeros_like(a)` by an inner Loop): the portable target (which needs every
    rank) lowers it, and it computes the same; a loop that never runs leaves the list empty."""
    model = _carried_unshaped(_NESTED_ZEROS_LIKE)
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0, reasons(report)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    for n in (1, 3):
        out = assert_same_outputs(model, lowered, {"x": x, "n": np.array(n, dtype=np.int64)})
        assert out[0].shape == (2 * n, 3)
    assert_same_or_both_fail(model, lowered, {"x": x, "n": np.array(0, dtype=np.int64)})


def test_the_cause_of_an_unknown_rank_made_by_if_or_loop_names_the_ranks_that_differ():
    """An If whose branches give a vector and a scalar (TorchScript's `x == y` of elements
    that may be scalars), a Loop that carries a scalar total into a vector: the cause names
    the ranks that differ, not a missing rule."""
    text = """
g (bool b, float[3] v, int64 n) => (float y, float z) {
    picked = If (b) <then_branch = t () => (float[3] a) {
        a = Relu (v)
    }, else_branch = e () => (float s) {
        s = Constant <value = float {1}> ()
    }>
    y = Neg (picked)
    zero = Constant <value = float {0}> ()
    cond = Constant <value = bool {1}> ()
    total = Loop (n, cond, zero) <body = body (int64 i, bool c, float t) => (bool c2, float t2) {
        t2 = Add (t, v)
        c2 = Identity (c)
    }>
    z = Neg (total)
}
"""
    model = parse(text)
    body = model.graph.node[4].attribute[0].g
    for info in (body.input[2], body.output[1]):
        info.type.tensor_type.ClearField("shape")  # the carried total: no rank declared
    inferred = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(model))
    by_name = {o.name: o for node in inferred.graph for o in node.outputs}
    for name in ("picked", "y", "total", "z"):
        by_name[name].shape = None  # as inference leaves them (the text declares y, z)
    assert Ranks(inferred).rank(by_name["y"]) is None
    assert unknown_rank_cause(by_name["y"]) == (
        "made from 'picked', made by If, whose branches give ranks 1 and 0"
    )
    assert Ranks(inferred).rank(by_name["z"]) is None
    assert unknown_rank_cause(by_name["z"]) == (
        "made from 't', carried by a Loop from rank 0, which its body does not give back"
    )


def test_the_cause_of_a_list_of_elements_of_different_ranks_names_them():
    """YOLOv5's detect head puts a 5-D tensor into a list of 4-D maps: no one rank, and the
    cause says which ranks meet."""
    model = parse(
        "g (float[2,3] x, float[2,3,4] y) => (seq(float) t, seq(float) u) {\n"
        " s = SequenceConstruct (x)\n t = SequenceInsert (s, y)\n"
        " u = SequenceConstruct (x, y)\n}"
    )
    inferred = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(model))
    _, t, u = (node.outputs[0] for node in inferred.graph)
    for value in (t, u):
        value.shape = None  # the elements' shape: none, they differ
        assert Ranks(inferred).rank(value) is None
    assert unknown_rank_cause(t) == "a tensor of rank 3 put into a list of elements of rank 2"
    assert unknown_rank_cause(u) == "made by SequenceConstruct of tensors of ranks 2, 3"
