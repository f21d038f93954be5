"""A Loop that maps each chunk of a split by elementwise operators is the split of the mapped
tensor: the operators run once, on the whole tensor, and no iteration is left.

    Loop(SequenceLength(xs), true, SequenceEmpty(),
         body(i, c, s): s' = SequenceInsert(s, f(SequenceAt(xs, i))))
        -> SplitToSequence(f(x), split, axis=a)     (xs = SplitToSequence(x, split, axis=a))

f is made of elementwise operators only (`UNARY`, `BROADCASTING`); the operands that do not come
from the chunk are the same in every iteration (outer values or constants) and broadcast
without a dim on the split axis (of rank at most the chunk's, with a dim of 1 or none there).
Then f commutes with slicing along the split axis, and element i of the result is f(xs[i]) for
chunks of any sizes (`x.split(2)` of an odd dim, run-time sizes), which loop-batch, needing
one stack of equal elements, does not take. The trip count must be the length of the split read,
the condition must stay true, the list must start empty and get one append per iteration.

Refused: a scalar split with keepdims=0 (onnxruntime squeezes its chunks, design trap 1), an
operator that is not elementwise or an operand that broadcasts along the split axis, a body that
does more than the map (another carried value, a scan output, a read at another position).
"""

from __future__ import annotations

__all__ = ["RULES", "plan_chunk_map"]

import dataclasses

import onnx_ir as ir

from seqlower.ops import peel_identity
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loops import _body, _body_always_continues, _static_bool, single_append

UNARY = frozenset(
    {
        "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Ceil", "Celu", "Cos",
        "Cosh", "Elu", "Erf", "Exp", "Floor", "HardSigmoid", "HardSwish", "Identity", "IsInf",
        "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu",
        "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh",
        "ThresholdedRelu",
    }
)  # fmt: skip
BROADCASTING = frozenset(
    {
        "Add", "And", "Clip", "Div", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual",
        "Max", "Mean", "Min", "Mul", "Or", "Pow", "PRelu", "Sub", "Sum", "Where", "Xor",
    }
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ChunkMap:
    split: ir.Node  # the SplitToSequence whose chunks are mapped
    chunk: ir.Value  # SequenceAt(xs, i) in the body
    result: ir.Value  # f(chunk), appended
    region: tuple[ir.Node, ...]  # the body nodes of f, in body order


def _check(node: ir.Node, ctx: Context) -> ChunkMap | Refusal:
    body = _body(node)
    if len(node.inputs) != 3 or len(node.outputs) != 1 or len(body.outputs) != 2:
        return Refusal("the loop carries more than one list, or has scan outputs")
    count, cond, initial = node.inputs
    if cond is not None and _static_bool(cond, ctx) is not True:
        return Refusal("the loop condition is computed at run time")
    if not _body_always_continues(body, ctx):
        return Refusal("the body may end the loop early")
    if initial is None or ctx.known_elements(initial) != ():
        return Refusal("the list does not start empty")
    index, _, state = body.inputs
    insert = single_append(peel_identity(body.outputs[1]), state, body)
    if insert is None:
        return Refusal("the body does not append once to the list it carries")
    reads = [use.node for use in index.uses()]
    if len(reads) != 1 or reads[0].op_type != "SequenceAt" or reads[0].domain != "":
        return Refusal("the iteration number is used other than to read one list")
    read = reads[0]
    if read.inputs[1] is not index or read.graph is not body or read.inputs[0] is None:
        return Refusal("the iteration number is used other than to read one list")
    sequence = read.inputs[0]
    split = sequence.producer()
    if split is None or split.op_type != "SplitToSequence" or split.domain != "":
        return Refusal("the list read is not a SplitToSequence")
    length = None if count is None else peel_identity(count).producer()
    if length is None or length.op_type != "SequenceLength" or length.inputs[0] is not sequence:
        return Refusal("the trip count is not the length of the list read")
    return _plan(body, split, read.outputs[0], insert.inputs[1], insert, ctx)


def _plan(  # type: ignore[no-untyped-def]
    body: ir.Graph, split: ir.Node, chunk: ir.Value, result: ir.Value, insert: ir.Node, ctx
) -> ChunkMap | Refusal:
    data = split.inputs[0]
    sizes = split.inputs[1] if len(split.inputs) > 1 else None
    if data is None or data.shape is None or sizes is None or sizes.shape is None:
        return Refusal("the split has no 'split' input, or a rank is unknown")
    if len(sizes.shape) == 0 and split.attributes.get_int("keepdims", 1) == 0:
        return Refusal("a scalar split with keepdims=0: onnxruntime squeezes its chunks")
    rank = len(data.shape)
    axis = split.attributes.get_int("axis", 0) % rank
    region: set[ir.Node] = set()
    stack = [result]
    while stack:
        value = stack.pop()
        producer = value.producer()
        if value is chunk or producer is None or producer.graph is not body:
            if value.graph is body and value is not chunk:  # a body input
                return Refusal("the appended tensor reads the loop state")
            continue
        if producer in region:
            continue
        if producer.domain != "" or producer.op_type not in UNARY | BROADCASTING | {"Constant"}:
            return Refusal(f"body op {producer.op_type} is not elementwise")
        region.add(producer)
        stack.extend(v for v in producer.inputs if v is not None)
    reads_chunk = _from_chunk(region, chunk)
    for region_node in region:
        if region_node.op_type == "Constant":
            continue
        if region_node not in reads_chunk:
            return Refusal(f"body op {region_node.op_type} is the same in every iteration")
        for operand in region_node.inputs:
            if operand is None or operand is chunk or operand.producer() in reads_chunk:
                continue
            why = _broadcast_refusal(operand, rank, axis)
            if why is not None:
                return Refusal(why)
        for output in region_node.outputs:
            if any(use.node not in region and use.node is not insert for use in output.uses()):
                return Refusal("a value of the map is read by more than the map")
    others = [n for n in body if n not in region and n is not insert and n is not chunk.producer()]
    if any(n.op_type not in ("Identity", "Constant") for n in others):
        return Refusal("the body does more than map the chunks")
    return ChunkMap(split, chunk, result, tuple(n for n in body if n in region))


def _from_chunk(region: set[ir.Node], chunk: ir.Value) -> set[ir.Node]:
    """The nodes of `region` that read the chunk, directly or through others."""
    found: set[ir.Node] = set()
    changed = True
    while changed:
        changed = False
        for node in region:
            if node not in found and any(
                v is chunk or (v is not None and v.producer() in found) for v in node.inputs
            ):
                found.add(node)
                changed = True
    return found


def _broadcast_refusal(operand: ir.Value, rank: int, axis: int) -> str | None:
    """Why an operand the same in every iteration may broadcast along the split axis."""
    shape = operand.shape
    if shape is None:
        return f"the rank of operand '{operand.name}' is unknown"
    if len(shape) > rank:
        return f"operand '{operand.name}' has a higher rank than the chunks"
    position = axis - (rank - len(shape))
    if position >= 0 and shape[position] != 1:
        return f"operand '{operand.name}' may broadcast along the split axis"
    return None


def _map_chunks(node: ir.Node, plan: ChunkMap, ctx: Context) -> None:
    """Loop(SequenceLength(xs), true, SequenceEmpty(), body: s' = SequenceInsert(s, f(xs[i])))
    -> SplitToSequence(f(x), split, axis=a)   (xs = SplitToSequence(x, split, axis=a))
    -> xs                                     (f(t) = t)"""
    if not plan.region:  # the chunks appended unchanged: the list is the split itself
        ctx.rewriter.replace(node.outputs[0], plan.split.outputs[0])
        return
    builder = ctx.rewriter.before(node)
    names = ctx.rewriter.names
    mapping: dict[ir.Value, ir.Value] = {plan.chunk: plan.split.inputs[0]}  # type: ignore[dict-item]
    for body_node in plan.region:
        inputs = [None if v is None else mapping.get(v, v) for v in body_node.inputs]
        attributes = list(body_node.attributes.values())
        copy = ir.Node(
            "",
            body_node.op_type,
            inputs,
            attributes,
            num_outputs=len(body_node.outputs),
            name=names.fresh(f"{builder.hint}/{body_node.op_type}"),
        )
        for old, new in zip(body_node.outputs, copy.outputs, strict=True):
            new.name = names.fresh(f"{builder.hint}_{old.name}")
            new.type = old.type
            mapping[old] = new
        builder.add_node(copy)
    mapped = mapping[plan.result]
    split_inputs = [mapped, *plan.split.inputs[1:]]
    attributes = {a.name: a for a in plan.split.attributes.values()}
    chunks = builder.op("SplitToSequence", split_inputs, attributes, name="mapped_chunks")
    chunks.type = node.outputs[0].type
    ctx.rewriter.replace(node.outputs[0], chunks)


plan_chunk_map = _check  # for loop-batch, which leaves such maps to this rule

RULES = RuleSet([Rule("loop-batch-chunks", "Loop", _check, _map_chunks, before_producers=True)])
