"""Dims known from how a value is made, where shape inference gives it no shape, and the
conditions they decide: TorchScript writes `x.squeeze(-1)` of a tensor of unknown shape as
`If(Shape(x)[-1] == 1, Squeeze, Identity)`, whose rank is unknown and makes everything after it
(in a Loop, the state it feeds back) of unknown rank.

Three ways: the dims and conditions answered (and where not), the If inlined by
`if-static-condition` (and left where the dim is not known), and numeric equivalence.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, op_counts, parse

from seqlower.analysis.known_dims import decided, known_dim
from seqlower.analysis.ranks import Ranks
from seqlower.analysis.static_values import StaticValues
from seqlower.ops import subgraphs
from seqlower.verification.runner import IsolatedRunner

# a sampler's state h: each step draws a token by the ArgMax of sorted probabilities,
# `si.gather(-1, p.argmax(-1, keepdim=True)).squeeze(-1)`, one-hot added back to h
SAMPLER = """
agraph (float[B, 10] logits, int64 n) => (int64[?, ?] tokens) {{
    c = Constant <value = bool {{1}}> ()
    last, toks = Loop (n, c, logits) <body = b (int64 i, bool ci, float h)
                                         => (bool co, float h2, int64 tok_out) {{
        co = Identity (ci)
        p = Softmax <axis = -1> (h)
        ten = Constant <value = int64[1] {{10}}> ()
        sp, si = TopK <axis = -1> (p, ten)
        pick = ArgMax <axis = {argmax_axis}, keepdims = {keepdims}> (sp)
        tok = GatherElements <axis = -1> (si, pick)
        shape = Shape (tok)
        minus = Constant <value = int64[1] {{-1}}> ()
        dim = Gather (shape, minus)
        one = Constant <value = int64[1] {{1}}> ()
        is_one = Equal (dim, one)
        tok_out = If (is_one) <then_branch = t () => (int64 sq) {{ sq = Squeeze (tok, minus) }},
                              else_branch = e () => (int64 same) {{ same = Identity (tok) }}>
        depth = Constant <value = int64[1] {{10}}> ()
        values = Constant <value = float[2] {{0, 1}}> ()
        hot = OneHot <axis = -1> (tok_out, depth, values)
        h2 = Add (h, hot)
    }}>
    tokens = Identity (toks)
}}"""


def _sampler(argmax_axis: int = -1, keepdims: int = 1) -> ir.Model:
    """The sampler with its body's state and token of no declared shape, as exporters leave
    the values of a Loop body (the text format would declare them scalars)."""
    model = ir.from_proto(parse(SAMPLER.format(argmax_axis=argmax_axis, keepdims=keepdims)))
    loop = next(node for node in model.graph if node.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    branches = [g for node in body if node.op_type == "If" for g in subgraphs(node)]
    for value in (*body.inputs[2:], *body.outputs[1:], *(g.outputs[0] for g in branches)):
        value.shape = None
    return model


def _sampler_proto(argmax_axis: int = -1, keepdims: int = 1):
    return ir.to_proto(_sampler(argmax_axis, keepdims))


def _body_values(model: ir.Model) -> dict[str, ir.Value]:
    loop = next(node for node in model.graph if node.op_type == "Loop")
    body = loop.attributes["body"].as_graph()
    return {v.name: v for node in body for v in node.outputs if v.name}


def _rank(value: ir.Value) -> int | None:
    return len(value.shape) if value.shape is not None else None


def test_argmax_with_keepdims_fixes_its_axis_and_gather_elements_keeps_it():
    values = _body_values(_sampler())
    static = StaticValues()
    assert known_dim(values["pick"], -1, _rank, static) == 1
    assert known_dim(values["tok"], -1, _rank, static) == 1  # through GatherElements
    assert known_dim(values["tok"], 0, _rank, static) is None  # B: not known
    assert decided(values["is_one"], _rank, static) is True


@pytest.mark.parametrize(
    ("argmax_axis", "keepdims", "why"),
    [(0, 1, "the ArgMax keeps axis 0, the read is of axis -1 of unknown rank"),
     (-1, 0, "no keepdims: the axis is gone")],
)  # fmt: skip
def test_a_dim_not_fixed_decides_nothing(argmax_axis, keepdims, why):
    values = _body_values(_sampler(argmax_axis, keepdims))
    assert decided(values["is_one"], _rank, StaticValues()) is None, why


def test_the_rank_of_the_squeeze_if_is_its_then_branch():
    model = _sampler()
    ranks = Ranks(model)
    values = _body_values(model)
    assert ranks.rank(values["tok_out"]) == 1
    assert ranks.rank(values["h2"]) == 2  # the loop's state keeps its rank
    unknown = _sampler(0, 1)
    assert Ranks(unknown).rank(_body_values(unknown)["tok_out"]) is None


def test_the_if_is_inlined_and_the_lowered_sampler_computes_the_same():
    original = _sampler_proto()
    lowered, report = lower(original, target="generic")
    assert report.rules_fired.get("if-static-condition") == 1
    (loop,) = [node for node in lowered.graph.node if node.op_type == "Loop"]
    assert "If" not in {node.op_type for node in loop.attribute[0].g.node}
    rng = np.random.default_rng(3)
    # (no step is left out: onnxruntime gives the original's empty scan output the rank of a
    # body output of no declared shape, 1, where the lowered body's is known, 2)
    for batch, steps in ((4, 5), (1, 1), (0, 2), (3, 1)):
        feeds = {
            "logits": rng.standard_normal((batch, 10)).astype(np.float32),
            "n": np.array(steps, np.int64),
        }
        if batch == 0 and _crashes(original, feeds):  # onnxruntime 1.20: SIGFPE, both models
            continue
        assert_same_outputs(original, lowered, feeds)


def _crashes(model, feeds: dict) -> bool:
    """Whether this onnxruntime dies running `model` on `feeds` (probed in a child process)."""
    with IsolatedRunner("onnxruntime", model.SerializeToString()) as runner:
        return runner.run(feeds).crashed


def test_an_if_whose_dim_is_not_known_stays():
    original = _sampler_proto(0, 1)
    lowered, report = lower(original, target="generic")
    assert "if-static-condition" not in report.rules_fired
    assert op_counts(lowered)["If"] == 1
