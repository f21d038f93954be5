"""SplitToSequence becomes Split (plus Squeeze only where keepdims=0 applies).

    SplitToSequence(x, axis=a, keepdims=1)   -> SequenceConstruct(Split(x, [1]*d, axis=a))
    SplitToSequence(x, axis=a, keepdims=0)   -> SequenceConstruct(Squeeze(Split(x, [1]*d), a)...)
    SplitToSequence(x, s, axis=a)            -> SequenceConstruct(Split(x, [s, ..., s, d % s]))
    SplitToSequence(x, [s0, ..., sk], axis=a) -> SequenceConstruct(Split(x, [s0, ..., sk]))

The SequenceConstruct is the canonical form the other rules consume; it disappears once every
consumer reads the elements directly.

Refused: more than MAX_FOLD_ELEMENTS chunks whose sizes are not read before run time (computed
at run time, or a `split` input longer than static values are read): they are not written out
one by one (50,000 chunks took over a minute and a gigabyte, three nodes a chunk, and a
161-byte file can declare 100,000 run-time sizes). The split stays one tensor and its sizes,
for the rules that read it so (a read at any position is one Slice, `at-of-chunks`; a
concatenation on the split axis is the tensor; the length is the number of sizes) and for the
tensor form of lists.
"""

from __future__ import annotations

__all__ = ["RULES"]

import onnx_ir as ir

from seqlower.analysis.split_plan import SplitPlan
from seqlower.analysis.static_values import MAX_FOLD_ELEMENTS
from seqlower.rule import Context, Refusal, Rule, RuleSet


def _check_static_split(node: ir.Node, ctx: Context) -> SplitPlan | Refusal:
    plan = ctx.facts.split_plan(node)
    if isinstance(plan, str):
        return Refusal(plan)
    if plan.sizes is None and plan.count > MAX_FOLD_ELEMENTS:
        return Refusal(
            f"{plan.count} chunks of sizes not read before run time are more than are written "
            f"out one by one (at most {MAX_FOLD_ELEMENTS}): the split stays one tensor"
        )
    if plan.sizes is None and ctx.rewriter.opset(node.graph) < 13:
        return Refusal(
            "split sizes are computed at run time; Split before opset 13 needs them static"
        )
    return plan


def _lower_static_split(node: ir.Node, plan: SplitPlan, ctx: Context) -> None:
    """SplitToSequence(x, split?, axis=a) -> SequenceConstruct(Split(x, sizes, axis=a)...)

    Elements are squeezed on `a` only when no `split` is given and keepdims=0.
    """
    builder = ctx.rewriter.before(node)
    data = node.inputs[0]
    assert data is not None
    chunks = builder.split(data, plan.axis, plan.sizes, plan.count, plan.runtime_sizes)
    for chunk, size in zip(chunks, plan.sizes or [None] * plan.count):
        chunk.type = data.type
        if data.shape is not None and size is not None:
            dims = list(data.shape)
            dims[plan.axis] = size
            chunk.shape = ir.Shape(dims)
    if plan.squeeze:
        squeezed = []
        for chunk in chunks:
            element = builder.squeeze(chunk, [plan.axis])
            element.type = data.type
            if chunk.shape is not None:
                element.shape = ir.Shape([d for i, d in enumerate(chunk.shape) if i != plan.axis])
            squeezed.append(element)
        chunks = squeezed
    ctx.replace_sequence(node.outputs[0], chunks, builder)


RULES = RuleSet(
    [Rule("split-to-sequence", "SplitToSequence", _check_static_split, _lower_static_split)]
)
