"""A Loop over the elements of a ragged list held as tensors (flat rows and a table of sizes)
whose body works row by row is its body run once on the flat rows, the iteration number of
each row being the element that holds it (its segment id).

    Loop(M, true, acc0, body(i, c, acc): acc' = Concat(acc, f(Slice(x, starts[i], ends[i]), i)))
        -> Concat(acc0, f(x[:T], ids))
           ends = CumSum(sizes), starts = ends - sizes, T = Sum(sizes),
           ids = repeat(Range(0, n), sizes) = CumSum(ScatterElements(zeros [T + 1], ends, 1,
           "add"))[:rows(x[:T])] (`seqlower.batching.segments.ids_of_sizes`: linear in T + n;
           cut to the rows x holds, as each Slice clamps to them where the sizes run past);
           where the list tier made x and the sizes as one list (`Rewriter.holds_rows_of`:
           T == rows(x)), x itself (x[:T] where a zip cuts the table) and ids [:T], no clamp
    ConstantOfShape(Gather(sizes, [i]))  (a vector of sizes[i] entries)
        -> ConstantOfShape(T)
    Add(ConstantOfShape(s) of zeros, i)  (`full_like(t, i)`, s = Shape(t) or [sizes[i]])
        -> Expand(Unsqueeze(ids, [1..r-1]), Shape(t')); for [sizes[i]]: ids
    acc' = Concat(acc, Reshape(f(..), [-1]))  (a list of tensors held flat)
        -> Concat(acc0, Reshape(f(x[:T], ids), [-1]))
    scan output Reshape(Shape(f(..)), [1, -1])  (that list's table of shapes)
        -> Unsqueeze(Concat(Unsqueeze(held, 1), Expand(Shape(f(x[:T], ids))[1:], [n, r - 1]),
           axis 1), 1)      held = Min(ends, rows(x[:T])) - Min(starts, rows(x[:T]))
                            (held = sizes where the list tier made x and the sizes as one list)

That is what DETR's `torch.cat([torch.full_like(src, i) for i, (src, _) in
enumerate(indices)])` and yolov5's `torch.cat([torch.cat([o, torch.full_like(o[:, :1], k)], 1)
for k, o in enumerate(output)])` leave once their lists are tensors (`seqlower.lists`): the
element read is a Slice of the flat rows between the running sums of the sizes, or only its size
read from the table. f is row-wise: elementwise operators (`UNARY`, `BROADCASTING` of
`loop-batch-chunks`), whose other operands are the same in every iteration and do not
broadcast along the rows (rank at most the element's, 1 or no dim there), or the iteration
number as a scalar (broadcast as ids of shape [T, 1..]); Slices along the other axes with
constant bounds; Concats along the other axes; Shape of a row-wise value (only as the shape of a
ConstantOfShape or an Expand, or the shape table of a list held flat). Then f commutes with
cutting the rows, and the concatenation of f over the elements is f of the flat rows.

The trip count must be the length of the sizes table, or a minimum over it (TorchScript's `zip`;
the table is cut to it, Max(M, 0) rows); the sizes must never be negative (a Slice between
running sums of a negative size reads what no element holds: `never_negative_across`, or a
list tier's table of first dims); the condition must stay true; a
carried value must be passed on unchanged or be a tensor grown by a Concat along axis 0 (read
by nothing else in the body). Opset 16 or newer (ScatterElements with reduction="add").

Refused: a body op that is not row-wise (a reduction, a Gather, a Reshape of the rows, a Slice
along the rows or with bounds known at run time only), an operand the same in every iteration
that broadcasts along the rows, reads of two lists of different sizes tables, the iteration
number used otherwise than as a scalar, reads of the rows of two lists or of both an element's
rows and its size from the table, a value carried from one iteration to the next, a
trip count not bounded by the table's length.
"""

from __future__ import annotations

__all__ = [
    "RULES",
    "count_bounded_by_table",
    "made_outside",
    "slice_sizes",
    "table_read",
]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.batching.segments import SEGMENT_OPSET, ids_of_sizes
from seqlower.lists.signs import never_negative_across
from seqlower.ops import peel_identity
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.loop_chunks import BROADCASTING, UNARY, _broadcast_refusal
from seqlower.rules.loop_parts import counted_loop_refusal, loop_body
from seqlower.uses import use_count


@dataclasses.dataclass(frozen=True)
class Kind:
    """What a body value is per iteration: the same in every one ("inv"), the iteration number
    or a scalar computed from it ("idx"), a tensor of the element's rows along axis 0 ("rows",
    of rank `rank`), or the shape of such a tensor ("shape": of `source`, or [sizes[i]] read
    from the table when `source` is None)."""

    tag: str
    rank: int = 0
    source: ir.Value | None = None


_INV, _IDX = Kind("inv"), Kind("idx")
_NO_BOUND = 2**62  # no tensor has that many rows


@dataclasses.dataclass(frozen=True)
class RaggedRowsPlan:
    sizes: ir.Value  # the table: rows of each element
    cut: bool  # the trip count may be below the table's length
    kinds: dict[ir.Value, Kind]
    reads: dict[ir.Value, ir.Value]  # a Slice of an element -> the flat rows it cuts
    shape_reads: tuple[ir.Value, ...]  # Gather(sizes, [i]): [rows of element i]
    region: tuple[ir.Node, ...]  # the body nodes to run once, in body order
    kept: tuple[int, ...]  # carried values passed on unchanged
    grown: tuple[tuple[int, ir.Value], ...]  # carried index, the value appended (Concat axis 0)
    scans: tuple[tuple[ir.Value, bool], ...]  # a shape value, Reshape'd to [1, r]
    ends: ir.Value | None = None  # CumSum(sizes) already computed, when the table is not cut


def _static(value: ir.Value | None, ctx: Context) -> list[int] | None:
    if value is None:
        return None
    array = ctx.facts.values.get(value)
    if array is None or array.dtype.kind not in "iu":
        return None
    return [int(v) for v in array.reshape(-1)]


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    return node if node is not None and node.op_type == op_type and node.domain == "" else None


def table_read(value: ir.Value, index: ir.Value, ctx: Context) -> ir.Value | None:
    """The 1-D table t when `value` is t[i:i+1]: Gather(t, Reshape(i, [1])) (or Unsqueeze(i,
    [0])), or Gather(Unsqueeze(t, [1]), i)."""
    gather = _producer(value, "Gather")
    if gather is None or gather.attributes.get_int("axis", 0) != 0 or len(gather.inputs) != 2:
        return None
    table, position = gather.inputs
    if table is None or position is None:
        return None
    position = peel_identity(position)
    if position is index:
        unsqueeze = _producer(peel_identity(table), "Unsqueeze")
        if unsqueeze is None or _static(unsqueeze.inputs[1], ctx) != [1]:
            return None
        table = unsqueeze.inputs[0]
    else:
        shaped = position.producer()
        if shaped is None or shaped.op_type not in ("Reshape", "Unsqueeze"):
            return None
        if peel_identity(shaped.inputs[0]) is not index:  # type: ignore[arg-type]
            return None
        if _static(shaped.inputs[1], ctx) != ([0] if shaped.op_type == "Unsqueeze" else [1]):
            return None
    table = peel_identity(table)  # type: ignore[arg-type]
    if table.shape is None or len(table.shape) != 1:
        return None
    return table


def slice_sizes(node: ir.Node, index: ir.Value, ctx: Context) -> tuple[ir.Value, ir.Value] | None:
    """The sizes table and its running sums when `node` is Slice(x, starts[i], ends[i]) along
    axis 0, ends = CumSum(sizes), starts = ends - sizes (element i of a list held as rows)."""
    if len(node.inputs) < 3 or any(v is None for v in node.inputs[:3]):
        return None
    if len(node.inputs) > 3 and node.inputs[3] is not None and _static(node.inputs[3], ctx) != [0]:
        return None
    if len(node.inputs) > 4 and node.inputs[4] is not None and _static(node.inputs[4], ctx) != [1]:
        return None
    starts = table_read(node.inputs[1], index, ctx)  # type: ignore[arg-type]
    ends = table_read(node.inputs[2], index, ctx)  # type: ignore[arg-type]
    cumsum = _producer(ends, "CumSum")
    sub = _producer(starts, "Sub")
    if cumsum is None or sub is None or cumsum.attributes.get_int("exclusive", 0):
        return None
    if cumsum.attributes.get_int("reverse", 0) or _static(cumsum.inputs[1], ctx) != [0]:
        return None
    sizes = peel_identity(cumsum.inputs[0])  # type: ignore[arg-type]
    if peel_identity(sub.inputs[0]) is not ends or peel_identity(sub.inputs[1]) is not sizes:  # type: ignore[arg-type]
        return None
    return sizes, ends  # type: ignore[return-value]


class _Walk:
    """Classifies the body values the loop's results need (memoized: each node once)."""

    def __init__(self, body: ir.Graph, ctx: Context) -> None:
        self.body, self.ctx = body, ctx
        self.index = body.inputs[0]
        self.kinds: dict[ir.Value, Kind] = {}
        self.reads: dict[ir.Value, ir.Value] = {}
        self.shape_reads: list[ir.Value] = []
        self.sizes: list[ir.Value] = []
        self.ends: list[ir.Value] = []  # CumSum(sizes) of the Slice reads

    def _inside(self, node: ir.Node) -> bool:
        return node.graph is self.body

    def kind(self, value: ir.Value) -> Kind | Refusal:
        """The kind of `value`, its operands classified first, deepest first, from an explicit
        stack (a body of thousands of chained nodes needs no Python recursion); the first
        refusal met ends the walk."""
        stack = [value]
        expanded: set[ir.Value] = set()
        while stack:
            current = stack[-1]
            if current in self.kinds:
                stack.pop()
                continue
            node = current.producer()
            if current not in expanded:
                leaf = self._leaf(current)
                if isinstance(leaf, Refusal):
                    return leaf
                if leaf is not None:
                    self.kinds[current] = leaf
                    stack.pop()
                    continue
                expanded.add(current)
                assert node is not None
                pending = [v for v in node.inputs if v is not None and v not in self.kinds]
                stack.extend(reversed(pending))
                continue
            stack.pop()
            assert node is not None
            kinds = [None if v is None else self.kinds[v] for v in node.inputs]
            if all(k is None or k.tag == "inv" for k in kinds):
                result: Kind | Refusal = _INV
            else:
                result = self._op(node, current, kinds)
            if isinstance(result, Refusal):
                return result
            self.kinds[current] = result
        return self.kinds[value]

    def _leaf(self, value: ir.Value) -> Kind | Refusal | None:
        """The kind of `value` where its operands do not decide it; None where they do."""
        if value is self.index:
            return _IDX
        node = value.producer()
        if node is None:
            if value.graph is self.body:
                return Refusal(f"the body reads '{value.name}', carried from the iteration before")
            return _INV
        if not self._inside(node) or node.op_type == "Constant":
            return _INV
        if node.domain != "":
            return Refusal(f"{node.op_type} of domain '{node.domain}' is not known to be row-wise")
        table = table_read(value, self.index, self.ctx)  # type: ignore[arg-type]
        if table is not None and made_outside(table, self.body):
            self.sizes.append(table)
            self.shape_reads.append(value)
            return Kind("shape", 1)
        if node.op_type == "Slice":
            found = slice_sizes(node, self.index, self.ctx)  # type: ignore[arg-type]
            data = node.inputs[0]
            if found is not None and data is not None and made_outside(data, self.body):
                sizes, ends = found
                if data.shape is None or len(data.shape) == 0:
                    return Refusal(f"the rank of the list's rows '{data.name}' is unknown")
                self.sizes.append(sizes)
                self.ends.append(ends)
                self.reads[value] = data
                return Kind("rows", len(data.shape))
        return None

    def _op(self, node: ir.Node, value: ir.Value, kinds: list[Kind | None]) -> Kind | Refusal:
        op = node.op_type
        rows = {k.rank for k in kinds if k is not None and k.tag == "rows"}
        shapes = [k for k in kinds if k is not None and k.tag == "shape"]
        if op == "Identity":
            return kinds[0]  # type: ignore[return-value]
        if op in UNARY or op in BROADCASTING:
            if shapes:
                return Refusal(f"{op} computes with the shape of an element")
            if len(rows) > 1:
                return Refusal(f"{op} of row-wise values of different ranks")
            if not rows:  # the iteration number and scalars the same in every iteration
                for operand, kind in zip(node.inputs, kinds, strict=True):
                    if kind is _INV and (operand.shape is None or len(operand.shape) != 0):  # type: ignore[union-attr]
                        return Refusal(f"{op} of the iteration number and a tensor")
                return _IDX
            (rank,) = rows
            for operand, kind in zip(node.inputs, kinds, strict=True):
                if kind is _INV:
                    why = _broadcast_refusal(operand, rank, 0)  # type: ignore[arg-type]
                    if why is not None:
                        return Refusal(why)
            if value.shape is not None and len(value.shape) != rank:
                return Refusal(f"{op} changes the rank of the rows")
            return Kind("rows", rank)
        if op == "Slice":
            if (
                kinds[0] is None
                or kinds[0].tag != "rows"
                or any(k is not _INV for k in kinds[1:] if k)
            ):
                return Refusal(
                    "a Slice of other than the rows, or with bounds that differ per element"
                )
            rank = kinds[0].rank
            bounds = [_static(v, self.ctx) for v in node.inputs[1:]]
            if any(
                b is None for b, v in zip(bounds, node.inputs[1:], strict=True) if v is not None
            ):
                return Refusal("a Slice with bounds known at run time only")
            if len(node.inputs) < 4 or node.inputs[3] is None:
                return Refusal("a Slice along every axis, the rows too")
            axes = [a % rank if -rank <= a < rank else None for a in bounds[2]]  # type: ignore[union-attr]
            if None in axes:
                return Refusal("a Slice along an axis the rows do not have")
            if 0 in axes:  # only the whole of the rows: [0, >= any dim), step 1
                at = axes.index(0)
                steps = bounds[3] if len(bounds) > 3 and bounds[3] is not None else None
                whole = bounds[0][at] == 0 and bounds[1][at] >= _NO_BOUND  # type: ignore[index]
                if not whole or (steps is not None and steps[at] != 1):
                    return Refusal("a Slice along the rows")
            return Kind("rows", rank)
        if op == "Concat":
            if any(k is None or k.tag != "rows" for k in kinds) or len(rows) != 1:
                return Refusal("a Concat of a row-wise value with others")
            (rank,) = rows
            axis = node.attributes.get_int("axis", 0)
            if not -rank <= axis < rank or axis % rank == 0:
                return Refusal("a Concat along the rows")
            return Kind("rows", rank)
        if op == "Shape":
            start = node.attributes.get_int("start", 0)
            end = node.attributes.get("end")
            rank = kinds[0].rank  # type: ignore[union-attr]
            if kinds[0].tag != "rows" or start != 0 or (end is not None and end.as_int() < rank):  # type: ignore[union-attr]
                return Refusal("a Shape of other than a whole row-wise value")
            return Kind("shape", rank, node.inputs[0])
        if op in ("ConstantOfShape", "Expand"):
            shape = kinds[-1]
            if shape is None or shape.tag != "shape":
                return Refusal(f"{op} to a shape that is not an element's")
            if op == "Expand":
                data, kind = node.inputs[0], kinds[0]
                if kind is None or kind.tag not in ("inv", "idx"):
                    return Refusal("an Expand of a row-wise value")
                if kind is _INV and _broadcast_refusal(data, shape.rank, 0) is not None:  # type: ignore[arg-type]
                    return Refusal("an Expand of a tensor that broadcasts along the rows")
            return Kind("rows", shape.rank)
        return Refusal(f"{op} is not known to work row by row")


def made_outside(value: ir.Value, body: ir.Graph) -> bool:
    """Whether `value` is made outside `body` (an input or a node of an enclosing graph)."""
    producer = value.producer()
    return value.graph is not body if producer is None else producer.graph is not body


def count_bounded_by_table(
    count: ir.Value, sizes: ir.Value, ctx: Context
) -> tuple[bool, bool] | None:
    """(bounded, exact): whether the trip count is the length of `sizes` or a minimum with it
    among the terms (exact when the other terms are all constants of at least 2**62); None
    when neither is known."""

    def length_of(value: ir.Value) -> bool:
        value = peel_identity(value)
        size = _producer(value, "Size")
        if size is None:
            return False
        return peel_identity(size.inputs[0]) is sizes  # type: ignore[arg-type]

    if length_of(count):
        return True, True
    # a minimum: ReduceMin(Concat(.., Unsqueeze(Size(sizes)), ..))
    minimum = _producer(peel_identity(count), "ReduceMin")
    concat = _producer(minimum.inputs[0], "Concat") if minimum is not None else None
    if concat is None:
        return None
    bounded, exact = False, True
    for term in concat.inputs:
        unsqueeze = _producer(term, "Unsqueeze") if term is not None else None
        if unsqueeze is not None and length_of(unsqueeze.inputs[0]):  # type: ignore[arg-type]
            bounded = True
            continue
        # TorchScript's `enumerate` bound of a list: a minimum with the largest int64
        big = _static(term, ctx)
        exact = exact and big is not None and all(v >= _NO_BOUND for v in big)
    return (True, exact) if bounded else None


def _check(node: ir.Node, ctx: Context) -> RaggedRowsPlan | Refusal:
    body = loop_body(node)
    if ctx.rewriter.opset(node.graph) < SEGMENT_OPSET:
        return Refusal(f"segment ids need ScatterElements with reduction (opset {SEGMENT_OPSET})")
    refusal = counted_loop_refusal(node, ctx)
    if refusal is not None:
        return refusal
    if any(v is not None and isinstance(v.type, ir.SequenceType) for v in node.inputs):
        return Refusal("the loop carries a list (the list rules first)")
    walk = _Walk(body, ctx)
    carried = len(node.inputs) - 2
    kept, grown = [], []
    for k in range(carried):
        before, after = body.inputs[2 + k], peel_identity(body.outputs[1 + k])
        if after is before:
            kept.append(k)
            continue
        concat = _producer(after, "Concat")
        if concat is None or len(concat.inputs) != 2 or concat.inputs[0] is not before:
            return Refusal(f"carried value '{before.name}' is not grown by a Concat")
        rank = len(before.shape) if before.shape is not None else None
        if rank is None or rank == 0 or concat.attributes.get_int("axis", 0) % rank != 0:
            return Refusal(f"carried value '{before.name}' is not grown along axis 0")
        if use_count(before) != 1:
            return Refusal(f"carried value '{before.name}' is read by more than its Concat")
        appended = concat.inputs[1]
        assert appended is not None
        source = appended
        flat = _producer(appended, "Reshape")
        if flat is not None and _static(flat.inputs[1], ctx) == [-1]:
            source = flat.inputs[0]  # type: ignore[assignment]
        kind = walk.kind(source)
        if isinstance(kind, Refusal):
            return kind
        if kind.tag != "rows":
            return Refusal(f"what grows '{before.name}' is not row-wise")
        if source is appended and kind.rank != rank:
            return Refusal(f"what grows '{before.name}' is of another rank")
        grown.append((k, appended))
    scans = []
    for output in body.outputs[1 + carried :]:
        value, reshaped = peel_identity(output), False
        reshape = _producer(value, "Reshape")
        if reshape is not None:
            value, reshaped = reshape.inputs[0], True  # type: ignore[assignment]
        kind = walk.kind(value)
        if isinstance(kind, Refusal):
            return kind
        if kind.tag != "shape":
            return Refusal(f"scan output '{output.name}' is not the shape of an element")
        if reshaped and _static(reshape.inputs[1], ctx) not in ([1, -1], [1, kind.rank]):  # type: ignore[union-attr]
            return Refusal(f"scan output '{output.name}' is a Reshape of a shape to another shape")
        scans.append((value, reshaped))
    if not grown:
        return Refusal("no tensor is grown (nothing to batch)")
    if not walk.sizes:
        return Refusal("the body reads no element of a list held as rows and sizes")
    sizes = walk.sizes[0]
    if any(s is not sizes for s in walk.sizes):
        return Refusal("the body reads lists of different sizes tables")
    if len(set(walk.reads.values())) > 1:
        return Refusal("the body reads the rows of two lists")
    if walk.reads and walk.shape_reads:
        return Refusal("the body reads an element's rows and its size from the table both")
    if sizes.dtype != ir.DataType.INT64:
        return Refusal("the sizes table is not int64")
    # a list tier's table of first dims is never negative; else the table's producers tell
    recorded = ctx.rewriter.is_row_table(sizes)
    if not recorded and not never_negative_across(sizes, ctx.facts.values):
        return Refusal("the sizes table may hold a negative size")
    bound = count_bounded_by_table(node.inputs[0], sizes, ctx)  # type: ignore[arg-type]
    if bound is None:
        return Refusal("the trip count is not known to be at most the sizes table's length")
    wanted = set(walk.kinds)
    region = tuple(n for n in body if any(o in wanted for o in n.outputs))
    return RaggedRowsPlan(
        sizes, not bound[1], dict(walk.kinds), dict(walk.reads), tuple(walk.shape_reads),
        region, tuple(kept), tuple(grown), tuple(scans),
        walk.ends[0] if walk.ends and bound[1] else None,
    )  # fmt: skip


def _rows(node: ir.Node, plan: RaggedRowsPlan, ctx: Context) -> None:
    """Loop(M, true, acc0, body: acc' = Concat(acc, f(Slice(x, starts[i], ends[i]), i)))
    -> Concat(acc0, f(x[:Sum(sizes)], the element of each row))"""
    builder = ctx.rewriter.before(node)
    body = loop_body(node)
    sizes = plan.sizes
    zero = builder.constant(np.array(0, np.int64), "zero")
    if plan.cut:
        count = builder.op("Max", [builder.op("Cast", [node.inputs[0]], {"to": 7}), zero])
        count = builder.op("Reshape", [count, builder.ints([1])])
        sizes = builder.op("Slice", [sizes, builder.ints([0]), count, builder.ints([0])])
    ends = plan.ends or builder.op("CumSum", [sizes, zero], name="ends")
    total = builder.op("ReduceSum", [sizes, builder.ints([0])], {"keepdims": 1}, name="total")
    length, rows, clamped = total, None, False
    if plan.reads:
        data = next(iter(plan.reads.values()))
        if ctx.rewriter.holds_rows_of(plan.sizes, data):  # the list tier's: T == rows of x
            # x itself; cut to T where the table is (fewer rows than x holds)
            rows = data
            if plan.cut:
                rows = builder.op("Slice", [data, builder.ints([0]), total, builder.ints([0])])
        else:  # the rows the elements hold: fewer than the sizes say where x runs out
            rows = builder.op("Slice", [data, builder.ints([0]), total, builder.ints([0])])
            length = builder.op("Shape", [rows], {"start": 0, "end": 1})
            clamped = True
    ids = ids_of_sizes(builder, sizes, ends, total, length)
    mapping: dict[ir.Value, ir.Value] = {body.inputs[0]: ids}
    for read in plan.shape_reads:
        mapping[read] = total
    for read in plan.reads:
        mapping[read] = rows  # type: ignore[assignment]
    lifted: dict[tuple[ir.Value, int], ir.Value] = {}
    for body_node in plan.region:
        if body_node.outputs[0] in mapping:
            continue
        rank = max(
            (plan.kinds[o].rank for o in body_node.outputs if plan.kinds[o].tag == "rows"),
            default=0,
        )
        filled = _filled(body_node, plan)
        if filled is not None:  # full_like(x, i): the ids broadcast to x's shape, no Add
            index, shape = filled
            value = mapping[index]
            if rank == 1 and plan.kinds[shape].source is None:
                mapping[body_node.outputs[0]] = value  # [T] already
            else:
                lifted_index = builder.unsqueeze(value, list(range(1, rank)))
                mapping[body_node.outputs[0]] = builder.op("Expand", [lifted_index, mapping[shape]])
            continue
        inputs = []
        for v in body_node.inputs:
            if v is None:
                inputs.append(None)
                continue
            new = mapping.get(v, v)
            if plan.kinds.get(v) is _IDX and rank > 1:  # ids [T] against rows [T, ..]
                key = (v, rank)
                if key not in lifted:
                    lifted[key] = builder.unsqueeze(new, list(range(1, rank)))
                new = lifted[key]
            inputs.append(new)
        builder.copy(body_node, mapping, inputs)
    carried = len(node.inputs) - 2
    for k in plan.kept:
        ctx.rewriter.replace(node.outputs[k], node.inputs[2 + k])  # type: ignore[arg-type]
    for k, appended in plan.grown:
        start = node.inputs[2 + k]
        assert start is not None
        flat = appended.producer()
        value = mapping.get(appended)
        if value is None:  # Reshape(rows, [-1]) outside the region
            assert flat is not None
            value = builder.op("Reshape", [mapping[flat.inputs[0]], builder.ints([-1])])  # type: ignore[index]
        if start.shape is not None and list(start.shape) == [0]:
            joined = value  # nothing to put first
        else:
            joined = builder.op("Concat", [start, value], {"axis": 0})
        joined.type = node.outputs[k].type
        ctx.rewriter.replace(node.outputs[k], joined)
    for position, (shape_value, reshaped) in enumerate(plan.scans):
        held = sizes
        if clamped:  # each element's rows as its Slice clamps them to x's
            starts = builder.op("Sub", [ends, sizes])
            held = builder.op(
                "Sub", [builder.op("Min", [ends, length]), builder.op("Min", [starts, length])]
            )
        table = _shape_table(builder, plan.kinds[shape_value], held, mapping)
        if reshaped:
            table = builder.unsqueeze(table, [1])
        table.type = node.outputs[carried + position].type
        ctx.rewriter.replace(node.outputs[carried + position], table)


def _filled(node: ir.Node, plan: RaggedRowsPlan) -> tuple[ir.Value, ir.Value] | None:
    """(the iteration number's value, the shape) when `node` is Add(ConstantOfShape(shape) of
    zeros, a scalar computed from the iteration number): `full_like(x, i)`."""
    if node.op_type != "Add" or len(node.inputs) != 2:
        return None
    for zeros, index in (node.inputs, reversed(node.inputs)):
        fill = zeros.producer() if zeros is not None else None
        if fill is None or fill.op_type != "ConstantOfShape" or zeros not in plan.kinds:
            continue
        if index is None or plan.kinds.get(index) is not _IDX:
            continue
        attr = fill.attributes.get("value")
        if attr is not None and np.any(attr.as_tensor().numpy() != 0):
            continue
        shape = fill.inputs[0]
        if shape is not None and plan.kinds.get(shape, _INV).tag == "shape":
            return index, shape
    return None


def _shape_table(
    builder: Builder, kind: Kind, sizes: ir.Value, mapping: dict[ir.Value, ir.Value]
) -> ir.Value:
    """The shape of each element's value [n, r]: its rows, then the dims of the flat value's
    other axes (the same for every element)."""
    rows = builder.unsqueeze(sizes, [1])
    if kind.rank == 1:
        return rows
    assert kind.source is not None
    others = builder.op("Shape", [mapping[kind.source]], {"start": 1})
    target = builder.op(
        "Concat", [builder.op("Shape", [sizes]), builder.ints([kind.rank - 1])], {"axis": 0}
    )
    spread = builder.op("Expand", [builder.unsqueeze(others, [0]), target])
    return builder.op("Concat", [rows, spread], {"axis": 1})


RULES = RuleSet([Rule("loop-ragged-rows", "Loop", _check, _rows)])
