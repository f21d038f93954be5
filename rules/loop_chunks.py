"""A Loop that maps each chunk of a split by elementwise operators is the split of the mapped
tensor: the operators run once, on the whole tensor, and no iteration is left.

    Loop(SequenceLength(xs), true, SequenceEmpty(),
         body(i, c, s): s' = SequenceInsert(s, f(SequenceAt(xs, i))))
        -> SplitToSequence(f(x), split, axis=a)     (xs = SplitToSequence(x, split, axis=a))

    Loop(.., body: s' = SequenceInsert(s, g(xs[i], i)))        (the iteration number read too)
        -> SplitToSequence(g(x, segment ids of the rows), split, axis=a)

f is made of elementwise operators (`UNARY`, `BROADCASTING`), Slices along other axes than the
split axis with constant bounds (`b[:, :1]`), and ConstantOfShape(Shape(t)) (`zeros_like`,
`full_like`); the operands that do not come from the chunk are the same in every iteration
(outer values or constants) and broadcast without a dim on the split axis (of rank at most the
chunk's, with a dim of 1 or none there). Then f commutes with slicing along the split axis, and
element i of the result is f(xs[i]) for chunks of any sizes (`x.split(2)` of an odd dim,
run-time sizes), which loop-batch, needing one stack of equal elements, does not take. The
iteration number i may be read as a number too (`for i, b in enumerate(x.split(sizes)):
ids.append(torch.full_like(b[:, :1], i))`, torchvision's `_convert_to_roi_format`): in the
whole tensor it is the index of the chunk that holds each row along the split axis, the
number of chunk ends at or before the row (a run-time size vector), or row // size (a scalar
size). The trip count must be the length of the split read (or TorchScript's `enumerate` bound
of it), the condition must stay true, the list must start empty and get one append per
iteration.

Refused: a scalar split with keepdims=0 (onnxruntime squeezes its chunks, design trap 1), an
operator that is not elementwise or an operand that broadcasts along the split axis, a Slice
along the split axis or with bounds computed at run time, a result made from the iteration
number alone, a body that does more than the map (another carried value, a scan output, a read
at another position).
"""

from __future__ import annotations

__all__ = ["RULES", "plan_chunk_map"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.ops import peel_identity
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_parts import counted_loop_refusal, loop_body, single_append

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
    index: ir.Value | None = None  # the iteration number, where f reads it as a number
    # the Slice bounds of f, computed in the body from constants: their values
    bounds: tuple[tuple[ir.Value, np.ndarray], ...] = ()


def _check(node: ir.Node, ctx: Context) -> ChunkMap | Refusal:
    body = loop_body(node)
    if len(node.inputs) != 3 or len(node.outputs) != 1 or len(body.outputs) != 2:
        return Refusal("the loop carries more than one list, or has scan outputs")
    count, _, initial = node.inputs
    refused = counted_loop_refusal(node, ctx)
    if refused is not None:
        return refused
    if initial is None or ctx.known_elements(initial) != ():
        return Refusal("the list does not start empty")
    index, _, state = body.inputs
    insert = single_append(peel_identity(body.outputs[1]), state, body)
    if insert is None:
        return Refusal("the body does not append once to the list it carries")
    reads = [
        use.node
        for use in index.uses()
        if use.node.op_type == "SequenceAt" and use.node.domain == "" and use.idx == 1
    ]
    if len(reads) != 1 or reads[0].graph is not body or reads[0].inputs[0] is None:
        return Refusal("the iteration number is used other than to read one list")
    read = reads[0]
    sequence = read.inputs[0]
    split = sequence.producer()
    if split is None or split.op_type != "SplitToSequence" or split.domain != "":
        return Refusal("the list read is not a SplitToSequence")
    if count is None or not _counts(count, sequence, ctx):
        return Refusal("the trip count is not the length of the list read")
    numbered = any(use.node is not read for use in index.uses())
    return _plan(body, split, read.outputs[0], insert.inputs[1], insert, ctx, numbered)


_NO_BOUND = 2**62  # TorchScript's `enumerate` bounds its counter by the largest int64


def _counts(count: ir.Value, sequence: ir.Value, ctx: Context) -> bool:
    """Whether `count` is SequenceLength(sequence), or TorchScript's trip count of
    `enumerate(sequence)`: ReduceMin(Concat(bound, Unsqueeze(SequenceLength(sequence))),
    keepdims=0) with a constant bound no list reaches."""
    node = peel_identity(count).producer()
    if node is None or node.domain != "":
        return False
    if node.op_type == "SequenceLength":
        return node.inputs[0] is sequence
    if node.op_type != "ReduceMin" or node.attributes.get_int("keepdims", 1) != 0:
        return False
    axes = node.attributes.get_ints("axes")
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = ctx.facts.values.get_ints(node.inputs[1])
    concat = node.inputs[0].producer() if node.inputs[0] is not None else None
    if axes not in (None, [0], [-1]) or concat is None or concat.op_type != "Concat":
        return False
    lengths = 0
    for piece in concat.inputs:
        bound = None if piece is None else ctx.facts.values.get_ints(piece)
        if bound is not None and len(bound) == 1 and bound[0] >= _NO_BOUND:
            continue
        unsqueeze = None if piece is None else piece.producer()
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or unsqueeze.inputs[0] is None:
            return False
        length = unsqueeze.inputs[0].producer()
        if length is None or length.op_type != "SequenceLength":
            return False
        if length.inputs[0] is not sequence or unsqueeze.inputs[0].shape != ir.Shape([]):
            return False
        lengths += 1
    return lengths >= 1


def _plan(  # type: ignore[no-untyped-def]
    body: ir.Graph,
    split: ir.Node,
    chunk: ir.Value,
    result: ir.Value,
    insert: ir.Node,
    ctx,
    numbered: bool = False,
) -> ChunkMap | Refusal:
    data = split.inputs[0]
    sizes = split.inputs[1] if len(split.inputs) > 1 else None
    if data is None or data.shape is None or sizes is None or sizes.shape is None:
        return Refusal("the split has no 'split' input, or a rank is unknown")
    if len(sizes.shape) == 0 and split.attributes.get_int("keepdims", 1) == 0:
        return Refusal("a scalar split with keepdims=0: onnxruntime squeezes its chunks")
    rank = len(data.shape)
    axis = split.attributes.get_int("axis", 0) % rank
    index = body.inputs[0] if numbered else None
    region: set[ir.Node] = set()
    bounds: dict[ir.Value, np.ndarray] = {}
    stack = [result]
    while stack:
        value = stack.pop()
        producer = value.producer()
        if value is chunk or value is index or producer is None or producer.graph is not body:
            if value.graph is body and value is not chunk and value is not index:  # a body input
                return Refusal("the appended tensor reads the loop state")
            continue
        if producer in region:
            continue
        why = _not_mapped(producer, rank, axis, bounds, ctx)
        if why is not None:
            return Refusal(why)
        region.add(producer)
        read = producer.inputs[:1] if producer.op_type == "Slice" else producer.inputs
        stack.extend(v for v in read if v is not None)
    reads_chunk = _from_chunk(region, chunk)
    reads_index = _from_chunk(region, index) if index is not None else set()
    if result is not chunk and result.producer() not in reads_chunk:
        return Refusal("the appended tensor is not made from the chunk")
    for region_node in region:
        if region_node.op_type == "Constant":
            continue
        if region_node not in reads_chunk | reads_index:
            return Refusal(f"body op {region_node.op_type} is the same in every iteration")
        if region_node in reads_chunk and region_node.op_type in BROADCASTING:
            for operand in region_node.inputs:
                if operand is None or operand is chunk or operand.producer() in reads_chunk:
                    continue
                why = _broadcast_refusal(operand, rank, axis)
                if why is not None:
                    return Refusal(why)
        elif region_node not in reads_chunk and region_node.op_type not in UNARY | BROADCASTING:
            return Refusal(f"body op {region_node.op_type} reads the iteration number")
        for output in region_node.outputs:
            if any(use.node not in region and use.node is not insert for use in output.uses()):
                return Refusal("a value of the map is read by more than the map")
    others = [n for n in body if n not in region and n is not insert and n is not chunk.producer()]
    if any(n.op_type not in ("Identity", "Constant") and not _static(n, ctx) for n in others):
        return Refusal("the body does more than map the chunks")
    return ChunkMap(
        split,
        chunk,
        result,
        tuple(n for n in body if n in region),
        index,
        tuple(bounds.items()),
    )


def _not_mapped(
    node: ir.Node, rank: int, axis: int, bounds: dict[ir.Value, np.ndarray], ctx: Context
) -> str | None:
    """Why `node` does not commute with slicing along the split axis, or None: an elementwise
    op, a Slice along other axes with constant bounds (kept in `bounds`), ConstantOfShape of
    the Shape of a value of the map."""
    if node.domain != "":
        return f"body op {node.op_type} is not elementwise"
    if node.op_type in UNARY | BROADCASTING | {"Constant"}:
        return None
    if node.op_type == "Shape":
        if "start" in node.attributes or "end" in node.attributes:
            return "body op Shape reads part of a shape"
        uses = node.outputs[0].uses()
        if not uses or any(use.node.op_type != "ConstantOfShape" for use in uses):
            return "body op Shape is not read as the shape of a tensor of one value"
        return None
    if node.op_type == "ConstantOfShape":
        shape = node.inputs[0].producer() if node.inputs and node.inputs[0] is not None else None
        if shape is None or shape.op_type != "Shape" or shape.graph is not node.graph:
            return "body op ConstantOfShape is not the shape of a value of the map"
        return None
    if node.op_type != "Slice":
        return f"body op {node.op_type} is not elementwise"
    arrays = []
    for value in node.inputs[1:]:
        array = None if value is None else ctx.facts.values.get(value)
        if value is not None and (array is None or array.dtype.kind not in "iu"):
            return "body op Slice has bounds computed at run time"
        arrays.append(array)
    starts = arrays[0]
    axes = arrays[2] if len(arrays) > 2 and arrays[2] is not None else None
    if starts is None:
        return "body op Slice has bounds computed at run time"
    listed = range(starts.size) if axes is None else [int(a) for a in axes.reshape(-1)]
    if any(not -rank <= a < rank for a in listed):
        return "body op Slice has an axis out of range"
    for k, a in enumerate(listed):  # along the split axis, only the whole of it (`b[:, :1]`)
        if a % rank == axis and not _whole_axis(arrays, k):
            return "body op Slice cuts along the split axis"
    for value, array in zip(node.inputs[1:], arrays, strict=False):
        if value is not None and array is not None:
            bounds[value] = array
    return None


def _whole_axis(arrays: list[np.ndarray | None], k: int) -> bool:
    """Whether entry k of a Slice's (starts, ends, axes, steps) keeps its whole axis: from 0 to
    an end no dim reaches (TorchScript's `:`), by steps of 1."""
    starts, ends = arrays[0], arrays[1] if len(arrays) > 1 else None
    steps = arrays[3] if len(arrays) > 3 else None
    if starts is None or ends is None or starts.size != ends.size:
        return False
    step = 1 if steps is None else int(steps.reshape(-1)[k])
    return int(starts.reshape(-1)[k]) == 0 and int(ends.reshape(-1)[k]) >= _NO_BOUND and step == 1


def _static(node: ir.Node, ctx: Context) -> bool:
    """A body node whose outputs are constants (a Slice bound made by Unsqueeze)."""
    return all(ctx.facts.values.get(output) is not None for output in node.outputs)


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
    -> xs                                     (f(t) = t)
    f(xs[i], i) -> SplitToSequence(f(x, the chunk of each row, checked), split, axis=a)"""
    if not plan.region:  # the chunks appended unchanged: the list is the split itself
        ctx.rewriter.replace(node.outputs[0], plan.split.outputs[0])
        return
    builder = ctx.rewriter.before(node)
    mapping: dict[ir.Value, ir.Value] = {plan.chunk: plan.split.inputs[0]}  # type: ignore[dict-item]
    for value, array in plan.bounds:
        mapping[value] = builder.constant(array, "bound")
    if plan.index is not None:
        mapping[plan.index] = _segment_ids(plan.split, builder)
    for body_node in plan.region:
        builder.copy(body_node, mapping)
    mapped = mapping[plan.result]
    split_inputs = [mapped, *plan.split.inputs[1:]]
    attributes = {a.name: a for a in plan.split.attributes.values()}
    chunks = builder.op("SplitToSequence", split_inputs, attributes, name="mapped_chunks")
    chunks.type = node.outputs[0].type
    ctx.rewriter.replace(node.outputs[0], chunks)


def _segment_ids(split: ir.Node, builder: Builder) -> ir.Value:
    """The chunk of each row of the split tensor x along the split axis a, shaped to broadcast
    as the iteration number does against a chunk ([1.., rows, 1..] of x's rank): for 1-D sizes
    the number of chunk ends at or before the row (rows of an empty chunk belong to none), for
    a scalar size s, row // max(s, 1). The ids fail where the split fails (the loop read its
    chunks; a concatenation of the mapped split may fold it away): on a Gather from a table of
    one zero at Max(Sum(|sizes|) - dim, dim - Sum(sizes)), 0 exactly for sizes that are all
    >= 0 and add up to the dim, or at Max(1 - s, 0) for a scalar size."""
    data, sizes = split.inputs[0], split.inputs[1]
    assert data is not None and data.shape is not None and sizes is not None
    rank = len(data.shape)
    axis = split.attributes.get_int("axis", 0) % rank
    dim = builder.op("Shape", [data])
    dim = builder.op("Gather", [dim, builder.constant(np.array(axis, np.int64), "axis")])
    zero = builder.constant(np.array(0, np.int64), "zero")
    one = builder.constant(np.array(1, np.int64), "one")
    rows = builder.op("Range", [zero, dim, one], name="rows")
    scalar = sizes.shape is not None and len(sizes.shape) == 0
    sizes = builder.op("Cast", [sizes], {"to": int(ir.DataType.INT64)})
    if scalar:
        ids = builder.op("Div", [rows, builder.op("Max", [sizes, one])], name="segment_ids")
        bad = builder.op("Max", [builder.op("Sub", [one, sizes]), zero])
    else:
        ends = builder.op("CumSum", [sizes, zero], name="ends")
        after = builder.op("Greater", [builder.unsqueeze(ends, [0]), builder.unsqueeze(rows, [1])])
        ended = builder.op("Cast", [builder.op("Not", [after])], {"to": int(ir.DataType.INT64)})
        ids = _sum(builder, ended, [1])
        magnitude = _sum(builder, builder.op("Abs", [sizes]), [0])
        bad = builder.op(
            "Max",
            [
                builder.op("Sub", [magnitude, dim]),
                builder.op("Sub", [dim, _sum(builder, sizes, [0])]),
            ],
        )
    table = builder.ints([0], "zero_table")
    check = builder.op(
        "Gather", [table, builder.unsqueeze(bad, [0])], {"axis": 0}, name="split_check"
    )
    target = [1] * rank
    target[axis] = -1
    checked = builder.op("Add", [ids, check], name="segment_ids")
    shaped = builder.op("Reshape", [checked, builder.ints(target)], name="segment_ids")
    shaped.type = ir.TensorType(ir.DataType.INT64)
    return shaped


def _sum(builder: Builder, value: ir.Value, axes: list[int]) -> ir.Value:
    """ReduceSum over `axes`, dropping them (axes an input from opset 13)."""
    if builder.opset >= 13:
        return builder.op("ReduceSum", [value, builder.ints(axes)], {"keepdims": 0})
    return builder.op("ReduceSum", [value], {"axes": axes, "keepdims": 0})


plan_chunk_map = _check  # for loop-batch, which leaves such maps to this rule

RULES = RuleSet([Rule("loop-batch-chunks", "Loop", _check, _map_chunks, before_producers=True)])
