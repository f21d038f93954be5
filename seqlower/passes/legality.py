"""What counts as legal output, and how much is left: no operator of `SEQUENCE_OPS`.

`count_sequence_ops` and `expanded_count` measure a model; why each operator left stays, and what
to try about it, is the report's job (`seqlower.report`).
"""

from __future__ import annotations

__all__ = ["count_sequence_ops", "expanded_count", "sequence_op_budget"]

import collections

import onnx_ir as ir

from seqlower.ops import is_sequence_op, iter_all_nodes


def count_sequence_ops(model: ir.Model) -> dict[str, int]:
    """How many nodes of each sequence operator the model holds, subgraphs included."""
    counts = collections.Counter(
        node.op_type for node in iter_all_nodes(model) if is_sequence_op(node)
    )
    return dict(sorted(counts.items()))


def sequence_op_budget(model: ir.Model) -> int:
    """The sequence-op count against which "lowering never adds sequence ops" is measured:
    `expanded_count` over every node of the model."""
    return sum(expanded_count(node) for node in iter_all_nodes(model))


def expanded_count(node: ir.Node) -> int:
    """How many sequence ops `node` counts as: 0 for a node that is no sequence op, 1 for most,
    and for a SequenceMap the ops of ONNX's own function expansion of it (SequenceLength, one
    SequenceAt per sequence input, one SequenceEmpty and one SequenceInsert per output): no
    SequenceMap survives lowering, and over a sequence of unknown length the Loop that replaces
    it needs those ops (fewer with scan outputs)."""
    if not is_sequence_op(node):
        return 0
    if node.op_type != "SequenceMap":
        return 1
    # the first input is a sequence by definition; the others count by declared type (give an
    # untyped model shape inference first)
    sequence_inputs = 1 + sum(
        isinstance(v.type, ir.SequenceType) for v in node.inputs[1:] if v is not None
    )
    return 1 + sequence_inputs + 2 * len(node.outputs)
