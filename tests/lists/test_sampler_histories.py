"""A sampler's history of model outputs: a list a Loop grows from empty, one tensor of the
sample's shape (known only at run time) appended each step, the oldest erased past a length,
the newest few read back (diffusers' PNDM `ets`, LMS `derivatives`).

Every element has the carried sample's shape when the sample keeps its shape from one step
to the next, which the loop analysis proves where the step runs a Conv on it (`_conv`) or a
Loop inside it carries a running total that starts from `zeros_like(sample)`
(`LoopShapes._nested_loop`): the list is then one stacked tensor, its element dims taken from
the first element put in (no table of shapes, no flattened data). A Conv that changes the
sample's size, or an inner total that grows, leaves the elements unequal: the flat layout.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import (
    assert_both_fail,
    assert_runs_like_stored,
    assert_same_outputs,
    lower,
    op_counts,
    parse,
    sequence_op_count,
)

from seqlower.analysis import symbolic as sym
from seqlower.analysis.loop_shapes import LoopShapes
from seqlower.analysis.static_values import StaticValues
from seqlower.analysis.symbolic import symbol
from seqlower.passes import NormalizePass

# PNDM's step: e = conv(s); ets.append(e); if len(ets) > 3: del ets[0];
# s = s + (ets[-1] - ets[READ]) / 2
PNDM = """
agraph (float[B, 2, H, W] x, int64 steps, float[2, 2, 3, 3] w) => (float[B, 2, ?, ?] y) {{
    c = Constant <value = bool {{1}}> ()
    empty = SequenceEmpty <dtype = 1> ()
    y, hist = Loop (steps, c, x, empty) <body = b (
            int64 i, bool ci, float[?, ?, ?, ?] s, seq(float[?, ?, ?, ?]) acc)
            => (bool co, float[?, ?, ?, ?] s2, seq(float[?, ?, ?, ?]) acc2) {{
        co = Identity (ci)
        e = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]{strides}> (s, w)
        acc1 = SequenceInsert (acc, e)
        n = SequenceLength (acc1)
        three = Constant <value = int64 {{3}}> ()
        long = Greater (n, three)
        acc2 = If (long) <then_branch = drop () => (seq(float[?, ?, ?, ?]) r) {{
            zero = Constant <value = int64 {{0}}> ()
            r = SequenceErase (acc1, zero)
        }}, else_branch = keep () => (seq(float[?, ?, ?, ?]) r2) {{
            r2 = Identity (acc1)
        }}>
        m1 = Constant <value = int64 {{-1}}> ()
        p = Constant <value = int64 {{{read}}}> ()
        last = SequenceAt (acc2, m1)
        other = SequenceAt (acc2, p)
        d = Sub (last, other)
        half = Constant <value = float {{0.5}}> ()
        dd = Mul (d, half)
        s2 = Add ({kept}, dd)
    }}>
}}"""

# LMS's step: d = (s - s @ w) / 2; ds.append(d); if len(ds) > 2: ds.pop(0);
# total = zeros_like(s); for k in range(len(ds)): total = total + ds[k]; s = s + total / 4
LMS = """
agraph (float[B, T, 3] x, int64 steps, float[3, 3] w) => (float[B, T, 3] y) {{
    c = Constant <value = bool {{1}}> ()
    empty = SequenceEmpty <dtype = 1> ()
    y, hist = Loop (steps, c, x, empty) <body = b (
            int64 i, bool ci, float[?, ?, ?] s, seq(float[?, ?, ?]) acc)
            => (bool co, float[?, ?, ?] s2, seq(float[?, ?, ?]) acc2) {{
        co = Identity (ci)
        m = MatMul (s, w)
        r = Sub (s, m)
        two = Constant <value = float {{2.0}}> ()
        d = Div (r, two)
        acc1 = SequenceInsert (acc, d)
        n = SequenceLength (acc1)
        limit = Constant <value = int64 {{2}}> ()
        long = Greater (n, limit)
        acc2 = If (long) <then_branch = drop () => (seq(float[?, ?, ?]) r1) {{
            zero = Constant <value = int64 {{0}}> ()
            r1 = SequenceErase (acc1, zero)
        }}, else_branch = keep () => (seq(float[?, ?, ?]) r2) {{
            r2 = Identity (acc1)
        }}>
        n2 = SequenceLength (acc2)
        shape = Shape (s)
        z = ConstantOfShape (shape)
        total = Loop (n2, c, z) <body = inner (
                int64 k, bool ck, float[?, ?, ?] t) => (bool ck2, float[?, ?, ?] t2) {{
            ck2 = Identity (ck)
            e = SequenceAt (acc2, k)
            {inner}
        }}>
        four = Constant <value = float {{4.0}}> ()
        q = Div (total, four)
        {update}
    }}>
}}"""

_SUM = "t2 = Add (t, e)"
# the running total grows by a row each step: the sample changes shape, so do the elements
_GROWING = "one = Slice (e, zero1, one1, one1)\n            t2 = Concat <axis = 1> (t, one)"
_GROWING_CONSTANTS = (
    "zero1 = Constant <value = int64[1] {0}> ()\n"
    "            one1 = Constant <value = int64[1] {1}> ()\n            "
)


def _pndm(read: int = 0, strides: str = "", kept: str = "s"):
    return parse(PNDM.format(read=read, strides=strides, kept=kept))


def _lms(inner: str = _SUM, update: str = "s2 = Add (s, q)"):
    return parse(LMS.format(inner=inner, update=update))


def _pndm_feeds(batch: int, size: int, steps: int) -> dict:
    rng = np.random.default_rng(batch * 100 + size * 10 + steps)
    return {
        "x": rng.standard_normal((batch, 2, size, size + 1)).astype(np.float32),
        "steps": np.array(steps, np.int64),
        "w": (rng.standard_normal((2, 2, 3, 3)) / 6).astype(np.float32),
    }


def _lms_feeds(batch: int, rows: int, steps: int) -> dict:
    rng = np.random.default_rng(batch * 100 + rows * 10 + steps)
    return {
        "x": rng.standard_normal((batch, rows, 3)).astype(np.float32),
        "steps": np.array(steps, np.int64),
        "w": (rng.standard_normal((3, 3)) / 3).astype(np.float32),
    }


def _flat(model) -> bool:
    """Whether a list is laid out flat: a table of shapes, each element's size its product."""
    return op_counts(model)["ReduceProd"] > 0


def test_a_pndm_history_is_stacked_and_computes_the_same():
    model = _pndm()
    lowered, report = lower(model)
    assert report.rules_fired["tensor-list"] > 0
    assert not any(n.op_type.startswith("Sequence") for n in lowered.graph.node)
    assert not _flat(lowered)
    counts = op_counts(lowered)
    assert counts["CumSum"] == 0 and counts["Compress"] == 0
    # no steps (the history never filled), one (ets[-1] and ets[0] the same), past the erase
    for batch, size, steps in ((1, 4, 0), (2, 5, 1), (1, 3, 2), (3, 4, 6), (0, 4, 3)):
        assert_same_outputs(model, lowered, _pndm_feeds(batch, size, steps))


def test_a_pndm_history_read_out_of_range_fails_as_the_original_does():
    """`ets[-2]` on the first step (one element): both fail; from the second step the newest
    two are read."""
    model = _pndm(read=-2)
    lowered, _ = lower(model)
    assert not _flat(lowered)
    assert_both_fail(model, lowered, _pndm_feeds(2, 4, 1))
    assert_both_fail(model, lowered, _pndm_feeds(1, 4, 5))  # fails on its first step too
    assert_same_outputs(model, lowered, _pndm_feeds(2, 4, 0))


def test_a_history_whose_sample_changes_size_stays_flat():
    """A strided Conv halves the sample each step (`(H + 2 - 3) // 2 + 1`): the elements
    differ, the analysis proves no one shape, and the list keeps the flat layout."""
    model = _pndm(read=-1, strides=", strides = [2, 2]", kept="e")
    lowered, _ = lower(model)
    assert _flat(lowered)
    for batch, size, steps in ((1, 9, 0), (2, 9, 1), (1, 16, 3), (2, 17, 6)):
        assert_same_outputs(model, lowered, _pndm_feeds(batch, size, steps))


def test_an_lms_history_summed_by_an_inner_loop_is_stacked_and_computes_the_same():
    model = _lms()
    lowered, _ = lower(model)
    assert not any(n.op_type.startswith("Sequence") for n in lowered.graph.node)
    assert not _flat(lowered)
    for batch, rows, steps in ((1, 2, 0), (2, 3, 1), (1, 4, 2), (3, 1, 7), (2, 0, 3)):
        assert_same_outputs(model, lowered, _lms_feeds(batch, rows, steps))


def test_an_lms_history_whose_inner_total_grows_stays_flat():
    """The inner loop appends a column to its total each time: the sample and so the
    elements change shape from step to step."""
    model = _lms(_GROWING_CONSTANTS + _GROWING, update="s2 = Identity (q)")
    lowered, _ = lower(model)
    assert _flat(lowered)
    for batch, rows, steps in ((1, 2, 0), (2, 3, 1), (1, 2, 4)):
        assert_same_outputs(model, lowered, _lms_feeds(batch, rows, steps))


def _analysed(model) -> tuple[LoopShapes, ir.Graph]:
    ir_model = ir.from_proto(model)
    NormalizePass()(ir_model)
    (loop,) = [n for n in ir_model.graph if n.op_type == "Loop"]
    analysis = LoopShapes(loop, StaticValues())
    return analysis, analysis.body


def _output(body: ir.Graph, name: str) -> ir.Value:
    return next(o for n in body for o in n.outputs if o.name == name)


@pytest.mark.parametrize(
    ("attributes", "height", "width"),
    [
        ("pads = [1, 1, 1, 1]", "H", "W"),  # 3x3, pads of one: the same size
        ("pads = [0, 0, 0, 0]", "H - 2", "W - 2"),
        ("pads = [1, 0, 1, 2], dilations = [2, 1]", "H - 2", "W"),
        ('auto_pad = "SAME_UPPER"', "H", "W"),
        ('auto_pad = "VALID"', "H - 2", "W - 2"),
    ],
)
def test_the_conv_rule_gives_the_output_dims(attributes, height, width):
    text = f"""
    agraph (float[B, 2, H, W] x, float[4, 2, 3, 3] w) => (float y) {{
        m = Constant <value = int64 {{2}}> ()
        c = Constant <value = bool {{1}}> ()
        y = Loop (m, c) <body = b (int64 i, bool ci) => (bool co, float out) {{
            co = Identity (ci)
            out = Conv <kernel_shape = [3, 3], {attributes}> (x, w)
        }}>
    }}"""
    analysis, body = _analysed(parse(text))
    h, w = symbol(("param", "H")), symbol(("param", "W"))
    want = {"H": h, "W": w, "H - 2": sym.sub(h, 2), "W - 2": sym.sub(w, 2)}
    assert analysis.shape(_output(body, "out")) == (
        symbol(("param", "B")),
        4,
        want[height],
        want[width],
    )


def test_a_strided_conv_of_a_carried_sample_changes_its_shape():
    """The carried sample through a strided Conv: not the shape it entered with, so not kept."""
    model = _pndm(strides=", strides = [2, 2]", kept="e")
    analysis, body = _analysed(model)
    sample = body.inputs[2]
    assert sample not in analysis.invariant_carried()
    assert analysis.shape(_output(body, "e"))[2] is None  # the height may change


NESTED = """
agraph (float[B, T, 3] x, int64 steps) => (float y) {{
    c = Constant <value = bool {{1}}> ()
    y = Loop (steps, c, x) <body = b (
            int64 i, bool ci, float[?, ?, ?] s) => (bool co, float[?, ?, ?] s2) {{
        co = Identity (ci)
        shape = Shape (s)
        z = ConstantOfShape (shape)
        total = Loop (steps, c, z) <body = inner (int64 k, bool ck, float[?, ?, ?] t)
                                                => (bool ck2, float[?, ?, ?] t2) {{
            ck2 = Identity (ck)
            {inner}
        }}>
        s2 = Add (s, total)
    }}>
}}"""


def test_a_total_an_inner_loop_carries_keeps_the_sample_s_shape():
    """zeros_like(s), then s added in every inner iteration: the inner Loop's output, and so
    the next sample, keep the sample's shape (the inner Loop analysed with the outer body's
    shapes)."""
    analysis, body = _analysed(parse(NESTED.format(inner="t2 = Add (t, s)")))
    b, t = symbol(("param", "B")), symbol(("param", "T"))
    assert analysis.shape(_output(body, "total")) == (b, t, 3)
    assert body.inputs[2] in analysis.invariant_carried()


def test_a_growing_inner_total_is_not_kept():
    """The inner Loop concatenates s to its total: the total, and the sample, change shape."""
    analysis, body = _analysed(parse(NESTED.format(inner="t2 = Concat <axis = 1> (t, s)")))
    shape = analysis.shape(_output(body, "total"))
    assert shape is None or None in shape
    assert body.inputs[2] not in analysis.invariant_carried()


# outs.append(inner_loop(x[1:, :i + 1])): the inner Loop carries a crop whose width changes
# with the outer iteration i, and keeps it (Neg twice)
CROPS = """
agraph (float[N, 3] x, int64 m) => (float[?, ?] y) {
    s0 = SequenceEmpty <dtype = 1> ()
    yes = Constant <value = bool {1}> ()
    s = Loop (m, yes, s0) <body = grow (int64 i, bool c, seq(float) acc)
                                       => (bool c2, seq(float) out) {
        one = Constant <value = int64[1] {1}> ()
        zero = Constant <value = int64[1] {0}> ()
        big = Constant <value = int64[1] {9223372036854775807}> ()
        rows = Slice (x, one, big, zero)
        axes = Constant <value = int64[1] {0}> ()
        i1 = Unsqueeze (i, axes)
        end = Add (i1, one)
        cut = Slice (rows, zero, end, one)
        twice = Constant <value = int64 {2}> ()
        piece = Loop (twice, c, cut) <body = again (int64 k, bool ck, float[?, ?] v)
                                                  => (bool ck2, float[?, ?] v2) {
            v2 = Neg (v)
            ck2 = Identity (ck)
        }>
        out = SequenceInsert (acc, piece)
        c2 = Identity (c)
    }>
    y = ConcatFromSequence <axis = 1> (s)
}"""


def test_an_inner_loop_keeps_a_shape_that_changes_with_the_outer_iteration():
    """The inner Loop keeps the crop's shape, but that shape is the crop's in this iteration
    of the outer Loop only (its width i + 1): the inner Loop's output is no one shape for the
    whole outer Loop, and its width is unknown there (the inner analysis names the crop's
    dims afresh, fixed while the inner Loop runs only). The list of crops is not stacked,
    and computes the same as the original, whose elements differ in width."""
    model = parse(CROPS)
    analysis, body = _analysed(model)
    piece = _output(body, "piece")
    assert not analysis.is_invariant(piece)
    assert analysis.shape(piece)[1] is None
    assert analysis.shape(piece) == analysis.shape(_output(body, "cut"))
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} == {"flat"}
    x = (np.arange(12).reshape(4, 3) - 5).astype(np.float32)
    for m in (1, 2, 5):  # elements of 1, 2, 3, 3, 3 columns
        (y,) = assert_same_outputs(model, lowered, {"x": x, "m": np.array(m)})
        assert y.shape == (3, sum(min(k + 1, 3) for k in range(m)))
    assert_both_fail(model, lowered, {"x": x, "m": np.array(0)})  # no element to join


@pytest.mark.parametrize("case", ["diffusers_pndm_plms", "diffusers_lms_derivatives"])
def test_the_scheduler_exports_histories_are_stacked(case):
    """The exports the forms were made for: no sequence operator left, no table of shapes
    (the flat layout's ReduceProd and CumSum), and the stored outputs."""
    root = pathlib.Path(__file__).parent.parent / "fixtures" / "torch_recent" / case
    original = onnx.load(root / "model.onnx")
    lowered, _ = lower(original, target="generic")
    counts = op_counts(lowered)
    assert sequence_op_count(lowered) == 0
    assert counts["ReduceProd"] == counts["CumSum"] == 0
    assert_runs_like_stored(original, root, lowered)
