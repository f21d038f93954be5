"""A Concat that joins every piece of a Split, in order and along the split axis, reads the tensor
that was split.

    Concat(a.., y_0, .., y_n-1, b.., axis=k), y_0..y_n-1 = Split(x, axis=k)
        -> Concat(a.., x, b.., axis=k)        (-> x when nothing else is joined)

A list made from `x.split(s)` and later concatenated with something appended lowers to such a
Concat of every chunk (`torch.cat(list(x.split(s)) + [t])`); the Split, and the arithmetic of
its sizes, then go with it when nothing else reads them. Pieces whose sizes do not add up to the
dim are an error for Split; x is then read whole instead.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import onnx_ir as ir

from seqlower.rule import Context, Refusal, Rule, RuleSet


@dataclasses.dataclass(frozen=True)
class WholeSplit:
    start: int  # the position of the first piece among the Concat's inputs
    split: ir.Node


def _axis(node: ir.Node, rank: int | None) -> int | None:
    axis = node.attributes.get_int("axis", 0)
    if rank is None:
        return axis if axis >= 0 else None
    return axis % rank if -rank <= axis < rank else None


def _check(node: ir.Node, ctx: Context) -> WholeSplit | Refusal:
    inputs = list(node.inputs)
    for start, value in enumerate(inputs):
        split = None if value is None else value.producer()
        if split is None or split.op_type != "Split" or split.domain != "":
            continue
        if value is not split.outputs[0]:
            continue
        pieces = list(split.outputs)
        if inputs[start : start + len(pieces)] != pieces:
            continue
        data = split.inputs[0]
        rank = None if data is None or data.shape is None else len(data.shape)
        concat_axis, split_axis = _axis(node, rank), _axis(split, rank)
        if concat_axis is None or concat_axis != split_axis:
            continue
        return WholeSplit(start, split)
    return Refusal("no Split has every piece joined, in order, along its axis")


def _join_whole(node: ir.Node, match: WholeSplit, ctx: Context) -> None:
    """Concat(a.., Split(x, axis=k)[0..n-1], b.., axis=k) -> Concat(a.., x, b.., axis=k)"""
    count = len(match.split.outputs)
    data = match.split.inputs[0]
    assert data is not None
    inputs = list(node.inputs)
    joined = [*inputs[: match.start], data, *inputs[match.start + count :]]
    if len(joined) == 1:
        ctx.rewriter.replace(node.outputs[0], data)
        return
    builder = ctx.rewriter.before(node)
    axis = node.attributes.get_int("axis", 0)
    result = builder.op("Concat", joined, {"axis": axis}, name="joined")
    result.type, result.shape = node.outputs[0].type, node.outputs[0].shape
    ctx.rewriter.replace(node.outputs[0], result)


RULES = RuleSet([Rule("concat-of-whole-split", "Concat", _check, _join_whole)])
