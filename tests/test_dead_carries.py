"""Loop-carried values nothing reads after the loop, read in the body only to compute their own
next value, are dropped by cleanup (`seqlower/passes/dead_carried.py`; more cases in
tests/test_dead_carried.py)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from support import assert_same_outputs, parse

from seqlower.passes.dead_carried import remove_dead_carried
from seqlower.passes.dead_code import remove_dead_nodes

# y grows by a row of x every iteration and is returned; `sizes` grows by the rows' counts
# (what a ragged list's table does) and is read after the loop, or not, per case
TEMPLATE = """g (int64 m, float[2,3] x) => ({outputs}) {{
    t = Constant<value = bool {{1}}>()
    y0 = Constant<value = float[0,3] {{}}>()
    sizes0 = Constant<value = int64[0] {{}}>()
    k0 = Constant<value = int64 {{0}}>()
    y, sizes, k = Loop(m, t, y0, sizes0, k0) <body = body (int64 i, bool c, float[?,3] acc,
            int64[?] seen, int64 count) => (bool c2, float[?,3] grown, int64[?] more, int64 next) {{
        {body}
    }}>
    {after}
}}"""
BODY = """one = Constant<value = int64 {1}>()
        next = Add(count, one)
        grown = Concat<axis = 0>(acc, x)
        rows = Shape<start = 0, end = 1>(x)
        more = Concat<axis = 0>(seen, rows)
        c2 = Identity(c)"""


def _model(body: str = BODY, outputs: str = "float[?,3] y", after: str = "") -> onnx.ModelProto:
    return parse(TEMPLATE.format(body=body, outputs=outputs, after=after))


def _dropped(model: onnx.ModelProto) -> tuple[int, onnx.ModelProto]:
    graph_model = ir.from_proto(model)
    count = remove_dead_carried(graph_model)
    remove_dead_nodes(graph_model)
    proto = ir.to_proto(graph_model)
    onnx.checker.check_model(proto, full_check=True)
    return count, proto


def _loop(model: onnx.ModelProto) -> onnx.NodeProto:
    (loop,) = [n for n in model.graph.node if n.op_type == "Loop"]
    return loop


def _feeds(m: int) -> dict:
    return {"m": np.array(m), "x": np.arange(6, dtype=np.float32).reshape(2, 3)}


@pytest.mark.parametrize("trips", [0, 1, 3])
def test_values_read_only_by_themselves_are_dropped(trips):
    model = _model()
    count, lowered = _dropped(model)
    assert count == 2  # the sizes and the counter
    loop = _loop(lowered)
    assert len(loop.input) == 3 and len(loop.output) == 1
    body = next(a.g for a in loop.attribute if a.name == "body")
    assert sorted(n.op_type for n in body.node) == ["Concat", "Identity"]
    (y,) = assert_same_outputs(model, lowered, _feeds(trips))
    assert y.shape == (2 * trips, 3)


def test_a_value_computed_in_a_branch_from_itself_is_dropped():
    body = BODY.replace(
        "more = Concat<axis = 0>(seen, rows)",
        """more = If(c) <then_branch = th () => (int64[?] a) { a = Concat<axis = 0>(seen, rows) },
                       else_branch = el () => (int64[?] b) { b = Identity(seen) }>""",
    )
    model = _model(body)
    count, lowered = _dropped(model)
    assert count == 2
    assert "If" not in {n.op_type for a in _loop(lowered).attribute for n in a.g.node}
    assert_same_outputs(model, lowered, _feeds(3))


@pytest.mark.parametrize(
    ("body", "outputs", "after", "kept"),
    [
        # read after the loop: the sizes stay, the counter goes
        (BODY, "float[?,3] y, int64[?] sizes", "", 1),
        # a model output
        (BODY, "float[?,3] y, int64 k", "", 1),
        # the counter decides the condition: it stays, and so the sizes alone go
        (
            BODY.replace(
                "c2 = Identity(c)",
                "lim = Constant<value = int64 {2}>()\n        c2 = Less(count, lim)",
            ),
            "float[?,3] y",
            "",
            1,
        ),
        # the sizes feed what y grows by: they stay (the counter goes)
        (
            BODY.replace(
                "grown = Concat<axis = 0>(acc, x)",
                "n = ReduceSum<keepdims = 0>(seen)\n        f = Cast<to = 1>(n)\n"
                "        shifted = Add(x, f)\n        grown = Concat<axis = 0>(acc, shifted)",
            ),
            "float[?,3] y",
            "",
            1,
        ),
    ],
    ids=["read-after", "model-output", "condition", "feeds-another"],
)
def test_values_read_elsewhere_stay(body, outputs, after, kept):
    model = _model(body, outputs, after)
    count, lowered = _dropped(model)
    assert count == 1
    assert len(_loop(lowered).input) == 2 + 1 + kept
    assert_same_outputs(model, lowered, _feeds(3))


@pytest.mark.parametrize(("read_after", "dropped"), [(False, 2), (True, 0)])
def test_a_value_returned_as_another_carried_value_stays_while_that_one_is_read(
    read_after, dropped
):
    """`more` (made from `count`) becomes the next `seen`: `count` is needed exactly when
    `seen` is."""
    body = """c2 = Identity(c)
        one = Constant<value = int64 {1}>()
        next = Add(count, one)
        grown = Identity(acc)
        more = Identity(count)"""
    outputs = "float[?,3] y, int64 sizes" if read_after else "float[?,3] y"
    model = parse(
        TEMPLATE.format(body=body, outputs=outputs, after="")
        .replace("int64[?] more, int64 next", "int64 more, int64 next")
        .replace(
            "sizes0 = Constant<value = int64[0] {}>()", "sizes0 = Constant<value = int64 {0}>()"
        )
        .replace("int64[?] seen", "int64 seen")
    )
    count, lowered = _dropped(model)
    assert count == dropped
    assert len(_loop(lowered).input) == 5 - dropped
    assert_same_outputs(model, lowered, _feeds(2))
