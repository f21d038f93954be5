"""Loop bodies that read a sequence built outside (`SequenceAt(outer, i)` on a split tensor)
read the tensor with Gather or Slice instead, whatever form of split PyTorch emitted."""

from __future__ import annotations

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument
from support import lower, lower_and_compare, parse, run_ort, sequence_op_count


def _sum_of_pieces(split: str, shape: str = "float[2,W] x") -> str:
    """`for p in x.split(...): acc = acc + p` as TorchScript exports it (scripted)."""
    return f"""g ({shape}) => (float[2,?] y) {{
        zero = Constant<value = int64 {{0}}>()
        t = Constant<value = bool {{1}}>()
        {split}
        first = SequenceAt(parts, zero)
        shape_first = Shape(first)
        acc0 = ConstantOfShape<value = float[1] {{0}}>(shape_first)
        n = SequenceLength(parts)
        y = Loop(n, t, acc0) <body = body (int64 i, bool cond, float[2,?] acc)
                                          => (bool c2, float[2,?] out) {{
            piece = SequenceAt(parts, i)
            out = Add(acc, piece)
            c2 = Identity(t)
        }}>
    }}"""


@pytest.mark.parametrize(
    ("split", "widths"),
    [
        (
            "size = Constant<value = int64 {2}>()\n"
            "        parts = SplitToSequence<axis = 1>(x, size)",
            [2, 6],
        ),
        ("parts = SplitToSequence<axis = 1, keepdims = 0>(x)", [1, 5]),
        ("parts = SplitToSequence<axis = 1, keepdims = 1>(x)", [1, 5]),
        (  # PyTorch's unbind: scalar split 1 with keepdims=0 (onnxruntime squeezes)
            "one = Constant<value = int64 {1}>()\n"
            "        parts = SplitToSequence<axis = 1, keepdims = 0>(x, one)",
            [1, 5],
        ),
    ],
    ids=["scalar-split", "unbind", "keepdims", "torch-unbind"],
)
def test_a_loop_over_an_outer_split_reads_the_tensor(split, widths):
    model = parse(_sum_of_pieces(split))
    rng = np.random.default_rng(1)
    for width in widths:
        x = rng.standard_normal((2, width)).astype(np.float32)
        lowered, _, _ = lower_and_compare(model, {"x": x})
    assert sequence_op_count(lowered) == 0


@pytest.mark.parametrize(
    ("split", "shape", "sizes"),
    [
        (
            "two = Constant<value = int64 {2}>()\n"
            "        parts = SplitToSequence<axis = 1>(x, two)",
            "float[2,W] x",
            None,
        ),
        ("parts = SplitToSequence<axis = 1>(x, s)", "float[2,W] x, int64[K] s", [2, 2, 1]),
    ],
    ids=["scalar-2", "run-time-sizes"],
)
def test_the_chunk_bounds_of_a_split_read_in_a_loop_are_built_outside_it(split, shape, sizes):
    model = parse(_sum_of_pieces(split, shape))
    feeds = {"x": np.arange(10, dtype=np.float32).reshape(2, 5)}
    if sizes is not None:
        feeds["s"] = np.array(sizes, dtype=np.int64)
    lowered, _, _ = lower_and_compare(model, feeds)
    (loop,) = [node for node in lowered.graph.node if node.op_type == "Loop"]
    body_ops = sorted(node.op_type for node in loop.attribute[0].g.node)
    # a read is a Slice from the start read in a column of starts to its end: the end read in
    # a column of ends, or start + 2 for the scalar split; Range or CumSum stay outside
    end = ["Gather"] if sizes is not None else ["Add"]
    assert [op for op in body_ops if op != "Constant"] == sorted(
        ["Add", "Gather", *end, "Identity", "Slice"]
    )
    outside = [node.op_type for node in lowered.graph.node]
    assert ("Range" in outside) == (sizes is None) and ("CumSum" in outside) == (sizes is not None)


LAST_AND_LENGTH = parse(
    """g (float[N,3] x, int64 p) => (float[?,3] piece, int64 n) {
    two = Constant<value = int64 {2}>()
    parts = SplitToSequence<axis = 0>(x, two)
    piece = SequenceAt(parts, p)
    n = SequenceLength(parts)
}"""
)


@pytest.mark.parametrize(("rows", "position"), [(5, -1), (5, 2), (5, -3), (4, 1), (1, 0)])
def test_positions_of_uneven_chunks(rows, position):
    x = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    lowered, _, (piece, n) = lower_and_compare(LAST_AND_LENGTH, {"x": x, "p": np.array(position)})
    assert n == (rows + 1) // 2
    np.testing.assert_array_equal(piece, np.array_split(x, range(2, rows, 2))[position])
    assert sequence_op_count(lowered) == 0


@pytest.mark.parametrize("position", [3, -4])
def test_an_out_of_range_position_still_fails(position):
    lowered, _ = lower(LAST_AND_LENGTH)
    feeds = {"x": np.zeros((5, 3), np.float32), "p": np.array(position)}
    for model in (LAST_AND_LENGTH, lowered):
        with pytest.raises((Fail, InvalidArgument), match=r"(?i)index|indices"):
            run_ort(model, feeds)


def test_runtime_split_sizes():
    """`torch.split(x, [1, x.size(1) - 1], 1)`: the sizes are computed, the count is static."""
    model = parse(
        """g (float[2,W] x, int64 p) => (float[2,?] y) {
        shape_x = Shape(x)
        one = Constant<value = int64[1] {1}>()
        w = Gather(shape_x, one)
        rest = Sub(w, one)
        sizes = Concat<axis = 0>(one, rest)
        parts = SplitToSequence<axis = 1>(x, sizes)
        y = SequenceAt(parts, p)
    }"""
    )
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    for position in (0, 1, -1):
        lowered, _, (y,) = lower_and_compare(model, {"x": x, "p": np.array(position)})
        np.testing.assert_array_equal(y, np.split(x, [1], axis=1)[position])
    assert sequence_op_count(lowered) == 0


def test_split_bounds_computed_from_shapes_are_folded():
    """The head count of a split of a Slice whose bounds come from Shape arithmetic is static
    once that arithmetic is folded (PyTorch's `q, k, v = qkv.chunk(3, -1)` then a split per
    head): the loop over the heads is unrolled."""
    model = parse(
        """g (float[B,12] x) => (float[B,4] y) {
        t = Constant<value = bool {1}>()
        shape_x = Shape(x)
        last = Constant<value = int64[1] {-1}>()
        width = Gather(shape_x, last)
        three = Constant<value = int64[1] {3}>()
        third = Div(width, three)
        zero = Constant<value = int64[1] {0}>()
        q = Slice(x, zero, third, last)
        head = Constant<value = int64 {2}>()
        heads = SplitToSequence<axis = -1>(q, head)
        n = SequenceLength(heads)
        empty = SequenceEmpty<dtype = 1>()
        out = Loop(n, t, empty) <body = body (int64 h, bool cond, seq(float) acc)
                                             => (bool c2, seq(float) grown) {
            c2 = Identity(cond)
            e = SequenceAt(heads, h)
            s = Softmax<axis = -1>(e)
            grown = SequenceInsert(acc, s)
        }>
        y = ConcatFromSequence<axis = -1>(out)
    }"""
    )
    x = np.random.default_rng(2).standard_normal((3, 12)).astype(np.float32)
    lowered, report, (y,) = lower_and_compare(model, {"x": x})
    heads = [np.exp(h) / np.exp(h).sum(-1, keepdims=True) for h in np.split(x[:, :4], 2, -1)]
    np.testing.assert_allclose(y, np.concatenate(heads, -1), rtol=1e-6)
    assert sequence_op_count(lowered) == 0
    # the head count folds to 2; two copies of the body cost fewer nodes than batching chunks
    # of a dynamic shape (see loop-batch's refusal in tests/rules/test_loop_batching.py)
    assert report.rules_fired["loop-unroll"] == 1
