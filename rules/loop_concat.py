"""A list whose appended tensors change shape, built only to be concatenated, becomes a tensor
accumulator carried by the Loop:

    Loop(.., s0=SequenceConstruct(e..), body: s1 = SequenceInsert(s, t)), read only by
    ConcatFromSequence(axis=a)
        -> Loop(.., acc0=Concat(e.., axis=a), body: acc1 = Concat(acc, t, axis=a))

The scan output of `loop-append-to-scan` needs one shape per iteration; an uneven last chunk of
`split(k)` with a run-time k, or the growing prefixes of a pyramid, are not. Concatenating as the
loop goes is portable (TensorRT, OpenVINO and tract have no sequence operators) but copies the
accumulator in every iteration, quadratic in its length. Every target applies it; where the
accumulator costs more than the list (`seqlower.cost`), `--target onnxruntime` keeps the loop's
region as given (docs/performance.md, "Never slower").

A list that starts empty starts from an empty tensor (ConstantOfShape): the appended tensor's
dims other than the concatenation axis must be fixed for the whole loop, static or the size of
a value outside the loop (read from its Shape before the loop: a batch dim B). If no iteration
runs, the original fails (ConcatFromSequence of an empty sequence) where the accumulator gives
an empty tensor.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.analysis.loop_shapes import LoopShapes, analysed
from seqlower.lists.tensors import dim0
from seqlower.ops import is_sequence_value
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import carried_plans


@dataclasses.dataclass(frozen=True)
class ConcatPlan:
    index: int  # among the loop-carried values
    insert: ir.Node  # SequenceInsert(s, t) in the body
    axis: int  # normalized
    initial: tuple[ir.Value, ...]
    # the start's shape, when there is no initial element: each dim a number, or (a value
    # outside the loop, an axis) whose size it is, fixed for the whole loop
    empty_shape: tuple[int | tuple[ir.Value, int], ...] | None
    dtype: ir.DataType


def _check(node: ir.Node, ctx: Context) -> tuple[ConcatPlan, ...] | Refusal:
    body = node.attributes["body"].as_graph()
    shapes: list[LoopShapes] = []  # one analysis of the body for every carried list

    def loop_shapes() -> LoopShapes:
        if not shapes:
            shapes.append(analysed(node, ctx.facts.values, ctx.facts.loops))
        return shapes[0]

    return carried_plans(
        node,
        lambda index: _plan(node, body, index, loop_shapes, ctx),
        lambda init, _: is_sequence_value(init),
    )


def _plan(
    node: ir.Node,
    body: ir.Graph,
    index: int,
    loop_shapes: Callable[[], LoopShapes],
    ctx: Context,
) -> ConcatPlan | str:
    init, body_input = node.inputs[2 + index], body.inputs[2 + index]
    body_output, result = body.outputs[1 + index], node.outputs[index]
    assert init is not None
    uses = list(body_input.uses())
    insert = body_output.producer()
    if len(uses) != 1 or insert is None or uses[0].node is not insert or uses[0].idx != 0:
        return "the body does not only append to it"
    if insert.op_type != "SequenceInsert" or (len(insert.inputs) > 2 and insert.inputs[2]):
        return "the body does not append to it at the end"
    if body_output.uses() or [o for o in body.outputs if o is body_output] != [body_output]:
        return "the sequence after the append is also read in the body"
    readers = [use.node for use in result.uses()]
    if result.is_graph_output() or not readers:
        return "the loop's sequence is a model output or not read"
    if any(
        r.op_type != "ConcatFromSequence" or r.attributes.get_int("new_axis", 0) for r in readers
    ):
        return "the loop's sequence is read by more than ConcatFromSequence(new_axis=0)"
    axes = {r.attributes.get_int("axis", 0) for r in readers}
    if len(axes) != 1:
        return "the loop's sequence is concatenated on different axes"
    shape = loop_shapes().shape(insert.inputs[1])  # type: ignore[arg-type]
    if not isinstance(shape, tuple):
        return "the rank of the appended tensor is not known"
    (axis,) = axes
    if not -len(shape) <= axis < len(shape):
        return f"axis {axis} is out of range for the appended tensor"
    axis %= len(shape)
    initial = ctx.facts.elements(init)
    if initial is None:
        return "its initial elements are not known"
    # the start when empty: dims fixed for the loop, read before it where not static
    empty = tuple(
        0 if k == axis else loop_shapes().outer_dim_source(d) for k, d in enumerate(shape)
    )
    if not initial and any(d is None for d in empty):
        return "it starts empty and the appended tensor's other dims are not fixed for the loop"
    dtype = element_dtype(init) or insert.inputs[1].dtype  # type: ignore[union-attr]
    if dtype is None:
        return "the element type is unknown"
    if not initial and dtype == ir.DataType.STRING:
        return "it starts empty, and ConstantOfShape makes no empty string tensor"
    return ConcatPlan(index, insert, axis, initial, None if initial else empty, dtype)  # type: ignore[arg-type]


def _to_accumulator(node: ir.Node, plans: tuple[ConcatPlan, ...], ctx: Context) -> None:
    """Loop(.., s0=SequenceConstruct(e..), body: s1 = SequenceInsert(s, t)) read only by
    ConcatFromSequence(axis=a) -> Loop(.., Concat(e.., axis=a), body: Concat(acc, t, axis=a)).
    The accumulator is copied in every iteration: quadratic in its length."""
    # every planned list of the Loop at once, in one rebuild of the Loop
    body = node.attributes["body"].as_graph()
    builder = ctx.rewriter.before(node)
    inputs = list(node.inputs)
    for plan in plans:
        inputs[2 + plan.index] = _accumulate(body, builder, plan, ctx)
    outputs = builder.ops("Loop", inputs, {"body": body}, num_outputs=len(node.outputs))
    accumulated = {plan.index: plan for plan in plans}
    for index, (old, new) in enumerate(zip(node.outputs, outputs)):
        if index in accumulated:
            new.type = ir.TensorType(accumulated[index].dtype)
            for reader in [use.node for use in old.uses()]:
                ctx.rewriter.replace(reader.outputs[0], new)
        else:
            new.type = old.type
            ctx.rewriter.replace(old, new)
    ctx.rewriter.fired_more("loop-append-to-concat", len(plans) - 1)


def _accumulate(body: ir.Graph, builder: Builder, plan: ConcatPlan, ctx: Context) -> ir.Value:
    """The body edits for one list: the carried accumulator grows by a Concat where the list
    grew by an insert. Returns the accumulator's start, made before the Loop."""
    k = plan.index
    if plan.empty_shape is not None:
        # ConstantOfShape, not a Constant with no element: OpenVINO 2026.4.1 fails to convert
        # a Loop that carries a zero-size Constant (probed: "Accessing out-of-range dimension")
        zero = ir.Tensor(np.zeros(1, plan.dtype.numpy()))
        start = builder.op("ConstantOfShape", [_shape(builder, plan.empty_shape)], {"value": zero})
    else:
        start = builder.op("Concat", list(plan.initial), {"axis": plan.axis})
    start.type = ir.TensorType(plan.dtype)
    acc = ir.Value(name=ctx.rewriter.names.fresh("accumulator"), type=ir.TensorType(plan.dtype))
    body.inputs[2 + k] = acc
    grown = ctx.rewriter.before(plan.insert).op(
        "Concat", [acc, plan.insert.inputs[1]], {"axis": plan.axis}, name="accumulated"
    )
    grown.type = ir.TensorType(plan.dtype)
    body.outputs[1 + k] = grown
    body.remove(plan.insert, safe=True)
    return start


def _shape(builder: Builder, dims: tuple[int | tuple[ir.Value, int], ...]) -> ir.Value:
    """A 1-D shape of `dims`: numbers as they are, (value, axis) read from the value's shape."""
    if all(isinstance(d, int) for d in dims):
        return builder.ints(dims)  # type: ignore[arg-type]
    parts = []
    for dim in dims:
        if isinstance(dim, int):
            parts.append(builder.ints([dim], "dim"))
        else:
            parts.append(dim0(builder, *dim))
    return builder.op("Concat", parts, {"axis": 0}, name="empty_shape")


RULES = RuleSet([Rule("loop-append-to-concat", "Loop", _check, _to_accumulator)])
