"""A Loop whose iterations do not depend on each other is a SequenceMap in disguise: its body is
applied once to the stack of the elements it reads (as `sequence-map-batch` does).

    Loop(SequenceLength(xs), true, SequenceEmpty(),
         body(i, c, s): s' = SequenceInsert(s, f(SequenceAt(xs, i))))
        -> SplitToSequence(f'(stack(xs)), axis=0, keepdims=0)
    Loop(M, true, body(i, c): scan output f(Gather(x, i, axis=a)))      (M = dim a of x)
        -> f'(moveaxis(x, a, 0))
    ConcatFromSequence(<the appended list>, axis=0, new_axis=1) -> f'(...)        (no copy)
    a running sum acc' = Add(acc, f(...)), acc' of acc0's rank
        -> final acc = Add(acc0, ReduceSum(f'(...), axis 0));
           acc' appended or a scan output = Add(acc0, CumSum(f'(...), axis 0))
    a carried value passed the element read, prev' = Gather(x, i) (`prev = x[t]` in a loop)
        -> prev in every iteration = Slice(Concat(Unsqueeze(prev0, 0), x), 0, M) (one row late)
    a tensor y read at i whose rows are not known to be M (a table of per-level constants)
        -> Slice(y, 0, M + Gather([0], Max(M - rows(y), 0))): fails where an iteration would

f' is f batched over a new leading axis (`seqlower.batching`): the TorchScript forms
`for t in x.unbind(0): out.append(f(t))`, `for s in x.split(1, 0): ...`, `for h in range(H):
out.append(f(q[h]))` and `zip` of two such lists. What the body reads each iteration is an element
of an outer list or tensor at the iteration number; everything else it reads is the same in
every iteration. A loop-carried value must be passed on unchanged, be a list that starts empty
and gets one append per iteration, or be a running sum (`acc = acc + f(t)`, read by nothing else
in the body but the append or scan output of its new value), or take the element read in this
iteration (`prev = x[t]`: the next iteration sees element t, the first the initial value, of the
element's type and static shape); the condition must stay true.
Floating-point sums may round differently from the loop's own order (CumSum and ReduceSum). The
trip count must be the length of what is read (or the minimum of such lengths, as `zip`
computes: then the stacks are cut to it), so that the batch holds exactly the elements the
iterations would read; or be proved equal to it by the symbolic shapes of the loop analysis
(`seqlower.analysis.loop_shapes`, which carries a dim through Slices over a whole axis, TopK,
reductions, Tiles and broadcasts where inference loses it). A tensor read at the iteration
number that is not proved to have the trip count's length is cut to it, with a check that fails
exactly where the loop would: at M > len (an iteration reads past the end), never at M <= 0
(no iteration reads anything, even from an empty tensor).

It also takes the iteration number used as a number (it is Range(0, M), and the loop need read
nothing else; a branch of a per-element If reads it at its rows as those rows, the batch having
M rows); a running maximum or minimum read after the loop (one reduction over the initial
value and the terms); a tensor grown by Concat (`acc = cat((acc, t))`, a list that starts with
acc) and a list that starts with elements, when only concatenations read it (the initial
elements first); and slices whose bounds differ per element (`seqlower.batching`: held padded
with a mask), appended to a list that is concatenated along the sliced axis (one Compress of
the padded stack). Windows of one tensor x whose length a constant w bounds (`x[s_i:s_i + w]`,
or ended at Min(s_i + w, a size)) are padded to w only, gathered from x at s_i + Range(w)
(`seqlower.batching.windows`): n x w values for n iterations (not where an If's branch returns
them: both branches' paddings must be as wide). Windows with no such bound whose two bounds
both differ per element (`x[off[i]:off[i + 1]]`, `x[s_i:s_i + count[i]]`), read elementwise, by
reductions along the axis with a segment form or concatenated back along it, are held flat:
x's rows in the windows laid end to end (clamped as Slice clamps), as many values as the
windows hold (`seqlower.batching.windows`); the loop is then batched even where its trip count
is not proved to be the offsets' length, by the default target:

    for i in range(len(off) - 1): out.append(relu(x[off[i]:off[i + 1]]))
        -> Relu(Gather(x, CumSum(ScatterElements(ones [T + 1], starts, jumps, "add"))[:T]))

Other slices with no such bound are padded to all N positions of x's axis (x Expanded to
[n, N, ...] and a mask of as many): n x N values and as much work, however short the slices are
(10^4 windows over 10^4 rows of 3 floats: 1.2 * 10^9 bytes for the padded stack alone).
The chunks of a split by 1-D run-time sizes are such slices, gathered into
as many slots as the largest chunk has (`seqlower.rules.ragged_reads`, by the default target
only: `x.split(sizes)` then a loop over the chunks, as torch_geometric's `unbatch` writes it).
Chunks read elementwise and concatenated back along the split axis, where every other read of
them is a reduction along that axis with a segment form, are not padded at all: they are x's
own rows, a value per chunk read at each row by one Gather at the rows' chunk ids
(`seqlower.batching.rows`):

    cat([g - g.mean(0, keepdim=True) for g in x.split(sizes)])
        -> x - Gather(ScatterElements(zeros [n, ..], ids, x, reduction="add") / sizes, ids)

Refused (the Loop is left to the other loop rules): a value carried from one iteration to the
next otherwise (an RNN state), a condition that may end the loop early, a body op without a
batching rule, a trip count not known to match a list that is read, or a tensor read beside
slices whose bounds differ per element (their masked batch, cut and checked, costs more than
the loop over the few chunks such loops read).
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.carried_rows import at_least_iterations, counts_iterations
from seqlower.analysis.facts import element_dtype
from seqlower.analysis.loop_shapes import analysed
from seqlower.analysis.lower_bounds import dim_lower_bound, lower_bound, value_bounds
from seqlower.analysis.provenance import split_source
from seqlower.analysis.static_values import StaticValues
from seqlower.batching.body import BodyPlan, emit_body, plan_region
from seqlower.batching.core import Emitter, Operand
from seqlower.batching.means import drop_unread_clamps
from seqlower.batching.rows import Rows, joined_rows, rows_of_chunk, windows_as_rows
from seqlower.batching.segments import Segments
from seqlower.batching.shapes import infer_region_shapes
from seqlower.lists.signs import never_negative
from seqlower.ops import outer_reads, peel_identity
from seqlower.options import SPEED_FIRST_TARGETS
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules import if_select, loop_chunks
from seqlower.rules.batching import _connect, _merge_shapes, _source
from seqlower.rules.loop_appends import splittable, unsplittable
from seqlower.rules.loop_parts import (
    concatenation_axes,
    counted_loop_refusal,
    loop_body,
    single_append,
)
from seqlower.rules.loops import MAX_UNROLL, MAX_UNROLLED_NODES, unrolled_size
from seqlower.rules.ragged_reads import (
    RaggedChunks,
    SplitCheck,
    drop_spent_checks,
    ragged_chunks,
    reduced_by_segments,
)
from seqlower.rules.stacks import dims, merged_shape, moveaxis_to_front
from seqlower.uses import use_count

# What a length is known to equal: a static count, a named dim, a dim of one value, or the length
# of one sequence value.
Term = tuple[object, ...]
MIN_OPSET = 14
_NO_BOUND = 2**62  # no tensor has that many elements along one axis


@dataclasses.dataclass(frozen=True)
class Read:
    """A body node that reads element i (the iteration number) of an outer list or tensor."""

    node: ir.Node
    element: ir.Shape
    length: Term
    dim: int | ir.SymbolicDim | None  # the number of elements, when known
    build: Callable[[Builder], ir.Value]  # the stack [length, *element]
    cost: int  # about how many nodes building the stack takes
    # chunks of differing sizes: `element` is the whole split tensor's shape, held with a mask
    ragged: RaggedChunks | None = None
    pinned: bool = False  # chunks proved equal by a reader that fails on others (`Source`)


@dataclasses.dataclass(frozen=True)
class RunningSum:
    """A carried value updated as acc' = Add(acc, term), acc' of the initial value's shape; or
    acc' = Max(acc, term) (Min), read after the loop only (ONNX has no running maximum)."""

    index: int  # among the loop-carried values
    update: ir.Value  # acc'
    term: ir.Value  # what each iteration adds: computed from the elements read
    rank: int  # of acc
    op: str = "Add"
    term_rank: int | None = None  # of one term, when lower than acc's (broadcast into it)


@dataclasses.dataclass(frozen=True)
class LaggedRead:
    """A carried value whose next value is the element the iteration reads (`prev = x[t]`): in
    iteration i it holds element i - 1, or the initial value in the first."""

    index: int  # among the loop-carried values
    read: ir.Node  # the Gather or SequenceAt whose output the body passes on


@dataclasses.dataclass(frozen=True)
class LoopBatchPlan:
    reads: tuple[Read, ...]
    body: BodyPlan
    cut: bool  # the trip count is a minimum of the lengths read: cut each stack to it
    count: int | ir.SymbolicDim | None
    appends: tuple[tuple[int, ir.Value], ...]  # (carried index, the tensor appended)
    kept: tuple[int, ...]  # carried indices passed on unchanged
    sums: tuple[RunningSum, ...] = ()
    wanted: tuple[ir.Value, ...] = ()  # the body values batched, in the order of the results
    lagged: tuple[LaggedRead, ...] = ()
    counter: bool = False  # the iteration number is used as a number
    # lists given back as one concatenation (carried index -> element axis), with their initial
    # elements first (`heads`): ragged appends, or lists that do not start empty
    joined: tuple[tuple[int, int], ...] = ()
    heads: tuple[tuple[int, tuple[ir.Value, ...]], ...] = ()
    accumulated: tuple[int, ...] = ()  # carried tensors grown by Concat (the rest are lists)
    # reads of tensors not proved to have the trip count's length: cut to it, with a check
    guarded: tuple[ir.Node, ...] = ()
    # those of them proved to hold at least the trip count's rows: cut to it, no check
    bounded: tuple[ir.Node, ...] = ()


def _outer(value: ir.Value, body: ir.Graph) -> bool:
    """True when `value` is defined outside `body` (the same in every iteration)."""
    producer = value.producer()
    return value.graph is not body if producer is None else producer.graph is not body


def _dim_term(data: ir.Value, axis: int) -> Term:
    dim = data.shape[axis] if data.shape is not None else None  # type: ignore[index]
    if isinstance(dim, int):
        return ("int", dim)
    if isinstance(dim, ir.SymbolicDim) and dim.value is not None:
        return ("named", dim.value)
    return ("dim", data, axis)


def _sequence_length_term(sequence: ir.Value, ctx: Context) -> Term:
    length = ctx.facts.length(sequence)
    if length is not None:
        return ("int", length)
    split = sequence.producer()
    if split is not None and split.op_type == "SplitToSequence" and split.domain == "":
        data = split.inputs[0]
        sizes = split.inputs[1] if len(split.inputs) > 1 else None
        unit = sizes is None or (
            sizes.shape is not None and len(sizes.shape) == 0 and ctx.facts.static_int(sizes) == 1
        )
        if data is not None and data.shape is not None and unit:
            rank = len(data.shape)
            axis = split.attributes.get_int("axis", 0)
            if -rank <= axis < rank:
                return _dim_term(data, axis % rank)
    return ("sequence", sequence)


def _one_dim_term(value: ir.Value, ctx: Context) -> frozenset[Term] | None:
    """Dim a of x when `value` is `Shape(x, start=a, end=a + 1)` or `Gather(Shape(x), [a])`,
    one entry (a Reshape or a Squeeze of it to a scalar keeps that entry); None otherwise."""
    node = value.producer()
    if node is not None and node.op_type == "Gather" and node.domain == "":
        index = node.inputs[1] if len(node.inputs) > 1 else None
        if index is None or index.shape is None or list(index.shape) != [1]:
            return None
        return _shape_entry_term(node, ctx)
    if node is None or node.op_type != "Shape" or node.domain != "" or node.inputs[0] is None:
        return None
    data = node.inputs[0]
    if data.shape is None:
        return None
    rank = len(data.shape)
    start = node.attributes.get_int("start", 0)
    end = node.attributes.get_int("end", rank)
    start, end = start + rank if start < 0 else start, end + rank if end < 0 else end
    if not 0 <= start < rank or end != start + 1:
        return None
    return frozenset([_dim_term(data, start)])


def _count_terms(count: ir.Value, ctx: Context) -> frozenset[Term] | None:
    """The lengths whose minimum the trip count `count` is, or None when not known."""
    static = ctx.facts.static_int(count)
    if static is not None:
        return frozenset([("int", static)])
    producer = count.producer()
    if producer is None or producer.domain != "":
        return None
    first = producer.inputs[0] if producer.inputs else None
    if producer.op_type in ("Identity", "Cast") and first is not None:
        return _count_terms(first, ctx)
    if producer.op_type == "SequenceLength" and first is not None:
        return frozenset([_sequence_length_term(first, ctx)])
    if producer.op_type == "Size" and first is not None and first.shape is not None:
        return frozenset([_dim_term(first, 0)]) if len(first.shape) == 1 else None
    if producer.op_type == "Min":
        parts = [None if v is None else _count_terms(v, ctx) for v in producer.inputs]
        if any(part is None for part in parts):
            return None
        return frozenset().union(*parts)  # type: ignore[arg-type]
    if producer.op_type == "ReduceMin" and first is not None:
        return _min_of_stacked(producer, first, ctx)  # zip / enumerate in TorchScript
    if producer.op_type in ("Reshape", "Squeeze") and first is not None:
        # a stacked list's length, Reshape(Shape(x, end=1), []); Squeeze(Gather(Shape(x), [a]))
        return _one_dim_term(first, ctx)
    if producer.op_type == "Gather" and first is not None and len(producer.inputs) == 2:
        return _shape_entry_term(producer, ctx)
    return None


def _shape_entry_term(gather: ir.Node, ctx: Context) -> frozenset[Term] | None:
    """Dim p of x when `gather` is `Gather(Shape(x), p)` on axis 0, p a constant (a scalar, or
    one entry); None otherwise."""
    first, index = gather.inputs[0], gather.inputs[1]
    shape_node = first.producer() if first is not None else None
    position = _one_static_int(index, ctx) if index is not None else None
    if (
        gather.attributes.get_int("axis", 0) != 0
        or shape_node is None
        or shape_node.op_type != "Shape"
        or shape_node.attributes.get_int("start", 0) != 0
        or "end" in shape_node.attributes
        or position is None
        or shape_node.inputs[0] is None
        or shape_node.inputs[0].shape is None
    ):
        return None
    data = shape_node.inputs[0]
    rank = len(data.shape)  # type: ignore[arg-type]
    if not -rank <= position < rank:
        return None
    return frozenset([_dim_term(data, position % rank)])


def _unproved_lengths(
    node: ir.Node, count: ir.Value, reads: list[Read], ctx: Context
) -> list[Read]:
    """The reads of `reads` not proved to have the trip count's length along their axis by the
    symbolic shapes of the loop analysis (`seqlower.analysis.loop_shapes`). It carries a dim
    through the ops whose inferred shape loses it (a Slice over the whole axis, TopK and the
    other axes of a reduction, a Tile by a count read from a Shape, a broadcast of equal
    dims), so `for b in range(x.size(0)): x[b][idx[b]]` with `idx` made from x by Where, TopK
    and Slices reads idx at dim 0 of x. A tensor an enclosing loop grew by one row per
    iteration holds as many rows as its iteration number (`_counts_rows`)."""
    reads = [read for read in reads if not _counts_rows(read, count, ctx)]
    tensors = [read for read in reads if read.node.op_type == "Gather" and read.ragged is None]
    if not tensors:
        return reads
    shapes = analysed(node, ctx.facts.values, ctx.facts.loops)
    trip = shapes.content(count)
    if trip is None or len(trip) != 1:
        return reads
    unproved = [read for read in reads if read not in tensors]
    for read in tensors:
        source = read.node.inputs[0]
        assert source is not None and source.shape is not None  # as `_read` found it
        axis = read.node.attributes.get_int("axis", 0) % len(source.shape)
        dims = shapes.outer_shape(source)
        if not isinstance(dims, tuple) or len(dims) <= axis or dims[axis] != trip[0]:
            unproved.append(read)
    return unproved


def _counts_rows(read: Read, count: ir.Value, ctx: Context) -> bool:
    """Whether `read` = Gather(x, i) reads a tensor x that has exactly the trip count of rows
    along its axis because an enclosing loop, whose iteration number is the trip count, grew
    x from none by one per iteration (`seqlower.analysis.carried_rows`)."""
    source = read.node.inputs[0]
    if read.node.op_type != "Gather" or read.ragged is not None or source is None:
        return False  # an element of a list: its length is the list's
    assert source.shape is not None  # as `_read` found it
    axis = read.node.attributes.get_int("axis", 0) % len(source.shape)
    return counts_iterations(count, source, axis, ctx.facts.list_lengths().owner)


def _rows_at_least(read: Read, count: ir.Value, ctx: Context) -> bool:
    """Whether `read` = Gather(x, i, axis=a) reads an x proved to hold at least the trip count
    M of rows along a, M the iteration number of an enclosing loop: x grows by at least one
    row per iteration of that loop (`seqlower.analysis.carried_rows`), or that loop's trip
    count is a minimum one of whose terms is x's dim a (i < that trip count <= the dim); or M
    is the loop's own trip count, at most x's dim a (`_count_bounds`), or at most a number
    that x's dim a is at least (`seqlower.analysis.lower_bounds`: `Min(step + 1, 4)` rows of a
    row of 4)."""
    source = read.node.inputs[0]
    assert source is not None and source.shape is not None  # as `_read` found it
    axis = read.node.attributes.get_int("axis", 0) % len(source.shape)
    lengths = ctx.facts.list_lengths()
    if at_least_iterations(count, source, axis, lengths.owner):
        return True
    found = value_bounds(count, ctx.facts.values, lengths.owner)
    rows = dim_lower_bound(source, axis, ctx.facts.values, lengths.owner)
    if found is not None and found[1] is not None and rows is not None and found[1] <= rows:
        return True
    bounds = _count_bounds(count, ctx)
    if bounds is not None and _dim_term(source, axis) in bounds:
        return True
    loop = lengths.owner(count.graph)
    if loop is None or loop.op_type != "Loop" or loop.domain != "" or not loop.inputs:
        return False
    if loop.attributes["body"].as_graph().inputs[0] is not count or loop.inputs[0] is None:
        return False
    terms = _count_terms(loop.inputs[0], ctx)
    return terms is not None and _dim_term(source, axis) in terms


def _count_bounds(count: ir.Value, ctx: Context) -> frozenset[Term] | None:
    """Lengths each at least the trip count `count`: the terms of its minimum, or the terms of
    n where `count` is Sub(n, c), c a constant never negative (`range(x.size(0) - 1)`: the
    loop reads x[i + 1] or x[i], i < n - c <= n)."""
    producer = count.producer()
    if producer is not None and producer.domain == "" and producer.op_type == "Sub":
        first, second = producer.inputs[0], producer.inputs[1]
        taken = _one_static_int(second, ctx) if second is not None else None
        if first is None or taken is None or taken < 0:
            return None
        return _count_bounds(first, ctx)
    return _count_terms(count, ctx)


def _one_static_int(value: ir.Value, ctx: Context) -> int | None:
    """The one int of a constant scalar or one-entry vector."""
    array = ctx.facts.static(value)
    if array is None or array.size != 1 or array.dtype.kind not in "iu":
        return None
    return int(array.reshape(-1)[0])


def _min_of_stacked(reduce: ir.Node, data: ir.Value, ctx: Context) -> frozenset[Term] | None:
    """ReduceMin(Concat(Unsqueeze(n0, 0), Unsqueeze(n1, 0), ..), keepdims=0): the terms of the
    n_k (TorchScript's trip count of `zip(a, b)` and `enumerate(a)`); a piece may be a dim of
    one entry itself, Shape(x, start=a, end=a + 1) (the length of a list lowered already)."""
    if reduce.attributes.get_int("keepdims", 1) != 0:
        return None
    axes = reduce.attributes.get_ints("axes")
    if axes is None and len(reduce.inputs) > 1 and reduce.inputs[1] is not None:
        axes = ctx.facts.values.get_ints(reduce.inputs[1])
        if axes is None:
            return None
    if axes is not None and list(axes) not in ([0], [-1]):
        return None
    concat = data.producer()
    if concat is None or concat.op_type != "Concat" or concat.domain != "":
        return None
    terms: set[Term] = set()
    for piece in concat.inputs:
        bound = ctx.facts.values.get_ints(piece)
        if bound is not None and len(bound) == 1:
            if bound[0] < _NO_BOUND:  # `enumerate` bounds its counter by the largest int64
                terms.add(("int", bound[0]))
            continue
        entry = None if piece is None else _one_dim_term(piece, ctx)
        if entry is not None:  # a lowered list's length: Shape(x, end=1), one entry
            terms |= entry
            continue
        unsqueeze = None if piece is None else piece.producer()
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or unsqueeze.inputs[0] is None:
            return None
        scalar = unsqueeze.inputs[0]
        if scalar.shape is None or len(scalar.shape) != 0:
            return None
        found = _count_terms(scalar, ctx)
        if found is None:
            return None
        terms |= found
    return frozenset(terms) if terms else None


def _read(node: ir.Node, body: ir.Graph, ctx: Context) -> Read | Refusal:
    """The element read `node` (of `_read_form`) does with the iteration number, or why it
    cannot be batched as one."""
    label = f"{node.op_type} '{node.name}'" if node.name else node.op_type
    source = node.inputs[0]
    assert source is not None
    if node.op_type == "SequenceAt":
        chunks = ragged_chunks(source, ctx)
        if isinstance(chunks, Refusal):
            return chunks
        if chunks is not None:
            dims = chunks.sizes.shape[0]  # type: ignore[index]
            term = _sequence_length_term(source, ctx)
            return Read(node, chunks.padded_shape, term, dims, chunks.emit, 20, chunks)
        found = _source(source, ctx, node.outputs[0])
        if isinstance(found, Refusal):
            return found
        element = _merge_shapes(found.element_shape, node.outputs[0].shape)
        if element is None:
            return Refusal(f"the elements read by {label} do not match its declared shape")
        term = _sequence_length_term(source, ctx)
        cost = _stack_cost(source, ctx)
        return Read(node, element, term, found.length, found.build, cost, pinned=found.pinned)
    if source.shape is None:
        return Refusal(f"the rank of the tensor read by {label} is unknown")
    rank = len(source.shape)
    axis = node.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return Refusal(f"{label} has axis {axis} out of range for rank {rank}")
    axis %= rank
    dims = list(source.shape)
    element = _merge_shapes(ir.Shape(dims[:axis] + dims[axis + 1 :]), node.outputs[0].shape)
    if element is None:
        return Refusal(f"the elements read by {label} do not match its declared shape")
    return Read(
        node,
        element,
        _dim_term(source, axis),
        dims[axis],
        lambda b: moveaxis_to_front(b, source, axis, rank),
        int(axis != 0),
    )


def _stack_cost(sequence: ir.Value, ctx: Context) -> int:
    """About how many nodes stacking the elements of `sequence` takes (as `_source` stacks them):
    none or a Transpose for the unit pieces of a split, a Reshape (its target computed when dims
    are dynamic) and a Transpose for equal chunks, an Unsqueeze each plus a Concat otherwise."""
    split = sequence.producer()
    if split is not None and split.op_type == "SplitToSequence":
        data, axis = split.inputs[0], split.attributes.get_int("axis", 0)
        unit = len(split.inputs) < 2 or split.inputs[1] is None
        return _chunk_cost(data, axis, unit)
    elements = ctx.known_elements(sequence)
    if isinstance(elements, Refusal):
        return 1
    origin = split_source(elements, ctx.facts.values)
    if origin is None:
        return 1 + len(elements)
    return _chunk_cost(origin.data, origin.axis, origin.squeezed)


def _chunk_cost(data: ir.Value | None, axis: int, unit: bool) -> int:
    if data is None or data.shape is None:
        return 1
    moved = int(axis % len(data.shape) != 0)
    if unit:
        return moved
    return 1 + moved + (0 if data.shape.is_static() else 3)


@dataclasses.dataclass
class Carried:
    """The loop-carried values, by what each iteration does with them."""

    appends: list[tuple[int, ir.Value]] = dataclasses.field(default_factory=list)  # (k, tensor)
    kept: list[int] = dataclasses.field(default_factory=list)  # passed on unchanged
    sums: list[RunningSum] = dataclasses.field(default_factory=list)
    lagged: list[LaggedRead] = dataclasses.field(default_factory=list)
    # the initial elements of a list appended to (a tensor grown by Concat: its initial value)
    heads: dict[int, tuple[ir.Value, ...]] = dataclasses.field(default_factory=dict)
    accumulated: dict[int, int] = dataclasses.field(default_factory=dict)  # k -> Concat axis


def _carried(node: ir.Node, body: ir.Graph, ctx: Context) -> Carried | Refusal:
    """Split the loop-carried values into lists appended to (or tensors grown by Concat), values
    passed on unchanged, running sums and values that pass on the element read."""
    found = Carried()
    appends, kept, sums, lagged = found.appends, found.kept, found.sums, found.lagged
    heads, accumulated = found.heads, found.accumulated
    for k, (initial, state) in enumerate(zip(node.inputs[2:], body.inputs[2:])):
        update = peel_identity(body.outputs[1 + k])
        output = node.outputs[k]
        unread = not state.uses() and not output.uses() and not output.is_graph_output()
        if update is state or unread:  # (a value nothing reads is as good as passed on)
            kept.append(k)
            continue
        running = _running_sum(k, initial, state, update)
        if running is not None:
            sums.append(running)
            continue
        read = _lagged_read(update, initial, body, ctx)
        if read is not None:
            lagged.append(LaggedRead(k, read))
            continue
        grown = _concat_accumulator(update, state, body)
        if grown is not None and initial is not None:  # acc' = Concat(acc, t): [acc0, t..]
            tensor, axis = grown
            appends.append((k, tensor))
            heads[k] = (initial,)
            accumulated[k] = axis
            continue
        insert = single_append(update, state, body)
        if insert is None or use_count(update) > 1:
            return Refusal(f"loop-carried value {k} feeds the next iteration")
        elements = ctx.known_elements(initial)
        if elements != () and (
            isinstance(elements, Refusal) or _concatenation_axis(node.outputs[k]) is None
        ):
            return Refusal(
                f"the list carried as value {k} does not start empty, and is read otherwise "
                "than concatenated (ConcatFromSequence, new_axis=0)"
            )
        if elements:
            heads[k] = elements  # type: ignore[assignment]
        appends.append((k, insert.inputs[1]))
    return found


def _concat_accumulator(
    update: ir.Value, state: ir.Value, body: ir.Graph
) -> tuple[ir.Value, int] | None:
    """(t, axis) when `update` = Concat(state, t, axis) and the body reads `state` nowhere else
    (`acc = torch.cat((acc, t))`), else None."""
    concat = update.producer()
    if concat is None or concat.op_type != "Concat" or concat.domain != "":
        return None
    if concat.graph is not body or len(concat.inputs) != 2 or concat.inputs[0] is not state:
        return None
    tensor = concat.inputs[1]
    if tensor is None or tensor is state or use_count(state) != 1 or update.uses():
        return None
    return tensor, concat.attributes.get_int("axis", 0)


def _concatenation_axis(output: ir.Value) -> int | None:
    """The one axis, as written, of the concatenations that alone read the list `output`."""
    axes = concatenation_axes(output)
    return axes.pop() if axes is not None and len(axes) == 1 else None


def _joined_axis(axis: int | None, operand: Operand, heads: tuple[ir.Value, ...]) -> int | Refusal:
    """The element axis `axis` (as written; None when the list is read otherwise than
    concatenated) normalized, when the appended elements (`operand`) are ragged or the list
    starts with `heads`: the concatenation of the heads and of the batched elements (the
    positions each holds, for ragged ones) then stands for the list."""
    rank = operand.rank
    if axis is None or rank is None or not -rank <= axis < rank:
        return Refusal(
            "a list of ragged slices, or one that does not start empty, is read "
            "otherwise than concatenated along one axis"
        )
    axis %= rank
    if operand.ragged_axis is not None and operand.ragged_axis != axis:
        return Refusal("a list of ragged slices is concatenated along another axis")
    for head in heads:  # of the element's rank and dims, but along the axis
        dims = head.shape
        if dims is None or operand.shape is None or len(dims) != rank:
            return Refusal("the initial elements of a list may differ in rank from its appends")
        for i, (d, e) in enumerate(zip(dims, operand.shape)):
            if i != axis and not (d == e and (isinstance(d, int) or d.value is not None)):
                return Refusal(
                    "the initial elements of a list may differ in shape from its "
                    "appends beyond the concatenation axis"
                )
    return axis


def _lagged_read(
    update: ir.Value, initial: ir.Value | None, body: ir.Graph, ctx: Context
) -> ir.Node | None:
    """The read of element i that `update` is, when the initial value can stand before those
    elements in one stack: a tensor of the same type and the same known shape."""
    reader = update.producer()
    if reader is None or initial is None or not _read_form(reader, body):
        return None  # an element of a stack the body builds itself is no read batched
    if isinstance(_read(reader, body, ctx), Refusal):
        return None
    if initial.dtype is None or initial.dtype != update.dtype:
        return None
    shape, element = initial.shape, update.shape
    if shape is None or element is None or not shape.is_static() or shape != element:
        return None
    return reader


def _running_sum(
    k: int, initial: ir.Value | None, state: ir.Value, update: ir.Value
) -> RunningSum | None:
    """acc' = Add(acc, term) with acc read by nothing else and of one static shape throughout
    (so that the sum of no term at all keeps the initial value's shape); or Max or Min, whose
    acc' nothing reads in the body."""
    add = update.producer()
    if add is None or add.op_type not in _RUNNING or add.domain != "" or len(add.inputs) != 2:
        return None
    if add.op_type != "Add" and update.uses():
        return None
    if use_count(state) != 1 or add.inputs.count(state) != 1:
        return None
    term = add.inputs[1] if add.inputs[0] is state else add.inputs[0]
    shape = None if initial is None else initial.shape
    if term is None or shape is None:
        return None
    if shape.is_static():
        if update.shape != shape:
            return None
    # acc0 of dims known at run time only: a sum read after the loop alone (`_summed`)
    elif add.op_type != "Add" or update.uses() or not _may_keep(update.shape, shape):
        return None
    # a term broadcasts into acc (acc + i, a scalar): its rank is needed to line the batched
    # terms up with acc's dims, not with the batch axis
    if term.shape is None or len(term.shape) > len(shape):
        return None
    if any(use.node.op_type not in ("SequenceInsert", "Identity") for use in update.uses()):
        return None
    term_rank = len(term.shape) if len(term.shape) < len(shape) else None
    return RunningSum(k, update, term, len(shape), add.op_type, term_rank)


_RUNNING = {"Add": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin"}


def _static(value: ir.Value | None) -> bool:
    return value is not None and value.shape is not None and value.shape.is_static()


def _may_keep(update: ir.Shape | None, initial: ir.Shape) -> bool:
    """Whether acc' = Add(acc, term) may keep acc0's shape: the same rank, no static dim of
    one differing from the other's. (Where a term broadcasts acc up, the loop's acc' takes
    the broadcast shape from the first iteration on, and so does acc0 + the sum of the terms;
    a loop of no iteration keeps acc0, as the batched sum does: `_summed`.)"""
    if update is None or len(update) != len(initial):
        return False
    return all(
        not (isinstance(a, int) and isinstance(b, int)) or a == b
        for a, b in zip(update, initial, strict=True)
    )


def _selects(node: ir.Node, ctx: Context) -> bool:
    """Whether `if-to-where` or `if-to-logic` takes the If `node` (cheaper than running each
    branch on its own rows, as the batched body would)."""
    return any(
        not isinstance(check(node, ctx), Refusal)
        for check in (if_select._check, if_select._check_flag)
    )


def _reads(node: ir.Node) -> list[ir.Value | None]:
    """What `node` reads: its inputs, and the values its subgraphs read from around them."""
    return [*node.inputs, *outer_reads(node)] if node.attributes.data else list(node.inputs)


def _region(body: ir.Graph, wanted: list[ir.Value], stops: set[ir.Value]) -> list[ir.Node]:
    """The body nodes that compute `wanted` from `stops` and outer values, in body order."""
    needed: set[ir.Node] = set()
    stack = [v for v in wanted if v not in stops]
    while stack:
        producer = stack.pop().producer()
        if producer is None or producer.graph is not body or producer in needed:
            continue
        needed.add(producer)
        stack.extend(v for v in _reads(producer) if v is not None and v not in stops)
    return [n for n in body if n in needed]


def _check(node: ir.Node, ctx: Context) -> LoopBatchPlan | Refusal:
    if ctx.rewriter.opset(node.graph) < MIN_OPSET:
        # the batched form reshapes stacks whose dims may be 0 (the shared emitters of
        # sequence-map-batch, which exists from opset 17, write every Reshape with allowzero)
        return Refusal(f"batching needs Reshape with allowzero (opset {MIN_OPSET} or newer)")
    body = loop_body(node)
    refused = counted_loop_refusal(node, ctx)
    if refused is not None:
        return refused
    count = node.inputs[0]
    carried = len(node.inputs) - 2
    if len(body.inputs) != 2 + carried or len(body.outputs) < 1 + carried:
        return Refusal("the body does not match the node")
    found = _carried(node, body, ctx)
    if isinstance(found, Refusal):
        return found
    for inner in body:
        if inner.op_type == "If" and inner.domain == "" and _selects(inner, ctx):
            return Refusal("an If of the body becomes a Where or logic first (if-to-where)")
    appends, kept, sums, lagged = found.appends, found.kept, found.sums, found.lagged
    heads, accumulated = found.heads, found.accumulated
    if ctx.options.target in SPEED_FIRST_TARGETS and any(
        not _static(node.inputs[2 + running.index]) for running in sums
    ):
        # (diffusers' LMS sum over one sampling step: 0.97x kept as lists, 0.88x batched)
        return Refusal(
            "a running sum of dims known at run time only is batched by the default target "
            "only: over a loop of one iteration, the batched sum and the If that keeps the "
            "initial value for no iteration cost more than the loop"
        )
    for k, tensor in appends:
        refusal = _unsplittable(node.outputs[k], tensor)
        if refusal is not None:
            return refusal
    reads: list[Read] = []
    counter = False  # the iteration number is used as a number: batched as Range(0, M)
    for use in dict.fromkeys(u.node for u in body.inputs[0].uses()):
        if not _read_form(use, body):
            counter = True
            continue
        read = _read(use, body, ctx)
        if isinstance(read, Refusal):
            return read
        reads.append(read)
    if not reads and not counter:
        return Refusal("the body does not read the iteration number")
    terms = _count_terms(count, ctx) if reads else frozenset()
    unmatched = [read for read in reads if terms is None or read.length not in terms]
    guarded = _unproved_lengths(node, count, unmatched, ctx) if unmatched else []
    if any(read.node.op_type != "Gather" or read.ragged is not None for read in guarded):
        return Refusal("the trip count is not known to be the length of what the body reads")
    bounded = [read.node for read in guarded if _rows_at_least(read, count, ctx)]
    cut = terms is not None and len(terms) > 1
    if any(r.pinned for r in reads) and (cut or unmatched):
        return Refusal(
            "chunks proved equal only by the op reading them are not all read: the trip count "
            "is not the number of chunks"
        )
    ragged = {r.node for r in reads if r.ragged is not None}
    if ragged and cut:
        return Refusal("chunks of differing sizes read beside a list of another length")
    if ragged and not isinstance(loop_chunks.plan_chunk_map(node, ctx), Refusal):
        return Refusal("the chunks are mapped elementwise: loop-batch-chunks maps the whole tensor")
    if ragged and ctx.options.target in SPEED_FIRST_TARGETS:
        return Refusal(
            "chunks of differing sizes are batched with a mask by the default target only: over "
            "a few chunks the masked form costs about the launches of the loop it replaces"
        )
    if any(lag.read in ragged for lag in lagged):
        return Refusal("a chunk of differing size passed on to the next iteration")
    seeds = {
        r.node.outputs[0]: Operand(True, r.element, r.ragged.axis if r.ragged else None)
        for r in reads
    }
    for k in kept:
        initial, state = node.inputs[2 + k], body.inputs[2 + k]
        seeds[state] = Operand(False, initial.shape if initial is not None else None)
    for lag in lagged:  # element i - 1, batched as the stack read one row late
        seeds[body.inputs[2 + lag.index]] = Operand(True, lag.read.outputs[0].shape)
    if counter:
        seeds[body.inputs[0]] = Operand(True, ir.Shape([]))
    summed = {running.update: running.term for running in sums}
    outputs = [tensor for _, tensor in appends] + list(body.outputs[1 + carried :])
    wanted = list(dict.fromkeys(summed.get(peel_identity(v), v) for v in outputs))
    wanted += [term for term in summed.values() if term not in wanted]
    region = _region(body, wanted, set(seeds))
    states = {body.inputs[1], *(body.inputs[2 + k] for k, _ in appends)}
    states |= {body.inputs[2 + running.index] for running in sums}
    for region_node in region:
        if any(value in states for value in _reads(region_node)):
            return Refusal(f"body op {region_node.op_type} reads the loop state")
    opset = ctx.rewriter.opset(node.graph)
    fed = {v: o.shape for v, o in seeds.items()}
    known = _sliced_shapes(region, body, set(fed), ctx.facts.values)
    shapes = infer_region_shapes(region, fed, {"": opset}, known)
    plan = plan_region(
        body, seeds, region, wanted, ctx.facts.values, opset, shapes, ragged_results=True
    )
    if isinstance(plan, Refusal):
        return plan
    for running in sums:  # a maximum stacks its terms after the initial value
        term_shape = plan.outputs[wanted.index(running.term)].shape
        initial = node.inputs[2 + running.index]
        if running.op != "Add" and (initial is None or term_shape != initial.shape):
            return Refusal(
                f"a running {running.op.lower()} whose term may differ in shape from its value"
            )
    joined: dict[int, int] = {}  # carried index -> the element axis its list is joined along
    for k, tensor in appends:
        if tensor not in wanted:  # a running sum appended: its prefix sums, of one shape
            if k in heads:
                return Refusal("a list of running sums does not start empty")
            continue
        operand = plan.outputs[wanted.index(tensor)]
        if operand.ragged_axis is None and k not in heads:
            continue
        written = accumulated.get(k, _concatenation_axis(node.outputs[k]))
        axis = _joined_axis(written, operand, heads.get(k, ()))
        if isinstance(axis, Refusal):
            return axis
        joined[k] = axis
    for index, value in enumerate(wanted):
        if plan.outputs[index].ragged_axis is not None and all(t is not value for _, t in appends):
            return Refusal(f"body output '{value.name}' is a slice whose bounds differ per element")
    speed_first = ctx.options.target in SPEED_FIRST_TARGETS
    sliced = any(operand.ragged_axis is not None for operand in plan.operands.values())
    if (
        guarded
        and sliced
        and (speed_first or _padded_slices(plan, appends, joined, ctx.facts.values, opset))
    ):
        # slices of differing sizes held with a mask, in a batch cut to the trip count: over
        # the few chunks such loops read, that costs more than the loop it replaces (measured);
        # windows held flat, as x's rows (`windows_as_rows`), pad nothing: the default target
        # batches them (onnxruntime's keeps the loop: over msdeform_levels' few levels the flat
        # form cost more than the loop, and the target then kept the sequence ops as given)
        return Refusal(
            "the trip count is not known to be the length of what the body reads, and the "
            "body cuts slices whose bounds differ per element"
        )
    static = ctx.facts.static_int(count)
    matched = [read for read in reads if read not in guarded]
    if static is None and not cut and matched and isinstance(matched[0].dim, int):
        static = matched[0].dim  # the length of what is read, before the trip count folds to it
    checks = len(guarded) - len(bounded)
    cheaper = _unrolling_is_cheaper(node, static, reads, region, appends, ctx, checks)
    if cheaper is not None:
        return Refusal(cheaper)
    dim = static if static is not None else (None if cut or not matched else matched[0].dim)
    return LoopBatchPlan(
        tuple(reads),
        plan,
        cut,
        dim,
        tuple(appends),
        tuple(kept),
        tuple(sums),
        tuple(wanted),
        tuple(lagged),
        counter,
        tuple(joined.items()),
        tuple(heads.items()),
        tuple(accumulated),
        tuple(read.node for read in guarded),
        tuple(bounded),
    )


def _unrolling_is_cheaper(
    node: ir.Node,
    count: int | None,
    reads: list[Read],
    region: list[ir.Node],
    appends: list[tuple[int, ir.Value]],
    ctx: Context,
    checks: int = 0,
) -> str | None:
    """Why `loop-unroll` should take a loop with a static trip count, or None.

    Both forms do the same arithmetic; on small tensors their cost is their node count. Batching
    costs the body once, plus the stacks of what it reads and a reshape of each concatenated
    list; unrolling costs the body and the reads N times, plus a Concat per output. A few
    iterations over chunks of dynamic dims (2 attention heads) unroll cheaper."""
    if count is None or count > MAX_UNROLL:
        return None
    if count * unrolled_size(loop_body(node), ctx) > MAX_UNROLLED_NODES:
        return None
    outputs = len(node.outputs) - len(node.inputs) + 2 + len(appends)
    reshapes = sum(
        1
        for k, _ in appends
        for use in node.outputs[k].uses()
        if use.node.op_type == "ConcatFromSequence"
        and use.node.attributes.get_int("new_axis", 0) == 0
    )
    batched = len(region) + sum(read.cost for read in reads) + 3 * reshapes + _CHECK_COST * checks
    unrolled = count * (len(region) + len(reads)) + outputs
    if unrolled < batched:
        return (
            f"unrolling {count} iterations takes about {unrolled} nodes, fewer than batching "
            f"({batched})"
        )
    return None


def _unsplittable(output: ir.Value, tensor: ir.Value) -> Refusal | None:
    """Why the list `output` of appended `tensor`s cannot be given back as a list: its readers
    other than concatenations read a SplitToSequence of the stack, which onnxruntime runs for
    some element types only."""
    dtype = tensor.dtype or element_dtype(output)
    as_list = output.is_graph_output() or any(
        use.node.op_type != "ConcatFromSequence" for use in output.uses()
    )
    if as_list and not splittable(dtype):
        return Refusal(unsplittable("batched", dtype))
    return None


def _iteration_numbers(builder: Builder, count: ir.Value) -> ir.Value:
    """Range(0, M): the iteration numbers of a loop that runs M times (none when M <= 0)."""
    if count.shape is None or len(count.shape) != 0:
        count = builder.op("Reshape", [count, builder.ints([], "scalar")], name="trip_count")
    zero = builder.constant(np.array(0, np.int64), "zero")
    one = builder.constant(np.array(1, np.int64), "one")
    numbers = builder.op("Range", [zero, count, one], name="iteration_numbers")
    numbers.type = ir.TensorType(ir.DataType.INT64)
    return numbers


def _slice_counted_reads(numbers: ir.Value, ctx: Context) -> dict[ir.Value, ir.Value]:
    """Gather(x, Range(0, M), axis=a) -> Slice(x, [0], [M], [a]) where 0 <= M <= dim a of x
    is proved (`seqlower.analysis.lower_bounds`: the `Min(step + 1, 4)` coefficients of a row
    of 4): the same rows, in one Slice and a Reshape of M where onnxruntime's optimizer makes
    the Range and the Gather a Slice and three Unsqueezes. (Where M may pass the dim, the
    Gather fails as an iteration would; a Slice would clamp.) Returns each Gather's result
    and the Slice that replaced it."""
    count = numbers.producer().inputs[1]  # type: ignore[union-attr]
    owner = ctx.facts.list_lengths().owner
    found = value_bounds(count, ctx.facts.values, owner)
    replaced: dict[ir.Value, ir.Value] = {}
    if count is None or found is None or found[0] < 0 or found[1] is None:
        return replaced
    for use in list(numbers.uses()):
        gather = use.node
        data = gather.inputs[0]
        if gather.op_type != "Gather" or gather.domain != "" or use.idx != 1 or data is None:
            continue
        rank = None if data.shape is None else len(data.shape)
        axis = gather.attributes.get_int("axis", 0)
        if rank is None or not -rank <= axis < rank:
            continue
        axis %= rank
        rows = dim_lower_bound(data, axis, ctx.facts.values, owner)
        if rows is None or found[1] > rows:
            continue
        builder = ctx.rewriter.before(gather)
        end = builder.op("Reshape", [count, builder.ints([1])], name="counted_end")
        zero, at = builder.ints([0], "counted_start"), builder.ints([axis], "counted_axis")
        sliced = builder.op("Slice", [data, zero, end, at], name="counted_rows")
        sliced.type, sliced.shape = gather.outputs[0].type, gather.outputs[0].shape
        ctx.rewriter.replace(gather.outputs[0], sliced)
        replaced[gather.outputs[0]] = sliced
    return replaced


def _read_form(node: ir.Node, body: ir.Graph) -> bool:
    """Whether `node` reads element i of an outer list or tensor (`_read` checks the rest)."""
    index = body.inputs[0]
    return (
        node.domain == ""
        and node.op_type in ("SequenceAt", "Gather")
        and node.graph is body
        and len(node.inputs) == 2
        and node.inputs[1] is index
        and node.inputs[0] is not None
        and _outer(node.inputs[0], body)
    )


def _join(
    result: ir.Value,
    rank: int,
    axis: int,
    heads: tuple[ir.Value, ...],
    mask: ir.Value | None,
    builder: Builder,
) -> ir.Value:
    """The concatenation along element axis `axis` of `heads` and of the elements of `result`
    [N, *S]: the batch axis moved next to `axis` and merged with it; for ragged elements, only
    the positions their `mask` [N, 1.., d, 1..] holds (a Compress of the merged axis)."""
    perm = [*range(1, axis + 1), 0, *range(axis + 1, rank + 1)]
    moved = result
    if axis:
        moved = builder.op("Transpose", [result], {"perm": perm}, name="moved")
        moved.type = result.type
    dims = None if result.shape is None else [result.shape[i] for i in perm]
    target = merged_shape(builder, moved, rank + 1, dims, axis)
    whole = builder.op("Reshape", [moved, target], {"allowzero": 1}, name="joined")
    whole.type = result.type
    if mask is not None:
        flat = builder.op("Reshape", [mask, builder.ints([-1])], name="positions")
        whole = builder.op("Compress", [whole, flat], {"axis": axis}, name="joined")
        whole.type = result.type
    if heads:
        whole = builder.op("Concat", [*heads, whole], {"axis": axis}, name="with_initial")
        whole.type = result.type
    return whole


def _terms_like_acc(running: RunningSum, terms: ir.Value, builder: Builder) -> ir.Value:
    """The stacked terms [n, *t] with the dims of one term lined up with acc's: a term of lower
    rank broadcasts into acc's last dims, so [n, 1.., *t]. (A running Max or Min takes terms of
    acc's own shape only: `_carried` refuses the others.)"""
    if running.term_rank is None:
        return terms
    return builder.unsqueeze(terms, list(range(1, 1 + running.rank - running.term_rank)))


def _rows_like_acc(terms: ir.Value, initial: ir.Value, count: int | ir.SymbolicDim | None) -> bool:
    """Whether the stacked terms hold at least one row (a static trip count), or have the
    initial value's static dims after the rows (then an empty stack sums to zeros of acc's
    shape)."""
    if isinstance(count, int) and count > 0:
        return True
    shape, acc = terms.shape, initial.shape
    if shape is None or acc is None or not acc.is_static() or len(shape) != 1 + len(acc):
        return False
    return all(isinstance(d, int) and d == a for d, a in zip(shape[1:], acc))


def _rows_of_acc_when_empty(terms: ir.Value, initial: ir.Value, builder: Builder) -> ir.Value:
    """The stacked terms [n, *t], reshaped to [0, *acc] where they hold no row. A loop of no
    iteration reads no element, but a stack of none has whatever dims its source gives (the
    scan output of a Loop of no iteration takes them from the body output's type: onnxruntime
    makes an unknown dim 0, or gives [0] for a type of no shape), and ReduceSum over it gives
    zeros of those dims, which would broadcast into acc (a [0, 0] sum beside a [3, 4] acc
    fails). Reshape(terms, Where(Shape(terms)[:1] > 0, Shape(terms), Concat(0, Shape(acc))))
    keeps every stack of at least one row as it is."""
    shape = builder.op("Shape", [terms], name="terms_shape")
    zero, one = builder.ints([0], "zero_1d"), builder.ints([1], "one_1d")
    rows = builder.op("Slice", [shape, zero, one], name="rows")
    nonempty = builder.op("Greater", [rows, zero], name="nonempty")
    acc_dims = builder.op("Shape", [initial], name="acc_dims")
    no_row = builder.op("Concat", [zero, acc_dims], {"axis": 0}, name="no_row_of_acc")
    target = builder.op("Where", [nonempty, shape, no_row], name="terms_dims")
    safe = builder.op("Reshape", [terms, target], {"allowzero": 1}, name="terms_or_no_row")
    safe.type, safe.shape = terms.type, terms.shape
    return safe


def _runs_once(count: ir.Value, ctx: Context) -> bool:
    """Whether the trip count `count` of a loop that runs all its iterations is proved at
    least one (`seqlower.analysis.lower_bounds`: `Min(i + 1, 4)` coefficients in the i-th
    step of a sampling loop), so that the batched terms hold at least one row."""
    return (lower_bound(count, ctx.facts.values, ctx.facts.list_lengths().owner) or 0) >= 1


def _summed(
    node: ir.Node, running: RunningSum, initial: ir.Value, terms: ir.Value, ctx: Context
) -> ir.Value:
    """The final value of acc' = Add(acc, term) for acc0 of dims known at run time only:
    If(M > 0, then: Add(acc0, ReduceSum(terms, axis 0)), else: acc0). A loop of no iteration
    keeps acc0, where the sum of a stack of no term gives zeros of whatever dims the stack has
    (see `_rows_of_acc_when_empty`, whose Reshape to [0, *acc] took seven launches, about
    4 us per loop against the If's 1.4 us, onnxruntime 1.32 CPU). Where M >= 1 is proved
    (`_runs_once`), the first branch alone."""
    builder = ctx.rewriter.before(node)
    count = node.inputs[0]
    assert count is not None
    if _runs_once(count, ctx):  # the If would always take its first branch
        total = builder.op("ReduceSum", [terms, builder.ints([0], "batch_axes")], {"keepdims": 0})
        total = builder.op("Add", [initial, total], name="running_sum")
        total.type, total.shape = initial.type, running.update.shape
        return total
    zero = builder.constant(np.array(0, dtype=count.dtype.numpy() if count.dtype else np.int64))
    runs = builder.op("Greater", [count, zero], name="runs")
    then = ctx.rewriter.new_graph(f"{builder.hint}_summed", builder.opset)
    total = then.op("ReduceSum", [terms, then.ints([0], "batch_axes")], {"keepdims": 0})
    total = then.op("Add", [initial, total], name="running_sum")
    total.type, total.shape = initial.type, running.update.shape
    then.graph.outputs.append(total)
    orelse = ctx.rewriter.new_graph(f"{builder.hint}_no_term", builder.opset)
    kept = orelse.op("Identity", [initial], name="initial")
    kept.type, kept.shape = initial.type, initial.shape
    orelse.graph.outputs.append(kept)
    branches = {"then_branch": then.graph, "else_branch": orelse.graph}
    (result,) = builder.ops("If", [runs], branches, num_outputs=1, name="running_sum")
    result.type = initial.type
    return result


def _extremum(
    running: RunningSum, initial: ir.Value, terms: ir.Value, builder: Builder
) -> ir.Value:
    """The final value of acc' = Max(acc, term): ReduceMax over the initial value and every
    term, stacked (never an empty reduction, which onnxruntime 1.20 fails)."""
    stacked = builder.op("Concat", [builder.unsqueeze(initial, [0]), terms], {"axis": 0})
    reduce = _RUNNING[running.op]
    if builder.opset >= 18:
        extremum = builder.op(reduce, [stacked, builder.ints([0], "batch_axes")], {"keepdims": 0})
    else:
        extremum = builder.op(reduce, [stacked], {"axes": [0], "keepdims": 0})
    extremum.type, extremum.shape = initial.type, initial.shape
    return extremum


def _runs(node: ir.Node, plan: LoopBatchPlan, ctx: Context, builder: Builder) -> ir.Value:
    """How many times the loop runs: its trip count M, or Max(M, 0) where M may be negative and
    is read as a Slice end (the stacks cut to M rows, a value read late) or gives the positions
    of a Gather (a Loop runs no iteration for M < 0; a Slice end or a Gather position of -1
    counts from the end, and onnxruntime's optimizer reads Gather(x, Range(0, M)) as
    Slice(x, 0, M): quirk gather-negative-range). Range(0, M) alone is empty for M < 0."""
    count = node.inputs[0]
    assert count is not None
    gathers = plan.counter and any(
        use.node.op_type in ("Gather", "SequenceAt") and use.idx == 1
        for use in loop_body(node).inputs[0].uses()
    )
    if not (plan.cut or plan.lagged or plan.guarded or gathers) or _never_negative_count(
        count, ctx
    ):
        return count
    zero = builder.constant(np.array(0, np.int64), "zero")
    runs = builder.op("Max", [count, zero], name="runs")
    runs.type, runs.shape = count.type, count.shape
    return runs


def _never_negative_count(count: ir.Value, ctx: Context) -> bool:
    """Whether a trip count is never negative: as `never_negative` proves (the iteration
    number of an enclosing Loop is one), or the least or the greatest of such counts
    (TorchScript's zip: ReduceMin(Concat(len(a), len(b))))."""
    values = ctx.facts.values
    graph = count.graph
    counters: tuple[int, ...] = ()
    if graph is not None and graph.inputs and ctx.facts.is_loop_body(graph):
        counters = (id(graph.inputs[0]),)
    producer = count.producer()
    if producer is not None and producer.domain == "" and producer.op_type in _RESHAPES:
        source = producer.inputs[0]
        producer = source.producer() if source is not None else None
    if producer is not None and producer.domain == "" and producer.op_type in _EXTREMA:
        source = producer.inputs[0]
        made = source.producer() if source is not None else None
        if made is not None and made.domain == "" and made.op_type == "Concat":
            return all(never_negative(part, values, counters) for part in made.inputs)
        return never_negative(source, values, counters)
    return never_negative(count, values, counters)


_EXTREMA = ("ReduceMin", "ReduceMax")
_RESHAPES = ("Reshape", "Squeeze")


_CHECK_COST = 7  # `_checked_rows`: Shape, Sub, Max, Gather, Add, Slice, and the end


def _checked_rows(
    read: ir.Node,
    end: ir.Value,
    count: int | ir.SymbolicDim | None,
    builder: Builder,
    checked: bool = True,
) -> ir.Value:
    """The stack of the elements the loop reads with `read` = Gather(x, i, axis=a) for i in
    [0, M), M = `end` (1-D, never negative): the first M entries of x along a, moved to the
    front, where x is not proved to hold M of them. Iteration i of the loop fails when i is
    past the end of x, so the loop fails exactly when M > len(x) (it reads nothing when M is
    0, even from an empty x); the batched read fails there too, on a Gather from a table of
    one zero at Max(M - len(x), 0), whose 0 is added to the Slice end:

        Slice(x, 0, M + Gather([0], Max(M - Shape(x)[a], 0)), axes=[a])

    Not Gather(x, Range(0, M)): onnxruntime's optimizer reads that as a Slice, which gives
    the rows there are instead of failing (quirk gather-range-past-end). Where x is proved to
    hold at least M of them (`checked` false: `_rows_at_least`), the Slice alone."""
    source = read.inputs[0]
    assert source is not None and source.shape is not None
    rank = len(source.shape)
    axis = read.attributes.get_int("axis", 0) % rank
    if checked:
        length = dims(builder, source, axis, axis + 1)
        excess = builder.op("Sub", [end, length], name="rows_missing")
        excess = builder.op("Max", [excess, builder.ints([0], "zero_1d")], name="rows_missing")
        table = builder.ints([0], "zero_table")
        check = builder.op("Gather", [table, excess], {"axis": 0}, name="rows_check")
        end = builder.op("Add", [end, check], name="rows_read")
        for value in (excess, check, end):
            value.type, value.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([1])
    start, axes = builder.ints([0], "zero_1d"), builder.ints([axis], "read_axis")
    rows = builder.op("Slice", [source, start, end, axes], name="rows")
    rows.type = source.type
    rows.shape = ir.Shape([*source.shape[:axis], count, *source.shape[axis + 1 :]])
    return moveaxis_to_front(builder, rows, axis, rank)


def _lagged_stack(
    node: ir.Node,
    lag: LaggedRead,
    stack: ir.Value,
    end: ir.Value,
    count: ir.Value,
    builder: Builder,
) -> ir.Value:
    """What the carried value holds in each iteration: Concat(initial, stack) cut to the trip
    count's rows (the last element read is never passed to an iteration). The value after the
    loop is row M of the same Concat, when something reads it."""
    initial = node.inputs[2 + lag.index]
    assert initial is not None
    shifted = builder.op("Concat", [builder.unsqueeze(initial, [0]), stack], {"axis": 0})
    shifted.type = initial.type
    zero = builder.ints([0])
    lagged = builder.op("Slice", [shifted, zero, end, zero], name="previous_elements")
    lagged.type = initial.type
    output = node.outputs[lag.index]
    if output.uses() or output.is_graph_output():
        last = builder.op("Gather", [shifted, count], {"axis": 0}, name="last_element")
        last.type, last.shape = initial.type, initial.shape
        builder.rewriter.replace(output, last)
    return lagged


def _sliced_shapes(
    region: list[ir.Node], body: ir.Graph, seeds: set[ir.Value], values: StaticValues
) -> dict[ir.Value, ir.Shape]:
    """Per Slice of an outer x of known rank by bounds computed in the body, along static axes:
    x's shape with those axes of unknown size (ONNX shape inference gives such a slice no dims,
    and what reads it then none either: a window's mean could not be proved to broadcast)."""
    found: dict[ir.Value, ir.Shape] = {}
    for node in region:
        if node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 4:
            continue
        data, axes = node.inputs[0], node.inputs[3]
        if data is None or axes is None or data in seeds or not _outer(data, body):
            continue
        if data.shape is None or (len(node.inputs) > 4 and node.inputs[4] is not None):
            continue
        sliced = values.get_ints(axes)
        rank = len(data.shape)
        if sliced is None or not all(-rank <= a < rank for a in sliced):
            continue
        cut = {a % rank for a in sliced}
        dims = [None if k in cut else d for k, d in enumerate(data.shape)]
        found[node.outputs[0]] = ir.Shape([d if isinstance(d, int) else None for d in dims])
    return found


def _padded_slices(
    plan: BodyPlan,
    appends: list[tuple[int, ir.Value]],
    joined: dict[int, int],
    values: StaticValues,
    opset: int,
) -> bool:
    """Whether a body value ragged along an axis is held padded, with a mask: not one of the
    windows held flat (`seqlower.batching.rows.windows_as_rows`) or computed from one so."""
    joined_at = {tensor: joined[k] for k, tensor in appends if k in joined}
    flat: set[ir.Value] = set()
    for members in windows_as_rows(plan, joined_at, values, opset).values():
        if not isinstance(members, str):
            flat |= members
    ragged = (v for v, operand in plan.operands.items() if operand.ragged_axis is not None)
    return any(value not in flat for value in ragged)


def _batch_loop(node: ir.Node, plan: LoopBatchPlan, ctx: Context) -> None:
    """Loop(M, true, [], body(i, c, s): s' = SequenceInsert(s, f(SequenceAt(xs, i))))
    -> SplitToSequence(f'(stack(xs)), axis=0, keepdims=0); scan outputs of f(Gather(x, i))
    -> f'(x with the gathered axis moved to the front); the chunks of SplitToSequence(x, sizes)
    with 1-D run-time sizes -> f'(the chunks gathered, padded to the largest, and masked), or
    where they are read elementwise, concatenated back and otherwise reduced by segments only
    -> f(x, per-chunk values gathered at each row's chunk id); windows Slice(x, s_i, e_i) of one
    x with both bounds per element and no constant bound on e_i - s_i, read so
    -> f(Gather(x, the rows of the windows laid end to end, clamped as Slice clamps));
    Gather(y, i) with the rows of y not known to be M
    -> Slice(y, 0, M + Gather([0], Max(M - rows(y), 0)))"""
    builder = ctx.rewriter.before(node)
    trips = node.inputs[0]
    assert trips is not None
    count = _runs(node, plan, ctx, builder)
    # the trip count as a Slice end: where the stacks are cut to it, and for values read late
    end = None
    if plan.cut or plan.lagged or plan.guarded:
        end = builder.op("Reshape", [count, builder.ints([1])], name="trip_count")
    stacks: list[ir.Value] = []
    masks: dict[ir.Value, ir.Value] = {}
    segments: dict[ir.Value, Segments] = {}
    held: dict[ir.Value, ir.Value] = {}
    checks: list[SplitCheck] = []  # chunks read through a Split that checks their sizes
    rows = Rows()
    joined_at = {
        tensor: dict(plan.joined)[k] for k, tensor in plan.appends if k in dict(plan.joined)
    }
    for read in plan.reads:
        chunk = read.node.outputs[0]
        members: set[ir.Value] | str = "not a chunk of differing size"
        if read.ragged is not None:
            members = rows_of_chunk(
                plan.body, chunk, read.ragged.axis, joined_at, ctx.facts.values, builder.opset
            )
        if read.ragged is not None and reduced_by_segments(
            chunk, read.ragged, builder.opset, ctx.facts.values
        ):  # only sums and means read the chunks: segment sums of the split tensor itself
            stack, masks[chunk], count, segments[chunk] = read.ragged.emit_segments(builder)
        elif read.ragged is not None and not isinstance(members, str):
            # also as x's own rows: the values computed from the chunk elementwise and
            # concatenated back are x's rows computed so (`seqlower.batching.rows`)
            stack, masks[chunk], count, held[masks[chunk]], chunk_rows = read.ragged.emit_with_rows(
                builder
            )
            rows.add(chunk, chunk_rows, members)
        elif read.ragged is not None:  # the chunks gathered, padded to the largest, masked
            # the checked count of chunks is the trip count (never cut: `_check`)
            stack, masks[chunk], count, held[masks[chunk]] = read.ragged.emit(builder, checks)
        elif read.node in plan.guarded:
            assert end is not None
            checked = read.node not in plan.bounded
            stack = _checked_rows(read.node, end, plan.count, builder, checked)
        else:
            stack = read.build(builder)
        if plan.cut and read.node not in plan.guarded:
            assert end is not None
            zero = builder.ints([0])
            stack = builder.op("Slice", [stack, zero, end, zero], name="first_elements")
        if stack.producer() is not None and stack.graph is builder.graph and stack.shape is None:
            stack.type = read.node.outputs[0].type
            stack.shape = ir.Shape([plan.count, *read.element])
        stacks.append(stack)
    # windows of one tensor with no constant bound on their length: x's rows, flat, where the
    # body reads them elementwise, by segment reductions or concatenated back (`windows_as_rows`)
    flat = windows_as_rows(plan.body, joined_at, ctx.facts.values, builder.opset)
    for window, members in flat.items():
        if not isinstance(members, str):
            rows.add(window, None, members)
    arguments = stacks + [node.inputs[2 + k] for k in plan.kept]
    for lag in plan.lagged:
        stack = stacks[[read.node for read in plan.reads].index(lag.read)]
        assert end is not None
        arguments.append(_lagged_stack(node, lag, stack, end, count, builder))
    static_count = plan.count if isinstance(plan.count, int) else None
    if plan.counter:  # the iteration numbers, after the other arguments (as seeded)
        numbers = _iteration_numbers(builder, count)
        arguments.append(numbers)
        stacks.append(numbers)
    emitter = Emitter(builder, stacks[0], static_count)
    emitter.masks.update(masks)
    emitter.segments.update(segments)
    emitter.held.update(held)
    emitter.rows = rows
    if plan.counter:
        # Range(0, M) has the batch's rows: every stack holds exactly the M rows the iterations
        # read (cut to M where longer, checked where not proved at least M), or the model fails
        emitter.positions = numbers
    batched = emit_body(plan.body, arguments, emitter, plan.count)  # type: ignore[arg-type]
    drop_spent_checks(checks, batched)
    if plan.counter:
        sliced = _slice_counted_reads(numbers, ctx)
        batched = [sliced.get(value, value) for value in batched]
    results = dict(zip(plan.wanted, batched))
    for running in plan.sums:  # each final sum, and the prefix sums where they are read
        initial = node.inputs[2 + running.index]
        assert initial is not None
        terms = _terms_like_acc(running, results[running.term], builder)
        if not _static(initial):
            ctx.rewriter.replace(
                node.outputs[running.index], _summed(node, running, initial, terms, ctx)
            )
            continue
        if not _rows_like_acc(terms, initial, plan.count) and not _runs_once(trips, ctx):
            terms = _rows_of_acc_when_empty(terms, initial, builder)
        if running.op != "Add":
            ctx.rewriter.replace(
                node.outputs[running.index], _extremum(running, initial, terms, builder)
            )
            continue
        axis = builder.constant(np.array(0, dtype=np.int64), "batch_axis")  # CumSum: 0-D
        prefix = builder.op("Add", [initial, builder.op("CumSum", [terms, axis])])
        prefix.type = initial.type
        prefix.shape = ir.Shape([plan.count, *initial.shape])  # type: ignore[union-attr]
        results[running.update] = prefix
        total = builder.op("ReduceSum", [terms, builder.ints([0], "batch_axes")], {"keepdims": 0})
        total = builder.op("Add", [initial, total], name="running_sum")
        total.type, total.shape = initial.type, initial.shape
        ctx.rewriter.replace(node.outputs[running.index], total)
    updates = {running.update: running.rank for running in plan.sums}

    def result_of(value: ir.Value) -> tuple[ir.Value, int | None]:
        """The batched `value` and the rank of one of its elements."""
        peeled = peel_identity(value)
        if peeled in updates:
            return results[peeled], updates[peeled]
        return results[value], plan.body.outputs[plan.wanted.index(value)].rank

    carried = len(node.inputs) - 2
    joined, heads = dict(plan.joined), dict(plan.heads)
    for k, tensor in plan.appends:
        output = node.outputs[k]
        result, rank = result_of(tensor)
        if k in joined:
            assert rank is not None
            flat = joined_rows(rows, emitter, tensor, rank, joined[k])
            if flat is not None:  # the rows themselves, after the initial elements
                whole = flat
                if heads.get(k):
                    whole = builder.op(
                        "Concat", [*heads[k], flat], {"axis": joined[k]}, name="with_initial"
                    )
                    whole.type = flat.type
            else:
                mask = emitter.masks.get(tensor)
                scattered = emitter.scattered.get(result)
                if mask is not None and scattered is not None and scattered[0] is mask:
                    # the rows one branch scattered, joined by their own mask: what the stack
                    # of every row joined by its mask gives, without the stack
                    _, result, mask = scattered
                whole = _join(result, rank, joined[k], heads.get(k, ()), mask, builder)
            if k in plan.accumulated:  # the grown tensor itself
                ctx.rewriter.replace(output, whole)
                continue
            for use in list(output.uses()):
                ctx.rewriter.replace(use.node.outputs[0], whole)
            continue
        if output.type is None:
            dtype = element_dtype(output) or result.dtype or ir.DataType.FLOAT
            output.type = ir.SequenceType(ir.TensorType(dtype))
        _connect(output, result, rank, plan.count, builder, ctx)
    for k in plan.kept:
        initial = node.inputs[2 + k]
        assert initial is not None
        ctx.rewriter.replace(node.outputs[k], initial)
    for output, value in zip(node.outputs[carried:], loop_body(node).outputs[1 + carried :]):
        result, _ = result_of(value)
        if result.type is None:
            result.type = output.type
        ctx.rewriter.replace(output, result)
    # once joined: a mean of chunks read only through their mask needs no mean of an empty one
    drop_unread_clamps(emitter.clamps, ctx.rewriter)


RULES = RuleSet([Rule("loop-batch", "Loop", _check, _batch_loop, before_producers=True)])
