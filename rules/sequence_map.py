"""SequenceMap: unrolled when the length is static, a Loop otherwise. No SequenceMap survives.

    SequenceMap(SequenceConstruct(a0..an), SequenceConstruct(b0..bn), t, body=f)
        -> SequenceConstruct(f(a0, b0, t), ..., f(an, bn, t))                  (unrolled)
    SequenceMap(s, t, body=f)
        -> SplitToSequence(Loop(SequenceLength(s), body: f(SequenceAt(s, i), t))
                           as scan output, keepdims=0)          (body outputs of static shape)
        -> Loop(SequenceLength(s), acc=SequenceEmpty(),
                body: acc = SequenceInsert(acc, f(SequenceAt(s, i), t)))       (otherwise)

Extra inputs that are tensors feed every copy; extra sequence inputs are zipped. Bodies may read
outer-scope values and may hold sequence ops, If, Loop or a nested SequenceMap: the copies are
lowered by the other rules in later sweeps.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import element_dtype
from seqlower.budget import over_budget
from seqlower.errors import InvalidModelError
from seqlower.inline import inline_graph
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_appends import splittable


@dataclasses.dataclass(frozen=True)
class MapPlan:
    body: ir.Graph
    # per node input: the known elements of a sequence input, or the tensor itself
    arguments: tuple[tuple[ir.Value, ...] | ir.Value, ...]
    is_sequence: tuple[bool, ...]
    length: int | None


def _plan(node: ir.Node, ctx: Context) -> MapPlan | Refusal:
    body = node.attributes["body"].as_graph() if "body" in node.attributes else None
    if body is None:
        raise InvalidModelError(f"SequenceMap '{node.name}': has no body")
    if len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs):
        raise InvalidModelError(
            f"SequenceMap '{node.name}': the body takes {len(body.inputs)} inputs and gives "
            f"{len(body.outputs)} outputs, but the node has {len(node.inputs)} inputs and "
            f"{len(node.outputs)} outputs"
        )
    arguments: list[tuple[ir.Value, ...] | ir.Value] = []
    is_sequence: list[bool] = []
    lengths: set[int] = set()
    unknown: str | None = None
    for index, value in enumerate(node.inputs):
        if value is None:
            raise InvalidModelError(f"SequenceMap '{node.name}': input {index} is missing")
        sequence = index == 0 or isinstance(value.type, ir.SequenceType)
        is_sequence.append(sequence)
        if not sequence:
            arguments.append(value)
            continue
        elements = ctx.facts.elements(value)
        if elements is None:
            fact = ctx.facts.sequence(value)
            unknown = unknown or getattr(fact, "reason", "elements unknown")
            arguments.append(value)
            continue
        lengths.add(len(elements))
        arguments.append(elements)
    length = None if unknown or len(lengths) != 1 else lengths.pop()
    if not unknown and length is None:
        return Refusal(f"the zipped sequences have different lengths {sorted(lengths)}")
    return MapPlan(body, tuple(arguments), tuple(is_sequence), length)


def _check_unroll(node: ir.Node, ctx: Context) -> MapPlan | Refusal:
    plan = _plan(node, ctx)
    if isinstance(plan, MapPlan) and plan.length is None:
        return Refusal("the sequence length is not static")
    if isinstance(plan, MapPlan):
        nodes = plan.length * max(plan.body.num_nodes(), 1)  # type: ignore[operator]
        if (too_many := over_budget(nodes, "nodes (elements times body nodes)")) is not None:
            return Refusal(too_many)
    return plan


def _output_dtype(node: ir.Node, plan: MapPlan, index: int) -> ir.DataType | None:
    return element_dtype(node.outputs[index]) or plan.body.outputs[index].dtype


def _unroll(node: ir.Node, plan: MapPlan, ctx: Context) -> None:
    """SequenceMap(SequenceConstruct(a0..an), t, body=f) -> SequenceConstruct(f(a0, t)..f(an, t))"""
    builder = ctx.rewriter.before(node)
    assert plan.length is not None
    results: list[list[ir.Value]] = [[] for _ in node.outputs]
    for k in range(plan.length):
        inputs = [arg[k] if isinstance(arg, tuple) else arg for arg in plan.arguments]
        for collected, value in zip(
            results, inline_graph(plan.body, inputs, builder, f"{builder.hint}_{k}")
        ):
            collected.append(value)
    for index, (output, elements) in enumerate(zip(node.outputs, results)):
        ctx.replace_sequence(output, elements, builder, _output_dtype(node, plan, index))


def _check_loop(node: ir.Node, ctx: Context) -> MapPlan | Refusal:
    return _plan(node, ctx)


def _static_shape(value: ir.Value) -> bool:
    return value.shape is not None and all(isinstance(d, int) for d in value.shape)


def _to_loop(node: ir.Node, plan: MapPlan, ctx: Context) -> None:
    """SequenceMap(s, t, body=f) -> Loop(SequenceLength(s), body: f(SequenceAt(s, i), t)),
    collecting results as scan outputs when their shape is static (and onnxruntime splits
    their element type back into a list), else by SequenceInsert."""
    builder = ctx.rewriter.before(node)
    dtypes = [_output_dtype(node, plan, i) or ir.DataType.FLOAT for i in range(len(node.outputs))]
    # scan outputs are split back into lists: only for element types onnxruntime splits
    as_scan = all(_static_shape(output) for output in plan.body.outputs) and all(
        splittable(dtype) for dtype in dtypes
    )
    sequences = [v for v, is_seq in zip(node.inputs, plan.is_sequence) if is_seq]
    trip_count = builder.op("SequenceLength", [sequences[0]], name="trip_count")

    body = ctx.rewriter.new_graph(f"{builder.hint}_loop_body", builder.opset)
    names = ctx.rewriter.names
    iteration = ir.Value(
        name=names.fresh(f"{builder.hint}_i"),
        type=ir.TensorType(ir.DataType.INT64),
        shape=ir.Shape([]),
    )
    condition = ir.Value(
        name=names.fresh(f"{builder.hint}_cond"),
        type=ir.TensorType(ir.DataType.BOOL),
        shape=ir.Shape([]),
    )
    body.graph.inputs.extend([iteration, condition])
    accumulators = []
    if not as_scan:
        for dtype in dtypes:
            accumulator = ir.Value(
                name=names.fresh(f"{builder.hint}_acc"), type=ir.SequenceType(ir.TensorType(dtype))
            )
            body.graph.inputs.append(accumulator)
            accumulators.append(accumulator)

    arguments = []
    for value, is_seq in zip(node.inputs, plan.is_sequence):
        if is_seq:
            element = body.op("SequenceAt", [value, iteration], name="element")
            element.type = ir.TensorType(element_dtype(value) or ir.DataType.FLOAT)  # type: ignore[arg-type]
            arguments.append(element)
        else:
            arguments.append(value)
    results = inline_graph(plan.body, arguments, body, f"{builder.hint}_body")
    body.graph.outputs.append(body.op("Identity", [condition], name="cond_out"))
    for index, result in enumerate(results):
        if as_scan:
            carried = body.op("Identity", [result], name="scan_out")
            carried.type, carried.shape = (
                plan.body.outputs[index].type,
                plan.body.outputs[index].shape,
            )
        else:
            carried = body.op("SequenceInsert", [accumulators[index], result], name="append")
            carried.type = accumulators[index].type
        body.graph.outputs.append(carried)

    initial = (
        []
        if as_scan
        else [
            builder.op("SequenceEmpty", [], {"dtype": int(dtype)}, name="empty") for dtype in dtypes
        ]
    )
    for value, dtype in zip(initial, dtypes):
        value.type = ir.SequenceType(ir.TensorType(dtype))
    loop_outputs = builder.ops(
        "Loop",
        [trip_count, builder.constant(np.array(True), "true"), *initial],
        {"body": body.graph},
        num_outputs=len(node.outputs),
        name="map_loop",
    )
    for index, (output, loop_output) in enumerate(zip(node.outputs, loop_outputs)):
        if as_scan:
            body_out = plan.body.outputs[index]
            loop_output.type = ir.TensorType(dtypes[index])
            loop_output.shape = ir.Shape([None, *body_out.shape])  # type: ignore[misc]
            loop_output = builder.op(
                "SplitToSequence", [loop_output], {"axis": 0, "keepdims": 0}, name="elements"
            )
        loop_output.type = ir.SequenceType(ir.TensorType(dtypes[index]))
        ctx.rewriter.replace(output, loop_output)


RULES = RuleSet(
    [
        Rule("sequence-map-unroll", "SequenceMap", _check_unroll, _unroll),
        Rule("sequence-map-to-loop", "SequenceMap", _check_loop, _to_loop, last_resort=True),
    ]
)
