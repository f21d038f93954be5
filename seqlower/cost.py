"""How much work one run of a model is, estimated from the graph: the cost model behind
`--target onnxruntime`'s choice between a region as given and lowered (docs/performance.md,
"Never slower").

The unit is one operator launch: the models seqlower rewrites are dominated by many small ops,
and onnxruntime spends about as long launching a small kernel as running it. Memory traffic is
added in the same unit, `BYTES_PER_LAUNCH` bytes read or written costing one launch:

- every node counts 1, except Constant (folded into an initializer when a session is created),
  the nodes onnxruntime folds into constants when it makes the session (a deterministic tensor
  operator whose inputs are all constants, in a loop body too: TorchScript's
  `Unsqueeze(Constant, Constant)` of slice bounds; a Shape of a static shape), which count 0,
  and nodes that onnxruntime merges as common subexpressions (same operator, attributes and
  inputs in one graph, small constants compared by value): the first counts, the others 0,
  except that a node whose result is used takes the launch from a first one whose results
  reach no output of its graph (dead: onnxruntime runs it, every lowering's cleanup removes
  it), so that a region is not lent a launch, as given, by a node its lowered form no longer
  has (ConvNeXt's `Reshape(x, Shape(x))` of each returned map, its Shape merged into the
  first Shape of the map, read only by shape arithmetic whose result nothing reads);
- an If counts `IF_LAUNCHES` (running a branch is a subgraph call) plus its costlier branch;
- a Loop or Scan body counts once per iteration, plus `ITERATION_LAUNCHES` per iteration for
  moving the carried values (a Loop `LOOP_ITERATION_LAUNCHES` more: measured 0.3 us more than a
  Scan's iteration): the static trip count (a Scan's scanned dim, the static length of the list
  whose SequenceLength a Loop's trip count is, a Loop's carried list included when every
  iteration keeps its length: `seqlower.analysis.static_lengths`; a Scan over Range(start,
  limit, delta) of static scalars, what a Loop of static trip count becomes for onnxruntime), or
  `DYNAMIC_COUNT` when it is known only at run time (`NESTED_DYNAMIC_COUNT` for a loop inside a
  loop body: two nested loops of run-time count are not 256 iterations); `node_costs(...,
  trip_count=SMALL_COUNT)` is the same estimate on small inputs, a loop of run-time count run
  twice (a loop over the images of a batch of two), which `seqlower.speed_first` weighs beside
  it: one guess of the count decides between a form with a fixed cost and one that costs per
  iteration by that guess alone (docs/performance.md, "A loop's trip count");
- a Loop or Scan body that reads a sequence defined outside it (and a SequenceMap, whose expansion
  does) runs every one of its nodes slower in onnxruntime: `OUTER_LIST_LAUNCHES` more per node
  and iteration, counted on the first node that reads one (onnxruntime 1.32, one thread: 30 Adds
  on [4, 4] in a Loop body ran at 0.29 us each beside a SequenceAt of an outer list, 0.19 us
  beside a Gather of an outer tensor, 0.5 launch more; with the folded nodes and the nested
  trip counts above, 0.2 is what the regions' calibration on every set agrees with best
  (docs/performance.md, "The cost model calibrated on every set"); a Loop that carries a list
  instead shows no difference);
- a SequenceMap counts as onnxruntime runs it, as its ONNX function expansion: a Loop whose body
  per element reads each sequence input (SequenceAt), runs the map's body and appends each output
  (SequenceInsert, which copies), after a SequenceLength and a SequenceEmpty per output;
- bytes: a tensor operator reads its inputs and writes its outputs (shape-only operators such as
  Shape, Reshape, Squeeze and Identity move no data); a sequence operator copies what it moves:
  SplitToSequence its input, SequenceAt its element, SequenceConstruct its elements,
  ConcatFromSequence its result twice (read and written); SequenceInsert and SequenceErase copy
  the whole sequence: the elements it already holds on average (half the trip count inside a
  loop), each also one more launch per `COPY_ELEMENTS` elements (a tensor allocated and copied
  per element: the quadratic copying of a list built in a loop); SplitToSequence and
  ConcatFromSequence also count one more launch per `COPY_ELEMENTS` elements they make or read
  (the number of chunks when the split says, else `DYNAMIC_COUNT`). A scan output is written once
  by the body, not copied. Gather, GatherElements, GatherND and Slice read only the part of
  their data they copy: their output, besides their indices. A dim known only at run time counts
  `DYNAMIC_DIM`; a value of unknown shape moves no counted bytes. `DYNAMIC_DIM` is small because
  lowering changes ranks: a list of [?, ?, ?, ?] elements becomes one stacked [?, ?, ?, ?, ?]
  tensor or one flat [?] buffer holding the same bytes, and a per-dim guess of 16 counted the
  same data 16^4 times apart in the two forms.

It is an estimate for choosing between forms of one computation, not a prediction of time;
`python -m bench.calibrate` measures how often it picks the faster form.
"""

from __future__ import annotations

__all__ = [
    "BYTES_PER_LAUNCH",
    "COPY_ELEMENTS",
    "DYNAMIC_COUNT",
    "DYNAMIC_DIM",
    "IF_LAUNCHES",
    "ITERATION_LAUNCHES",
    "LOOP_ITERATION_LAUNCHES",
    "NESTED_DYNAMIC_COUNT",
    "OUTER_LIST_LAUNCHES",
    "SMALL_COUNT",
    "STRING_BYTES",
    "launches",
    "node_costs",
    "node_costs_both",
]

import math
from collections.abc import Callable, Hashable

import onnx_ir as ir

from seqlower.analysis.static_lengths import StaticLengths
from seqlower.analysis.static_values import StaticValues
from seqlower.ops import graph_nodes, graphs_within, is_sequence_value, subgraphs

DYNAMIC_COUNT = 16  # iterations assumed for a loop or a sequence of run-time length
SMALL_COUNT = 2  # the same, on small inputs: a batch of two (`node_costs(trip_count=...)`)
DYNAMIC_DIM = 4  # size assumed for a dim known only at run time (see the module docstring)
BYTES_PER_LAUNCH = 16384  # bytes moved in the time of one small kernel launch (about 0.3 us)
IF_LAUNCHES = 3.0  # an If: the node and its subgraph call (measured: 0.7 to 0.9 us)
ITERATION_LAUNCHES = 0.5  # a Loop iteration: moving the carried values between iterations
LOOP_ITERATION_LAUNCHES = 1.0  # what a Loop's iteration costs more than a Scan's
COPY_ELEMENTS = 8  # list elements copied per launch's worth of work
OUTER_LIST_LAUNCHES = 0.2  # more per node of a loop body that reads a list from outside it
NESTED_DYNAMIC_COUNT = 4  # iterations assumed for a loop of run-time count inside a loop body
STRING_BYTES = 16  # bytes assumed per string element (strings have no fixed width)
_LARGEST_STATIC_COUNT = 2**31 - 1  # larger trip counts are read as "until the condition ends it"
_COPIES_LIST = frozenset({"SequenceInsert", "SequenceErase"})
# operators that only read or rewrite shapes: no data moves (onnxruntime aliases the buffer)
_NO_DATA = frozenset(
    {"Shape", "Size", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Constant"}
)
# operators that copy part of their data input: they read only what they write
_READS_WHAT_IT_WRITES = frozenset({"Gather", "GatherElements", "GatherND", "Slice"})
_NOT_MERGED = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike"})
_NOT_FOLDED = _NOT_MERGED | {"Constant", "Multinomial", "Bernoulli", "Loop", "Scan", "If"}
_SMALL_CONSTANT = 64  # elements: constants up to this size are compared by value


def launches(model: ir.Model, trip_count: float = DYNAMIC_COUNT) -> float:
    """The estimated cost of one run of `model`, in operator launches (`trip_count`: see
    `node_costs`)."""
    return sum(node_costs(model, trip_count=trip_count).values())


def node_costs(
    model: ir.Model,
    counted: Callable[[ir.Node], bool] | None = None,
    trip_count: float = DYNAMIC_COUNT,
) -> dict[ir.Node, float]:
    """Each node's share of `launches(model)`, for every node of every graph: its own cost
    times how often its graph runs (a Loop body node counts once per iteration of every loop
    around it); a node in the branch of an If that is not the costlier one, and a node merged
    into an identical one, count 0.

    With `counted`, for a caller that adds up some nodes' shares only (`regions.region_costs`
    of the regions): a node of the main graph that holds no subgraph and that `counted` turns
    down is not costed and has no share in the result. Every other share is the same: such a
    node is still keyed (a later node may be merged into it, or it into an earlier one), and
    its own cost is read by nothing else (only a body's or a branch's nodes add up into what
    their holder costs).

    `trip_count`: the iterations assumed for a loop, and the elements for a list, whose count
    is known at run time only (`DYNAMIC_COUNT`, or `SMALL_COUNT` for the estimate on small
    inputs, a loop over the images of a batch of two; a loop of run-time count inside
    such a loop runs `NESTED_DYNAMIC_COUNT` times, or `trip_count` if fewer)."""
    return _walk(model, counted, trip_count)[0]


def node_costs_both(
    model: ir.Model, counted: Callable[[ir.Node], bool] | None = None
) -> tuple[dict[ir.Node, float], dict[ir.Node, float]]:
    """`node_costs` with `DYNAMIC_COUNT` and with `SMALL_COUNT`: one walk when no count is
    known at run time only (the two are then the same, and the same dict is returned twice).
    When every count guessed is a list's length read by a node of the main graph that holds no
    subgraph (a SplitToSequence or ConcatFromSequence of run-time length), only those nodes
    are costed again: nothing else a walk does (the merges, the folds, the other nodes' costs)
    reads the count, so a second walk would give every other node the same share."""
    costs, walk = _walk(model, counted, DYNAMIC_COUNT)
    if not walk.guessed[0]:
        return costs, costs
    redo = walk.redo
    if redo is None:
        return costs, _walk(model, counted, SMALL_COUNT)[0]
    small = dict(costs)  # the same nodes in the same order
    walk.dynamic = float(SMALL_COUNT)
    for node, source in redo.items():
        # a main-graph node runs once: its share is its own cost (`_Graph.run`); the analyses
        # it reads hold what they held when the first walk costed it there
        small[node] = walk._own(source, 1.0, 1.0)[0] * 1.0
    return costs, small


def _walk(
    model: ir.Model, counted: Callable[[ir.Node], bool] | None, trip_count: float
) -> tuple[dict[ir.Node, float], _Graph]:
    """The costs of `node_costs`, and the walk of the main graph (`guessed[0]`: whether any of
    them read `trip_count`; `redo`: see `_Graph`)."""
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    costs: dict[ir.Node, float] = {}
    values = StaticValues(opset)
    walk = _Graph(values, StaticLengths(values), costs, {}, set(), _Holders(model))
    walk.dynamic = float(trip_count)
    walk.redo = {}  # the main graph's walk: its guesses may be costed again alone
    walk.run(model.graph, 1.0, 1.0, counted=counted)
    return costs, walk


class _Graph:
    """One walk of a graph and its subgraphs, recording the costs; `alias` maps a value to
    the identical value onnxruntime keeps (common subexpressions), shared with the subgraphs;
    `constant` holds the outputs of the nodes onnxruntime folds (`_folded`)."""

    def __init__(
        self,
        values: StaticValues,
        lengths: StaticLengths,
        costs: dict[ir.Node, float],
        alias: dict[ir.Value, ir.Value],
        constant: set[ir.Value],
        holders: _Holders,
    ) -> None:
        self.values, self.lengths, self.costs, self.alias = values, lengths, costs, alias
        self.holders = holders  # the node holding each subgraph (shared with the subgraphs)
        self.constant = constant  # outputs of the nodes onnxruntime folds, shared with subgraphs
        self.in_run_time_loop = False  # in the body of a loop of run-time count, at any depth
        self.dynamic = float(DYNAMIC_COUNT)  # iterations of a loop of run-time count
        self.guessed = [False]  # whether a cost read `dynamic` (shared with the subgraphs)
        self.guesses = [0]  # how many costs read it (shared with the subgraphs)
        # the main graph's walk (`_walk`): each node whose share is a guessed own cost of a
        # node that holds no subgraph (itself, or the node merged into it), to cost again with
        # another count; None once a guess is read anywhere else (a body, a branch, a loop's
        # count): then only a whole walk gives the other count
        self.redo: dict[ir.Node, ir.Node] | None = None

    def run(
        self,
        graph: ir.Graph,
        iterations: float,
        runs: float,
        body: bool = False,
        counted: Callable[[ir.Node], bool] | None = None,
    ) -> float:
        """Adds the share of every node of `graph` (run `runs` times, `iterations` times in the
        loop holding it; `body` when it is the body of a Loop, Scan or SequenceMap) to the costs;
        returns their sum for one run. `counted`: see `node_costs` (the main graph only; the
        sum returned then leaves out the nodes not costed)."""
        seen: dict[Hashable, ir.Node] = {}
        dead: set[ir.Node] | None = None  # `_dead_nodes(graph)`, once a node is merged
        total = 0.0
        # a key names the node's operator and is looked up in this graph only: a node whose
        # operator no other node of the graph has is merged with none and needs no key (a
        # branch of an If holding a Constant and a SequenceAt: 20,000 keys for 10,000 Ifs,
        # each reading a constant's bytes)
        kinds: dict[str, int] = {}
        for node in graph_nodes(graph):
            kinds[node.op_type] = kinds.get(node.op_type, 0) + 1
        for node in graph_nodes(graph):
            key = self._key(node) if kinds[node.op_type] > 1 else None
            first = seen.get(key) if key is not None else None
            if first is not None:
                for mine, kept in zip(node.outputs, first.outputs, strict=True):
                    self.alias[mine] = self.alias.get(kept, kept)
                if dead is None:  # computed at the graph's first merge only
                    dead = _dead_nodes(graph, self.holders)
                if not (first in dead and node not in dead):
                    self.costs[node] = 0.0
                    continue
                # the launch is charged to a node whose result is used, not to a dead one
                # (which every lowering's cleanup removes): later merges find this one
                seen[key] = node
                if first in self.costs:
                    self.costs[node], self.costs[first] = self.costs[first], 0.0
                    if self.redo is not None and first in self.redo:
                        self.redo[node] = self.redo.pop(first)
                    continue
                # `counted` turned the first down: this node is costed as any other below
            if key is not None:
                seen[key] = node
            skipped = counted is not None and not counted(node) and not subgraphs(node)
            if self._folded(node):  # known to later readers whether costed or not
                self.constant.update(node.outputs)
                if not skipped:
                    self.costs[node] = 0.0
                continue
            if skipped:
                continue
            guesses = self.guesses[0]
            own, inside = self._own(node, iterations, runs)
            self.costs[node] = own * runs
            total += own + inside
            if self.guesses[0] != guesses and self.redo is not None:
                if subgraphs(node):  # a guess in its subgraphs or its trip count
                    self.redo = None
                else:
                    self.redo[node] = node
        readers = (
            [node for node in graph_nodes(graph) if _reads_outer_list(node, graph)] if body else []
        )
        if readers:  # every node of the body runs slower: counted on the first reader
            slowed = sum(1 for node in graph_nodes(graph) if self.costs[node] > 0)
            self.costs[readers[0]] += OUTER_LIST_LAUNCHES * slowed * runs
            total += OUTER_LIST_LAUNCHES * slowed
        return total

    def _folded(self, node: ir.Node) -> bool:
        """Whether onnxruntime folds `node` into a constant when it makes the session: a
        deterministic default-domain tensor operator without subgraphs whose inputs are all
        constants (Constant outputs, initializers that are not graph inputs, in this graph or
        around it, and the outputs of nodes folded before it), or a Shape of a static shape."""
        op = node.op_type
        if node.domain not in ("", "ai.onnx") or op in _NOT_FOLDED or not node.inputs:
            return False
        if op == "Shape":
            if any(is_sequence_value(v) for v in (*node.inputs, *node.outputs)):
                return False
            shape = node.inputs[0].shape if node.inputs[0] is not None else None
            return shape is not None and all(isinstance(d, int) for d in shape)
        # the inputs first: most nodes read a value computed at run time, found at once (the
        # two conditions are both required, so the order changes no answer)
        alias = self.alias
        for value in node.inputs:
            if value is None or alias.get(value, value) in self.constant:
                continue
            producer = value.producer()
            if producer is not None:
                if producer.op_type == "Constant" and producer.domain in ("", "ai.onnx"):
                    continue
                return False
            if not (value.is_initializer() and not value.is_graph_input()):
                return False
        return not any(is_sequence_value(v) for v in (*node.inputs, *node.outputs))

    def _key(self, node: ir.Node) -> Hashable | None:
        """What makes `node` identical to another for onnxruntime's common subexpression
        elimination, or None when it is never merged."""
        if node.domain not in ("", "ai.onnx") or node.op_type in _NOT_MERGED or not node.outputs:
            return None
        attributes = []
        data = node.attributes.data
        for name, attr in sorted(data.items()) if data else ():  # most nodes have none
            if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
                return None
            if attr.type == ir.AttributeType.TENSOR:
                # its value: `as_tensor()` checks it against a Protocol, slow on every constant
                tensor = attr.value
                if math.prod(tensor.shape.numpy()) > _SMALL_CONSTANT:
                    return None
                if tensor.dtype == ir.DataType.STRING:
                    contents: Hashable = tuple(tensor.string_data())  # type: ignore[attr-defined]
                else:
                    contents = tensor.tobytes()
                value: Hashable = (str(tensor.dtype), tuple(tensor.shape.numpy()), contents)
            elif isinstance(attr.value, list | tuple):
                value = tuple(attr.value)
            else:
                value = attr.value if isinstance(attr.value, Hashable) else str(attr.value)
            attributes.append((name, value))
        alias = self.alias
        if alias:
            inputs = tuple(id(alias.get(v, v)) if v is not None else None for v in node.inputs)
        else:  # no merged node yet (most graphs): no lookup
            inputs = tuple(id(v) if v is not None else None for v in node.inputs)
        return (node.op_type, node.overload, inputs, tuple(attributes), len(node.outputs))

    def _own(self, node: ir.Node, iterations: float, runs: float) -> tuple[float, float]:
        """(the node's own cost, that of its subgraphs) for one run of `node`."""
        if node.domain not in ("", "ai.onnx"):
            return 1.0, 0.0
        op = node.op_type
        if op == "Constant":
            return 0.0, 0.0
        dynamic = self.dynamic
        moved = _bytes_moved(node, iterations, self.values, self.lengths, dynamic)
        moved /= BYTES_PER_LAUNCH
        if op in _COPIES_LIST:
            return 1.0 + (iterations / 2) / COPY_ELEMENTS + moved, 0.0
        if op in ("SplitToSequence", "ConcatFromSequence"):
            elements = _elements(node, self.values, self.lengths, dynamic)
            if elements == dynamic:  # or a static count equal to it: read as a guess
                self.guessed[0] = True
                self.guesses[0] += 1
            return 1.0 + elements / COPY_ELEMENTS + moved, 0.0
        if op == "If":
            branches = []
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    shares: dict[ir.Node, float] = {}
                    walk = _Graph(
                        self.values,
                        self.lengths,
                        shares,
                        dict(self.alias),
                        self.constant,
                        self.holders,
                    )
                    walk.in_run_time_loop, walk.dynamic = self.in_run_time_loop, dynamic
                    walk.guessed, walk.guesses = self.guessed, self.guesses
                    branches.append((walk.run(attr.as_graph(), iterations, runs), shares))
            if not branches:
                return IF_LAUNCHES, 0.0
            costliest = max(total for total, _ in branches)
            chosen = next(i for i, (total, _) in enumerate(branches) if total == costliest)
            for index, (_, shares) in enumerate(branches):
                self.costs.update(shares if index == chosen else dict.fromkeys(shares, 0.0))
            return IF_LAUNCHES, costliest
        if op in ("Loop", "Scan", "SequenceMap"):
            static = _static_count(node, self.values, self.lengths)
            count = dynamic if static is None else static
            if static is None:
                self.guessed[0] = True
                self.guesses[0] += 1
            if static is None and self.in_run_time_loop and op != "SequenceMap":
                # two nested loops of run-time count: not 16 x 16
                count = min(float(NESTED_DYNAMIC_COUNT), dynamic)
            body = node.attributes.get("body")
            if body is None or body.type != ir.AttributeType.GRAPH:
                return 1.0, 0.0
            self.lengths.register(node)
            walk = _Graph(
                self.values, self.lengths, self.costs, dict(self.alias), self.constant, self.holders
            )
            walk.in_run_time_loop = self.in_run_time_loop or static is None
            walk.dynamic = dynamic
            walk.guessed, walk.guesses = self.guessed, self.guesses
            per_iteration = walk.run(body.as_graph(), count, runs * count, body=True)
            if op == "SequenceMap":  # its expansion's body reads the lists from outside
                graph = body.as_graph()
                slowed = sum(1 for inner in graph_nodes(graph) if self.costs[inner] > 0)
                slowed += sum(1 for v in node.inputs if is_sequence_value(v)) + len(node.outputs)
                outer = OUTER_LIST_LAUNCHES * slowed * count
                return _sequence_map(node, count) + moved + outer, count * per_iteration
            step = ITERATION_LAUNCHES + (LOOP_ITERATION_LAUNCHES if op == "Loop" else 0.0)
            return 1.0 + count * step, count * per_iteration
        return 1.0 + moved, 0.0


def _dead_nodes(graph: ir.Graph, holders: _Holders) -> set[ir.Node]:
    """The nodes of `graph` whose results reach none of its outputs (onnxruntime runs them;
    seqlower's cleanup removes them). A result read inside a subgraph is used when the node
    of `graph` holding that subgraph is."""
    dead: set[ir.Node] = set()
    for node in reversed(list(graph_nodes(graph))):
        used = not node.outputs
        for value in node.outputs:
            if value.is_graph_output():
                used = True
                break
            for reader in value.consumers():
                if reader.graph is not graph:  # in a subgraph: its holder here
                    reader = holders.top(reader, graph)
                if reader not in dead:
                    used = True
                    break
            if used:
                break
        if not used:
            dead.add(node)
    return dead


class _Holders:
    """The node holding each subgraph of a model, mapped once, when first asked."""

    def __init__(self, model: ir.Model) -> None:
        self.model = model
        self.of: dict[int, ir.Node] | None = None

    def top(self, node: ir.Node, graph: ir.Graph) -> ir.Node | None:
        """The node of `graph` that is `node` or holds it (in a subgraph at any depth), or
        None when `node` is not within `graph`."""
        while node.graph is not graph:
            if self.of is None:
                self.of = {}
                roots = [self.model.graph, *(f.graph for f in self.model.functions.values())]
                for root in roots:
                    for inner in graphs_within(root):
                        for holder in graph_nodes(inner):
                            if holder.attributes.data:
                                for subgraph in subgraphs(holder):
                                    self.of.setdefault(id(subgraph), holder)
            holder = self.of.get(id(node.graph)) if node.graph is not None else None
            if holder is None:
                return None
            node = holder
        return node


def _reads_outer_list(node: ir.Node, graph: ir.Graph) -> bool:
    """Whether `node` reads a sequence value defined outside `graph`."""
    return any(
        value is not None and is_sequence_value(value) and value.graph is not graph
        for value in node.inputs
    )


def _bytes_moved(
    node: ir.Node,
    iterations: float,
    values: StaticValues,
    lengths: StaticLengths,
    dynamic: float = DYNAMIC_COUNT,
) -> float:
    """The bytes `node` reads and writes (see the module docstring; `dynamic`: the count of a
    SequenceMap over a list of run-time length)."""
    op = node.op_type
    if op in _NO_DATA or op in ("If", "Loop", "Scan", "SequenceLength", "SequenceEmpty"):
        return 0.0
    if op == "SequenceMap":  # each element read in (SequenceAt) and appended (SequenceInsert)
        count = _count(node, values, lengths, dynamic)
        reads = sum(2 * _bytes(v) for v in node.inputs if is_sequence_value(v))
        appends = sum(2 * _bytes(v) * (count / 2 + 1) for v in node.outputs)
        return count * (reads + appends)
    if op in _COPIES_LIST:
        element = _bytes(node.inputs[1] if op == "SequenceInsert" else node.inputs[0])
        return 2 * element * (iterations / 2 + 1)
    if op == "ConcatFromSequence":
        return 2 * sum(_bytes(v) for v in node.outputs)
    if op in ("SplitToSequence", "SequenceConstruct"):  # reads its inputs, copies them in
        return 2 * sum(_bytes(v) for v in node.inputs if v is not None)
    if op in _READS_WHAT_IT_WRITES:  # the rows or slice it copies, and its indices
        return 2 * _bytes(node.outputs[0]) + sum(_bytes(v) for v in node.inputs[1:])
    total = 0  # summed in the order of a plain sum(): the same float
    for value in (*node.inputs, *node.outputs):
        if value is not None and not is_sequence_value(value):
            total += _tensor_bytes(value)  # asked once: a tensor, or of no type
    return total


def _elements(
    node: ir.Node, values: StaticValues, lengths: StaticLengths, dynamic: float = DYNAMIC_COUNT
) -> float:
    """How many tensors a SplitToSequence makes or a ConcatFromSequence reads (`dynamic`
    when the length is not static)."""
    data = node.inputs[0] if node.inputs else None
    if node.op_type == "ConcatFromSequence":
        length = lengths.of(data)
        return dynamic if length is None else float(length)
    if node.op_type != "SplitToSequence" or data is None or data.shape is None:
        return dynamic
    axis = node.attributes.get_int("axis", 0) % max(len(data.shape), 1)
    dim = data.shape[axis] if len(data.shape) > axis else None
    split = node.inputs[1] if len(node.inputs) > 1 else None
    if split is not None:
        if split.shape is not None and len(split.shape) == 1:
            length = split.shape[0]
            return float(length) if isinstance(length, int) else dynamic
        size = values.get_int(split)
        if isinstance(dim, int) and size:
            return float(-(-dim // size))
        return dynamic
    return float(dim) if isinstance(dim, int) else dynamic


def _bytes(value: ir.Value | None) -> float:
    """The bytes of a tensor value, or of one element of a sequence value (0 if unknown)."""
    if value is None or value.shape is None:
        return 0.0
    if not is_sequence_value(value):
        return _tensor_bytes(value)
    return _size_bytes(value.shape, _element_dtype(value))


def _tensor_bytes(value: ir.Value) -> float:
    """`_bytes` of a value known not to be a sequence."""
    shape = value.shape
    return 0.0 if shape is None else _size_bytes(shape, value.dtype)


def _size_bytes(shape: ir.Shape, dtype: ir.DataType | None) -> float:
    if dtype is None:
        return 0.0
    size = 1.0
    for dim in shape:
        size *= dim if isinstance(dim, int) else DYNAMIC_DIM
    itemsize = _ITEMSIZES.get(dtype)
    return size * (itemsize if itemsize is not None else _itemsize(dtype))


def _itemsize(dtype: ir.DataType) -> float:
    """Bytes per element: a string counts `STRING_BYTES` (it has no fixed width); sub-byte
    types count a whole byte."""
    if dtype == ir.DataType.STRING:
        return STRING_BYTES
    try:
        return max(dtype.itemsize, 1)
    except TypeError:  # a type without a fixed width
        return STRING_BYTES


def _length_read(value: ir.Value, lengths: StaticLengths) -> int | None:
    """The static length a trip count reads: SequenceLength(s), possibly through a Cast."""
    node = value.producer()
    while node is not None and node.op_type in ("Cast", "Identity") and node.inputs:
        source = node.inputs[0]
        node = source.producer() if source is not None else None
    if node is None or node.op_type != "SequenceLength" or not node.inputs:
        return None
    return lengths.of(node.inputs[0])


_ITEMSIZES = {dtype: _itemsize(dtype) for dtype in ir.DataType}  # read once per value


def _element_dtype(value: ir.Value) -> ir.DataType | None:
    element = getattr(value.type, "elem_type", None)
    return getattr(element, "dtype", None)


def _sequence_map(node: ir.Node, count: float) -> float:
    """A SequenceMap's own launches as its function expansion, its body apart (see the module
    docstring)."""
    reads = sum(1 for value in node.inputs if value is not None and is_sequence_value(value))
    appends = len(node.outputs) * (1.0 + (count / 2) / COPY_ELEMENTS)
    setup = 1.0 + len(node.outputs)  # SequenceLength, SequenceEmpty per output
    step = ITERATION_LAUNCHES + LOOP_ITERATION_LAUNCHES
    return setup + 1.0 + count * (reads + appends + step)


def _count(
    node: ir.Node, values: StaticValues, lengths: StaticLengths, dynamic: float = DYNAMIC_COUNT
) -> float:
    """How many times the body of a Loop, Scan or SequenceMap runs (`dynamic` when it is known
    at run time only)."""
    count = _static_count(node, values, lengths)
    return dynamic if count is None else count


def _static_count(node: ir.Node, values: StaticValues, lengths: StaticLengths) -> float | None:
    """How many times the body of a Loop, Scan or SequenceMap runs, when that is static: a
    Loop's static trip count or the static length of the list whose SequenceLength it is, a
    Scan's static scanned dim, a SequenceMap's static list length; else None."""
    first = node.inputs[0] if node.inputs else None
    if node.op_type == "Loop" and first is not None:
        count = values.get_int(first)
        if count is None:
            count = _length_read(first, lengths)
        # a `while` loop has the largest int64 as its trip count: its condition ends it
        if count is not None and count <= _LARGEST_STATIC_COUNT:
            return float(max(count, 0))
        return None
    if node.op_type == "SequenceMap":
        length = lengths.of(first)
        return None if length is None else float(length)
    if node.op_type == "Scan":
        scanned = node.inputs[-1] if node.inputs else None
        shape = scanned.shape if scanned is not None else None
        axes = node.attributes.get_ints("scan_input_axes", [0])
        axis = axes[-1] if axes else 0
        if shape is not None and -len(shape) <= axis < len(shape):
            dim = shape[axis]
            if isinstance(dim, int):
                return float(dim)
        length = _range_length(scanned, values)
        if length is not None:
            return float(length)
    return None


def _range_length(value: ir.Value | None, values: StaticValues) -> int | None:
    """The length of `value` when it is Range(start, limit, delta) of static scalars (a Scan
    over iteration numbers), else None."""
    node = value.producer() if value is not None else None
    if node is None or node.op_type != "Range" or node.domain not in ("", "ai.onnx"):
        return None
    bounds = [values.get(operand) for operand in node.inputs]
    if len(bounds) != 3 or any(b is None or b.size != 1 for b in bounds):
        return None
    start, limit, delta = (float(b.reshape(())) for b in bounds)  # type: ignore[union-attr]
    if delta == 0:
        return None
    return max(math.ceil((limit - start) / delta), 0)
