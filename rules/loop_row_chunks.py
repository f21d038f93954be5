"""A Loop that maps consecutive row chunks of a tensor by row-wise operators, joining the
results by rows, is the map of the rows it walks: the operators run once, no iteration is left.

    Loop(T, true, a0.., body(i, c, a..):
         r = Slice(x, [i*k], [i*k + k], [0]); a' = Concat(a, f(r), axis=0) ..)
        -> If(m > 0, then: Concat(a0, f(Slice(x, [0], [m*k], [0])), axis=0) ..,
                     else: a0 ..)                  m = Min(Max(T, 0), Max(rows of x, 1))

This is nerf-pytorch's `batchify_rays` (`for i in range(0, n, chunk): ret = render(rays[i:i +
chunk]); all_ret.append(ret)`, then `torch.cat(all_ret, 0)`), after `loop-append-to-concat`
made its lists accumulators: chunks whose last one may be shorter, so no scan output and no
stack can hold them. f may hold elementwise operators whose other operands do not broadcast
along the rows, Slices, Gathers, reductions, CumSums, Concats and Softmaxes along other axes,
Unsqueezes and Squeezes of other axes, Transposes that keep the rows first, a MatMul of the
rows by a matrix the same in every iteration, and ConstantOfShape(Shape(t)) (`ones_like`).
Each of them computes row j of its result from row j of its row operands alone, so f of the
joined chunks is the join of f of each chunk, whatever the chunks' sizes.

Iteration i reads rows [i*k, i*k + k) clamped to the rows there are, so the T iterations read
rows [0, T*k). The Slice bound m*k, with m at most the rows of x (or 1 over no rows), never
overflows and reads the same rows; an iteration past the rows appends f of no rows, which
these operators give as rows of none (their other dims are the chunks'), failing only where a
chunk of rows fails. The If keeps a loop that runs no iteration from running f, and the
Concat with a0 fails where the first iteration's would. Refused: a chunk step k that
is not a positive constant, bounds not of that form, a loop that may stop early, a carried
value that is not such an accumulator, f reading another carried value or the iteration
number, an operator not in the list above or one that mixes rows, a subgraph in f.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses

import onnx_ir as ir

from seqlower.ops import peel_identity, subgraphs
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_chunks import BROADCASTING, UNARY, _whole_axis
from seqlower.rules.loop_parts import counted_loop_refusal, loop_body

REDUCTIONS = frozenset(
    {
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
        "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "ArgMax", "ArgMin",
    }
)  # fmt: skip
_AXES_INPUT_FROM = {"ReduceSum": 13}  # the other reductions take axes as an input from 18


@dataclasses.dataclass(frozen=True)
class RowChunks:
    data: ir.Value  # x, the tensor whose rows the loop walks
    step: int  # k, the rows of one chunk
    chunk: ir.Value  # the Slice of x in the body
    results: tuple[ir.Value, ...]  # f(chunk) appended to each accumulator
    region: tuple[ir.Node, ...]  # the body nodes f needs, in body order


def _check(node: ir.Node, ctx: Context) -> RowChunks | Refusal:
    body = loop_body(node)
    carried = len(node.inputs) - 2
    if carried < 1 or len(body.outputs) != carried + 1 or len(node.outputs) != carried:
        return Refusal("the loop carries no tensor, or has scan outputs")
    count = node.inputs[0]
    if count is None or count.shape is None or len(count.shape) != 0:
        return Refusal("the loop has no scalar trip count")
    refused = counted_loop_refusal(node, ctx)
    if refused is not None:
        return refused
    index = body.inputs[0]
    results = []
    for j in range(carried):
        state, update = body.inputs[2 + j], peel_identity(body.outputs[1 + j])
        concat = update.producer()
        if (
            concat is None
            or concat.graph is not body
            or concat.op_type != "Concat"
            or len(concat.inputs) != 2
            or concat.inputs[0] is not state
            or len(state.uses()) != 1
            or concat.inputs[1] is state
        ):
            return Refusal(f"carried value {j} is not grown by one Concat(it, piece) alone")
        rank = _rank(concat.outputs[0])
        if rank is None or concat.attributes.get_int("axis", 0) % rank != 0:
            return Refusal(f"carried value {j} is not grown along its first axis")
        results.append(concat.inputs[1])
    found = _chunk(body, index, ctx)
    if isinstance(found, Refusal):
        return found
    slice_node, data, step = found
    chunk = slice_node.outputs[0]
    region: set[ir.Node] = set()
    stack = list(results)
    while stack:
        value = stack.pop()
        producer = value.producer()
        if value is chunk or producer is None or producer.graph is not body:
            if value.graph is body and value is not chunk:  # a body input
                return Refusal("the appended tensors read the loop state or iteration number")
            continue
        if producer in region:
            continue
        if subgraphs(producer):
            return Refusal(f"body op {producer.op_type} holds a subgraph")
        region.add(producer)
        stack.extend(v for v in producer.inputs if v is not None)
    ordered = tuple(n for n in body if n in region)
    rows = {chunk}
    for region_node in ordered:
        if not any(v in rows for v in region_node.inputs):
            continue  # the same in every iteration: copied as it is
        why = _not_row_wise(region_node, rows, ctx)
        if why is not None:
            return Refusal(why)
        rows.update(region_node.outputs)
    if any(value not in rows for value in results):
        return Refusal("an appended tensor is not made from the chunk")
    return RowChunks(data, step, chunk, tuple(results), ordered)


def _rank(value: ir.Value) -> int | None:
    return None if value.shape is None else len(value.shape)


def _chunk(
    body: ir.Graph, index: ir.Value, ctx: Context
) -> tuple[ir.Node, ir.Value, int] | Refusal:
    """The one Slice(x, [i*k], [i*k + k], [0]) of an outer x in `body`, its x and its k."""
    starts = []
    for use in index.uses():
        mul = use.node
        if mul.op_type != "Mul" or mul.graph is not body:
            return Refusal("the iteration number is read other than as i*k")
        step = ctx.facts.values.get_int(mul.inputs[1 - use.idx])
        if step is None or step < 1:
            return Refusal("the chunk step is not a positive constant")
        starts.append((mul.outputs[0], step))
    if len(starts) != 1:
        return Refusal("the iteration number is not read once, as i*k")
    start, step = starts[0]
    ends = []
    for use in start.uses():
        reader = use.node
        if reader.op_type == "Add":
            if ctx.facts.values.get_int(reader.inputs[1 - use.idx]) != step:
                return Refusal("a chunk's end is not its start plus the chunk step")
            ends.append(reader.outputs[0])
    adds = {end.producer() for end in ends}
    begins = [use for use in _through_unsqueeze(start) if use.node not in adds]
    for role, uses in [(1, begins), *((2, _through_unsqueeze(end)) for end in ends)]:
        if any(use.node.op_type != "Slice" or use.idx != role for use in uses):
            return Refusal("a chunk bound is read other than by the Slice")
    bounded = {use.node for end in ends for use in _through_unsqueeze(end)}
    begun = {use.node for use in begins}
    if len(bounded) != 1 or bounded != begun:
        return Refusal("the chunk is not one Slice from i*k to i*k + k")
    (slice_node,) = bounded
    data = slice_node.inputs[0]
    if data is None or data.graph is body or _rank(data) is None:
        return Refusal("the chunk is not a slice of a tensor from outside the loop")
    rest = [ctx.facts.values.get_ints(v) if v is not None else None for v in slice_node.inputs[3:]]
    axes = rest[0] if rest else None
    steps = rest[1] if len(rest) > 1 else None
    if len(slice_node.inputs) > 3 and slice_node.inputs[3] is not None and axes is None:
        return Refusal("the chunk's Slice axes are computed at run time")
    if axes is not None and (len(axes) != 1 or axes[0] % len(data.shape) != 0):  # type: ignore[arg-type]
        return Refusal("the chunk is not cut along the first axis")
    if len(slice_node.inputs) > 4 and slice_node.inputs[4] is not None and steps != [1]:
        return Refusal("the chunk's Slice has a step other than 1")
    return slice_node, data, step


def _through_unsqueeze(value: ir.Value) -> list:
    """The uses of `value`, looking through the Unsqueeze or Reshape that makes it 1-D."""
    found = []
    for use in value.uses():
        if use.node.op_type in ("Unsqueeze", "Reshape") and use.idx == 0:
            found.extend(use.node.outputs[0].uses())
        else:
            found.append(use)
    return found


def _not_row_wise(node: ir.Node, rows: set[ir.Value], ctx: Context) -> str | None:
    """Why `node`, reading a value made from the chunk, may mix rows or move them from the
    first axis; None when row j of each output is made from row j of its row inputs alone."""
    op = node.op_type
    if node.domain != "":
        return f"body op {op} is not row-wise"
    ins = node.inputs
    rank = _rank(node.outputs[0]) if node.outputs else None
    if op in UNARY or op in BROADCASTING:
        if rank is None or rank == 0:
            return f"body op {op}: the rank of its result is unknown or 0"
        for operand in ins:
            if operand is None or operand in rows:
                continue
            own = _rank(operand)
            if own is None:
                return f"the rank of operand '{operand.name}' is unknown"
            if own == rank and (operand.shape[0] != 1):  # type: ignore[index]
                return f"operand '{operand.name}' may broadcast along the rows"
        if any(v in rows and _rank(v) != rank for v in ins if v is not None):
            return f"body op {op} broadcasts a row operand to a higher rank"
        return None
    if any(v in rows for v in ins[1:] if v is not None) and op not in ("Concat", "MatMul"):
        return f"body op {op} reads the chunk other than as its data"
    source = ins[0]
    if source is None or source not in rows or _rank(source) is None:
        return f"body op {op} does not read the rows as its data"
    r = _rank(source)
    assert r is not None
    if op == "Shape":
        uses = node.outputs[0].uses()
        if "start" in node.attributes or "end" in node.attributes:
            return "body op Shape reads part of a shape"
        if not uses or any(use.node.op_type != "ConstantOfShape" for use in uses):
            return "body op Shape is not read as the shape of a tensor of one value"
        return None
    if op == "ConstantOfShape":
        shape = source.producer()
        if shape is None or shape.op_type != "Shape":
            return "body op ConstantOfShape is not the shape of a value of the map"
        return None  # `ones_like` of rows: the Shape is checked where it is made
    if op == "MatMul":
        other = ins[1]
        if other is None or other in rows or _rank(other) is None or r < 2 or _rank(other) > 2:  # type: ignore[operator]
            return "body op MatMul does not multiply the rows by one matrix"
        return None
    if op in ("Slice", "Gather", "CumSum", "Softmax", "LogSoftmax", "Hardmax", "Concat"):
        return _along_other_axes(node, r, rows, ctx)
    if op in REDUCTIONS:
        return _reduction(node, r, ctx)
    if op in ("Unsqueeze", "Squeeze"):
        axes = _axes(node, 1, ctx)
        if axes is None:
            return f"body op {op} has no constant axes"
        out = r + len(axes) if op == "Unsqueeze" else r
        if any(a % out == 0 for a in axes):
            return f"body op {op} moves the rows from the first axis"
        return None
    if op == "Transpose":
        perm = node.attributes.get_ints("perm")
        if perm is None or perm[0] != 0:
            return "body op Transpose moves the rows from the first axis"
        return None
    return f"body op {op} is not row-wise"


def _axes(node: ir.Node, at: int, ctx: Context) -> list[int] | None:
    """A node's constant axes: its attribute, or its input `at` (None if run-time or absent)."""
    if len(node.inputs) > at and node.inputs[at] is not None:
        return ctx.facts.values.get_ints(node.inputs[at])
    return node.attributes.get_ints("axes")


def _along_other_axes(node: ir.Node, r: int, rows: set[ir.Value], ctx: Context) -> str | None:
    op = node.op_type
    if op == "Slice":
        axes = _axes(node, 3, ctx)
        starts = ctx.facts.values.get_ints(node.inputs[1]) if node.inputs[1] is not None else None
        if axes is None and starts is not None and len(node.inputs) <= 3:
            axes = list(range(len(starts)))
        if axes is None:
            return "body op Slice has axes computed at run time"
        arrays = [ctx.facts.values.get(v) for v in node.inputs[1:]]
        for k, a in enumerate(axes):  # along the rows, only the whole of them (`t[:, :3]`)
            if a % r == 0 and not _whole_axis(arrays, k):
                return "body op Slice cuts along the rows"
        return None
    if op == "Concat":
        if any(v is None or v not in rows for v in node.inputs):
            return "body op Concat joins the rows with a tensor the same in every iteration"
        axis = node.attributes.get_int("axis", 0)
    elif op == "CumSum":
        found = ctx.facts.values.get_int(node.inputs[1])
        if found is None:
            return "body op CumSum has an axis computed at run time"
        axis = found
    elif op == "Gather":
        axis = node.attributes.get_int("axis", 0)
    else:
        axis = node.attributes.get_int("axis", -1 if ctx.rewriter.opset(node.graph) >= 13 else 1)
    if axis % r == 0:
        return f"body op {op} works along the rows"
    return None


def _reduction(node: ir.Node, r: int, ctx: Context) -> str | None:
    op = node.op_type
    if op in ("ArgMax", "ArgMin"):
        axes = [node.attributes.get_int("axis", 0)]
    else:
        from_input = _AXES_INPUT_FROM.get(op, 18) <= ctx.rewriter.opset(node.graph)
        axes = _axes(node, 1, ctx) if from_input else node.attributes.get_ints("axes")
    if not axes:
        return f"body op {op} reduces every axis"
    if any(a % r == 0 for a in axes):
        return f"body op {op} reduces the rows"
    return None


def _map_rows(node: ir.Node, plan: RowChunks, ctx: Context) -> None:
    """Loop(T, true, a0.., body: a' = Concat(a, f(Slice(x, [i*k], [i*k + k], [0])), axis=0) ..)
    -> If(m > 0, then: Concat(a0, f(Slice(x, [0], [m*k], [0])), axis=0) .., else: a0 ..),
       m = Min(Max(T, 0), Max(rows of x, 1))"""
    builder = ctx.rewriter.before(node)
    count = node.inputs[0]
    assert count is not None
    zero = builder.constant(0, "zero")
    rows = builder.op("Gather", [builder.op("Shape", [plan.data]), zero], {"axis": 0})
    # no more iterations than rows (so m*k cannot overflow), but one over no rows: the loop
    # then runs f on an empty chunk, which fails or gives what the rows of none give
    cap = builder.op("Max", [rows, builder.constant(1, "one")])
    runs = builder.op("Min", [builder.op("Max", [_int64(builder, count), zero]), cap])
    end = builder.op("Mul", [runs, builder.constant(plan.step, "chunk")], name="rows_read")
    any_run = builder.op("Greater", [runs, zero], name="runs")
    then = ctx.rewriter.new_graph(f"{builder.hint}_rows", builder.opset)
    mapping: dict[ir.Value, ir.Value] = {
        plan.chunk: then.op(
            "Slice", [plan.data, then.ints([0]), then.unsqueeze(end, [0]), then.ints([0])]
        )
    }
    for body_node in plan.region:
        if body_node is plan.chunk.producer():
            continue
        then.copy(body_node, mapping)
    orelse = ctx.rewriter.new_graph(f"{builder.hint}_no_rows", builder.opset)
    for j, result in enumerate(plan.results):
        initial = node.inputs[2 + j]
        assert initial is not None
        joined = then.op("Concat", [initial, mapping.get(result, result)], {"axis": 0})
        joined.type = node.outputs[j].type
        then.graph.outputs.append(joined)
        kept = orelse.op("Identity", [initial], name="initial")
        kept.type = node.outputs[j].type
        orelse.graph.outputs.append(kept)
    branches = {"then_branch": then.graph, "else_branch": orelse.graph}
    outputs = builder.ops("If", [any_run], branches, num_outputs=len(node.outputs), name="rows")
    for old, new in zip(node.outputs, outputs, strict=True):
        new.type, new.shape = old.type, old.shape
        ctx.rewriter.replace(old, new)


def _int64(builder: Builder, value: ir.Value) -> ir.Value:
    if value.dtype == ir.DataType.INT64:
        return value
    return builder.op("Cast", [value], {"to": int(ir.DataType.INT64)})


RULES = RuleSet([Rule("loop-batch-row-chunks", "Loop", _check, _map_rows)])
