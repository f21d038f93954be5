"""The uses of values, asked and rewired in time independent of how many there are.

onnx_ir's public ways cost time in proportion to a node's inputs or a value's uses on every
call: `Node.replace_input_with` rebuilds the input tuple element by element, `Value.uses()`
copies every use into a tuple, `Node.resize_inputs` does both once per input. A node of
thousands of inputs (a SequenceConstruct or Concat of every element of a long list) or a value
read thousands of times (a list read at every position) then makes each local rewrite cost as
much as the model: a SequenceConstruct of 20,000 SequenceAts, each lowered by a rewrite of its
own, spent 27 s of CPU in these calls alone.

The functions here keep onnx_ir's bookkeeping of uses through its private fields, where they
are as this module knows them (checked on every call), and otherwise take the public way. A
node with sharding annotations always takes the public way (they must be updated; older
onnx-ir releases have none).
"""

from __future__ import annotations

__all__ = [
    "WIDE", "detach_inputs", "is_used", "replace_all_uses", "replace_input", "use_count",
]  # fmt: skip

import onnx_ir as ir

WIDE = 64  # inputs: below this the public method's cost does not matter


def is_used(value: ir.Value) -> bool:
    """Whether some node reads `value` (graph outputs aside)."""
    uses = getattr(value, "_uses", None)
    return bool(uses) if isinstance(uses, dict) else bool(value.uses())


def use_count(value: ir.Value) -> int:
    """How many inputs of nodes read `value` (graph outputs aside)."""
    uses = getattr(value, "_uses", None)
    return len(uses) if isinstance(uses, dict) else len(value.uses())


def replace_input(node: ir.Node, index: int, value: ir.Value | None) -> None:
    """`node.replace_input_with(index, value)`, the same result at any width."""
    inputs = getattr(node, "_inputs", None)
    if (
        not isinstance(inputs, tuple)
        or len(inputs) < WIDE
        or not 0 <= index < len(inputs)
        or not _plain(node)
        or not all(_tracks_uses(v) for v in (inputs[index], value) if v is not None)
    ):
        node.replace_input_with(index, value)
        return
    old = inputs[index]
    node._inputs = (*inputs[:index], value, *inputs[index + 1 :])
    if old is not None:
        old._remove_usage(node, index)
    if value is not None:
        value._add_usage(node, index)


def replace_all_uses(old: ir.Value, new: ir.Value, *, replace_graph_outputs: bool = False) -> None:
    """`old.replace_all_uses_with(new, replace_graph_outputs=...)`, with the inputs of wide
    readers rewired by `replace_input`."""
    for use in tuple(old.uses()):
        if len(use.node.inputs) >= WIDE:
            replace_input(use.node, use.idx, new)
    old.replace_all_uses_with(new, replace_graph_outputs=replace_graph_outputs)


def detach_inputs(node: ir.Node) -> None:
    """Detach `node` from every value it reads, in time linear in its inputs (the public
    `resize_inputs(0)` rebuilds the input tuple once per input: a dead SequenceConstruct of
    3,000 elements took seconds, a chain of them minutes)."""
    inputs = getattr(node, "_inputs", None)
    if not isinstance(inputs, tuple) or not _plain(node):
        node.resize_inputs(0)
        return
    if not all(_tracks_uses(v) for v in inputs if v is not None):
        node.resize_inputs(0)
        return
    for index, value in enumerate(inputs):
        if value is not None:
            value._remove_usage(node, index)
    node._inputs = ()


def _plain(node: ir.Node) -> bool:
    """No sharding annotations to update as inputs change."""
    return not getattr(node, "device_configurations", None)


def _tracks_uses(value: ir.Value) -> bool:
    return hasattr(value, "_add_usage") and hasattr(value, "_remove_usage")
