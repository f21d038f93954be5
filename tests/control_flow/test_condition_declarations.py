"""A Loop body that declares its condition input of rank 1, the export's guess at a scalar
(`while j < n and bool(tok[i] == tok[j])`, as PyTorch's TorchScript exporter writes it): while
the condition reads list elements of no declared shape, inference agrees; once the lowering makes
them tensors, it proves the condition a scalar, and the body's declaration alone failed the
full check of the lowered model. The body's condition input now declares no shape.

Checked three ways: the lowered model passes the full check and declares no shape for the inner
body's condition (emits); a body whose declaration agrees keeps it (refuses); and equivalence
under onnxruntime for runs of equal tokens, one token and none. The same Loop in the main graph,
its condition declared by the model as the body declares it (what onnxruntime reads), is not
refused as bad input: it lowers the same way (`seqlower.loop_condition`).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import lower, lower_and_compare, op_counts, parse

from seqlower.passes.condition_declarations import match_loop_condition_declarations

# j_end: where the run of tokens equal to tok[i] that starts at i ends (a Loop that advances j
# while tok[j] equals tok[i]); {COND} is the shape its body declares for its condition input
RUN_END = """one = Constant<value = int64 {1}>()
    j1 = Add(i, one)
    inside = Less(j1, n)
    first = If(inside) <then_branch = t1 () => (bool[D] same1) {
        a1 = SequenceAt(tok, i)
        b1 = SequenceAt(tok, j1)
        same1 = Equal(a1, b1)
    }, else_branch = e1 () => (bool f1) {
        f1 = Constant<value = bool {0}>()
    }>
    j_end = Loop(n, first, j1) <body = inner (int64 m, bool{COND} cc, int64 j)
                                      => (bool[D] cc2, int64 j2) {
        one_i = Constant<value = int64 {1}>()
        j2 = Add(j, one_i)
        still = Less(j2, n)
        cc2 = If(still) <then_branch = t2 () => (bool[D] same2) {
            a2 = SequenceAt(tok, i)
            b2 = SequenceAt(tok, j2)
            same2 = Equal(a2, b2)
        }, else_branch = e2 () => (bool f2) {
            f2 = Constant<value = bool {0}>()
        }>
    }>"""

# an outer loop counts the runs, the inner one in its body
RUNS = """g (int64[N] x) => (int64 runs) {
    tok = SplitToSequence<keepdims = 0>(x)
    n = SequenceLength(tok)
    zero = Constant<value = int64 {0}>()
    more = Less(zero, n)
    i_end, runs = Loop(n, more, zero, zero) <body = outer (int64 k, bool c, int64 i, int64 r)
                                                   => (bool c2, int64 i2, int64 r2) {
        RUN_END
        i2 = Identity(j_end)
        r2 = Add(r, one)
        c2 = Less(i2, n)
    }>
}""".replace("RUN_END", RUN_END)


def _model(cond: str):  # type: ignore[no-untyped-def]
    return parse(RUNS.replace("{COND}", cond), opset=17)


def _inner_condition(model) -> ir.Value:  # type: ignore[no-untyped-def]
    graph = ir.from_proto(model).graph
    outer = next(n for n in graph if n.op_type == "Loop").attributes["body"].as_graph()
    inner = next(n for n in outer if n.op_type == "Loop").attributes["body"].as_graph()
    return inner.inputs[1]


@pytest.mark.parametrize(
    "tokens", [[1, 1, 2, 2, 2, 3], [4, 4, 4], [7], [], [-1, 5, -1, -1]], ids=str
)
def test_a_condition_declared_of_rank_one_lowers_and_passes_the_full_check(tokens):
    model = _model("[D]")
    assert _inner_condition(model).shape is not None  # as the export declares it
    lowered, _, (runs,) = lower_and_compare(model, {"x": np.array(tokens, dtype=np.int64)})
    want = sum(1 for k, t in enumerate(tokens) if k == 0 or tokens[k - 1] != t)
    assert int(runs) == want
    assert not {"SequenceAt", "SplitToSequence", "SequenceLength"} & set(op_counts(lowered))
    assert _inner_condition(lowered).shape is None


def test_a_declaration_of_the_condition_rank_is_kept():
    model = _model("")  # the body declares a scalar, as inference proves it after lowering
    lowered, _ = lower(model)
    assert _inner_condition(lowered).shape == ir.Shape([])
    graph = ir.from_proto(lowered)
    assert match_loop_condition_declarations(graph) == 0


# the same run in the main graph: its condition declared bool[D] by the model, as the body
# declares it, which is what onnxruntime reads
RUN_LENGTH = """g (int64[N] x, int64 i) => (int64 j_end) <bool[D] first> {
    tok = SplitToSequence<keepdims = 0>(x)
    n = SequenceLength(tok)
    RUN_END
}""".replace("RUN_END", RUN_END.replace("{COND}", "[D]"))


@pytest.mark.parametrize(
    ("tokens", "start"), [([1, 1, 2, 2, 2], 0), ([1, 1, 2, 2, 2], 2), ([3], 0), ([5, -1, -1], 1)]
)
def test_a_main_graph_loop_whose_condition_the_model_declares_as_its_body_does(tokens, start):
    model = parse(RUN_LENGTH, opset=17)
    x = np.array(tokens, dtype=np.int64)
    lowered, _, (j_end,) = lower_and_compare(model, {"x": x, "i": np.array(start)})
    want = start + 1
    while want < len(tokens) and tokens[want] == tokens[start]:
        want += 1
    assert int(j_end) == want
    loop = next(n for n in ir.from_proto(lowered).graph if n.op_type == "Loop")
    assert loop.attributes["body"].as_graph().inputs[1].shape is None
