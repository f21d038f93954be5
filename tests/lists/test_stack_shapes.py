"""A list whose pushes have dims shape inference leaves unknown is stacked when the loop proves
them by induction: SPINN's stack pops two vectors, composes them and pushes the result, which
has the vectors' shape whenever the elements popped have it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support import assert_same_outputs, lower, parse, sequence_op_count


def _spinn(width: int = 3, out: int = 3) -> str:
    """`stack = []; buffer = list(tokens.unbind(0))`; per op: reduce (pop two, push
    tanh(cat(left, right) @ w)) when op > 0 and the stack holds two, else shift (push
    buffer.pop(0))."""
    return f"""g (float[T,{width}] tokens, int64[K] ops, float[{2 * width},{out}] w)
        => (float[?] y, int64 n) {{
    zero = Constant<value = int64 {{0}}>()
    t = Constant<value = bool {{1}}>()
    buffer = SplitToSequence<axis = 0, keepdims = 0>(tokens)
    empty = SequenceEmpty<dtype = 1>()
    shape = Shape(ops)
    trips = Gather(shape, zero)
    stack, rest = Loop(trips, t, empty, buffer) <body = body (int64 i, bool c,
            seq(float[?]) st, seq(float[?]) buf)
            => (bool c2, seq(float[?]) st2, seq(float[?]) buf2) {{
        op = Gather(ops, i)
        size = SequenceLength(st)
        two = Constant<value = int64 {{2}}>()
        enough = GreaterOrEqual(size, two)
        positive = Greater(op, zero)
        reduce = And(positive, enough)
        st2, buf2 = If(reduce) <then_branch = then ()
                => (seq(float[?]) s_out, seq(float[?]) b_out) {{
            last = Constant<value = int64 {{-1}}>()
            right = SequenceAt(st, last)
            st_a = SequenceErase(st, last)
            left = SequenceAt(st_a, last)
            st_b = SequenceErase(st_a, last)
            both = Concat<axis = 0>(left, right)
            composed = MatMul(both, w)
            squashed = Tanh(composed)
            s_out = SequenceInsert(st_b, squashed)
            b_out = Identity(buf)
        }}, else_branch = other () => (seq(float[?]) s_shift, seq(float[?]) b_shift) {{
            first = SequenceAt(buf, zero)
            b_shift = SequenceErase(buf, zero)
            s_shift = SequenceInsert(st, first)
        }}>
        c2 = Identity(c)
    }}>
    y = ConcatFromSequence<axis = 0>(stack)
    n = SequenceLength(stack)
}}"""


def _expected(tokens: np.ndarray, ops: list[int], w: np.ndarray) -> np.ndarray:
    stack: list[np.ndarray] = []
    buffer = list(tokens)
    for op in ops:
        if op > 0 and len(stack) >= 2:
            right, left = stack.pop(), stack.pop()
            stack.append(np.tanh(np.concatenate([left, right]) @ w))
        else:
            stack.append(buffer.pop(0))
    return np.concatenate(stack) if stack else np.zeros((0,), np.float32)


def _feeds(ops: list[int], width: int = 3, out: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(len(ops))
    tokens = rng.standard_normal((len(ops), width)).astype(np.float32)
    w = rng.standard_normal((2 * width, out)).astype(np.float32)
    return {"tokens": tokens, "ops": np.array(ops, np.int64), "w": w}


def _stack_tiers(report) -> set[str]:  # type: ignore[no-untyped-def]
    return {node.tier for node in report.nodes if node.op_type.startswith("Sequence")}


@pytest.mark.parametrize("ops", [[0, 0, 1, 0, 1], [1, 1, 1], [0], [0, 0, 0, 1, 1]])
def test_pushes_proved_by_induction_make_a_stacked_list(ops):
    model = parse(_spinn())
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert _stack_tiers(report) == {"stacked"}
    feeds = _feeds(ops)
    y, n = assert_same_outputs(model, lowered, feeds)
    want = _expected(feeds["tokens"], ops, feeds["w"])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    assert n == len(want) // 3


def test_pushes_of_another_shape_keep_a_list_of_sizes():
    """The composition gives 4 numbers where the tokens have 3: the hypothesis fails, the list
    keeps its sizes (ragged), and computes the same."""
    model = parse(_spinn(out=4))
    lowered, report = lower(model)
    assert sequence_op_count(lowered) == 0
    assert _stack_tiers(report) != {"stacked"}
    ops = [0, 0, 0, 1, 0]  # one reduce: the stack holds [3], [4], [3]
    feeds = _feeds(ops, out=4)
    feeds["tokens"] = feeds["tokens"][:5]
    y, n = assert_same_outputs(model, lowered, feeds)
    np.testing.assert_allclose(y, _expected(feeds["tokens"], ops, feeds["w"]), rtol=1e-5)
    assert n == 3


def _body(model) -> onnx.GraphProto:  # type: ignore[no-untyped-def]
    (loop,) = [node for node in model.graph.node if node.op_type in ("Loop", "Scan")]
    return next(a.g for a in loop.attribute if a.name == "body")


def test_what_one_branch_reads_runs_in_that_branch():
    """The buffer's length decides the shift only: its Shape runs in the branch that shifts
    (the list's table is built there, as every reader of the buffer is in that branch; else
    sink-into-branch moves it), not on every iteration; the stack's length decides the If."""
    model = parse(_spinn())
    lowered, _ = lower(model)
    assert [node.op_type for node in _body(lowered).node].count("Shape") == 1
    feeds = _feeds([0, 0, 1, 0, 1])
    assert_same_outputs(model, lowered, feeds)


def test_onnxruntime_compares_lengths_as_one_element_vectors():
    """With `--target onnxruntime` the If conditions read `Shape(data, end=1)` itself: no
    Reshape to a scalar is left in the loop body; the default target keeps the scalar."""
    model = parse(_spinn())
    lowered, report = lower(model, target="onnxruntime")
    assert report.rules_fired.get("single-element-condition", 0) >= 1
    assert "Reshape" not in {node.op_type for node in _body(lowered).node}
    for ops in ([0, 0, 1, 0, 1], [1, 1, 1], [0]):
        feeds = _feeds(ops)
        y, _ = assert_same_outputs(model, lowered, feeds)
        np.testing.assert_allclose(y, _expected(feeds["tokens"], ops, feeds["w"]), rtol=1e-5)
    default, _ = lower(model, target="generic")
    assert "Reshape" in {node.op_type for node in _body(default).node}
