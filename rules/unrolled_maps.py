"""A map written out once per element is applied once to the whole stack (as `jax.vmap` does):
what a traced export makes of `torch.stack([f(t) for t in x.unbind(a)], b)`, of a loop over
`x.split(1, a)` unrolled, or of `zip` of two such lists.

    Concat(Unsqueeze(f(e_0), b), .., Unsqueeze(f(e_n), b), axis=b)
        (e_i: chunk i of one Split of x along a, in order, squeezed or not; or row i of x,
     Gather(x, i, axis=a), or Reshape(Slice(x, [i], [i + 1], [a]), the row's static shape),
     for every row of a static axis)
        -> Transpose(f'(stack(e)), axis 0 to b)           (no Transpose when b = 0)
    Concat(f(e_0), .., f(e_n), axis=b)                    (`torch.cat`, not `torch.stack`)
        -> Reshape(Transpose(f'(stack(e)), axis 0 to b), axes b and b + 1 merged)
    Add(..Add(Add(c, f(e_0)), f(e_1)).., f(e_n))         (`acc = acc + f(t)` in a traced loop)
        -> Add(c, ReduceSum(f'(stack(e)), axis 0))
    ConcatFromSequence(SequenceConstruct(f(e_0), .., f(e_n)), axis=b, new_axis=0 or 1)
        (e_i: SequenceAt(SplitToSequence(x, axis=a), i), every element of the list, in order)
        -> as the Concat of the f(e_i), or of their Unsqueezes for new_axis=1   (a list)

f' is f batched over a new leading axis (`seqlower.batching`), and stack(e) is x with axis a
moved first (reshaped when the chunks are larger than 1). The copies of f must be the same
computation, node for node: the same operators and attributes, reading the same values
elsewhere (constants compared by value: a traced export writes one Constant per copy), and
chunk i of each Split read where the first copy reads chunk 0. The chunks must be all the
chunks of their Split, in order, of one static size. Every op of f that reads a chunk needs a
batching rule; what reads no chunk is computed once. A sum is added up in another order
(ReduceSum), so float results may round differently, as `loop-batch` does for a running sum.
The batched form must take fewer nodes than the copies (Constants and static shape arithmetic
not counted): two copies of an attention head whose chunks must be transposed to be stacked
and back stay copies, as they run faster so.

The list form (`unrolled-list-map-batch`, what TorchScript writes for `torch.stack([f(t) for t
in x.unbind(a)], b)` kept as lists) is batched at once, before the list is split into a Split
and its reads, each read and the SequenceConstruct are lowered one by one and the Concat is
batched in a later sweep: the result is the same batched form. The list's elements are stacked
as `sequence-map-batch` stacks a SplitToSequence (`seqlower.rules.batching`); positions may be
negative (-n + i is element i).

Refused: opsets before 14 (the batched form reshapes with allowzero); fewer than two copies;
copies that differ in an operator, an attribute or what they read, or that read what the first
copy computes from its chunk; chunks or rows out of order, of different sizes, or not all of
them; a body op without a batching rule; a batched form no smaller than the copies.
"""

from __future__ import annotations

__all__ = ["RULES"]

import dataclasses
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.batching.body import BodyPlan, emit_body, plan_region
from seqlower.batching.core import Emitter, Operand
from seqlower.graph_order import in_graph_order
from seqlower.ops import graph_nodes, has_subgraph, is_tensor
from seqlower.release import let_go
from seqlower.rewriter import Builder, Rewriter
from seqlower.rule import Context, Refusal, Rule, RuleSet
from seqlower.rules.batching import Source, _source_of_elements, _source_of_split
from seqlower.rules.loop_batching import MIN_OPSET
from seqlower.rules.loop_induction import NUMERIC
from seqlower.rules.stacks import ALLOW_ZERO, merged_shape, moveaxis_to_front
from seqlower.uses import use_count

MAX_COPY_NODES = 256  # nodes in one copy of f, at most


@dataclasses.dataclass(frozen=True)
class UnrolledMap:
    axis: int  # the stack axis b, non-negative
    stacked: bool  # Unsqueeze'd results (stack); else concatenated as they are (cat)
    copies: Copies
    built: Built | None = None  # the batched form, built by the check to count it


class _Mismatch(Exception):
    """Two copies of f differ (the message says where)."""


class _Matcher:
    """Matches copy k of f against copy 0, value by value, from their results upwards."""

    def __init__(
        self, graph: ir.Graph, count: int, values: StaticValues, lists: bool = False
    ) -> None:
        self.graph = graph
        self.count = count
        self.values = values
        # with `lists`: element 0 of a list read -> the SplitToSequence that made the list
        self.lists: dict[ir.Value, ir.Node] | None = {} if lists else None
        self.pairs: dict[ir.Value, ir.Value] = {}  # a value of copy k -> its value in copy 0
        self.nodes: set[ir.Node] = set()  # the nodes of copy 0
        self.seeds: dict[ir.Value, list[ir.Value | None]] = {}  # chunk 0 -> chunk i per copy
        self.rows: dict[ir.Value, tuple[ir.Value, int]] = {}  # row 0 -> (data, axis) read

    def match(self, first: ir.Value, other: ir.Value, k: int) -> None:
        known = self.pairs.get(other)
        if known is not None:
            if known is not first:
                raise _Mismatch(f"'{other.name}' stands for two values of the first copy")
            return
        self.pairs[other] = first
        if first is other:
            return  # the same value, read by both copies
        a, b = first.producer(), other.producer()
        if a is None or b is None or a.graph is not self.graph or b.graph is not self.graph:
            if _same_constant(first, other, self.values):
                return
            raise _Mismatch(f"'{first.name}' and '{other.name}' are different inputs")
        if _same_constant(first, other, self.values):
            return
        if a is b:
            self._chunk(a, first, other, k)
            return
        if self._row(a, b, first, other, k) or self._sliced_row(a, b, first, other, k):
            return
        if self._element(a, b, first, other, k):
            return
        if a.op_type != b.op_type or a.domain != b.domain or len(a.inputs) != len(b.inputs):
            raise _Mismatch(f"{_label(a)} and {_label(b)} differ")
        if first.index() != other.index():
            raise _Mismatch(f"'{first.name}' and '{other.name}' are different outputs")
        if has_subgraph(a) or _attributes(a) != _attributes(b):
            raise _Mismatch(f"the attributes of {_label(a)} and {_label(b)} differ")
        if k == 1:
            self.nodes.add(a)
            if len(self.nodes) > MAX_COPY_NODES:
                raise _Mismatch(f"a copy has more than {MAX_COPY_NODES} nodes")
        for x, y in zip(a.inputs, b.inputs):
            if (x is None) != (y is None):
                raise _Mismatch(f"{_label(a)} and {_label(b)} read different optional inputs")
            if x is not None and y is not None:
                self.match(x, y, k)

    def _row(self, a: ir.Node, b: ir.Node, first: ir.Value, other: ir.Value, k: int) -> bool:
        """Whether copy k reads row k of a tensor where copy 0 reads row 0 (Gather at a
        constant, what tracing makes of `x[i]`): then both are rows of one stack."""
        if not (a.op_type == b.op_type == "Gather" and a.domain == b.domain == ""):
            return False
        data = a.inputs[0]
        if data is None or data is not b.inputs[0] or data.shape is None:
            return False
        axis = a.attributes.get_int("axis", 0)
        if axis != b.attributes.get_int("axis", 0) or not -len(data.shape) <= axis < len(
            data.shape
        ):
            return False
        axis %= len(data.shape)
        index_a = _constant(a.inputs[1], self.values)  # type: ignore[arg-type]
        index_b = _constant(b.inputs[1], self.values)  # type: ignore[arg-type]
        if index_a is None or index_b is None or index_a.shape != () or index_b.shape != ():
            return False
        if int(index_a) != 0 or int(index_b) != k:
            raise _Mismatch(f"copy {k} does not read row {k} of '{data.name}'")
        if data.shape[axis] != self.count:
            raise _Mismatch(f"the copies read {self.count} of the rows of '{data.name}', not all")
        self.rows[first] = (data, axis)
        self._seed(first, other, k)
        return True

    def _sliced_row(self, a: ir.Node, b: ir.Node, first: ir.Value, other: ir.Value, k: int) -> bool:
        """Whether copy k reads row k of a tensor where copy 0 reads row 0, each written as a
        Slice of one row reshaped to the row's shape (`Reshape(Slice(x, [i], [i + 1], [a]),
        shape of x without a)`, what an unrolled loop makes of `x[i:i + 1]` reshaped to a
        scalar; the cleanup folds it to the Gather `_row` reads, so a second lowering would
        batch what the first left)."""
        if not (a.op_type == b.op_type == "Reshape" and a.domain == b.domain == ""):
            return False
        found = [_sliced_row(node, self.values) for node in (a, b)]
        if found[0] is None or found[1] is None:
            return False
        (data, axis, index_a), (data_b, axis_b, index_b) = found  # type: ignore[misc]
        if data is not data_b or axis != axis_b:
            return False
        if index_a != 0 or index_b != k:
            raise _Mismatch(f"copy {k} does not read row {k} of '{data.name}'")
        if data.shape[axis] != self.count:  # type: ignore[index]
            raise _Mismatch(f"the copies read {self.count} of the rows of '{data.name}', not all")
        self.rows[first] = (data, axis)
        self._seed(first, other, k)
        return True

    def _element(self, a: ir.Node, b: ir.Node, first: ir.Value, other: ir.Value, k: int) -> bool:
        """Whether copy k reads element k of a list split from a tensor where copy 0 reads
        element 0 (SequenceAt at a constant position, -n + i standing for i), when lists are
        matched: then both are elements of one stack (the list's length is checked against
        the copies' count with its stack, `_copies`)."""
        if self.lists is None:
            return False
        if not (a.op_type == b.op_type == "SequenceAt" and a.domain == b.domain == ""):
            return False
        listed = a.inputs[0]
        if listed is None or listed is not b.inputs[0] or len(a.inputs) != 2 or len(b.inputs) != 2:
            return False
        split = listed.producer()
        if split is None or split.op_type != "SplitToSequence" or split.domain != "":
            return False
        if split.graph is not self.graph:
            return False
        at_a, at_b = self.values.get_int(a.inputs[1]), self.values.get_int(b.inputs[1])
        if at_a is None or at_b is None:
            return False
        n = self.count
        if not (-n <= at_a < n and -n <= at_b < n and at_a % n == 0 and at_b % n == k):
            raise _Mismatch(f"copy {k} does not read element {k} of '{listed.name}'")
        self.lists[first] = split
        self._seed(first, other, k)
        return True

    def _chunk(self, split: ir.Node, first: ir.Value, other: ir.Value, k: int) -> None:
        """Copy k reads chunk k of the Split where copy 0 reads chunk 0."""
        if split.op_type != "Split" or split.domain != "" or len(split.outputs) != self.count:
            raise _Mismatch(f"'{first.name}' and '{other.name}' are different outputs")
        if first.index() != 0 or other.index() != k:
            raise _Mismatch(f"copy {k} does not read chunk {k} of {_label(split)}")
        self._seed(first, other, k)

    def _seed(self, first: ir.Value, other: ir.Value, k: int) -> None:
        """Note that copy k reads `other` where copy 0 reads `first` (the list of what each
        copy reads there is made once: a list of n copies made per copy was quadratic)."""
        seeds = self.seeds.get(first)
        if seeds is None:
            seeds = self.seeds[first] = [None] * self.count
            seeds[0] = first
        seeds[k] = other


def _label(node: ir.Node) -> str:
    return f"{node.op_type} '{node.name}'" if node.name else node.op_type


def _attributes(node: ir.Node) -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for name, attr in sorted(node.attributes.items()):
        value = attr.value
        if is_tensor(value):
            value = (str(value.dtype), tuple(value.shape.numpy()), value.tobytes())
        elif isinstance(value, list | tuple):
            value = tuple(value)
        found.append((name, value))
    return found


def _same_constant(a: ir.Value, b: ir.Value, values: StaticValues) -> bool:
    """True when both are small constants of one type, shape and content."""
    x, y = _constant(a, values), _constant(b, values)
    return x is not None and y is not None and x.dtype == y.dtype and np.array_equal(x, y)


def _constant(value: ir.Value, values: StaticValues) -> np.ndarray | None:
    """The content of a small Constant node or fixed initializer (not of a computed value)."""
    producer = value.producer()
    is_constant = producer.op_type == "Constant" if producer is not None else True
    array = values.get(value) if is_constant else None
    return array if array is not None and array.size <= 64 else None


def _sliced_row(reshape: ir.Node, values: StaticValues) -> tuple[ir.Value, int, int] | None:
    """(x, a, i) when `reshape` is Reshape(Slice(x, [i], [i + 1], [a], [1]), the static shape
    of x without axis a), i and a non-negative; else None."""
    if len(reshape.inputs) != 2 or reshape.inputs[0] is None:
        return None
    piece = reshape.inputs[0].producer()
    if piece is None or piece.op_type != "Slice" or piece.domain != "":
        return None
    data = piece.inputs[0]
    if data is None or data.shape is None or not data.shape.is_static():
        return None
    dims = [int(d) for d in data.shape]
    rank = len(dims)
    bounds = [values.get_ints(v) if v is not None else None for v in piece.inputs[1:]]
    while len(bounds) < 4:
        bounds.append(None)
    starts, ends, axes, steps = bounds
    if starts is None or ends is None or len(starts) != 1 or len(ends) != 1:
        return None
    if len(piece.inputs) > 3 and piece.inputs[3] is not None and axes is None:
        return None
    if len(piece.inputs) > 4 and piece.inputs[4] is not None and steps != [1]:
        return None
    axis = (axes or [0])[0]
    if not -rank <= axis < rank:
        return None
    axis %= rank
    start, end, size = starts[0], ends[0], dims[axis]
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    if not (0 <= start < size and end == start + 1):
        return None
    target = values.get_ints(reshape.inputs[1])
    row = dims[:axis] + dims[axis + 1 :]
    if target != row or 0 in row:  # a 0 in the target may copy a dim, not be 0
        return None
    return data, axis, start


def _rows(data: ir.Value, axis: int, count: int) -> Source:
    """The stack of all the rows of `data` along `axis`: `data` with that axis first."""
    dims = list(data.shape or [])
    rank = len(dims)
    element = ir.Shape(dims[:axis] + dims[axis + 1 :])
    return Source(element, count, lambda b: moveaxis_to_front(b, data, axis, rank))


def _squeezes(chunks: list[ir.Value], nodes: set[ir.Node]) -> list[ir.Value] | None:
    """The Squeeze of each chunk, when each chunk is read by one Squeeze only, and the first is
    in the first copy; else None."""
    found = []
    for chunk in chunks:
        readers = chunk.consumers()
        if use_count(chunk) != 1 or readers[0].op_type != "Squeeze" or readers[0].domain != "":
            return None
        found.append(readers[0].outputs[0])
    return found if found[0].producer() in nodes else None


def _unsqueezed(value: ir.Value, axis: int, ctx: Context) -> ir.Value | None:
    """x when `value` is Unsqueeze(x, [axis]) read only here, else None."""
    node = value.producer()
    if node is None or node.op_type != "Unsqueeze" or node.domain != "" or use_count(value) != 1:
        return None
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = ctx.facts.values.get_ints(node.inputs[1])
    else:
        found = node.attributes.get_ints("axes")
        axes = None if found is None else list(found)
    source = node.inputs[0]
    if axes is None or len(axes) != 1 or source is None or source.shape is None:
        return None
    return source if axes[0] % (len(source.shape) + 1) == axis else None


@dataclasses.dataclass(frozen=True)
class Copies:
    """The copies of f, batched: the plan of the first (fed the first chunk of each list) and
    how to build the stack of each list it reads."""

    plan: BodyPlan
    sources: tuple[Source, ...]  # per seed of the plan
    count: int


def _copies(
    results: list[ir.Value], graph: ir.Graph, ctx: Context, reader: ir.Node, lists: bool = False
) -> Copies | Refusal:
    """The copies of one computation whose results are `results` (copy k reads chunk k of
    each list where the first reads chunk 0; `reader` reads them all), batched; else why not.
    With `lists`, element k of a split list may stand for chunk k, and one must."""
    matcher = _Matcher(graph, len(results), ctx.facts.values, lists)
    try:
        for k, result in enumerate(results[1:], start=1):
            matcher.match(results[0], result, k)
    except _Mismatch as mismatch:
        return Refusal(f"the values are not copies of one computation: {mismatch}")
    if not matcher.seeds:
        return Refusal("the copies read no chunk of a Split")
    if any(v is None for chunks in matcher.seeds.values() for v in chunks):
        return Refusal("a copy does not read every list")
    made = {v for n in matcher.nodes for v in n.outputs}
    if any(
        first is other and (first in made or first in matcher.seeds)
        for other, first in matcher.pairs.items()
    ):
        return Refusal("a copy reads what the first copy computes from its chunk")
    if matcher.lists is not None and not matcher.lists:
        return Refusal("the copies read no element of a split list")
    sources, seeds = [], {}
    nodes = set(matcher.nodes)
    for first, chunks in matcher.seeds.items():
        if matcher.lists and first in matcher.lists:
            listed = _source_of_split(matcher.lists[first], ctx)
            if isinstance(listed, Refusal):
                return listed
            if listed.length != len(chunks):
                return Refusal(
                    f"the copies read {len(chunks)} elements of a list of {listed.length}, not all"
                )
            sources.append(listed)
            seeds[first] = Operand(True, listed.element_shape)
            continue
        if first in matcher.rows:
            data, row_axis = matcher.rows[first]
            sources.append(_rows(data, row_axis, len(chunks)))
            seeds[first] = Operand(True, sources[-1].element_shape)
            continue
        squeezes = _squeezes(chunks, nodes)  # elements read squeezed: no reshape needed
        if squeezes is not None:
            nodes.discard(squeezes[0].producer())  # type: ignore[arg-type]
            first, chunks = squeezes[0], squeezes
        source = _source_of_elements(chunks, ctx)  # type: ignore[arg-type]
        if isinstance(source, Refusal):
            return source
        sources.append(source)
        seeds[first] = Operand(True, source.element_shape)
    in_order = in_graph_order(graph, nodes, reader)
    opset = ctx.rewriter.opset(graph)
    plan = plan_region(graph, seeds, in_order, [results[0]], ctx.facts.values, opset)
    if isinstance(plan, Refusal):
        return plan
    return Copies(plan, tuple(sources), len(results))


def _emit(copies: Copies, builder: Builder) -> ir.Value:
    """f'(stack(e)): [count, *the shape of f's result]."""
    stacks = []
    for source in copies.sources:
        stack = source.build(builder)
        if stack.shape is None:
            stack.shape = ir.Shape([copies.count, *source.element_shape])
        stacks.append(stack)
    emitter = Emitter(builder, stacks[0], copies.count)
    (batched,) = emit_body(copies.plan, stacks, emitter, copies.count)
    return batched


@dataclasses.dataclass(frozen=True, eq=False)
class Built:
    """The batched form as the check built it, in a scratch graph (`Rewriter.scratch`), for
    the rewrite to adopt (`Builder.adopt`) rather than build it again."""

    builder: Builder
    result: ir.Value

    def adopted_by(self, builder: Builder) -> ir.Value | None:
        """The result, once `builder` has adopted the nodes; None when it cannot (the scratch
        nodes are then let go of)."""
        if builder.adopt(self.builder):
            return self.result
        _discard(self.builder.graph)
        return None


def _smaller(
    copies: Copies, before: int, build: Callable[[Builder], ir.Value], ctx: Context
) -> Refusal | Built:
    """Why the batched form would not take fewer nodes than the copies (`before`: each copy
    runs the nodes of the first, and what joins it to the result), or the form as built. The
    batched form is what `build` emits, counted in a scratch graph. Constants and static shape
    arithmetic are not counted (folded)."""
    opset = ctx.rewriter.opset(copies.plan.body)
    probe = Rewriter.scratch(opset)
    result = build(probe)
    live = {result.producer()}
    for node in reversed(
        list(graph_nodes(probe.graph))
    ):  # what the result depends on (no dead node)
        if node in live:
            live.update(v.producer() for v in node.inputs if v is not None)
    values = ctx.facts.values  # shape arithmetic on static shapes is folded after lowering
    after = sum(1 for node in probe.graph if node in live and values.get(node.outputs[0]) is None)
    if after < before:
        return Built(probe, result)
    _discard(probe.graph)
    return Refusal(
        f"batching the {copies.count} copies takes {after} nodes, not fewer than the "
        f"{before} of the copies"
    )


def _discard(graph: ir.Graph) -> None:
    """The scratch nodes let go of what they read (values of the model among them)."""
    for node in reversed(list(graph_nodes(graph))):
        node.resize_inputs(0)
        graph.remove(node)
        let_go(node)


def _copy_nodes(copies: Copies, joins: int) -> int:
    """The nodes the copies take: each runs the first one's nodes and `joins` more; each list
    is split (or its rows gathered) once."""
    per_copy = sum(1 for node, _ in copies.plan.steps if node.op_type != "Constant")
    return copies.count * (per_copy + joins) + len(copies.sources)


def _check(node: ir.Node, ctx: Context) -> UnrolledMap | Refusal:
    if ctx.rewriter.opset(node.graph) < MIN_OPSET:
        # the batched form reshapes with allowzero (the emitters shared with loop-batch)
        return Refusal(f"batching needs Reshape with allowzero (opset {MIN_OPSET} or newer)")
    output = node.outputs[0]
    if len(node.inputs) < 2 or output.shape is None:
        return Refusal("not a stack of two or more copies of one computation")
    axis = node.attributes.get_int("axis", 0) % len(output.shape)
    results = [_unsqueezed(v, axis, ctx) if v is not None else None for v in node.inputs]
    stacked = all(r is not None for r in results)
    if not stacked:  # a cat: the copies' results as they are
        results = list(node.inputs)
        if any(r is None or r.shape is None or use_count(r) != 1 for r in results):
            return Refusal("an input is of unknown rank or read elsewhere too")
    assert node.graph is not None
    copies = _copies(results, node.graph, ctx, node)  # type: ignore[arg-type]
    if isinstance(copies, Refusal):
        return copies
    found = UnrolledMap(axis, stacked, copies)
    rank = len(output.shape)
    before = _copy_nodes(copies, int(stacked)) + 1  # and the Concat
    build = lambda builder: _build_map(found, rank, builder)  # noqa: E731
    built = _smaller(copies, before, build, ctx)
    return built if isinstance(built, Refusal) else dataclasses.replace(found, built=built)


def _rewrite(node: ir.Node, found: UnrolledMap, ctx: Context) -> None:
    """Concat(Unsqueeze(f(e_0), b), .., Unsqueeze(f(e_n), b), axis=b)
    -> Transpose(f'(stack(e)), axis 0 to b); a Concat of the f(e_i) themselves merges axis 0
    into b (Transpose, then Reshape)"""
    output = node.outputs[0]
    builder = ctx.rewriter.before(node)
    result = found.built.adopted_by(builder) if found.built is not None else None
    if result is None:
        result = _build_map(found, len(output.shape or []), builder)
    result.type = output.type
    ctx.rewriter.replace(output, result)


def _check_list(node: ir.Node, ctx: Context) -> UnrolledMap | Refusal:
    if ctx.rewriter.opset(node.graph) < MIN_OPSET:
        return Refusal(f"batching needs Reshape with allowzero (opset {MIN_OPSET} or newer)")
    listed, output = node.inputs[0], node.outputs[0]
    construct = listed.producer() if listed is not None else None
    if construct is None or construct.op_type != "SequenceConstruct" or construct.domain != "":
        return Refusal("the list is not built by a SequenceConstruct")
    if use_count(listed) != 1 or listed.is_graph_output():  # type: ignore[union-attr]
        return Refusal("the list is read elsewhere too")
    if len(construct.inputs) < 2 or output.shape is None:
        return Refusal("not a list of two or more copies of one computation")
    stacked = node.attributes.get_int("new_axis", 0) == 1
    rank = len(output.shape)
    axis = node.attributes.get_int("axis", 0)
    if not -rank <= axis < rank:
        return Refusal(f"axis {axis} is out of range for a result of rank {rank}")
    results = list(construct.inputs)
    if any(r is None or r.shape is None or len(r.shape) != rank - stacked for r in results):
        return Refusal("an element is of unknown rank")
    if not stacked and any(use_count(r) != 1 for r in results):  # type: ignore[arg-type]
        return Refusal("an element is read elsewhere too")  # as the Concat's rule asks
    assert node.graph is not None
    copies = _copies(results, node.graph, ctx, node, lists=True)  # type: ignore[arg-type]
    if isinstance(copies, Refusal):
        return copies
    found = UnrolledMap(axis % rank, stacked, copies)
    before = _copy_nodes(copies, int(stacked)) + 1  # as the Concat of the copies is counted
    build = lambda builder: _build_map(found, rank, builder)  # noqa: E731
    built = _smaller(copies, before, build, ctx)
    return built if isinstance(built, Refusal) else dataclasses.replace(found, built=built)


def _rewrite_list(node: ir.Node, found: UnrolledMap, ctx: Context) -> None:
    """ConcatFromSequence(SequenceConstruct(f(e_0), .., f(e_n)), axis=b, new_axis=1)
    (e_i: SequenceAt(SplitToSequence(x, axis=a), i)) -> Transpose(f'(stack(e)), axis 0 to b);
    with new_axis=0, axis 0 is merged into b (Transpose, then Reshape)"""
    output = node.outputs[0]
    builder = ctx.rewriter.before(node)
    built = found.built
    scratch = set(built.builder.graph) if built is not None else set()
    result = built.adopted_by(builder) if built is not None else None
    made_here = result is not None and result.producer() in scratch
    if result is None:
        result = _build_map(found, len(output.shape or []), builder)
    result.type = output.type
    # so that the next link of a chain of lists is lowered in this sweep: only on a value this
    # rewrite made (the inference after the sweep infers it again), as the driver carries shapes
    if made_here and result.shape is None:
        result.shape = _static_shape(found)
    ctx.rewriter.replace(output, result)


def _static_shape(found: UnrolledMap) -> ir.Shape | None:
    """The shape of the copies' results stacked (or concatenated) when f's result has a static
    shape (every copy's is the same: the same computation on elements of one shape)."""
    first = found.copies.plan.results[0].shape
    if first is None or not all(isinstance(d, int) for d in first):
        return None
    dims = [int(d) for d in first]  # type: ignore[arg-type]
    if found.stacked:
        dims.insert(found.axis, found.copies.count)
    else:
        dims[found.axis] *= found.copies.count
    return ir.Shape(dims)


def _build_map(found: UnrolledMap, rank: int, builder: Builder) -> ir.Value:
    """The batched copies, as the Concat of rank `rank` gives them."""
    batched = _emit(found.copies, builder)
    rank += 0 if found.stacked else 1  # the rank of the stack
    if found.axis:
        perm = [*range(1, found.axis + 1), 0, *range(found.axis + 1, rank)]
        batched = builder.op("Transpose", [batched], {"perm": perm}, name="stacked")
    if not found.stacked:
        result = found.copies.plan.results[0]
        dims = list(result.shape) if result.shape is not None else None
        if dims is not None:
            dims.insert(found.axis, found.copies.count)
        target = merged_shape(builder, batched, rank, dims, found.axis)  # type: ignore[arg-type]
        batched = builder.op("Reshape", [batched, target], ALLOW_ZERO, name="concatenated")
    return batched


# -- a running sum of the copies ------------------------------------------------------------------

_SUMMABLE = NUMERIC  # the types ReduceSum takes, as a running sum in a loop


@dataclasses.dataclass(frozen=True)
class UnrolledSum:
    start: ir.Value  # what the sum starts from
    copies: Copies
    built: Built | None = None  # the batched form, built by the check to count it


def _sum_terms(node: ir.Node) -> list[tuple[ir.Value, list[ir.Value]]]:
    """Each way to read `node` as start + t_0 + .. + t_k (Add(Add(start, t_0), t_1)..., either
    operand order), longest first: (start, [t_0, .., t_k]) with at least two terms, each read
    by that Add alone."""
    terms: list[ir.Value] = []
    accumulators: list[ir.Value] = []
    current = node
    while True:
        left, right = current.inputs
        inner = [v for v in (left, right) if _is_add(v) and use_count(v) == 1]  # type: ignore[arg-type]
        if not inner:
            if not terms:  # one Add alone: a single term either way (most Adds of a model)
                return []
            break
        accumulator = inner[0]
        term = right if accumulator is left else left
        if use_count(term) != 1:  # type: ignore[arg-type]
            # a term read elsewhere too ends every reading: the walk stops here (each Add of
            # a long chain walked all of it: quadratic), the readings start after it
            terms.reverse()
            accumulators.reverse()  # each the sum its term is added to
            return [(accumulators[i], terms[i:]) for i in range(len(terms) - 1)]
        terms.append(term)  # type: ignore[arg-type]
        accumulators.append(accumulator)
        current = accumulator.producer()  # type: ignore[assignment]
    terms.reverse()
    accumulators.reverse()
    readings = []
    for start, first in ((left, right), (right, left)):  # the innermost Add: either order
        found = [start, *accumulators], [first, *terms]
        # the terms of a reading are a suffix: those after the last term read elsewhere too
        shared = [i for i, term in enumerate(found[1]) if use_count(term) != 1]  # type: ignore[arg-type]
        first_alone = shared[-1] + 1 if shared else 0
        readings += [(found[0][i], found[1][i:]) for i in range(first_alone, len(found[1]) - 1)]
    readings.sort(key=lambda reading: -len(reading[1]))
    return readings  # type: ignore[return-value]


def _is_add(value: ir.Value | None) -> bool:
    producer = value.producer() if value is not None else None
    return producer is not None and producer.op_type == "Add" and producer.domain == ""


def _check_sum(node: ir.Node, ctx: Context) -> UnrolledSum | Refusal:
    if ctx.rewriter.opset(node.graph) < MIN_OPSET:
        return Refusal(f"batching needs Reshape with allowzero (opset {MIN_OPSET} or newer)")
    if node.outputs[0].dtype not in _SUMMABLE:
        return Refusal("not a sum of a type ReduceSum takes")
    assert node.graph is not None
    refusal = Refusal("not a sum of two or more copies of one computation")
    for start, terms in _sum_terms(node):
        copies = _copies(terms, node.graph, ctx, node)
        if not isinstance(copies, Refusal):
            found = UnrolledSum(start, copies)
            build = lambda builder, found=found: _build_sum(found, builder)  # noqa: E731
            built = _smaller(copies, _copy_nodes(copies, 1), build, ctx)
            if isinstance(built, Refusal):
                return built
            return dataclasses.replace(found, built=built)
        refusal = copies
    return refusal


def _rewrite_sum(node: ir.Node, found: UnrolledSum, ctx: Context) -> None:
    """Add(..Add(Add(c, f(e_0)), f(e_1)).., f(e_n)) -> Add(c, ReduceSum(f'(stack(e)), axis 0))"""
    builder = ctx.rewriter.before(node)
    total = found.built.adopted_by(builder) if found.built is not None else None
    if total is None:
        total = _build_sum(found, builder)
    total.type = node.outputs[0].type
    ctx.rewriter.replace(node.outputs[0], total)


def _build_sum(found: UnrolledSum, builder: Builder) -> ir.Value:
    batched = _emit(found.copies, builder)
    axis = 0
    moved = batched.producer()
    if moved is not None and moved.op_type == "Transpose" and use_count(batched) == 0:
        perm = list(moved.attributes.get_ints("perm") or [])
        if perm and perm[1:] == sorted(perm[1:]):  # the stack itself: sum where it lies
            batched, axis = moved.inputs[0], perm[0]  # type: ignore[assignment]
    summed = builder.op(
        "ReduceSum", [batched, builder.ints([axis], "axes")], {"keepdims": 0}, name="summed"
    )
    summed.type = batched.type
    return builder.op("Add", [found.start, summed], name="total")


RULES = RuleSet(
    [
        Rule("unrolled-map-batch", "Concat", _check, _rewrite),
        Rule("unrolled-sum-batch", "Add", _check_sum, _rewrite_sum),
        Rule(
            "unrolled-list-map-batch",
            "ConcatFromSequence",
            _check_list,
            _rewrite_list,
            before_producers=True,  # at once, before the list is split into a Split and reads
        ),
    ]
)
