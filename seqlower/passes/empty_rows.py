"""The nodes that compute from the rows of one tensor and constants alone, run only where it has
a row; where it has none, their results are constants, computed here.

    x: [M, 9] (every dim static but the first)
    a = Slice(x, [0], [4], [1]); b = Add(a, c)        g = If(Cast(Size(x), to=BOOL)) {
    k = Compress(Range(0, Gather(Shape(x), 0)), m)  ->   then: a = ..; b = ..; k = ..; return b, k
    .. = Loop(Size(k), .., b)                            else: return <[0, 4] float>, <[0] int64>
                                                       }
                                                       .. = Loop(Size(g_k), .., g_b)

A loop batched over a list's elements (`loop-batch`) runs its whole body once on the stack of
them, however many there are; where the list is empty, the loop it replaces ran no iteration
and launched nothing, while the batched body launches each of its kernels on empty tensors
(SORT's Kalman predict over no tracker: about 24 kernels against a Loop of no iteration).
Every node of the region reads x, or a value of the region, beside static values only, so where
x holds no row (M = 0, its one possible value the empty tensor of its type and shape) each of
its results has one possible value: onnx.reference computes it once, at M = 0, and the
else-branch returns it as a constant. With x's other dims static and above 0, `Size(x)` is 0
exactly where M is.

The region grows from x through its readers: a node joins it when it reads x or the region,
every other input it reads is static (`seqlower.analysis.static_values`), it is a deterministic
operator of the default domain without subgraphs, and its values are tensors. What the region
gives to nodes outside it (and to the graph's outputs) the If returns. A region is guarded only
where the nodes in it that a batching rule made (`BATCHING_RULES`, passed in as `batched`) cost
at least `MIN_LAUNCHES` launches, three times the guard (`seqlower.cost`: the If counts
`IF_LAUNCHES`, the Size and the Cast one each), and where the guard is at most `MAX_SHARE` of
the whole model's estimate on small inputs (`seqlower.cost.SMALL_COUNT` iterations per loop):
where x has rows the guard is all that changes, and it is a fixed cost, measured 2.4 to 3 us in
onnxruntime 1.32 on one thread (a 13 us lowering of 22 launches ran 18% slower guarded). A
batch of a loop's elements is where the model as given ran nothing for no element; other tensor
code over a dim that may be 0 (a network over a batch) ran as many kernels as given, and is not
guarded. Also only where what the region
returns at M = 0 holds at most `MAX_ELEMENTS` elements, and where onnx.reference computes it
(a region that fails on an empty x is left as it is: it fails there either way). Only the main
graph, and only where declared shapes are trusted (not for tract, which holds a model to its
declared shapes). A second lowering batches nothing, so guards nothing.
"""

from __future__ import annotations

__all__ = ["BATCHING_RULES", "MAX_ELEMENTS", "MAX_SHARE", "MIN_LAUNCHES", "guard_empty_rows"]

import logging
import math
import warnings
from collections.abc import Collection

import numpy as np
import onnx
import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.cost import IF_LAUNCHES, SMALL_COUNT, launches
from seqlower.ops import graph_nodes, graphs_within_node, has_subgraph, iter_all_graphs
from seqlower.passes.new_constants import fresh_name

logger = logging.getLogger(__name__)

# the rules that batch a loop of run-time count over its elements
BATCHING_RULES = frozenset(
    {"loop-batch", "loop-batch-chunks", "loop-batch-row-chunks", "sequence-map-batch"}
)
GUARD_LAUNCHES = IF_LAUNCHES + 2  # the If, the Size and the Cast of its condition
MIN_LAUNCHES = 3 * GUARD_LAUNCHES  # the guard costs at most a third of what it may skip
# ... and at most this share of the whole model's estimate on small inputs, which it adds to
# every run that has rows
MAX_SHARE = 0.02
MAX_ELEMENTS = 64  # elements of the constants the else-branch returns, in all

_NOT_DETERMINISTIC = frozenset(
    {
        "Bernoulli",
        "Dropout",
        "Multinomial",
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
    }
)


def guard_empty_rows(model: ir.Model, batched: Collection[ir.Node]) -> int:
    """Guard each region of the main graph that computes from the rows of one tensor and
    constants, and holds at least `MIN_LAUNCHES` launches of `batched` (the nodes a batching
    rule made: see the module docstring); returns how many were guarded. Each node is looked
    at in one region at most, and a region is grown from its seed's readers: linear in the
    graph (the graph's order is read again after each guard made)."""
    graph = model.graph
    opset = model.opset_imports.get("", None)
    if opset is None or not any(node.graph is graph for node in batched):
        return 0
    values = StaticValues(opset)
    seen: set[ir.Node] = set()  # the nodes of every region looked at
    names: set[str | None] | None = None
    whole: float | None = None
    order: _Order | None = None
    guarded = 0
    # a region worth a guard holds batched nodes: its seed is read by one
    seeds = list(graph.inputs) + [v for node in graph_nodes(graph) for v in node.outputs]
    seeds = [v for v in seeds if any(use.node in batched for use in v.uses())]
    for seed in seeds:
        if seed.producer() in seen or _empty_shape(seed) is None:
            continue
        if order is None:
            order = _Order(graph)
        region = _region(graph, seed, values, seen, order)
        seen.update(region)
        if _launches([n for n in region if n in batched], values) < MIN_LAUNCHES:
            continue
        if whole is None:  # estimated once, where a region is found
            whole = launches(model, trip_count=SMALL_COUNT)
        if MAX_SHARE * whole < GUARD_LAUNCHES:
            continue
        exits = _exits(region)
        if not exits:
            continue
        at_zero = _at_zero(seed, region, exits, values, opset)
        if at_zero is None or sum(a.size for a in at_zero) > MAX_ELEMENTS:
            continue
        place = _place(region, exits, order)
        if place is False:
            continue
        if names is None:
            names = {v.name for g in iter_all_graphs(model) for v in _graph_values(g)}
        _guard(graph, seed, region, exits, at_zero, place, names)
        order = None  # nodes moved and made
        guarded += 1
    return guarded


class _Order:
    """Each node's position in the main graph, and for each graph nested in a node of it that
    node (where what the nested graph reads is read)."""

    def __init__(self, graph: ir.Graph) -> None:
        self.graph = graph
        self.position: dict[ir.Node, int] = {}
        self.holder: dict[int, ir.Node] = {}
        for index, node in enumerate(graph_nodes(graph)):
            self.position[node] = index
            for inner in graphs_within_node(node):
                self.holder[id(inner)] = node

    def reader(self, node: ir.Node) -> ir.Node | None:
        """The node of the main graph that is `node` or holds it."""
        if node.graph is self.graph:
            return node
        return self.holder.get(id(node.graph))


def _empty_shape(value: ir.Value) -> list[int] | None:
    """The shape of `value` where its first dim is 0: the other dims must be static and above 0
    (then its Size is 0 exactly there), and the first not static (else nothing to guard)."""
    if not isinstance(value.type, ir.TensorType) or value.dtype is None or value.shape is None:
        return None
    dims = list(value.shape)
    if not dims or isinstance(dims[0], int):
        return None
    rest = dims[1:]
    if not all(isinstance(d, int) and d > 0 for d in rest):
        return None
    if value.dtype in (ir.DataType.STRING, ir.DataType.UNDEFINED):
        return None
    return [0, *(int(d) for d in rest)]  # type: ignore[arg-type]


def _joins(node: ir.Node) -> bool:
    """Whether `node` is of a kind a region may hold."""
    if node.domain != "" or node.op_type in _NOT_DETERMINISTIC or node.op_type == "Constant":
        return False
    if has_subgraph(node) or any(a.is_ref() for a in node.attributes.values()):
        return False
    return all(
        isinstance(v.type, ir.TensorType) for v in (*node.inputs, *node.outputs) if v is not None
    )


def _region(
    graph: ir.Graph, seed: ir.Value, values: StaticValues, seen: set[ir.Node], order: _Order
) -> list[ir.Node]:
    """The nodes of `graph` that read `seed` or the region, and otherwise static values only,
    in graph order (none of `seen`)."""
    inside: set[ir.Value] = {seed}
    region: set[ir.Node] = set()
    pending = [seed]
    while pending:
        value = pending.pop()
        for use in value.uses():
            node = use.node
            if node.graph is not graph or node in region or node in seen or not _joins(node):
                continue
            present = [v for v in node.inputs if v is not None]
            if all(v in inside or values.get(v) is not None for v in present):
                region.add(node)
                inside.update(node.outputs)
                pending.extend(node.outputs)
    return sorted(region, key=order.position.__getitem__)


def _launches(region: list[ir.Node], values: StaticValues) -> int:
    """The region's launches: its nodes but those whose results are static (folded when a
    session is made)."""
    return sum(1 for n in region if not all(values.get(v) is not None for v in n.outputs))


def _exits(region: list[ir.Node]) -> list[ir.Value]:
    """The region's values read outside it or returned by the graph, in graph order."""
    members = set(region)
    found = []
    for node in region:
        for value in node.outputs:
            outside = any(use.node not in members for use in value.uses())
            if outside or value.is_graph_output():
                found.append(value)
    return found


def _at_zero(
    seed: ir.Value,
    region: list[ir.Node],
    exits: list[ir.Value],
    values: StaticValues,
    opset: int,
) -> list[np.ndarray] | None:
    """What each of `exits` holds where `seed` has no row, computed by onnx.reference; None
    where the region fails there or onnx.reference cannot run it."""
    from onnx.reference import ReferenceEvaluator  # loaded only when a region is found

    made = {v for node in region for v in node.outputs}
    shape = _empty_shape(seed)
    assert shape is not None and seed.dtype is not None and seed.name
    initializers = []
    done: set[str] = set()
    for node in region:
        for value in node.inputs:
            if value is None or value is seed or value in made or value.name in done:
                continue
            array = values.get(value)
            assert array is not None and value.name
            done.add(value.name)
            initializers.append(onnx.numpy_helper.from_array(np.asarray(array), value.name))
    nodes = [ir.serde.serialize_node(node) for node in region]
    try:
        proto = onnx.helper.make_model(
            onnx.helper.make_graph(
                nodes,
                "at_zero",
                [onnx.helper.make_tensor_value_info(seed.name, int(seed.dtype), shape)],
                [onnx.helper.make_value_info(v.name or "", onnx.TypeProto()) for v in exits],
                initializers,
            ),
            opset_imports=[onnx.helper.make_opsetid("", opset)],
        )
        feed = np.zeros(shape, dtype=seed.dtype.numpy())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = ReferenceEvaluator(proto).run(None, {seed.name: feed})
    except Exception as error:  # fails on an empty x, or an operator onnx.reference lacks
        logger.debug("no guard for the rows of '%s': %s", seed.name, error)
        return None
    arrays = []
    for value, result in zip(exits, results, strict=True):
        if not isinstance(result, (np.ndarray, np.generic)) or value.dtype is None:
            return None
        array = np.asarray(result)
        if array.dtype != value.dtype.numpy() or not _fits(array.shape, value.shape):
            return None
        arrays.append(array)
    return arrays


def _fits(shape: tuple[int, ...], declared: ir.Shape | None) -> bool:
    if declared is None:
        return True
    if len(declared) != len(shape):
        return False
    return all(not isinstance(d, int) or d == s for d, s in zip(declared, shape, strict=True))


def _place(region: list[ir.Node], exits: list[ir.Value], order: _Order) -> ir.Node | bool | None:
    """The node the If goes before (None: at the end of the graph): the first node outside the
    region that reads one of `exits` (a node of a subgraph reads it where the node holding the
    subgraph runs). False where a value the region reads from outside is made after that
    place."""
    members = set(region)
    readers = {order.reader(use.node) for value in exits for use in value.uses()}
    readers = {node for node in readers if node is not None and node not in members}
    place = min(readers, key=order.position.__getitem__, default=None)
    limit = order.position[place] if place is not None else math.inf
    for node in region:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is None or producer in members:
                continue
            if order.position.get(producer, math.inf) >= limit:
                return False
    return place


def _graph_values(graph: ir.Graph) -> list[ir.Value]:
    found = list(graph.inputs) + list(graph.initializers.values())
    return found + [v for node in graph for v in node.outputs]


def _guard(
    graph: ir.Graph,
    seed: ir.Value,
    region: list[ir.Node],
    exits: list[ir.Value],
    at_zero: list[np.ndarray],
    place: ir.Node | None,
    names: set[str | None],
) -> None:
    base = seed.name or "rows"

    def named(node: ir.Node, hint: str, dtype: ir.DataType, dims: list[int]) -> ir.Value:
        node.name = fresh_name(f"{base}_{hint}", names)
        out = node.outputs[0]
        out.name, out.type, out.shape = node.name, ir.TensorType(dtype), ir.Shape(dims)
        return out

    size = ir.node("Size", [seed])
    named(size, "size", ir.DataType.INT64, [])
    any_row = ir.node("Cast", [size.outputs[0]], {"to": ir.DataType.BOOL})
    named(any_row, "any_row", ir.DataType.BOOL, [])
    for node in region:
        graph.remove(node)
    returned = {}  # the graph outputs among `exits`, by their position: the If's results
    for value in exits:
        if value.is_graph_output():
            index = list(graph.outputs).index(value)
            returned[index] = value
            graph.outputs[index] = seed  # a stand-in until the If's result is made
    then_branch = ir.Graph([], exits, nodes=region, name=fresh_name(f"{base}_rows", names))
    constants = []
    for value, array in zip(exits, at_zero, strict=True):
        const = ir.node("Constant", [], {"value": ir.tensor(array)})
        assert value.dtype is not None
        constants.append(const)
        named(const, "no_row", value.dtype, list(array.shape))
    else_branch = ir.Graph(
        [],
        [c.outputs[0] for c in constants],
        nodes=constants,
        name=fresh_name(f"{base}_none", names),
    )
    guard = ir.node(
        "If",
        [any_row.outputs[0]],
        {"then_branch": then_branch, "else_branch": else_branch},
        num_outputs=len(exits),
    )
    guard.name = fresh_name(f"{base}_if_rows", names)
    if place is None:
        graph.extend([size, any_row, guard])
    else:
        graph.insert_before(place, [size, any_row, guard])
    results = dict(zip(exits, guard.outputs, strict=True))
    for index, value in returned.items():
        graph.outputs[index] = results[value]
    for (value, result), array in zip(results.items(), at_zero, strict=True):
        # as inference joins the two branches' shapes: a dim only where both give it
        result.type, result.shape = value.type, _joined(value.shape, array.shape)
        name = value.name
        value.name = fresh_name(f"{name}_rows", names)
        for use in list(value.uses()):
            if use.node.graph is not then_branch:
                use.node.replace_input_with(use.idx, result)
        result.name = name


def _joined(declared: ir.Shape | None, empty: tuple[int, ...]) -> ir.Shape | None:
    """The shape of an If's result whose then-branch declares `declared` and whose else-branch
    returns a constant of shape `empty`: each dim both give, else unknown (what ONNX inference
    says, so that a second lowering declares the same)."""
    if declared is None or len(declared) != len(empty):
        return None
    return ir.Shape([d if d == e else None for d, e in zip(declared, empty, strict=True)])
