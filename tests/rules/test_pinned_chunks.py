"""Chunks of `SplitToSequence(x, k)` along a dim whose size is not known are equal only where k
divides it; an op that every iteration applies to the chunk and that fails on any other size
(Conv's input channels, MatMul's inner dim) proves it for every run that succeeds
(`seqlower/analysis/required_sizes.py`). The loop, or the map, is then batched over the chunks
stacked by one Reshape, which fails where the original fails."""

from __future__ import annotations

import numpy as np
import pytest
from support import lower, parse, rule_check, run_ort

from seqlower.rule import Refusal
from seqlower.rules import batching, loop_batching

RNG = np.random.default_rng(7)


def _floats(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _loop(reader: str, weight: str = "float[3,4,3,3] w", count: str = "n") -> str:
    return f"""g (float[N,C,5,5] x, {weight}, int64 m) => (float[?,?,?,?] y) {{
        four = Constant <value = int64 {{4}}> ()
        s = SplitToSequence <axis = 1> (x, four)
        n = SequenceLength (s)
        zero = Constant <value = int64 {{0}}> ()
        shape = Shape (x)
        batch = Gather (shape, zero)
        lesser = Min (n, batch)
        yes = Constant <value = bool {{1}}> ()
        e = SequenceEmpty <dtype = 1> ()
        out = Loop ({count}, yes, e) <body = body (int64 i, bool c, seq(float) acc) =>
                (bool c2, seq(float) acc2) {{
            chunk = SequenceAt (s, i)
            {reader}
            acc2 = SequenceInsert (acc, y0)
            c2 = Identity (c)
        }}>
        y = ConcatFromSequence <axis = 1> (out)
    }}"""


CONV = """r = Relu (chunk)
            y0 = Conv <pads = [1, 1, 1, 1]> (r, w)"""


def _feeds(channels: int, batch: int = 2) -> dict[str, np.ndarray]:
    return {"x": _floats(batch, channels, 5, 5), "w": _floats(3, 4, 3, 3), "m": np.array(99)}


def test_chunks_a_conv_needs_are_batched_and_agree():
    model = parse(_loop(CONV))
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1
    ops = [node.op_type for node in lowered.graph.node]
    assert "Loop" not in ops and ops.count("Conv") == 1
    for channels, batch in ((4, 2), (8, 2), (12, 3), (8, 0)):
        feeds = _feeds(channels, batch)
        for got, want in zip(run_ort(lowered, feeds), run_ort(model, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_dim_the_chunk_size_does_not_divide_fails_in_both():
    """10 channels: the last chunk has 2, and the original's Conv on it fails; the batched
    form's Reshape into chunks of 4 fails too."""
    model = parse(_loop(CONV))
    lowered, _ = lower(model)
    feeds = _feeds(10)
    with pytest.raises(Exception, match=r"(?i)channel|shape|reshape"):
        run_ort(model, feeds)
    with pytest.raises(Exception, match=r"(?i)reshape|shape"):
        run_ort(lowered, feeds)


def test_chunks_a_matmul_needs_are_batched():
    text = _loop("y0 = MatMul (chunk, v)", weight="float[4,3] v").replace(
        "float[N,C,5,5] x", "float[N,5,C] x"
    )
    text = text.replace("<axis = 1> (x, four)", "<axis = -1> (x, four)").replace(
        "ConcatFromSequence <axis = 1>", "ConcatFromSequence <axis = -1>"
    )
    model = parse(text.replace("float[?,?,?,?] y", "float[?,?,?] y"))
    lowered, report = lower(model)
    assert report.rules_fired.get("loop-batch") == 1
    assert "Loop" not in [node.op_type for node in lowered.graph.node]
    for channels in (4, 12):
        feeds = {"x": _floats(2, 5, channels), "v": _floats(4, 3), "m": np.array(9)}
        for got, want in zip(run_ort(lowered, feeds), run_ort(model, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # the Conv needs 2 channels, the chunks have 4 (but for the last): no proof
        (
            _loop(CONV, weight="float[3,2,3,3] w"),
            "chunks of 4 along a dim of C do not share a shape",
        ),
        # the chunk is only summed: any size runs
        (
            _loop("y0 = ReduceSum <keepdims = 1> (chunk)"),
            "chunks of 4 along a dim of C do not share a shape",
        ),
        # fewer iterations than chunks (as many as images): the smaller last chunk may never
        # be read
        (_loop(CONV, count="lesser"), "chunks proved equal only by the op reading them"),
    ],
)
def test_refused(text: str, reason: str):
    found = rule_check(parse(text), loop_batching._check, "Loop")
    assert isinstance(found, Refusal) and reason in found.reason, found


def test_a_conv_in_a_branch_proves_nothing():
    """A Conv that only one branch runs may never see the smaller chunk."""
    reader = """y0 = If (c) <then_branch = t () => (float[?,?,?,?] a) {
                a = Conv <pads = [1, 1, 1, 1]> (chunk, w)
            }, else_branch = f () => (float[?,?,?,?] b) {
                b = Identity (chunk)
            }>"""
    found = rule_check(parse(_loop(reader)), loop_batching._check, "Loop")
    assert isinstance(found, Refusal), found
    assert "chunks of 4 along a dim of C do not share a shape" in found.reason


def test_a_map_over_chunks_a_conv_needs_is_batched():
    model = parse("""g (float[N,C,5,5] x, float[3,4,3,3] w) => (float[?,?,?,?] y) {
        four = Constant <value = int64 {4}> ()
        s = SplitToSequence <axis = 1> (x, four)
        o = SequenceMap (s) <body = body (float[N,4,5,5] chunk) => (float[N,3,5,5] z) {
            z = Conv <pads = [1, 1, 1, 1]> (chunk, w)
        }>
        y = ConcatFromSequence <axis = 1> (o)
    }""")
    assert not isinstance(rule_check(model, batching._check, "SequenceMap"), Refusal)
    lowered, _ = lower(model)
    assert "Loop" not in [node.op_type for node in lowered.graph.node]
    for channels in (4, 8):
        feeds = {"x": _floats(2, channels, 5, 5), "w": _floats(3, 4, 3, 3)}
        for got, want in zip(run_ort(lowered, feeds), run_ort(model, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
