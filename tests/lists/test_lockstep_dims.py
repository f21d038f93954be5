"""The static dims of a list whose elements' shape is known only at run time (stacked,
`shaped_by_first`): every maker of its elements records the dims it proves (`_GrownLists.fix`
in `seqlower.lists.components`), and the layout keeps those all of them share.

- an append in a Loop of a tensor of one shape for the whole loop (`keys.append(h @ w)` of an
  h of shape [B, 4]): (None, 4), B being known at run time only;
- the rows of a Loop's scan output, unbound into a list an outer Loop carries (a per-layer
  cache `caches = list(torch.stack(...).unbind(0))` of keys `h @ wk[layer]`, h's rows
  changing between steps): their columns, from the loop analysis of the inner Loop.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from support import assert_same_outputs, lower, parse, sequence_op_count

from seqlower.lists import find_lists
from seqlower.passes import NormalizePass

APPENDS = """
agraph (float[B, 4] x, int64 steps, float[4, 4] w) => (float[?, B, 4] y) {
    c = Constant <value = bool {1}> ()
    empty = SequenceEmpty <dtype = 1> ()
    last, keys = Loop (steps, c, x, empty) <body = b (int64 i, bool ci, float[B, 4] h,
                                                      seq(float[?, ?]) acc)
                                                   => (bool co, float[B, 4] h2,
                                                      seq(float[?, ?]) acc2) {
        co = Identity (ci)
        k = MatMul (h, w)
        acc2 = SequenceInsert (acc, k)
        h2 = Tanh (k)
    }>
    y = ConcatFromSequence <axis = 0, new_axis = 1> (keys)
}"""

# h: [T, 6] from the prompt, then [1, 6]; each step's two keys h @ w are a scan output of
# the inner Loop, unbound into the list the outer Loop carries
UNBOUND = """
agraph (float[T, 6] x, int64 steps, float[6, 6] w) => (float[?, ?, 6] y) {
    c = Constant <value = bool {1}> ()
    empty = SequenceEmpty <dtype = 1> ()
    last, keys = Loop (steps, c, x, empty) <body = b (int64 i, bool ci, float[?, 6] h,
                                                      seq(float[?, ?]) acc)
                                                   => (bool co, float[?, 6] h2,
                                                      seq(float[?, ?]) acc2) {
        co = Identity (ci)
        two = Constant <value = int64 {2}> ()
        g_last, ks = Loop (two, ci, h) <body = inner (int64 j, bool cj, float[?, 6] g)
                                                  => (bool cj2, float[?, 6] g2,
                                                      float[?, 6] k) {
            cj2 = Identity (cj)
            k = MatMul (g, w)
            g2 = Identity (g)
        }>
        acc2 = SplitToSequence <axis = 0, keepdims = 0> (ks)
        axes = Constant <value = int64[1] {0}> ()
        h2 = ReduceSum <keepdims = 1> (g_last, axes)
    }>
    y = ConcatFromSequence <axis = 0> (keys)
}"""


def _layouts(model: onnx.ModelProto) -> list[tuple]:
    normalized = ir.from_proto(model)
    NormalizePass()(normalized)
    return [
        (p.layout.kind, p.layout.dims, p.layout.shaped_by_first)
        for p in find_lists(normalized, 18)
        if p.layout is not None
    ]


def test_an_append_of_one_shape_records_its_static_dims():
    model = parse(APPENDS)
    assert _layouts(model) == [("stacked", (None, 4), True)]
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    w = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    for b, steps in ((3, 4), (1, 1), (0, 2)):
        x = np.arange(b * 4, dtype=np.float32).reshape(b, 4) / 7
        assert_same_outputs(model, lowered, {"x": x, "steps": np.array(steps), "w": w})


def test_the_rows_of_an_inner_scan_output_record_their_columns():
    model = parse(UNBOUND)
    assert _layouts(model) == [("stacked", (None, 6), True)]
    lowered, _ = lower(model)
    assert sequence_op_count(lowered) == 0
    w = np.linspace(-1, 1, 36, dtype=np.float32).reshape(6, 6)
    for t, steps in ((3, 3), (1, 1), (5, 2)):
        x = np.arange(t * 6, dtype=np.float32).reshape(t, 6) / 11
        assert_same_outputs(model, lowered, {"x": x, "steps": np.array(steps), "w": w})
