"""A list a Loop grows from empty whose appended tensor is computed from the list itself: a
decoder's key cache, `keys.append(proj(h)[:, None]); K = torch.cat(keys, 1); h = f(K, h)`.

The loop analysis cannot show h keeps its shape without knowing the cache's elements, nor the
elements' shape without h: it assumes the list holds what the body appends in a first pass
(where h keeps its initial shape) and confirms both together (an induction over the
iterations). The list is then one stacked tensor with the list axis at the elements' dim of
one, so `torch.cat(keys, 1)` is the tensor itself.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_both_fail, assert_same_outputs, lower, parse, run_ort

from seqlower.analysis.loop_shapes import LoopShapes
from seqlower.analysis.static_values import StaticValues

# h: [B, H]; every step appends k = (h W)[:, None] of shape [B, 1, H] and reads the whole cache
KEY_CACHE = """
agraph ({t}[B, 4] x, int64 steps, {t}[4, 4] w) => ({t}[B, ?, 4] y, {t}[B, 4] last) {{
    c = Constant <value = bool {{1}}> ()
    empty = SequenceEmpty <dtype = {code}> ()
    last, keys = Loop (steps, c, x, empty) <body = b (int64 i, bool ci, {t}[B, 4] h,
                                                      seq({t}[?, ?, ?]) acc)
                                                   => (bool co, {t}[B, 4] h2,
                                                      seq({t}[?, ?, ?]) acc2) {{
        co = Identity (ci)
        k = MatMul (h, w)
        one = Constant <value = int64[1] {{1}}> ()
        k1 = Unsqueeze (k, one)
        acc2 = SequenceInsert (acc, k1)
        cache = ConcatFromSequence <axis = 1> (acc2)
        hq = Unsqueeze (h, one)
        scores = Mul (cache, hq)
        minus = Constant <value = int64[1] {{-1}}> ()
        logits = ReduceSum <keepdims = 0> (scores, minus)
        att = Softmax <axis = -1> (logits)
        att3 = Unsqueeze (att, minus)
        mixed = Mul (att3, cache)
        pooled = ReduceSum <keepdims = 0> (mixed, one)
        h2 = Tanh (pooled)
    }}>
    y = ConcatFromSequence <axis = 1> (keys)
}}"""

# the same, but each step appends the whole cache so far: the element grows every step
GROWING = KEY_CACHE.replace(
    "acc2 = SequenceInsert (acc, k1)",
    "acc1 = SequenceInsert (acc, k1)\n"
    "        grown = ConcatFromSequence <axis = 1> (acc1)\n"
    "        acc2 = SequenceInsert (acc1, grown)",
)


def _model(dtype: str = "float") -> onnx.ModelProto:
    code = {"float": 1, "double": 11}[dtype]
    return parse(KEY_CACHE.format(t=dtype, code=code))


def _feeds(batch: int, steps: int, dtype=np.float32) -> dict:
    rng = np.random.default_rng(batch * 10 + steps)
    return {
        "x": rng.standard_normal((batch, 4)).astype(dtype),
        "steps": np.array(steps, np.int64),
        "w": (rng.standard_normal((4, 4)) / 2).astype(dtype),
    }


def _fails(model: onnx.ModelProto, feeds: dict) -> bool:
    try:
        run_ort(model, feeds)
    except Exception:
        return True
    return False


def _same_or_empty(original: onnx.ModelProto, lowered: onnx.ModelProto, feeds: dict) -> None:
    """The same outputs; where no step runs, onnxruntime fails on the original's concatenation
    of an empty list, and the lowered model gives an empty tensor (a failure that becomes a
    result, which lowering allows; its dims are those of no element, 1 but the list axis)."""
    if feeds["steps"] > 0:
        if feeds["x"].shape[0] == 0 and _fails(original, feeds):
            # onnxruntime 1.20 broadcasts the original's empty batch wrongly ("2 by 4"): its
            # departure, on both models; the newer releases run both
            return
        assert_same_outputs(original, lowered, feeds)
        return
    with pytest.raises(Exception, match="Must have 1 or more inputs"):
        run_ort(original, feeds)
    cache, last = run_ort(lowered, feeds)
    assert cache.shape == (1, 0, 1)
    np.testing.assert_array_equal(last, feeds["x"])


def test_the_cache_is_one_tensor_the_concatenation_reads_as_it_is():
    model = _model()
    lowered, report = lower(model, target="generic")
    (loop,) = [node for node in lowered.graph.node if node.op_type == "Loop"]
    body = collections.Counter(node.op_type for node in loop.attribute[0].g.node)
    # no Transpose and no shape arithmetic to concatenate: the data is [B, n, 4] already
    assert "Transpose" not in body and "Reshape" not in body and "Loop" not in body, body
    assert body["Concat"] == 1  # the append
    tiers = {node.tier for node in report.nodes if node.op_type.startswith("Sequence")}
    assert tiers == {"stacked"}
    for dtype, numpy_type in (("float", np.float32), ("double", np.float64)):
        model = _model(dtype)
        lowered, _ = lower(model, target="generic")
        for batch, steps in ((2, 5), (1, 1), (3, 0), (0, 3), (2, -1)):
            _same_or_empty(model, lowered, _feeds(batch, steps, numpy_type))


def test_the_analysis_assumes_what_is_appended_and_confirms_it():
    model = ir.from_proto(_model())
    loop = next(node for node in model.graph if node.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    values = [body.inputs[3], *(n.outputs[0] for n in body if n.op_type == "SequenceInsert")]
    plain = LoopShapes(loop, StaticValues())
    assert not plain.is_invariant(body.outputs[1])  # h: unknown without the cache's elements
    grown = LoopShapes(loop, StaticValues(), grown=[values])
    assert grown.is_invariant(body.outputs[1])
    (shape,) = set(grown.grown_shapes.values())
    assert shape[1:] == (1, 4) and grown.shape(body.outputs[1]) == (shape[0], 4)


def test_a_list_whose_appended_tensor_grows_is_not_assumed_of_one_shape():
    model = ir.from_proto(parse(GROWING.format(t="float", code=1)))
    loop = next(node for node in model.graph if node.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    values = [body.inputs[3], *(n.outputs[0] for n in body if n.op_type == "SequenceInsert")]
    grown = LoopShapes(loop, StaticValues(), grown=[values])
    assert grown.grown_shapes == {}  # k1 and the growing cache differ: no hypothesis
    original = parse(GROWING.format(t="float", code=1))
    lowered, report = lower(original, target="generic")
    tiers = {node.tier for node in report.nodes if node.op_type.startswith("Sequence")}
    assert "stacked" not in tiers
    for batch, steps in ((2, 3), (1, 1), (0, 2)):
        _same_or_empty(original, lowered, _feeds(batch, steps))
    assert_both_fail(original, lowered, _feeds(1, 0))  # the concatenation of an empty list


@pytest.mark.parametrize("target", ["openvino", "onnxruntime"])
def test_the_cache_form_for_other_targets(target):
    model = _model()
    lowered, _ = lower(model, target=target)
    for batch, steps in ((2, 4), (0, 2), (2, 0)):
        _same_or_empty(model, lowered, _feeds(batch, steps))


def _many_caches(count: int) -> onnx.ModelProto:
    """One Loop carrying `count` states and key caches like KEY_CACHE's, each on its own."""
    inputs = ", ".join(f"float[B, 4] h{k}, seq(float[?, ?, ?]) acc{k}" for k in range(count))
    outputs = ", ".join(f"float[B, 4] g{k}, seq(float[?, ?, ?]) grown{k}" for k in range(count))
    starts = ", ".join("x, empty" for _ in range(count))
    results = ", ".join(f"last{k}, keys{k}" for k in range(count))
    steps = []
    for k in range(count):
        steps.append(f"""
        k{k} = MatMul (h{k}, w)
        k1_{k} = Unsqueeze (k{k}, one)
        grown{k} = SequenceInsert (acc{k}, k1_{k})
        cache{k} = ConcatFromSequence <axis = 1> (grown{k})
        hq{k} = Unsqueeze (h{k}, one)
        scores{k} = Mul (cache{k}, hq{k})
        logits{k} = ReduceSum <keepdims = 0> (scores{k}, minus)
        att{k} = Softmax <axis = -1> (logits{k})
        att3_{k} = Unsqueeze (att{k}, minus)
        mixed{k} = Mul (att3_{k}, cache{k})
        pooled{k} = ReduceSum <keepdims = 0> (mixed{k}, one)
        g{k} = Tanh (pooled{k})""")
    outs = ", ".join(f"float[B, ?, 4] y{k}" for k in range(count))
    concats = "\n".join(f"    y{k} = ConcatFromSequence <axis = 1> (keys{k})" for k in range(count))
    return parse(f"""
agraph (float[B, 4] x, int64 steps, float[4, 4] w) => ({outs}) {{
    c = Constant <value = bool {{1}}> ()
    empty = SequenceEmpty <dtype = 1> ()
    {results} = Loop (steps, c, {starts}) <body = b (int64 i, bool ci, {inputs})
                                           => (bool co, {outputs}) {{
        co = Identity (ci)
        one = Constant <value = int64[1] {{1}}> ()
        minus = Constant <value = int64[1] {{-1}}> ()
        {"".join(steps)}
    }}>
{concats}
}}""")


def test_one_analysis_of_the_loop_confirms_every_cache_it_grows(monkeypatch):
    """Twenty caches in one Loop: the hypothesis on all of them is made and confirmed by one
    analysis of the body, not one per list (linear in the lists)."""
    from seqlower.lists import components

    made = []
    real = components.LoopShapes

    def counting(*args, **kwargs):
        if kwargs.get("grown"):
            made.append(len(kwargs["grown"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(components, "LoopShapes", counting)
    model = _many_caches(20)
    lowered, report = lower(model, target="generic")
    assert made and set(made) == {20}, made  # each analysis holds all twenty lists
    assert len(made) <= 2, made  # (one per pass over the lists that reads them)
    tiers = {node.tier for node in report.nodes if node.op_type.startswith("Sequence")}
    assert tiers == {"stacked"}
    monkeypatch.undo()
    _same_or_empty(model, lowered, _feeds(2, 3))
