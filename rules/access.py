"""Read elements and lengths of sequences directly.

    SequenceAt(SequenceConstruct(e0..en), p)         -> e[p]                       (p static)
    SequenceAt(SplitToSequence(x, axis=a, keepdims=0), p) -> Gather(x, p, axis=a)
    SequenceAt(SplitToSequence(x, axis=a, keepdims=1), p) -> Gather(x, [p], axis=a)
    SequenceAt(SplitToSequence(x, s, axis=a), p)     -> Slice(x, q*s, q*s + s, a)  (s scalar)
    SequenceAt(SplitToSequence(x, sizes, axis=a), p) -> Slice(x, c[p] - sizes[p], c[p], a)
                                                        (c = CumSum(sizes))
    SequenceAt(SequenceConstruct(Squeeze(Split(x))...), p) -> Gather(x, p, axis=a)  (split undone)
    SequenceAt(SequenceConstruct(Split(x, s, .., s, axis=a)...), p)
        -> Gather(Reshape(x, [.., n, s, ..]), p, axis=a)          (n even chunks, run-time p)
    SequenceAt(SequenceConstruct(e0..en), p)  -> Gather(Concat(Unsqueeze(e)..), p)  (same shapes)
    SequenceAt(SequenceConstruct(e0..en), p)  -> If(p == 0, e0, If(p == 1, e1, ...))  (otherwise)
    SequenceLength(s)                                -> Constant(n)   (n static)
    SequenceLength(SplitToSequence(x, axis=a))       -> Gather(Shape(x), a)
    SequenceLength(SplitToSequence(x, s, axis=a))    -> Size(Range(0, Gather(Shape(x), a), s))
                                                        (s static; Gather(Shape(x), a) for s = 1)
    SequenceLength(SplitToSequence(x, sizes (1-D)))  -> Gather(Shape(sizes), 0)  (+ a check)

A run-time position out of range stays a run-time error: Gather checks its indices, and the If
chain and the scalar-split Slice read the position through a Gather over [0, n) first (q above).
Run-time split sizes that do not add up to the split dim stay a run-time error too: the length
adds dim 0 of Concat(ConstantOfShape([0, d]), ConstantOfShape([0, sum(sizes)])), which is 0 and
fails when the two differ (no element is allocated).
"""

from __future__ import annotations

__all__ = ["RULES"]

import numpy as np
import onnx_ir as ir

from seqlower.analysis.facts import Unknown
from seqlower.analysis.provenance import split_source
from seqlower.analysis.static_values import StaticValues
from seqlower.lists.signs import never_negative
from seqlower.lists.tensors import INT64_MAX
from seqlower.rewriter import Builder
from seqlower.rule import Context, Refusal, Rule, RuleSet, never_empty
from seqlower.rules.construct import static_position

_END = np.iinfo(np.int64).max  # a Slice end past any dim
# Each If of a chain nests its else branch one level deeper; protobuf parsers stop at 100
# nested messages (three per If level), so about 30 levels are all a file can hold, less the
# Loop or If bodies the read is already in.
MAX_IF_CHAIN = 16


def _producer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    node = value.producer() if value is not None else None
    while node is not None and node.op_type == "Identity" and node.domain == "":
        node = node.inputs[0].producer() if node.inputs[0] is not None else None
    if node is None or node.op_type != op_type or node.domain != "":
        return None
    return node


# onnxruntime's Gather (1.20 to 1.32; quirk string-gather in seqlower.runtime_quirks) copies only
# the first string of each inner block when the dims after the gather axis hold more than one
# element, so a Gather over strings would silently give different results there; strings are
# selected by the If chain (or kept) instead.
_STRING_GATHER = "onnxruntime's Gather mis-copies string tensors, so strings are not gathered"


def _is_string(value: ir.Value | None) -> bool:
    return value is not None and value.dtype == ir.DataType.STRING


def _elements_or_refusal(node: ir.Node, ctx: Context) -> tuple[ir.Value, ...] | Refusal:
    elements = ctx.known_elements(node.inputs[0])
    if not isinstance(elements, Refusal):
        return never_empty(node, elements, "reads from", ctx) or elements
    return elements


# -- SequenceAt, static position -----------------------------------------------------------


def _check_at_static(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = _elements_or_refusal(node, ctx)
    if isinstance(elements, Refusal):
        return elements
    position = static_position(node, ctx, len(elements), position_input=1, default=-1)
    if isinstance(position, Refusal):
        return position
    return elements[position]


def _at_static(node: ir.Node, element: ir.Value, ctx: Context) -> None:
    """SequenceAt(SequenceConstruct(e0..en), p) -> e[p]"""
    ctx.rewriter.replace(node.outputs[0], element)


# -- SequenceAt over a split that was not (or cannot be) unrolled ---------------------------


def _check_at_of_split(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    split = _producer(node.inputs[0], "SplitToSequence")
    if split is None:
        return Refusal("the sequence does not come from SplitToSequence")
    if len(split.inputs) > 1 and split.inputs[1] is not None:
        return Refusal("SplitToSequence has a 'split' input: chunks are not single slices")
    data = split.inputs[0]
    if data is None or data.shape is None:
        return Refusal("the rank of the split input is unknown")
    if _is_string(data):
        return Refusal(_STRING_GATHER)
    axis = split.attributes.get_int("axis", 0) % len(data.shape)
    return data, axis, split.attributes.get_int("keepdims", 1) == 1


def _at_of_split(node: ir.Node, match, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceAt(SplitToSequence(x, axis=a, keepdims=k), p) -> Gather(x, p or [p], axis=a)"""
    data, axis, keepdims = match
    _emit_gather(node, data, axis, keepdims, ctx)


def _emit_gather(node: ir.Node, data: ir.Value, axis: int, keepdims: bool, ctx: Context) -> None:
    builder = ctx.rewriter.before(node)
    position = node.inputs[1]
    assert position is not None
    if keepdims:
        position = builder.op("Reshape", [position, builder.ints([1], "one_dim")])
    result = builder.op("Gather", [data, position], {"axis": axis})
    result.type = data.type
    ctx.rewriter.replace(node.outputs[0], result)


def _check_at_of_chunks(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    split = _producer(node.inputs[0], "SplitToSequence")
    if split is None:
        return Refusal("the sequence does not come from SplitToSequence")
    sizes = split.inputs[1] if len(split.inputs) > 1 else None
    if sizes is None:
        return Refusal("SplitToSequence has no 'split' input (at-of-split)")
    data = split.inputs[0]
    if data is None or data.shape is None:
        return Refusal("the rank of the split input is unknown")
    static = ctx.facts.static(sizes)
    if static is not None:
        rank = static.ndim
    elif sizes.shape is not None:
        rank = len(sizes.shape)
    else:
        return Refusal("the rank of the 'split' input is unknown")
    if rank not in (0, 1):
        return Refusal(f"the 'split' input has rank {rank}")
    axis = split.attributes.get_int("axis", 0) % len(data.shape)
    return data, axis, sizes, rank == 0


def _at_of_chunks(node: ir.Node, match, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceAt(SplitToSequence(x, s (scalar), axis=a), p)
        -> Slice(x, S[p], E[p], a), S = Range(0, d, s), E = S + s
    SequenceAt(SplitToSequence(x, sizes (1-D), axis=a), p)
        -> the same with S = CumSum(sizes, exclusive), E = CumSum(sizes)

    The tables of chunk bounds are built once, where the split is (outside a loop that reads
    it), for every SequenceAt that reads the split, all rewritten at once. Every read takes its
    start from S with a Gather, which accepts exactly the positions SequenceAt does ([-n, n-1])
    and fails on the others; the Slice's end clips the uneven last chunk. A constant position
    needs no more than that one entry where the end is known without a table: the last chunk
    ends at the end of x (p = -1), a chunk before the last where the next one starts
    (p < -1: S[p + 1]), and chunk p >= 0 of a static size s at (p + 1) * s. The constant reads
    in the split's own graph (all of which run) take their entries from one Gather of a table
    (and one Split of its result), not one Gather each. A position known at run time reads the
    tables as columns ([n, 1], made once), its end S[p] + s for a static s."""
    data, axis, sizes, scalar = match
    split = node.inputs[0].producer()  # type: ignore[union-attr]
    bounds = _ChunkBounds(ctx.rewriter.before(split), data, axis, sizes, scalar, ctx)
    readers = [node] + [
        use.node
        for use in node.inputs[0].uses()  # type: ignore[union-attr]
        if use.node is not node
        and use.idx == 0
        and use.node.op_type == "SequenceAt"
        and use.node.domain == ""
        and len(use.node.inputs) > 1
        and use.node.inputs[1] is not None
    ]
    plans = {}
    for reader in readers:
        position = ctx.facts.values.get_int(reader.inputs[1])
        if position is not None:
            plans[reader] = bounds.static_plan(position)
    grouped = [reader for reader in plans if reader.graph is split.graph]
    entries = bounds.entries([ref for r in grouped for ref in plans[r] if isinstance(ref, tuple)])
    for reader in readers:
        builder = ctx.rewriter.before(reader)
        if reader in plans:
            taken = entries if reader in grouped else {}
            start = bounds.value(builder, plans[reader][0], taken)
            end = bounds.end(builder, start, plans[reader][1], taken)
        else:
            start, end = bounds.runtime(builder, reader.inputs[1])  # type: ignore[arg-type]
        result = builder.op("Slice", [data, start, end, builder.ints([axis], "axes")])
        result.type = data.type
        ctx.rewriter.replace(reader.outputs[0], result)


# A bound of a chunk at a constant position: an entry of a table ("starts" or "ends", index),
# a constant, or (an end) the start plus the run-time size of a scalar split.
_PLUS_SIZE = "start + s"
_Bound = tuple[str, int] | int | str


class _ChunkBounds:
    """The tables of one split's chunk bounds, each built (where the split is) when first used."""

    def __init__(self, tables: Builder, data, axis, sizes, scalar, ctx) -> None:  # type: ignore[no-untyped-def]
        self.tables = tables
        self.data, self.axis, self.scalar = data, axis, scalar
        static = ctx.facts.values.get_int(sizes) if scalar else None
        self.size = static if static is not None and static > 0 else None  # s, when static
        if sizes.dtype != ir.DataType.INT64:
            sizes = tables.op("Cast", [sizes], {"to": int(ir.DataType.INT64)})
        self.sizes = sizes
        self._built: dict[str, ir.Value] = {}

    def table(self, name: str) -> ir.Value:
        """The table `name`: "starts" or "ends" (one entry per chunk), or as columns ([n, 1]):
        "start_rows", "end_rows"."""
        if name in self._built:
            return self._built[name]
        b = self.tables
        if name.endswith("_rows"):
            table = b.unsqueeze(self.table(name.removesuffix("_rows") + "s"), [1])
        elif self.scalar and name == "starts":
            shape = b.op("Shape", [self.data])
            dim = b.op("Gather", [shape, b.constant(np.array(self.axis))])
            table = b.op("Range", [b.constant(np.array(0, dtype=np.int64)), dim, self.sizes])
        elif self.scalar:
            table = b.op("Add", [self.table("starts"), self.sizes])
        else:
            exclusive = int(name == "starts")
            zero = b.constant(np.array(0))
            table = b.op("CumSum", [self.sizes, zero], {"exclusive": exclusive})
        self._built[name] = table
        return table

    def static_plan(self, p: int) -> tuple[_Bound, _Bound]:
        """Where the chunk at constant position p starts and ends."""
        if p == -1:
            end: _Bound = _END
        elif p < -1:
            end = ("starts", p + 1)
        elif self.size is not None:
            end = (p + 1) * self.size
        elif self.scalar:
            end = _PLUS_SIZE
        else:
            end = ("ends", p)
        return ("starts", p), end

    def entries(self, refs: list[tuple[str, int]]) -> dict[tuple[str, int], ir.Value]:
        """The table entries `refs` as 1-D values of one entry, built where the tables are: one
        Gather per table and a Split of its result (a Gather per entry for one or two)."""
        b = self.tables
        found: dict[tuple[str, int], ir.Value] = {}
        for name in ("starts", "ends"):
            wanted = list(dict.fromkeys(i for t, i in refs if t == name))
            if len(wanted) > 2:
                picked = b.op("Gather", [self.table(name), b.ints(wanted, "positions")])
                parts = b.split(picked, 0, [1] * len(wanted), len(wanted))
                found.update(((name, i), part) for i, part in zip(wanted, parts))
            else:
                found.update(((name, i), self.value(b, (name, i), {})) for i in wanted)
        return found

    def value(self, b: Builder, ref: _Bound, found: dict[tuple[str, int], ir.Value]) -> ir.Value:
        """A bound as a 1-D value of one entry: `found` holds the table entries already read."""
        if isinstance(ref, int):
            return b.ints([ref], "bound")
        assert isinstance(ref, tuple), ref
        if ref not in found:
            name, index = ref
            found[ref] = b.op("Gather", [self.table(name), b.ints([index], "position")])
        return found[ref]

    def runtime(self, b: Builder, position: ir.Value) -> tuple[ir.Value, ir.Value]:
        """The bounds of the chunk at a run-time position: Gathers of the columns."""
        start = b.op("Gather", [self.table("start_rows"), position], {"axis": 0})
        if self.scalar:
            return start, self.end(b, start, _PLUS_SIZE, {})
        return start, b.op("Gather", [self.table("end_rows"), position], {"axis": 0})

    def end(
        self, b: Builder, start: ir.Value, ref: _Bound, found: dict[tuple[str, int], ir.Value]
    ) -> ir.Value:
        """The end of the chunk that begins at `start`: `ref`, or start + s (scalar splits)."""
        if ref != _PLUS_SIZE:
            return self.value(b, ref, found)
        size = b.ints([self.size], "size") if self.size is not None else self.sizes
        return b.op("Add", [start, size])


def _check_at_split_source(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = _elements_or_refusal(node, ctx)
    if isinstance(elements, Refusal):
        return elements
    source = split_source(elements, ctx.facts.values)
    if source is None or not source.squeezed:
        return Refusal("the elements are not the squeezed slices of one tensor")
    if _is_string(source.data):
        return Refusal(_STRING_GATHER)
    return source


def _at_split_source(node: ir.Node, source, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceAt(SequenceConstruct(Squeeze(Split(x, 1s, axis=a), a)...), p) -> Gather(x, p, a)"""
    _emit_gather(node, source.data, source.axis, False, ctx)


# -- SequenceAt, run-time position ----------------------------------------------------------


def _check_at_even_chunks(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = _elements_or_refusal(node, ctx)
    if isinstance(elements, Refusal):
        return elements
    source = split_source(elements, ctx.facts.values)
    if source is None or source.squeezed:
        return Refusal("the elements are not the chunks of one Split")
    if _is_string(source.data):
        return Refusal(_STRING_GATHER)
    axis, shape = source.axis, source.data.shape
    assert shape is not None
    sizes = {e.shape[axis] if e.shape is not None else None for e in elements}
    (size,) = sizes if len(sizes) == 1 else (None,)
    if not isinstance(size, int) or size == 0:
        return Refusal("the chunks do not share one static, non-zero size on the split axis")
    trailing = list(shape)[axis + 1 :]
    if not all(isinstance(d, int) for d in trailing):
        return source.data, axis, len(elements), size, None
    return source.data, axis, len(elements), size, [0] * axis + [len(elements), size, *trailing]


def _at_even_chunks(node: ir.Node, match, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceAt(SequenceConstruct(Split(x, s, .., s, axis=a)...), p)
        -> Gather(Reshape(x, [0.., n, s, ..]), p, axis=a)      (the dims after a static)
        -> Slice(x, Gather(S, p), Gather(S + s, p), a), S = [[0], [s], .., [(n-1)s]] (others)

    The n chunks of size s are one Reshape away from an axis of n: a run-time position reads
    its chunk with one Gather (which accepts exactly SequenceAt's positions, [-n, n-1]), not a
    comparison per element. Where a dim after the axis is known at run time only, a Reshape
    would need it (a -1 is ambiguous for an empty tensor): the chunk's bounds are read from
    constant tables instead."""
    data, axis, count, size, shape = match
    builder = ctx.rewriter.before(node)
    position = node.inputs[1]
    if shape is not None:
        chunked = builder.op("Reshape", [data, builder.ints(shape, "chunked_shape")])
        result = builder.op("Gather", [chunked, position], {"axis": axis})
    else:
        starts = np.arange(0, count * size, size, dtype=np.int64).reshape(count, 1)
        tables = (builder.constant(starts, "starts"), builder.constant(starts + size, "ends"))
        bounds = [builder.op("Gather", [table, position], {"axis": 0}) for table in tables]
        result = builder.op("Slice", [data, *bounds, builder.ints([axis], "axes")])
    result.type = data.type
    ctx.rewriter.replace(node.outputs[0], result)


def _same_static_shape(elements: tuple[ir.Value, ...]) -> bool:
    shapes = {tuple(e.shape) if e.shape is not None else None for e in elements}
    if len(shapes) != 1:
        return False
    (shape,) = shapes
    return shape is not None and all(isinstance(d, int) for d in shape)


def _check_at_gather(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = _elements_or_refusal(node, ctx)
    if isinstance(elements, Refusal):
        return elements
    if not _same_static_shape(elements):
        return Refusal("the elements do not share one static shape, so they cannot be stacked")
    if _is_string(elements[0]):
        return Refusal(_STRING_GATHER)
    return elements


def _at_gather(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceAt(SequenceConstruct(e0..en), p) -> Gather(Concat(Unsqueeze(e, 0)...), p)"""
    builder = ctx.rewriter.before(node)
    stacked = builder.stack(elements)
    result = builder.op("Gather", [stacked, node.inputs[1]], {"axis": 0})
    result.type = elements[0].type
    result.shape = elements[0].shape
    ctx.rewriter.replace(node.outputs[0], result)


def _check_at_if_chain(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    elements = _elements_or_refusal(node, ctx)
    if isinstance(elements, Refusal):
        return elements
    if len({e.dtype for e in elements}) != 1 or elements[0].dtype is None:
        return Refusal("the element types are not all known")
    if len(elements) > MAX_IF_CHAIN:
        return Refusal(
            f"choosing one of {len(elements)} elements would nest {len(elements) - 1} Ifs, "
            f"more than an ONNX file holds (at most {MAX_IF_CHAIN} elements are chosen this way)"
        )
    return elements


def _at_if_chain(node: ir.Node, elements, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceAt(SequenceConstruct(e0..en), p) -> If(i == 0, e0, If(i == 1, e1, ... en)),
    with i = Gather(range(n), p) so that an out-of-range p still fails at run time; one element
    e0 -> Gather(Unsqueeze(e0, 0), p), which fails there too (an If chain of one element would
    read no position, and the check would be taken away as unused); one string element (never
    gathered) -> Squeeze(Slice(Unsqueeze(e0, 0), i, i + 1)), i = Gather([0], p)."""
    builder = ctx.rewriter.before(node)
    if len(elements) == 1:
        ctx.rewriter.replace(node.outputs[0], _only_element(builder, elements[0], node.inputs[1]))
        return
    positions = builder.ints(list(range(len(elements))), "positions")
    index = builder.op("Gather", [positions, node.inputs[1]], {"axis": 0})
    ctx.rewriter.replace(node.outputs[0], _select(builder, index, list(elements), 0))


def _only_element(builder: Builder, element: ir.Value, position: ir.Value) -> ir.Value:
    """`element`, read at `position` as the only element of a list: fails unless it is 0 or -1."""
    one = builder.unsqueeze(element, [0])
    if not _is_string(element):
        result = builder.op("Gather", [one, position], {"axis": 0}, name="only_element")
    else:
        index = builder.op("Gather", [builder.ints([0], "positions"), position], {"axis": 0})
        start = builder.op("Reshape", [index, builder.ints([1])])
        end = builder.op("Add", [start, builder.ints([1])])
        picked = builder.op("Slice", [one, start, end, builder.ints([0])])
        result = builder.squeeze(picked, [0])
    result.type, result.shape = element.type, element.shape
    return result


def _select(builder: Builder, index: ir.Value, elements: list[ir.Value], first: int) -> ir.Value:
    """A value equal to elements[index - first], by a chain of If nodes."""
    if len(elements) == 1:
        result = builder.op("Identity", [elements[0]])
    else:
        condition = builder.op("Equal", [index, builder.constant(np.array(first))])
        branches = {}
        for key, picked in (("then_branch", elements[:1]), ("else_branch", elements[1:])):
            branch = builder.rewriter.new_graph(f"{builder.hint}_{key}_{first}", builder.opset)
            branch.graph.outputs.append(
                _select(branch, index, picked, first + (key == "else_branch"))
            )
            branches[key] = branch.graph
        result = builder.op("If", [condition], branches, name="select")
    result.type = elements[0].type
    result.shape = elements[0].shape if len(elements) == 1 else None
    return result


# -- SequenceLength -------------------------------------------------------------------------


def _check_length_static(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    fact = ctx.facts.sequence(node.inputs[0])  # type: ignore[arg-type]
    if isinstance(fact, Unknown):
        return Refusal(fact.reason)
    return fact.length


def _length_static(node: ir.Node, length: int, ctx: Context) -> None:
    """SequenceLength(s) -> Constant(n), n the static length of s"""
    value = ctx.rewriter.before(node).constant(np.array(length, dtype=np.int64), "length")
    ctx.rewriter.replace(node.outputs[0], value)


def _check_length_of_split(node: ir.Node, ctx: Context):  # type: ignore[no-untyped-def]
    split = _producer(node.inputs[0], "SplitToSequence")
    if split is None:
        return Refusal("the sequence does not come from SplitToSequence")
    data = split.inputs[0]
    if data is None or data.shape is None:
        return Refusal("the rank of the split input is unknown")
    chunk = None
    if len(split.inputs) > 1 and split.inputs[1] is not None:
        chunk = split.inputs[1]
        if chunk.shape is None or len(chunk.shape) not in (0, 1):
            return Refusal("the rank of the 'split' input is unknown or not 0 or 1")
    return data, split.attributes.get_int("axis", 0) % len(data.shape), chunk


def _length_of_split(node: ir.Node, match, ctx: Context) -> None:  # type: ignore[no-untyped-def]
    """SequenceLength(SplitToSequence(x, axis=a)) -> Gather(Shape(x), a)
    SequenceLength(SplitToSequence(x, s, axis=a)) -> (Gather(Shape(x), a) + s - 1) / s
        (s static: Size(Range(0, Gather(Shape(x), a), s)), the table at-of-chunks reads)
    SequenceLength(SplitToSequence(x, sizes (1-D), axis=a)) -> Size(sizes)
        (checked: fails when Sum(sizes) != Gather(Shape(x), a) or a size is negative)

    The lengths of one split read in one graph are one value: the first rewrite builds it, the
    later ones read it (n lengths of a split, n graph outputs: one Shape and Gather, n - 1
    Identities naming the outputs, not n of each)."""
    data, axis, chunk = match
    each_read = (
        chunk is not None
        and len(chunk.shape) == 1  # type: ignore[arg-type]
        and _counts_loops_reading_each(node.outputs[0], node.inputs[0], ctx.facts.values)
    )
    key = ("length-of-split", data, axis, chunk, each_read)
    graph = node.graph
    assert graph is not None
    length = ctx.built_earlier(key, graph)
    if length is None:
        length = _split_length(node, data, axis, chunk, each_read, ctx)
        ctx.remember(key, graph, length)
    ctx.rewriter.replace(node.outputs[0], length)


def _split_length(
    node: ir.Node,
    data: ir.Value,
    axis: int,
    chunk: ir.Value | None,
    each_read: bool,
    ctx: Context,
) -> ir.Value:
    """The length of the split of `data` along `axis` by `chunk`, built before `node`."""
    builder = ctx.rewriter.before(node)
    length = builder.op("Gather", [builder.op("Shape", [data]), builder.constant(np.array(axis))])
    if chunk is not None and len(chunk.shape) == 1:  # type: ignore[arg-type]
        proved = never_negative(chunk, ctx.facts.values)
        length = _length_of_sizes(builder, length, chunk, nonnegative=proved, empty_read=each_read)
    elif chunk is not None and (size := ctx.facts.values.get_int(chunk)) == 1:
        pass  # chunks of one: as many as the dim
    elif chunk is not None and size is not None and size > 1:
        # the size of at-of-chunks' table of chunk starts, the one node both rules emit
        zero = builder.constant(np.array(0, dtype=np.int64))
        size64 = builder.constant(np.array(size, dtype=np.int64))
        length = builder.op("Size", [builder.op("Range", [zero, length, size64])])
    elif chunk is not None:
        chunk64 = builder.op("Cast", [chunk], {"to": int(ir.DataType.INT64)})
        one = builder.constant(np.array(1, dtype=np.int64), "one")
        rounded_up = builder.op("Sub", [builder.op("Add", [length, chunk64]), one])
        length = builder.op("Div", [rounded_up, chunk64])
    length.type = ir.TensorType(ir.DataType.INT64)
    return length


def _counts_loops_reading_each(
    length: ir.Value, sequence: ir.Value | None, values: StaticValues
) -> bool:
    """Whether `length` (of the list `sequence`) is read only as the trip count of Loops whose
    body reads the list at its iteration number in every iteration (`for v in x.split(s)`):
    a Loop that runs at all then reads element 0."""
    loops = _trip_count_of(length, values)
    return (
        sequence is not None
        and bool(loops)
        and all(
            any(
                n.op_type == "SequenceAt"
                and n.domain == ""
                and n.inputs[0] is sequence
                and n.inputs[1] is body.inputs[0]
                for n in body
            )
            for body in (loop.attributes["body"].as_graph() for loop in loops or ())
        )
    )


def _trip_count_of(length: ir.Value, values: StaticValues) -> list[ir.Node] | None:
    """The Loops that read `length` as their trip count, directly or as TorchScript's count of
    `enumerate`, ReduceMin(Concat(INT64_MAX, Unsqueeze(n))) (which is n); None when anything
    else reads it."""
    loops: list[ir.Node] = []
    pending = [length]
    while pending:
        value = pending.pop()
        if value.is_graph_output():
            return None
        for use in value.uses():
            node = use.node
            op = node.op_type if node.domain == "" else ""
            if op == "Loop" and use.idx == 0:
                loops.append(node)
            elif op == "Unsqueeze" and use.idx == 0 and value is length:
                pending.append(node.outputs[0])
            elif op == "Concat" and value is not length and len(node.inputs) == 2:
                other = node.inputs[1 - use.idx]
                if other is None or values.get_ints(other) != [INT64_MAX]:
                    return None
                pending.append(node.outputs[0])
            elif (
                op == "ReduceMin"
                and use.idx == 0
                and value.producer() is not None
                and (
                    value.producer().op_type == "Concat"  # type: ignore[union-attr]
                )
            ):
                pending.append(node.outputs[0])
            else:
                return None
    return loops


def _length_of_sizes(
    builder: Builder,
    dim: ir.Value,
    sizes: ir.Value,
    *,
    nonnegative: bool = False,
    empty_read: bool = False,
) -> ir.Value:
    """The number of chunks of a split of `dim` by the 1-D run-time `sizes`: Size(sizes), or
    `dim` when `sizes` is empty (onnxruntime then splits into chunks of 1; onnx.reference gives
    no chunk); the split fails, as the SplitToSequence itself does, when the sizes are not
    empty and have a negative size or do not add up to `dim`:

        bad = Max(Sum(|sizes|) - dim, dim - Sum(sizes))
        length = Size(sizes) + bad + Gather([0], Min(bad, Size(sizes)))

    bad is >= 0 always (Sum(|sizes|) >= Sum(sizes)), 0 exactly when the sizes add up to `dim`
    and none is negative, and `dim` when there is no size; so the Gather of the table of one
    fails exactly for sizes that are there and wrong, and the length is Size(sizes) or `dim`.
    Sizes proved `nonnegative` (a count such as ReduceSum(Cast(Equal(...)))) take bad =
    |Sum(sizes) - dim|, the same on every input. (An earlier form tested the empty case with an
    Equal and two Wheres: four launches more; it stays before opset 12, which has no Max or Min
    of integers.)

    With `empty_read` (the length is only the trip count of Loops that read element i in every
    iteration i) empty sizes are not told apart: Size(sizes) + Gather([0], bad). Empty sizes on
    a dim that is not empty (onnxruntime's chunks of one) then fail at the length, where the
    read of element 0 from the lowered list's empty tables fails without it; on an empty dim
    the length is 0, as before."""
    sizes = builder.op("Cast", [sizes], {"to": int(ir.DataType.INT64)})
    if builder.opset < _INTEGER_MAX_OPSET:
        return _length_of_sizes_with_wheres(
            builder, dim, sizes, nonnegative=nonnegative, empty_read=empty_read
        )
    count = builder.op("Size", [sizes])
    total = builder.op("ReduceSum", [sizes], {"keepdims": 0})
    if nonnegative:
        bad = builder.op("Abs", [builder.op("Sub", [total, dim])])
    else:
        magnitude = builder.op("ReduceSum", [builder.op("Abs", [sizes])], {"keepdims": 0})
        over = builder.op("Sub", [magnitude, dim])
        under = builder.op("Sub", [dim, total])
        bad = builder.op("Max", [over, under])
    if empty_read:
        check = builder.op("Gather", [builder.ints([0], "zero_table"), bad], {"axis": 0})
        return builder.op("Add", [count, check], name="length")
    wrong = builder.op("Min", [bad, count])
    check = builder.op("Gather", [builder.ints([0], "zero_table"), wrong], {"axis": 0})
    return builder.op("Add", [builder.op("Add", [count, bad]), check], name="length")


_INTEGER_MAX_OPSET = 12  # Max and Min of integers


def _length_of_sizes_with_wheres(
    builder: Builder, dim: ir.Value, sizes: ir.Value, *, nonnegative: bool, empty_read: bool
) -> ir.Value:
    """`_length_of_sizes` before opset 12 (no Max or Min of int64): the empty case tested.

    bad = |Sum(sizes) - dim| + (Sum(|sizes|) - Sum(sizes))     (0 when empty)
    length = Where(empty, dim, Size(sizes)) + Gather([0], bad)"""
    zero = builder.constant(np.array(0, dtype=np.int64), "zero")
    count = builder.op("Size", [sizes])
    empty = None if empty_read else builder.op("Equal", [count, zero])
    total = builder.op("ReduceSum", [sizes], {"keepdims": 0})
    off_sum = builder.op("Abs", [builder.op("Sub", [total, dim])])
    if not nonnegative:
        magnitude = builder.op("ReduceSum", [builder.op("Abs", [sizes])], {"keepdims": 0})
        off_sum = builder.op("Add", [off_sum, builder.op("Sub", [magnitude, total])])
    if empty is None:
        check = builder.op("Gather", [builder.ints([0], "zero_table"), off_sum], {"axis": 0})
        return builder.op("Add", [count, check], name="length")
    bad = builder.op("Where", [empty, zero, off_sum])
    check = builder.op("Gather", [builder.ints([0], "zero_table"), bad], {"axis": 0})
    return builder.op("Add", [builder.op("Where", [empty, dim, count]), check], name="length")


RULES = RuleSet(
    [
        Rule("at-static-position", "SequenceAt", _check_at_static, _at_static),
        Rule("at-of-split", "SequenceAt", _check_at_of_split, _at_of_split),
        Rule("at-of-chunks", "SequenceAt", _check_at_of_chunks, _at_of_chunks),
        Rule("at-split-source", "SequenceAt", _check_at_split_source, _at_split_source),
        Rule(
            "at-even-chunks",
            "SequenceAt",
            _check_at_even_chunks,
            _at_even_chunks,
            last_resort=True,
        ),
        Rule("at-dynamic-gather", "SequenceAt", _check_at_gather, _at_gather, last_resort=True),
        Rule(
            "at-dynamic-if-chain", "SequenceAt", _check_at_if_chain, _at_if_chain, last_resort=True
        ),
        Rule("length-static", "SequenceLength", _check_length_static, _length_static),
        Rule("length-of-split", "SequenceLength", _check_length_of_split, _length_of_split),
    ]
)
