"""Batch a whole SequenceMap body: decide for each body value whether it varies per element, check
that every op reading a varying value has a batching rule, then emit the batched computation.

A body value is batched when it depends on a sequence input; everything else (extra tensor
inputs, constants, outer-scope values and what is computed from those only) is the same for
every element and is emitted once, unchanged ("hoisted"). Random ops are never hoisted: one
sample would then be shared by all elements.
"""

from __future__ import annotations

__all__ = ["BodyPlan", "emit_body", "plan_body", "plan_region"]

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.batching.branches import plan_if
from seqlower.batching.core import Batched, Emitter, Operand, OpView
from seqlower.batching.ops import OP_RULES, RANDOM_OPS
from seqlower.batching.ragged import RAGGED_RULES, makes_ragged
from seqlower.ops import has_subgraph, outer_reads, same_dim
from seqlower.rule import Refusal


@dataclasses.dataclass(frozen=True)
class BodyPlan:
    """The accepted region of a body: the values it is fed (`inputs`), per node its batching
    (None: hoisted), the values it computes (`results`) and per result its operand."""

    body: ir.Graph
    inputs: tuple[ir.Value, ...]
    steps: tuple[tuple[ir.Node, Batched | None], ...]
    operands: Mapping[ir.Value, Operand]
    results: tuple[ir.Value, ...]
    outputs: tuple[Operand, ...]


def plan_body(
    body: ir.Graph, inputs: Sequence[Operand], values: StaticValues, opset: int
) -> BodyPlan | Refusal:
    """Check that `body`, fed `inputs` (batched sequence elements or unbatched tensors), can be
    batched; the refusal names the first op that cannot."""
    return plan_region(body, dict(zip(body.inputs, inputs)), body, body.outputs, values, opset)


def plan_region(
    body: ir.Graph,
    seeds: Mapping[ir.Value, Operand],
    nodes: Iterable[ir.Node],
    results: Sequence[ir.Value],
    values: StaticValues,
    opset: int,
    shapes: Mapping[ir.Value, ir.Shape] | None = None,
    ragged_results: bool = False,
) -> BodyPlan | Refusal:
    """Check that `nodes` of `body` (in order), fed the values `seeds` (batched or not), can be
    batched to compute `results`; the refusal names the first op that cannot. `shapes` gives
    element shapes known better than the body declares them (`infer_region_shapes`).
    `ragged_results`: the caller reads results that are ragged (their operands say so) with
    their masks (`Emitter.masks`); otherwise a ragged result is refused."""
    operands: dict[ir.Value, Operand] = dict(seeds)
    known = shapes or {}

    def shape_of(value: ir.Value) -> ir.Shape | None:
        return known.get(value, value.shape)

    def operand(value: ir.Value) -> Operand:
        return operands.get(value) or Operand(False, value.shape)

    steps: list[tuple[ir.Node, Batched | None]] = []
    for node in nodes:
        label = _label(node)
        if any(attr.is_ref() for attr in node.attributes.values()):
            return Refusal(f"body op {label} has a reference attribute")
        node_operands = tuple(None if v is None else operand(v) for v in node.inputs)
        if has_subgraph(node):
            captured = outer_reads(node)
            reads_body = any(_made_in_body(v, body) for v in captured)
            batched_if = node.op_type == "If" and node.domain in ("", "ai.onnx")
            if not (batched_if and (reads_body or any(o and o.batched for o in node_operands))):
                return Refusal(f"body op {label} holds a subgraph")
            branches = plan_if(node, operand, values, opset, plan_region)
            if isinstance(branches, Refusal):
                return Refusal(f"body op {label}: {branches.reason}")
            for output in node.outputs:
                operands[output] = Operand(True, shape_of(output))
            for index, axis, padded in branches.ragged_outputs:
                operands[node.outputs[index]] = Operand(True, padded, axis)
            steps.append((node, branches))
            continue
        if not any(o is not None and o.batched for o in node_operands):
            if node.op_type in RANDOM_OPS:
                return Refusal(f"body op {label} draws random values per element")
            steps.append((node, None))
            for output in node.outputs:
                operands[output] = Operand(False, shape_of(output))
            continue
        output_shapes = tuple(shape_of(o) for o in node.outputs)
        view = OpView(node, node_operands, output_shapes, opset, values)
        rule = OP_RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        passed_on: tuple[ir.Value, int] | Refusal | None = None
        if (_reads_ragged_first(view) and node.op_type in RAGGED_RULES) or makes_ragged(view):
            rule = RAGGED_RULES[node.op_type]
        else:
            passed_on = _ragged_passed_on(view)
        if rule is None:
            return Refusal(f"body op {label} has no batching rule")
        if isinstance(passed_on, Refusal):
            return Refusal(f"body op {label}: {passed_on.reason}")
        batched = rule(view)
        if isinstance(batched, Refusal):
            return Refusal(f"body op {label}: {batched.reason}")
        flags = batched.outputs_batched or (True,) * len(node.outputs)
        for output, flag in zip(node.outputs, flags):
            operands[output] = Operand(flag, shape_of(output))
        if batched.ragged_axis is not None:  # padded: the shape of the sliced input
            padded = batched.ragged_shape or node_operands[0].shape  # type: ignore[union-attr]
            operands[node.outputs[0]] = Operand(True, padded, batched.ragged_axis)
        elif passed_on is not None:
            source, axis = passed_on
            operands[node.outputs[0]] = Operand(True, operands[source].shape, axis)
            batched = _passing_mask_on(batched, source, node.outputs[0])
        steps.append((node, batched))
    outputs = []
    for index, output in enumerate(results):
        found = operand(output)
        if not found.batched and found.rank is None:
            return Refusal(f"the rank of body output {index} is unknown")
        if found.ragged_axis is not None and not ragged_results:
            return Refusal(f"body output {index} is a slice whose bounds differ per element")
        outputs.append(found)
    return BodyPlan(body, tuple(seeds), tuple(steps), operands, tuple(results), tuple(outputs))


def _made_in_body(value: ir.Value, body: ir.Graph) -> bool:
    producer = value.producer()
    return (value.graph if producer is None else producer.graph) is body


def _reads_ragged_first(view: OpView) -> bool:
    """Whether the first input, and only it, is ragged (the ops of `RAGGED_RULES` read so)."""
    flags = [o is not None and o.ragged_axis is not None for o in view.operands]
    return bool(flags) and flags[0] and not any(flags[1:])


# ops that read a ragged value position by position, keeping its shape: the result is ragged
# along the same axis, padded the same way
_KEEPS_RAGGED_SHAPE = frozenset(
    """Abs Ceil Cos Erf Exp Floor Identity IsInf IsNaN Log Neg Not Reciprocal Relu Round Sigmoid
    Sign Sin Softplus Sqrt Tanh Cast Add Sub Mul Div Pow Max Min""".split()  # noqa: SIM905
)
_READS_RAGGED = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})


def _ragged_passed_on(view: OpView) -> tuple[ir.Value, int] | Refusal | None:
    """For an op that reads a ragged value: (that value, its ragged axis) when the op keeps its
    shape position by position (the other operands broadcast into it with one value along its
    ragged axis: `_fits_within`); None when the
    op reads it itself (a reduction, checked by its rule) or reads none; else why not."""
    ragged = [
        (value, operand)
        for value, operand in zip(view.node.inputs, view.operands)
        if operand is not None and operand.ragged_axis is not None
    ]
    if not ragged:
        return None
    if view.op_type in _READS_RAGGED and len(ragged) == 1 and view.operands[0] is ragged[0][1]:
        return None
    if view.op_type not in _KEEPS_RAGGED_SHAPE or len(ragged) != 1:
        return Refusal(
            f"{view.op_type} reads a slice whose bounds differ per element (only reductions "
            "over its sliced axis and elementwise ops read one)"
        )
    value, operand = ragged[0]
    divisor = view.op_type in ("Div", "Mod") and view.node.inputs.index(value) != 0
    if divisor and not (value.dtype is not None and value.dtype.is_floating_point()):
        # the padded positions hold what the slice left out (zeros, often): the original never
        # divides by them, an integer division of the padded stack would
        return Refusal(f"{view.op_type} divides by a slice whose bounds differ per element")
    for other in view.operands:
        if other is operand or other is None:
            continue
        if other.shape is None:
            return Refusal(f"{view.op_type} broadcasts a ragged slice against a tensor")
        if other.rank > operand.rank:  # type: ignore[operator]
            return Refusal(f"{view.op_type} raises the rank of a ragged slice")
        if not _fits_within(other.shape, operand.shape, operand.ragged_axis):  # type: ignore[arg-type]
            return Refusal(f"{view.op_type} broadcasts a ragged slice against a tensor")
    return value, operand.ragged_axis  # type: ignore[return-value]


def _fits_within(other: ir.Shape, ragged: ir.Shape, axis: int) -> bool:
    """Whether `other` broadcasts into the padded `ragged` shape without growing it and with one
    value along the ragged axis (`x - x.mean(a, keepdim=True)`): each of its dims, lined up from
    the right, is 1, or equals the ragged value's dim off its ragged axis. Then every position of
    an element meets the value it meets in the element alone."""
    offset = len(ragged) - len(other)
    for index, dim in enumerate(other):
        if dim == 1:
            continue
        if offset + index == axis or not same_dim(dim, ragged[offset + index]):
            return False
    return True


def _passing_mask_on(batched: Batched, source: ir.Value, result: ir.Value) -> Batched:
    """`batched` emitting also the mask of `source` as the mask of `result`."""

    def emit(em: Emitter, inputs: list[ir.Value | None]) -> list[ir.Value]:
        em.masks[result] = em.masks[source]
        return batched.emit(em, inputs)

    return dataclasses.replace(batched, emit=emit)


def emit_body(
    plan: BodyPlan, inputs: Sequence[ir.Value], em: Emitter, count_dim: int | ir.SymbolicDim | None
) -> list[ir.Value]:
    """Emit the batched region, fed `inputs` (one per `plan.inputs`); return one [N, *element]
    value per result."""
    mapping: dict[ir.Value, ir.Value] = dict(zip(plan.inputs, inputs))
    constants: dict[ir.Value, ir.Value] = {}

    def get(value: ir.Value | None) -> ir.Value | None:
        if value is None:
            return None
        if value in mapping:
            return mapping[value]
        if value.is_initializer() and value.graph is plan.body:
            if value not in constants:
                assert value.const_value is not None
                constant = em.op("Constant", [], {"value": value.const_value})
                constant.type, constant.shape = value.type, value.shape
                constants[value] = constant
            return constants[value]
        return value  # an outer-scope value

    for node, batched in plan.steps:
        inputs_now = [get(v) for v in node.inputs]
        if batched is not None and batched.captured:
            inputs_now += [get(v) for v in batched.captured]
        hoisted = batched is None
        results = _hoist(node, inputs_now, em) if hoisted else batched.emit(em, inputs_now)  # type: ignore[union-attr]
        if not hoisted and em.rows is not None and em.rows.holds(node.outputs[0]):
            operands = [None if v is None else plan.operands.get(v) for v in node.inputs]
            em.rows.record(node, inputs_now, operands, plan.operands[node.outputs[0]])
        for original, result in zip(node.outputs, results):
            _annotate(result, original, plan.operands[original], count_dim)
            mapping[original] = result
    outputs = []
    for output, operand in zip(plan.results, plan.outputs):
        value = get(output)
        assert value is not None
        if not operand.batched:
            value = em.broadcast(value, operand.rank)  # type: ignore[arg-type]
            _annotate(value, output, Operand(True, operand.shape), count_dim)
        outputs.append(value)
    return outputs


def _annotate(
    value: ir.Value, original: ir.Value, operand: Operand, count_dim: int | ir.SymbolicDim | None
) -> None:
    """Give a new value the type of the body value it stands for, and its batched shape."""
    if value.producer() is None or value.shape is not None:
        return
    if value.type is None:
        value.type = original.type
    if operand.shape is not None:
        value.shape = ir.Shape([count_dim, *operand.shape] if operand.batched else operand.shape)


def _hoist(node: ir.Node, inputs: list[ir.Value | None], em: Emitter) -> list[ir.Value]:
    """Emit a copy of a node that reads no batched value: it runs once for all elements."""
    names = em.builder.rewriter.names
    attributes = [ir.Attr(a.name, a.type, a.value) for a in node.attributes.values()]
    copy = ir.Node(
        node.domain,
        node.op_type,
        inputs,
        attributes,
        num_outputs=len(node.outputs),
        name=names.fresh(f"{em.builder.hint}/{node.name or node.op_type}"),
    )
    for new, old in zip(copy.outputs, node.outputs):
        new.name = names.fresh(f"{em.builder.hint}_{old.name or 'hoisted'}")
        new.type, new.shape = old.type, old.shape
    em.builder.add_node(copy)
    return list(copy.outputs)


def _label(node: ir.Node) -> str:
    op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
    return f"{op} '{node.name}'" if node.name else op
