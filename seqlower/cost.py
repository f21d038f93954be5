"""How much work one run of a model is, estimated from the graph: the cost model behind "lowering
never makes a model slower" (README, "Never slower").

The unit is one operator launch. The models seqlower rewrites are dominated by many small ops
(onnxruntime spends about as long launching a small kernel as running it), so:

- every node counts 1, except Constant (folded into an initializer when a session is created);
- a Loop or Scan body counts once per iteration: the static trip count, or `DYNAMIC_COUNT` when it
  is known only at run time;
- a SequenceMap counts as onnxruntime runs it, as its ONNX function expansion: a Loop whose body
  per element reads each sequence input (SequenceAt), runs the map's body and appends each output
  (SequenceInsert, which copies), after a SequenceLength and a SequenceEmpty per output;
- an If counts its costlier branch;
- an op that copies a whole sequence (SequenceInsert, SequenceErase, SequenceMap's output
  building) in a Loop body counts one more launch per `COPY_ELEMENTS` elements the sequence
  already holds on average (half the trip count): the quadratic copying of a list built in a
  loop.

It is an estimate for choosing between forms of one computation, not a prediction of time.
"""

from __future__ import annotations

__all__ = ["COPY_ELEMENTS", "DYNAMIC_COUNT", "launches", "node_costs"]

import onnx_ir as ir

from seqlower.analysis.static_values import StaticValues
from seqlower.ops import is_sequence_value

DYNAMIC_COUNT = 16  # iterations assumed for a loop or a sequence of run-time length
COPY_ELEMENTS = 8  # list elements copied per launch's worth of work
_LARGEST_STATIC_COUNT = 2**31 - 1  # larger trip counts are read as "until the condition ends it"
_COPIES_LIST = frozenset({"SequenceInsert", "SequenceErase"})


def launches(model: ir.Model) -> float:
    """The estimated operator launches of one run of `model`."""
    return sum(node_costs(model).values())


def node_costs(model: ir.Model) -> dict[ir.Node, float]:
    """Each node's share of `launches(model)`, for every node of every graph: its own launches
    times how often its graph runs (a Loop body node counts once per iteration of every loop
    around it); a node in the branch of an If that is not the costlier one counts 0."""
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    costs: dict[ir.Node, float] = {}
    _graph(model.graph, StaticValues(opset), 1.0, 1.0, costs)
    return costs


def _graph(
    graph: ir.Graph, values: StaticValues, iterations: float, runs: float, costs: dict
) -> float:
    """Adds the share of every node of `graph` (run `runs` times, `iterations` times in the
    loop holding it) to `costs`; returns their sum for one run."""
    total = 0.0
    for node in graph:
        total += _node(node, values, iterations, runs, costs)
    return total


def _node(
    node: ir.Node, values: StaticValues, iterations: float, runs: float, costs: dict
) -> float:
    """The launches of one run of `node`, its subgraphs included; records its own share."""
    own, inside = _own(node, values, iterations, runs, costs)
    costs[node] = own * runs
    return own + inside


def _own(
    node: ir.Node, values: StaticValues, iterations: float, runs: float, costs: dict
) -> tuple[float, float]:
    """(the node's own launches, those of its subgraphs) for one run of `node`."""
    if node.domain not in ("", "ai.onnx"):
        return 1.0, 0.0
    op = node.op_type
    if op == "Constant":
        return 0.0, 0.0
    if op in _COPIES_LIST:
        return 1.0 + (iterations / 2) / COPY_ELEMENTS, 0.0
    if op == "If":
        branches = []
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                shares: dict[ir.Node, float] = {}
                branches.append((_graph(attr.as_graph(), values, iterations, runs, shares), shares))
        if not branches:
            return 1.0, 0.0
        costliest = max(total for total, _ in branches)
        chosen = next(index for index, (total, _) in enumerate(branches) if total == costliest)
        for index, (_, shares) in enumerate(branches):
            costs.update(shares if index == chosen else dict.fromkeys(shares, 0.0))
        return 1.0, costliest
    if op in ("Loop", "Scan", "SequenceMap"):
        count = _count(node, values)
        body = node.attributes.get("body")
        if body is None or body.type != ir.AttributeType.GRAPH:
            return 1.0, 0.0
        per_iteration = _graph(body.as_graph(), values, count, runs * count, costs)
        if op == "SequenceMap":
            return _sequence_map(node, count), count * per_iteration
        return 1.0, count * per_iteration
    return 1.0, 0.0


def _sequence_map(node: ir.Node, count: float) -> float:
    """A SequenceMap's own launches as its function expansion, its body apart (see the module
    docstring)."""
    reads = sum(1 for value in node.inputs if value is not None and is_sequence_value(value))
    appends = len(node.outputs) * (1.0 + (count / 2) / COPY_ELEMENTS)
    setup = 1.0 + len(node.outputs)  # SequenceLength, SequenceEmpty per output
    return setup + 1.0 + count * (reads + appends)


def _count(node: ir.Node, values: StaticValues) -> float:
    """How many times the body of a Loop, Scan or SequenceMap runs."""
    first = node.inputs[0] if node.inputs else None
    if node.op_type == "Loop" and first is not None:
        count = values.get_int(first)
        # a `while` loop has the largest int64 as its trip count: its condition ends it
        if count is not None and count <= _LARGEST_STATIC_COUNT:
            return float(max(count, 0))
        return DYNAMIC_COUNT
    if node.op_type == "Scan":
        scanned = node.inputs[-1] if node.inputs else None
        shape = scanned.shape if scanned is not None else None
        if shape is not None and len(shape) > 0 and isinstance(shape[0], int):
            return float(shape[0])
    return DYNAMIC_COUNT
