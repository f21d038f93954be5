"""Index vectors that a chain of shape operators assembles are built from their pieces: what the
pass emits, where it leaves a chain alone, and the same results under onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_both_fail, assert_same_outputs, op_counts, parse, torch_pad_nodes

import seqlower
from seqlower.passes.index_vectors import fold_index_vectors

# `F.pad(x, (0, 0, 0, length - x.size(0)))` as TorchScript exports it
TORCH_PAD = f"""
agraph (float[N,3] x, int64 length) => (float[?,3] y) {{
    shape_x = Shape (x)
    zero = Constant <value = int64 {{0}}> ()
    rows = Gather <axis = 0> (shape_x, zero)
    extra = Sub (length, rows)
    {torch_pad_nodes("x", "extra", "y")}
}}"""


def _folded(text: str) -> tuple[onnx.ModelProto, onnx.ModelProto, int]:
    original = parse(text)
    model = ir.from_proto(original)
    seqlower.passes.infer_shapes(model)
    count = fold_index_vectors(model)
    folded = ir.to_proto(model)
    onnx.checker.check_model(folded, full_check=True)
    return original, folded, count


def test_torchs_pads_become_one_concat_of_constants_and_the_padding():
    original, folded, count = _folded(TORCH_PAD)
    assert count == 1
    counts = op_counts(folded)
    for op in ("Transpose", "ConstantOfShape", "Slice", "Cast"):
        assert counts[op] == 0, counts
    assert counts["Concat"] == 1 and counts["Unsqueeze"] == 1
    (pad,) = [n for n in folded.graph.node if n.op_type == "Pad"]
    (concat,) = [n for n in folded.graph.node if n.output[0] == pad.input[1]]
    constants = {
        n.output[0]: onnx.numpy_helper.to_array(n.attribute[0].t).tolist()
        for n in folded.graph.node
        if n.op_type == "Constant"
    }
    assert [constants.get(name, name) for name in concat.input][0::2] == [[0, 0], [0]]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for length in (4, 6, 2):  # no padding, two rows of padding, a crop (negative pads)
        assert_same_outputs(original, folded, {"x": x, "length": np.array(length)})


def test_a_chain_no_longer_than_its_pieces_stays():
    """`Concat(Unsqueeze(n), [-1])` is already one launch per piece."""
    _, folded, count = _folded("""
agraph (float[N,3] x, int64 n) => (float[?,?] y) {
  axes0 = Constant <value = int64[1] {0}> ()
  lead = Unsqueeze (n, axes0)
  rest = Constant <value = int64[1] {-1}> ()
  target = Concat <axis = 0> (lead, rest)
  y = Reshape (x, target)
}""")
    assert count == 0
    assert op_counts(folded)["Concat"] == 1


def test_a_shape_cut_and_glued_back_is_the_shape():
    """`Concat(Shape(x)[0:1], Shape(x)[1:])`: the pieces are the whole shape, read as it is."""
    original, folded, count = _folded("""
agraph (float[N,M] x) => (float[?,?] y) {
  s = Shape (x)
  zero = Constant <value = int64[1] {0}> ()
  one = Constant <value = int64[1] {1}> ()
  two = Constant <value = int64[1] {2}> ()
  head = Slice (s, zero, one)
  tail = Slice (s, one, two)
  again = Concat <axis = 0> (head, tail)
  y = ConstantOfShape <value = float[1] {1}> (again)
}""")
    assert count == 1
    (fill,) = [n for n in folded.graph.node if n.op_type == "ConstantOfShape"]
    (shape,) = [n for n in folded.graph.node if n.op_type == "Shape"]
    assert fill.input[0] == shape.output[0]
    assert op_counts(folded)["Concat"] == 0
    assert_same_outputs(original, folded, {"x": np.zeros((2, 3), np.float32)})


RESHAPE_BY_ROWS = """
agraph (float[N,3,4] x, float[N,12] z) => (float[?,?] y) {{
  s = Shape (x)
  zero = Constant <value = int64 {{0}}> ()
  rows = Gather <axis = 0> (s, zero)
  axes0 = Constant <value = int64[1] {{0}}> ()
  lead = Unsqueeze (rows, axes0)
  rest = Constant <value = int64[1] {{-1}}> ()
  target = Concat <axis = 0> (lead, rest)
  y = Reshape ({data}, target)
}}"""


def test_a_reshape_to_its_own_leading_dims_gets_a_constant_target():
    """`x.view(x.size(0), -1)`: the target becomes [0, -1] (0 copies the dim), which is what
    onnxruntime's own fusion makes of the chain."""
    original, folded, count = _folded(RESHAPE_BY_ROWS.format(data="x"))
    assert count == 1
    assert {n.op_type for n in folded.graph.node} == {"Constant", "Reshape"}
    (reshape,) = [n for n in folded.graph.node if n.op_type == "Reshape"]
    (target,) = [n for n in folded.graph.node if n.output[0] == reshape.input[1]]
    assert onnx.numpy_helper.to_array(target.attribute[0].t).tolist() == [0, -1]
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert_same_outputs(original, folded, {"x": x, "z": np.zeros((2, 12), np.float32)})


def test_any_other_reshape_target_is_left_to_onnxruntime():
    """Rebuilt, a chain onnxruntime fuses into its Reshape would run as kernels again: a
    target read from another tensor's shape stays as it is."""
    _, folded, count = _folded(RESHAPE_BY_ROWS.format(data="z"))
    assert count == 0
    assert op_counts(folded)["Unsqueeze"] == 1 and op_counts(folded)["Gather"] == 1


def test_a_vector_also_read_by_another_shape_operator_is_left_to_its_last_reader():
    """`pads` is read by the Pad and by a Concat: only whole chains are rebuilt, at their
    end; the inner link stays for the Concat."""
    text = TORCH_PAD.replace("=> (float[?,3] y) {", "=> (float[?,3] y, int64[?] both) {").replace(
        "  y = Pad (x, pads)", "  y = Pad (x, pads)\n  both = Concat <axis = 0> (pads, pads)"
    )
    original, folded, _ = _folded(text)
    assert op_counts(folded)["Transpose"] == 1
    x = np.ones((2, 3), np.float32)
    assert_same_outputs(original, folded, {"x": x, "length": np.array(5)})


@pytest.mark.parametrize("length", [3, 5])
def test_pads_built_in_a_loop_body_from_a_length_another_loop_carries(length):
    """The longest row count is carried out of one Loop (onnx inference gives it no shape;
    the body keeps it a scalar); each row block is padded to it in a second Loop."""
    model = parse(
        """
agraph (float[N,3] x, int64[B] lengths) => (float[?,?,?] y) {
  zero = Constant <value = int64 {0}> ()
  t = Constant <value = bool {1}> ()
  shape_l = Shape (lengths)
  b = Gather <axis = 0> (shape_l, zero)
  longest = Loop (b, t, zero) <body = longest (int64 j, bool c, int64 m) => (bool c2, int64 m2) {
    n = Gather <axis = 0> (lengths, j)
    m2 = Max (m, n)
    c2 = Identity (c)
  }>
  y = Loop (b, t) <body = pad (int64 k, bool c) => (bool c3, float[?,3] out) {
    n1 = Gather <axis = 0> (lengths, k)
    first = Constant <value = int64[1] {0}> ()
    upto = Unsqueeze (n1, first)
    block = Slice (x, first, upto, first)
    shape_x = Shape (block)
    rows = Gather <axis = 0> (shape_x, zero)
    extra = Sub (longest, rows)
    """
        + torch_pad_nodes("block", "extra", "out")
        + """
    c3 = Identity (c)
  }>
}"""
    )
    lowered, _ = seqlower.optimize(model)
    onnx.checker.check_model(lowered, full_check=True)
    assert op_counts(lowered)["Transpose"] == 0
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    feeds = {"x": x, "lengths": np.array([2, length, 1])}
    assert_same_outputs(model, lowered, feeds)


def test_a_vector_made_outside_a_loop_and_read_in_its_body_is_built_outside():
    """Built where the chain ends (once a run), not where it is read (once an iteration)."""
    text = TORCH_PAD.replace("=> (float[?,3] y) {", "=> (float[?,?,3] y) {").replace(
        "y = Pad (x, pads)",
        """t = Constant <value = bool {1}> ()
  two = Constant <value = int64 {2}> ()
  y = Loop (two, t) <body = body (int64 i, bool c) => (bool c2, float[?,3] out) {
    out = Pad (x, pads)
    c2 = Identity (c)
  }>""",
    )
    original, folded, count = _folded(text)
    assert count == 1
    (loop,) = [n for n in folded.graph.node if n.op_type == "Loop"]
    assert [n.op_type for n in loop.attribute[0].g.node] == ["Pad", "Identity"]
    assert op_counts(folded)["Transpose"] == 0
    x = np.ones((2, 3), np.float32)
    assert_same_outputs(original, folded, {"x": x, "length": np.array(4)})


def test_what_is_built_declares_its_type_so_lowering_again_changes_nothing():
    model = parse(TORCH_PAD)
    once, _ = seqlower.optimize(model)
    twice, _ = seqlower.optimize(once)
    assert op_counts(once)["Transpose"] == 0
    assert once.SerializeToString() == twice.SerializeToString()


def test_a_vector_of_no_element_is_an_empty_constant():
    """`x[0:0]` of an int64 vector has no element: the vector is the constant [] (a Concat
    needs an input; the pass built one of none, which the checker rejects)."""
    original, folded, count = _folded("""
agraph (int64[3] x) => (int64[?] y) {
  zero = Constant <value = int64[1] {0}> ()
  s = Slice (x, zero, zero, zero)
  y = Neg (s)
}""")
    assert count == 1
    assert "Concat" not in op_counts(folded) and "Slice" not in op_counts(folded)
    assert_same_outputs(original, folded, {"x": np.array([4, 5, 6])})


# the batched form of a per-chunk op over `torch.split(x, 4, 1)`: the chunks held as rows of
# `[C/4, N, 4, H, W]`, their two leading axes merged for the op, its dims read back
BATCHED_CHUNKS = """
agraph (float[N,C,H,W] x{inputs}) => (float[?,?,?,?] y, int64[?] lead) {{
  four = Constant <value = int64[1] {{4}}> ()
  c = Shape <start = 1, end = 2> (x)
  k = Div (c, four)
  n = Shape <start = 0, end = 1> (x)
  hw = Shape <start = 2, end = 4> (x)
  split = Concat <axis = 0> ({first}, k, four, hw)
  r = Reshape <allowzero = {allowzero}> (x, split)
  stack = Transpose <perm = [1, 0, 2, 3, 4]> (r)
  d0 = Shape <start = 0, end = 1> (stack)
  d1 = Shape <start = 1, end = 2> (stack)
  rows = Mul (d0, d1)
  rest = Shape <start = 2> (stack)
  merged = Concat <axis = 0> (rows, rest)
  flat = Reshape <allowzero = 1> (stack, merged)
  y = Relu (flat)
  soft = Softmax <axis = 2> (stack)
  one = Constant <value = int64[1] {{1}}> ()
  big = Constant <value = int64[1] {{9223372036854775807}}> ()
  cut_axis = Constant <value = int64[1] {{{cut}}}> ()
  cut = Slice (soft, one, big, cut_axis)
  moved = Transpose <perm = [1, 0, 2, 4, 3]> (cut)
  e0 = Shape <start = 0, end = 1> (moved)
  e1 = Shape <start = 1, end = 2> (moved)
  lead = Mul (e0, e1)
}}"""


def _chunks(allowzero: int = 1, first: str = "n", inputs: str = "", cut: int = 3) -> str:
    return BATCHED_CHUNKS.format(allowzero=allowzero, first=first, inputs=inputs, cut=cut)


def _shapes_of(model: onnx.ModelProto) -> list[str]:
    return sorted(n.input[0] for n in model.graph.node if n.op_type == "Shape")


@pytest.mark.parametrize(
    "shape", [(2, 8, 3, 5), (0, 8, 3, 5), (2, 0, 3, 5), (2, 8, 0, 5), (1, 4, 1, 1)]
)
def test_dims_of_a_reshape_with_allowzero_are_read_from_its_target(shape):
    """A dim of a value made by Reshape(allowzero=1) is its target's element there (followed
    through Transposes, a Slice of other axes, a Softmax): `Shape(stack)` reads `k` and `n`,
    the Reshape target `merged` becomes `Concat(Mul(k, n), [4], hw)` and `lead` is `Mul(n, k)`
    (one Shape each of `stack` and `moved` no longer runs). Empty batches and chunks too."""
    original, folded, count = _folded(_chunks())
    assert count >= 3
    assert _shapes_of(folded) == ["x", "x", "x"]
    muls = {n.output[0]: sorted(n.input) for n in folded.graph.node if n.op_type == "Mul"}
    assert sorted(muls.values()) == [["k", "n"], ["k", "n"]]
    # the target of an allowzero=1 Reshape is rebuilt (onnxruntime 1.20 to 1.32 fuses the
    # shape chain of a Reshape into it only with allowzero=0)
    (flat,) = [n for n in folded.graph.node if n.output[0] == "flat"]
    (merged,) = [n for n in folded.graph.node if n.output[0] == flat.input[1]]
    assert merged.op_type == "Concat" and merged.input[0] in muls and merged.input[2] == "hw"
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    assert_same_outputs(original, folded, {"x": x})


def test_a_split_of_the_wrong_size_fails_after_the_fold_as_before():
    """Six channels in chunks of four: the first Reshape fails in both models."""
    original, folded, _ = _folded(_chunks())
    assert_both_fail(original, folded, {"x": np.zeros((2, 6, 3, 5), np.float32)})


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        # allowzero=0: a target element of 0 copies the input's dim instead
        pytest.param(_chunks(allowzero=0),
                     ["moved", "moved", "stack", "stack", "stack", "x", "x", "x"],
                     id="allowzero-0-copies-dims"),
        # an element read from an input may be -1 (the dim inferred), not the element: the
        # dims from `m` stay read from the Shapes, those from `k` do not
        pytest.param(_chunks(first="m", inputs=", int64[1] m"),
                     ["moved", "stack", "x", "x", "x"], id="element-may-be-negative"),
        # a Slice of the chunk axis: `moved`'s axis 1 is cut, its axis 0 is still `n`
        pytest.param(_chunks(cut=0), ["moved", "x", "x", "x"], id="slice-cuts-the-axis"),
    ],
)  # fmt: skip
def test_dims_not_known_to_be_a_target_element_are_read_from_the_shape(text, kept):
    original, folded, _ = _folded(text)
    assert _shapes_of(folded) == kept
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 8, 3, 5)).astype(np.float32)}
    if "int64[1] m" in text:
        feeds["m"] = np.array([-1])  # the dim inferred: 2
    assert_same_outputs(original, folded, feeds)


_BOUNDS = """zero = Constant <value = int64[1] {0}> ()
  one = Constant <value = int64[1] {1}> ()
  end = Constant <value = int64[1] {9223372036854775807}> ()"""

# `x.view(n, 4, 1, -1)` through a Conv, then one more operator, then its dims read back
CONV_OF_RESHAPED = """
agraph (float[N,M] x, float[2,4,1,1] w) => (float[?,?,?,?] y, int64[1] d2) {{
  n = Shape <start = 0, end = 1> (x)
  rest = Constant <value = int64[3] {{4, 1, -1}}> ()
  target = Concat <axis = 0> (n, rest)
  r = Reshape <allowzero = 1> (x, target)
  conv = Conv (r, w)
  {last}
  d = Shape <start = {axis}, end = {end}> (y)
  d2 = Mul (d, d)
}}"""


@pytest.mark.parametrize(
    ("last", "axis", "followed"),
    [
        ("y = Sigmoid (conv)", 0, True),  # a Conv keeps the batch axis, Sigmoid every axis
        ("y = Sigmoid (conv)", 3, False),  # a Conv computes the others
        ("y = Add (conv, conv)", 0, False),  # two inputs: not followed (it may broadcast)
        ("y = Flatten <axis = 3> (conv)", 0, False),  # not an operator of the same shape
        # TorchScript's `t[:, :]`: a Slice from 0 to the largest int64 by 1 keeps the axis
        (f"{_BOUNDS}\n  y = Slice (conv, zero, end, zero)", 0, True),
        (f"{_BOUNDS}\n  y = Slice (conv, one, end, zero)", 0, False),  # `t[1:]` cuts it
    ],
)
def test_which_operators_a_dim_is_followed_through(last, axis, followed):
    original, folded, _ = _folded(CONV_OF_RESHAPED.format(last=last, axis=axis, end=axis + 1))
    assert _shapes_of(folded) == (["x"] if followed else ["x", "y"])
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    w = np.ones((2, 4, 1, 1), np.float32)
    assert_same_outputs(original, folded, {"x": x, "w": w})


# `x.view(n, 4, 1, -1)` through a Conv (`[n, 2, 1, K]`), its batch axis moved last
READ_BACK = """
agraph (float[N,M] x, float[2,4,1,1] w) => (float[?,?,?,?] y, float[?,?,?] z) {
  n = Shape <start = 0, end = 1> (x)
  rest = Constant <value = int64[3] {4, 1, -1}> ()
  target = Concat <axis = 0> (n, rest)
  r = Reshape <allowzero = 1> (x, target)
  conv = Conv (r, w)
  lead = Shape <start = 0, end = 1> (r)
  tail = Shape <start = 1> (conv)
  both = Concat <axis = 0> (lead, tail)
  y = Reshape <allowzero = 1> (conv, both)
  t = Transpose <perm = [1, 2, 3, 0]> (conv)
  last = Shape <start = 2> (t)
  lead2 = Shape <start = 0, end = 1> (r)
  three = Concat <axis = 0> (lead2, last)
  z = ConstantOfShape (three)
}"""


def test_a_shape_is_read_whole_or_not_at_all():
    """`both` = [n, 2, 1, K]: the Shape of r goes (its one dim is n), and the constants 2 and 1
    are read from `tail` with K (one whole Shape, no Slice). `last` = [K, n]: K is the Conv's
    own, so the Shape of t still runs, and is read whole (n not taken from elsewhere)."""
    original, folded, count = _folded(READ_BACK)
    assert count == 2
    assert _shapes_of(folded) == ["conv", "t", "x"]
    inputs = {n.output[0]: list(n.input) for n in folded.graph.node}
    y, z = (next(n for n in folded.graph.node if n.output[0] == out) for out in ("y", "z"))
    assert inputs[y.input[1]] == ["n", "tail"]
    assert inputs[z.input[0]] == ["n", "last"]
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    w = np.ones((2, 4, 1, 1), np.float32)
    assert_same_outputs(original, folded, {"x": x, "w": w})
