"""Flat lists joined on one axis a other than 0, and read no other way: each element is stored
with axis a moved first, so that the join is one Reshape of the data and one Transpose back.

The flat layout (`seqlower.lists.flat`) concatenates on axis 0 by a Reshape of its data (the
elements flattened one after the other are the concatenation on axis 0, flattened), but on any
other axis only by a Loop over the elements that copies a growing result in every iteration
(`ListForms.concat_loop`). A list grown in a loop and read only by `torch.cat(outs, a)`, whose
elements change shape (`repeated_refinement`: crops `y[:, :, 1:]` of run-time size, joined on
axis 1), stores each element with axis a moved first instead (`Layout.moved`):

    SequenceConstruct(x0..xk)    -> the flat layout's, of Transpose(xi, a first)
    SequenceInsert(s, x, p?)     -> the flat layout's, of Transpose(x, a first)
    ConcatFromSequence(s, axis=a) -> Transpose(the flat layout's axis-0 join, a back in place)

and the rest as the flat layout has it (SequenceEmpty, SequenceErase and SequenceLength work on
the spans and the rows of the table, whose sizes and count moving an axis keeps). Concatenating
on a is concatenating on axis 0 the elements with a moved first, then moving it back: the same
numbers, and the same failures (an empty list fails in both; elements whose other dims differ
make the Reshape fail, as the original's ConcatFromSequence does).

`moved_axis` gives a, for a flat list (all its values) whose every reader is a
ConcatFromSequence(new_axis=0) on a, or an operator that only passes the list on or edits or
measures it (SequenceInsert, SequenceErase, SequenceLength, Identity, a Loop carrying it), and
that no SplitToSequence makes and the model does not return (its elements would be read as they
are stored); for any other list, why not.
"""

from __future__ import annotations

__all__ = ["moved_axis"]

import onnx_ir as ir

from seqlower.lists.tensors import Layout

# what may read a list stored with an axis moved first: edits and measures of the list, and the
# operators that pass it on (a Loop carrying it: its body's lists are values of the same plan)
_PASSING = frozenset({"SequenceInsert", "SequenceErase", "SequenceLength", "Identity", "Loop"})


def moved_axis(values: list[ir.Value], layout: Layout, main: ir.Graph) -> int | str:
    """The axis a != 0 every reader of the flat list `values` concatenates on, when nothing
    else reads the list (see the module), else why the elements are stored as they are."""
    rank = layout.rank
    if layout.kind != "flat" or rank is None or rank < 2:
        return "not a flat list of elements of rank 2 or more"
    axes: set[int] = set()
    for value in values:
        if value.graph is main and value.is_graph_output():
            return "the model returns it"
        producer = value.producer()
        if producer is not None and producer.domain != "":
            return f"a {producer.op_type} of another domain makes it"
        if producer is not None and producer.op_type == "SplitToSequence":
            return "a SplitToSequence makes it"
        for use in value.uses():
            node = use.node
            op = node.op_type if node.domain == "" else f"{node.domain}.{node.op_type}"
            if op == "ConcatFromSequence":
                axis = node.attributes.get_int("axis", 0)
                if node.attributes.get_int("new_axis", 0):
                    return "it is stacked (ConcatFromSequence with new_axis=1)"
                if not -rank <= axis < rank:
                    return f"axis {axis} is out of range"
                axes.add(axis % rank)
            elif op not in _PASSING or (op == "SequenceInsert" and use.idx != 0):
                return f"a {op} reads it"
    if len(axes) != 1:
        return "it is not concatenated" if not axes else "it is concatenated on several axes"
    (axis,) = axes
    return axis if axis != 0 else "it is concatenated on axis 0"
