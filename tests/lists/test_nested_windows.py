"""Windows cut in nested loops (`for i in range(h // 2): for j in range(w // 2):
windows.append(x[2i : 2i+2, 2j : 2j+2])`, Swin's `window_partition` written with a list): the
loop analysis bounds the outer iteration number by the outer trip count and proves
`2i + 2 <= 2 * (h // 2) <= h`, so every window is 2 x 2 and the list is one stacked tensor, not
a ragged buffer with a table of sizes. Checked by what is emitted and, under onnxruntime,
against the original for odd and even sizes, 0 included."""

from __future__ import annotations

import numpy as np
from support import assert_same_outputs, lower_tensor_form, parse, sequence_op_count

WINDOWS = """
agraph (float[H,W,4] x) => (float[?,2,2,4] y, int64 n) {
    dims = Shape(x)
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    two = Constant<value = int64 {2}>()
    h = Gather(dims, zero)
    w = Gather(dims, one)
    nh = Div(h, two)
    nw = Div(w, two)
    t = Constant<value = bool {1}>()
    empty = SequenceEmpty<dtype = 1>()
    windows = Loop(nh, t, empty) <body = outer (int64 i, bool c, seq(float) acc)
                                   => (bool c1, seq(float) acc2) {
        c1 = Identity(c)
        acc2 = Loop(nw, c, acc) <body = inner (int64 j, bool d, seq(float) a)
                                  => (bool d1, seq(float) a2) {
            d1 = Identity(d)
            zero1 = Constant<value = int64[1] {0}>()
            axes = Constant<value = int64[2] {0, 1}>()
            i2 = Mul(i, two)
            i3 = Add(i2, two)
            j2 = Mul(j, two)
            j3 = Add(j2, two)
            i2u = Unsqueeze(i2, zero1)
            i3u = Unsqueeze(i3, zero1)
            j2u = Unsqueeze(j2, zero1)
            j3u = Unsqueeze(j3, zero1)
            starts = Concat<axis = 0>(i2u, j2u)
            ends = Concat<axis = 0>(i3u, j3u)
            win = Slice(x, starts, ends, axes)
            a2 = SequenceInsert(a, win)
        }>
    }>
    y = ConcatFromSequence<axis = 0, new_axis = 1>(windows)
    n = SequenceLength(windows)
}"""


def test_windows_cut_in_nested_loops_are_one_stacked_tensor():
    model = parse(WINDOWS)
    lowered, report = lower_tensor_form(model)
    assert sequence_op_count(lowered) == 0
    assert {node.tier for node in report.nodes} == {"stacked"}
    rng = np.random.default_rng(0)
    for h in range(1, 6):
        for w in range(1, 6):
            if h < 2 or w < 2:
                continue  # no window: the original's ConcatFromSequence of nothing fails
            x = rng.standard_normal((h, w, 4)).astype(np.float32)
            y, n = assert_same_outputs(model, lowered, {"x": x})
            assert y.shape == ((h // 2) * (w // 2), 2, 2, 4) and int(n) == len(y)


def test_windows_that_may_pass_the_end_are_not_proved_one_shape():
    """`x[2i : 2i+3]` for i in range(h // 2) may pass h (h = 4: the last window is cut short):
    not proved one shape, the list stays ragged; the lowered model still agrees."""
    text = WINDOWS.replace("i3 = Add(i2, two)", "i3 = Add(i2, three)").replace(
        "two = Constant<value = int64 {2}>()",
        "two = Constant<value = int64 {2}>()\n    three = Constant<value = int64 {3}>()",
    )
    model = parse(text.replace("float[?,2,2,4] y", "float[?,?,2,4] y"))
    lowered, report = lower_tensor_form(model)
    assert {node.tier for node in report.nodes} == {"ragged"}
    # sizes whose windows do fit (h = 4 cuts the last short, where the original's stack fails)
    for h, w in ((5, 4), (3, 2), (7, 2)):
        x = np.arange(h * w * 4, dtype=np.float32).reshape(h, w, 4)
        assert_same_outputs(model, lowered, {"x": x})
