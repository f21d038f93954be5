"""seqlower/uses.py: rewiring and asking the uses of values gives what onnx_ir's public ways
give, at any width (the fast paths apply from `WIDE` inputs on)."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from seqlower.uses import (
    WIDE,
    OutputPositions,
    detach_inputs,
    is_used,
    replace_all_uses,
    replace_input,
)


def _wide_node(width: int) -> tuple[ir.Node, list[ir.Value]]:
    values = [ir.Value(name=f"v{k}") for k in range(width)]
    node = ir.Node("", "Concat", [*values, values[0]], attributes=[ir.AttrInt64("axis", 0)])
    return node, values


def _uses(value: ir.Value) -> set[tuple[int, int]]:
    return {(id(use.node), use.idx) for use in value.uses()}


@pytest.mark.parametrize("width", [3, WIDE, 4 * WIDE])
def test_replacing_an_input_matches_the_public_method(width: int) -> None:
    ours, values = _wide_node(width)
    theirs, their_values = _wide_node(width)
    new, their_new = ir.Value(name="new"), ir.Value(name="new")
    for index in (1, width - 1, width):  # width: the second read of v0, the last input
        replace_input(ours, index, new)
        theirs.replace_input_with(index, their_new)
    assert [v.name if v else None for v in ours.inputs] == [
        v.name if v else None for v in theirs.inputs
    ]
    assert {idx for _, idx in _uses(new)} == {idx for _, idx in _uses(their_new)} == {
        1, width - 1, width,
    }  # fmt: skip
    assert _uses(values[0]) == {(id(ours), 0)}
    assert not values[1].uses() and not their_values[1].uses()
    replace_input(ours, 1, None)  # an input made optional
    assert ours.inputs[1] is None and {idx for _, idx in _uses(new)} == {width - 1, width}
    with pytest.raises(ValueError):
        replace_input(ours, width + 1, new)


def test_replacing_every_use_rewires_wide_and_narrow_readers() -> None:
    wide, values = _wide_node(2 * WIDE)
    narrow = ir.Node("", "Relu", [values[5]])
    new = ir.Value(name="new")
    replace_all_uses(values[5], new)
    assert wide.inputs[5] is new and narrow.inputs[0] is new
    assert not values[5].uses() and {idx for _, idx in _uses(new)} == {5, 0}


def test_is_used_and_detaching_inputs() -> None:
    wide, values = _wide_node(2 * WIDE)
    assert all(is_used(v) for v in values)
    assert not is_used(wide.outputs[0])
    detach_inputs(wide)
    assert wide.inputs == () and not any(is_used(v) for v in values)


def test_graph_outputs_are_replaced_in_place_without_a_protocol_check(monkeypatch) -> None:
    """Each output replaced keeps its position, the old value stops being an output (unless it
    is one elsewhere in the list) and the new one becomes one; no `SupportsIndex` protocol
    check, which cost some 15 us per output replaced (100,000 outputs)."""
    import typing

    x = ir.Value(name="x")
    nodes = [ir.Node("", "Relu", [x], num_outputs=1) for _ in range(5)]
    olds = [node.outputs[0] for node in nodes]
    graph = ir.Graph([x], [*olds, olds[1]], nodes=nodes)
    news = [ir.Node("", "Neg", [x], num_outputs=1).outputs[0] for _ in range(5)]
    meta = type(typing.SupportsIndex)
    original = meta.__instancecheck__
    checked: list[object] = []

    def counted(cls: type, instance: object) -> bool:
        if cls is typing.SupportsIndex:
            checked.append(instance)
        return original(cls, instance)

    monkeypatch.setattr(meta, "__instancecheck__", counted)
    positions = OutputPositions()
    for k in (3, 1, 0):
        positions.replace(graph, olds[k], news[k])
    assert checked == []
    assert list(graph.outputs) == [news[0], news[1], olds[2], news[3], olds[4], news[1]]
    assert not any(olds[k].is_graph_output() for k in (0, 1, 3))
    assert all(news[k].is_graph_output() for k in (0, 1, 3))
    assert olds[2].is_graph_output() and olds[4].is_graph_output()
