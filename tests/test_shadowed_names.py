"""A body value named as a value outside the body (ONNX forbids it; the checker accepts it) is
renamed, so that a rewrite moving a reader of the outer value into the body cannot bind it to
the body's value (seqlower/passes/shadowed_names.py)."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from support import assert_same_outputs, lower, parse, sequence_op_count

from seqlower.passes.shadowed_names import rename_shadowing_values

# the carried value of the Loop is named `x`, as the tensor the list is split from: the lowered
# read of the list inside the body is a Gather of the outer `x`
CARRIED_NAMED_AS_THE_SPLIT_TENSOR = parse(
    """g (float[N,3] inp, float[1,3] init) => (float[1,3] res) {
    x = Relu(inp)
    seq = SplitToSequence<axis = 0>(x)
    len = SequenceLength(seq)
    res = Loop(len, , init) <body = body (int64 i, bool c, float[1,3] x)
                                      => (bool co, float[1,3] xo) {
        e = SequenceAt(seq, i)
        s = Add(x, e)
        xo = Sin(s)
        co = Identity(c)
    }>
}"""
)


@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
@pytest.mark.parametrize("rows", [0, 1, 4])
def test_a_body_input_named_as_an_outer_value_keeps_its_meaning(target: str, rows: int) -> None:
    lowered, _ = lower(CARRIED_NAMED_AS_THE_SPLIT_TENSOR, target=target)
    if target == "generic":
        assert sequence_op_count(lowered) == 0
    rng = np.random.default_rng(rows)
    feeds = {
        "inp": rng.standard_normal((rows, 3)).astype(np.float32),
        "init": rng.standard_normal((1, 3)).astype(np.float32),
    }
    assert_same_outputs(CARRIED_NAMED_AS_THE_SPLIT_TENSOR, lowered, feeds)


def _body(model: ir.Model, index: int = 0) -> ir.Graph:
    node = [node for node in model.graph if node.op_type in ("Loop", "If")][index]
    return next(iter(node.attributes.values())).as_graph()


def test_what_shadows_is_renamed_and_the_outer_value_kept() -> None:
    model = ir.from_proto(CARRIED_NAMED_AS_THE_SPLIT_TENSOR)
    assert rename_shadowing_values(model) == 1
    assert [v.name for v in _body(model).inputs] == ["i", "c", "x_inner"]
    assert "x" in {v.name for node in model.graph for v in node.outputs}
    assert rename_shadowing_values(model) == 0  # nothing left to rename


def test_a_fresh_name_avoids_every_name_of_the_model() -> None:
    model = ir.from_proto(
        parse(
            """g (float[2] x, bool b) => (float[2] y) {
            x_inner = Neg(x)
            y = If(b) <then_branch = t () => (float[2] x) { x = Identity(x_inner) },
                       else_branch = e () => (float[2] z) { z = Identity(x_inner) }>
        }"""
        )
    )
    assert rename_shadowing_values(model) == 1
    assert [v.name for v in _body(model).outputs] == ["x_inner2"]


def test_many_bodies_shadowing_one_name_take_the_next_free_names_in_order() -> None:
    """Five Ifs whose branches each shadow `x`, with `x_inner3` taken by the model: the
    names are given in graph order, each the first one free (what remembering where the
    search stopped must keep)."""
    ifs = "".join(
        f"""y{k} = If(b) <then_branch = t{k} () => (float[2] x) {{ x = Identity(x_inner3) }},
                         else_branch = e{k} () => (float[2] z{k}) {{ z{k} = Neg(x) }}>
        """
        for k in range(5)
    )
    outputs = ", ".join(f"float[2] y{k}" for k in range(5))
    model = ir.from_proto(
        parse(f"g (float[2] x, bool b) => ({outputs}) {{ x_inner3 = Neg(x)\n {ifs} }}")
    )
    assert rename_shadowing_values(model) == 5
    names = [_body(model, k).outputs[0].name for k in range(5)]
    assert names == ["x_inner", "x_inner2", "x_inner4", "x_inner5", "x_inner6"]


def test_names_siblings_share_and_models_without_shadowing_are_left_alone() -> None:
    text = """g (float[2] a, bool b) => (float[2] y) {
        y = If(b) <then_branch = t () => (float[2] tmp) { tmp = Neg(a) },
                   else_branch = e () => (float[2] tmp) { tmp = Abs(a) }>
    }"""
    model = ir.from_proto(parse(text))
    assert rename_shadowing_values(model) == 0
    assert ir.to_proto(model) == ir.to_proto(ir.from_proto(parse(text)))


def test_a_name_shadowed_two_levels_down() -> None:
    model = ir.from_proto(
        parse(
            """g (float[2] a, bool b) => (float[2] y) {
            y = If(b) <then_branch = t () => (float[2] u) {
                    b_f = Identity(a)
                    u = If(b) <then_branch = t2 () => (float[2] a) { a = Neg(b_f) },
                               else_branch = e2 () => (float[2] v) { v = Abs(b_f) }>
                },
                else_branch = e () => (float[2] w) { w = Abs(a) }>
        }"""
        )
    )
    assert rename_shadowing_values(model) == 1
    inner_if = next(node for node in _body(model) if node.op_type == "If")
    assert [v.name for v in inner_if.attributes["then_branch"].as_graph().outputs] == ["a_inner"]


def test_a_second_value_of_one_name_in_a_graph_is_renamed() -> None:
    model = ir.from_proto(parse("g (float[2] a) => (float[2] y) { t = Neg(a)  y = Abs(t) }"))
    neg, abs_ = list(model.graph)
    copy = ir.node("Neg", [neg.outputs[0]], name="again")
    copy.outputs[0].name = "t"  # as a merge of two graphs could leave it
    model.graph.insert_after(neg, copy)
    abs_.replace_input_with(0, copy.outputs[0])
    assert rename_shadowing_values(model) == 1
    assert [node.outputs[0].name for node in model.graph] == ["t", "t_inner", "y"]


def test_an_input_with_a_default_is_one_value_not_two() -> None:
    model = ir.from_proto(
        parse(
            """g (float[2] a, float[2] w) => (float[2] y) <float[2] w = {1.0, 2.0}> {
            y = Add(a, w)
        }"""
        )
    )
    assert rename_shadowing_values(model) == 0
    assert [v.name for v in model.graph.inputs] == ["a", "w"]


def test_each_graph_is_walked_once_to_find_what_may_shadow(monkeypatch) -> None:
    """One walk of each graph's nodes finds its values and the subgraphs it holds (before, the
    graphs were listed, then each graph's nodes walked for its values and again for its
    subgraphs: three walks of the dense map chain's 85,000 nodes); the same renames, a body
    that two nodes hold walked once and in scope under each."""
    import seqlower.ops as ops
    import seqlower.passes.shadowed_names as shadowed_names

    walked: list[str] = []
    walk = ops.graph_nodes

    def counted(graph):
        walked.append(graph.name)
        return walk(graph)

    monkeypatch.setattr(ops, "graph_nodes", counted)
    monkeypatch.setattr(shadowed_names, "graph_nodes", counted)
    model = ir.from_proto(CARRIED_NAMED_AS_THE_SPLIT_TENSOR)
    loop = next(node for node in model.graph if node.op_type == "Loop")
    # a second Loop holding the same body (as a rewrite does until the old one goes)
    twin = ir.Node("", "Loop", loop.inputs, attributes=[loop.attributes["body"]], num_outputs=1)
    model.graph.append(twin)
    assert rename_shadowing_values(model) == 1
    assert walked == [model.graph.name, _body(model).name]
    assert [v.name for v in _body(model).inputs] == ["i", "c", "x_inner"]
    assert [v.name for v in _body(model, 1).inputs] == ["i", "c", "x_inner"]
