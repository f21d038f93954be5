"""The shapes the Loop shape analysis derives for values outside a body are remembered across
analyses while what they are computed from is unchanged, and forgotten when a rewrite reaches
them (`seqlower.analysis.derived_shapes`)."""

from __future__ import annotations

import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import seqlower.analysis.loop_shapes as loop_shapes
from seqlower.analysis.derived_shapes import DerivedShapes
from seqlower.analysis.loop_memo import LoopMemo
from seqlower.analysis.loop_shapes import INVARIANT, LoopShapes
from seqlower.analysis.static_values import StaticValues
from seqlower.analysis.symbolic import add, symbol


def _chain(links: int) -> ir.Model:
    """x [N, 3], then `links` Concats each adding a row (`c1` .. `cL`, no declared shapes), then
    a Loop whose body grows the tensor it carries from `cL` (and one that starts from x)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c"], ["c_out"]),
            helper.make_node("Concat", ["t", "row"], ["t_out"], axis=0),
        ],
        "grows",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("t", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("t_out", TensorProto.FLOAT, None),
        ],
    )
    row = helper.make_tensor("row", TensorProto.FLOAT, [1, 3], [1, 2, 3])
    rows = helper.make_tensor("rows", TensorProto.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6])
    nodes = [
        helper.make_node("Constant", [], ["row"], value=row),
        helper.make_node("Constant", [], ["rows"], value=rows),
        helper.make_node("Identity", ["row"], ["a"]),
    ]
    previous = "x"
    for k in range(1, links + 1):
        nodes.append(helper.make_node("Concat", [previous, "a"], [f"c{k}"], axis=0))
        previous = f"c{k}"
    nodes.append(helper.make_node("Loop", ["n", "", previous], ["y"], body=body))
    nodes.append(helper.make_node("Loop", ["n", "", "x"], ["z"], body=body))
    graph = helper.make_graph(
        nodes,
        "chain",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, None) for v in ("y", "z")],
    )
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def _parts(model: ir.Model) -> tuple[ir.Node, dict[str, ir.Value]]:
    loop = next(node for node in model.graph if node.op_type == "Loop")
    named = {out.name: out for node in model.graph for out in node.outputs}
    return loop, named


def _rows(extra: int) -> tuple:
    return (add(symbol(("param", "N")), extra), 3)


def _assumed(loop: ir.Node, values: StaticValues, memo: LoopMemo, **hypotheses) -> object:
    """The shape the analysis of `loop` starts its carried tensor from: its initial value's."""
    return LoopShapes(loop, values, memo=memo, **hypotheses).outer_shape(loop.inputs[2])


@pytest.fixture
def derivations(monkeypatch) -> list[str]:
    """The names of the values each derivation from a producer was run for."""
    seen: list[str] = []
    original = loop_shapes.LoopShapes._derived_outer_shape

    def counting(self, value):
        seen.append(value.name)
        return original(self, value)

    monkeypatch.setattr(loop_shapes.LoopShapes, "_derived_outer_shape", counting)
    return seen


def test_a_derived_shape_is_remembered_and_read_by_the_next_analysis(derivations) -> None:
    model = _chain(3)
    loop, named = _parts(model)
    values = StaticValues()
    derived = DerivedShapes()
    memo = LoopMemo(values, generation=lambda: 0, derived=derived)
    assert _assumed(loop, values, memo) == _rows(3)
    assert derivations == ["c3", "c2", "c1"]  # `a` is static: not derived
    assert derived.known(named["c3"])[0] == _rows(3)
    assert derived.known(named["a"]) is None
    # another analysis (the generation may change: the memo outlives it) derives nothing anew
    derivations.clear()
    memo = LoopMemo(values, generation=lambda: 1, derived=derived)
    analysis = LoopShapes(loop, values, memo=memo)
    assert analysis.outer_shape(loop.inputs[2]) == _rows(3)
    assert derivations == []
    # the dim sources the derivation noted are noted again: N is read from x's first axis
    assert analysis.outer_dim_source(symbol(("param", "N"))) == (model.graph.inputs[0], 0)


def test_a_rewrite_reaching_a_derived_value_is_not_answered_from_the_memo(derivations) -> None:
    model = _chain(3)
    loop, named = _parts(model)
    values = StaticValues()
    derived = DerivedShapes()
    memo = LoopMemo(values, derived=derived)
    assert _assumed(loop, values, memo) == _rows(3)
    # c1 now reads two rows instead of one: c1, c2 and c3 grow by one
    c1 = named["c1"].producer()
    c1.replace_input_with(1, named["rows"])
    derived.forget_downstream([c1])  # as the driver does with the nodes a rewrite rewired
    for name in ("c1", "c2", "c3"):
        assert derived.known(named[name]) is None
    derivations.clear()
    assert _assumed(loop, values, memo) == _rows(4)
    assert derivations == ["c3", "c2", "c1"]


def test_a_changed_producer_is_not_answered_from_the_memo_even_unannounced() -> None:
    model = _chain(3)
    loop, named = _parts(model)
    values = StaticValues()
    derived = DerivedShapes()
    assert _assumed(loop, values, LoopMemo(values, derived=derived)) == _rows(3)
    # the producer of c3 reads another input, and nobody said so: its own answer is not used
    named["c3"].producer().replace_input_with(1, named["rows"])
    assert derived.known(named["c3"]) is None
    assert _assumed(loop, values, LoopMemo(values, derived=derived)) == _rows(4)
    # a declared shape that changed: not used either
    named["c3"].shape = ir.Shape([None, 3])
    assert derived.known(named["c3"]) is None


def test_analyses_under_hypotheses_or_over_other_values_neither_read_nor_add() -> None:
    model = _chain(3)
    loop, _ = _parts(model)
    values = StaticValues()
    derived = DerivedShapes()
    memo = LoopMemo(values, derived=derived)
    _assumed(loop, values, memo, uniform=[model.graph.inputs[0]])
    assert len(derived) == 0
    other = StaticValues()
    LoopShapes(loop, other, memo=memo)  # the memo answers for its own values only
    assert len(derived) == 0
    assert _assumed(loop, values, memo) == _rows(3)
    assert len(derived) == 3


def test_a_derivation_cut_at_the_depth_limit_is_not_remembered(derivations) -> None:
    """100 links asked at once: the derivation stops 64 deep, so nothing it found is
    remembered (each answer depended on where the walk started) and the next analysis finds
    the same. Asked link by link (as a chain of Loops lowered one after another is), each
    derivation stops at the last link remembered, and the answer is the one a derivation
    without a limit gives."""
    links = 100
    model = _chain(links)
    loop, named = _parts(model)
    values = StaticValues()
    derived = DerivedShapes()
    memo = LoopMemo(values, derived=derived)
    for _ in range(2):
        assert _assumed(loop, values, memo) == INVARIANT  # its declared shape: none
        assert len(derived) == 0
    without = LoopShapes(loop, values)  # as without the memo
    assert without.outer_shape(loop.inputs[2]) == INVARIANT
    probe = [node for node in model.graph if node.op_type == "Loop"][1]  # it reads x
    for k in range(30, links + 1, 30):
        analysis = LoopShapes(probe, values, memo=memo)
        derivations.clear()
        assert analysis.outer_shape(named[f"c{k}"]) == _rows(k)
        assert derivations == [f"c{j}" for j in range(k, k - 30, -1)]
    derivations.clear()
    assert _assumed(loop, values, memo) == _rows(links)
    assert derivations == ["c100", "c99", "c98", "c97", "c96", "c95", "c94", "c93", "c92", "c91"]


def test_the_lowering_forgets_what_each_rewrite_rewired(monkeypatch) -> None:
    """In a sweep, each rewrite hands the memo the nodes it emitted and rewired: the Loop after
    a lowered one reads what the lowering made, and what was derived through it is forgotten."""
    from tests.support import assert_same_outputs, lower
    from tests.test_hostile_shapes import _CHAIN_INPUTS, chained_loops_in_a_loop

    rewired: list[str] = []  # what makes the carried input of each Loop handed on, then
    original = DerivedShapes.forget_downstream

    def recording(self, nodes):
        nodes = list(nodes)
        for node in nodes:
            if node.op_type == "Loop" and len(node.inputs) > 2 and node.inputs[2] is not None:
                producer = node.inputs[2].producer()
                rewired.append(producer.op_type if producer is not None else "")
        return original(self, nodes)

    monkeypatch.setattr(DerivedShapes, "forget_downstream", recording)
    model = chained_loops_in_a_loop(3)
    lowered, _ = lower(model)
    # the second and third Loops of the chain, rewired to the Concat the lowering of the Loop
    # before made
    assert rewired.count("Concat") >= 2
    assert_same_outputs(model, lowered, _CHAIN_INPUTS)
