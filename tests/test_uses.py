"""seqlower/uses.py: rewiring and asking the uses of values gives what onnx_ir's public ways
give, at any width (the fast paths apply from `WIDE` inputs on)."""

from __future__ import annotations

import onnx_ir as ir
import pytest

from seqlower.uses import WIDE, detach_inputs, is_used, replace_all_uses, replace_input


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
