"""Cheaper Loops for onnxruntime: run after lowering, with `--target onnxruntime` only.

    Loop(M, true, v.., body: f(v.., Gather(x, i, axis=a)))      (M = dim a of x, static > 0)
        -> Scan(v.., x, scan_input_axes=[a], body: f(v.., x_i))
    Loop(M, true, v.., body: f(i, v..))                 (M static > 0, the body never ends it)
        -> Scan(v.., Range(0, M, 1), body: f(v.., i))
    Loop(M, true, v.., body: ..; cond_out = Identity(true))   (any other Loop)
        -> Loop(M, true, v.., body: ..; cond_out = cond_in)

Measured with onnxruntime 1.32 (CPU, one thread): an iteration of a Loop costs about 0.3 us
more than one of a Scan, besides the Gather that reads row i (a Scan slices its input for the
body); the Identity that makes a Loop body's condition costs about 0.25 us per iteration.

- A Scan over an empty axis fails in onnxruntime (1.20 to 1.32: "Invalid dim0_offset of 0"),
  where the Loop runs zero times, so only a trip count known to be positive makes a Scan. An If
  that ran the Loop when the count is 0 costs about 1.9 us a run, what about three iterations
  of a small body save: the loops of the exports measured run a few times, and were slower so.
- onnxruntime (1.20 to 1.32) returns wrong values from a Scan whose body returns one of its
  inputs as an output, or one value as two outputs (the state and the scan output of
  `h = f(h); outs.append(h)`): each such output is returned as a copy (Identity), which a Loop
  body does not need.
- Each Scan state must keep its shape from one iteration to the next (a list grown by Concat
  stays a Loop), and the rank of every body output must be known.
- OpenVINO (2026.4) cannot convert a Loop body whose condition output is its condition input
  ("canonical inputs size ... does not match"): the other targets keep the Identity, and only
  `--target onnxruntime` runs this pass.
"""

from __future__ import annotations

__all__ = ["LoopConditionPass", "LoopsToScansPass"]

import dataclasses

import numpy as np
import onnx_ir as ir

from seqlower.analysis import Facts
from seqlower.analysis.loop_shapes import LoopShapes
from seqlower.analysis.scan_forms import (
    WalkedTensor,
    always_continues,
    condition_chain,
    give_ranks,
    static_bool,
    unknown_output_rank,
    walked_tensor,
)
from seqlower.ops import is_sequence_op, is_sequence_value, iter_all_graphs
from seqlower.rewriter import Builder, Rewriter

MAX_STATIC_COUNT = 2**31 - 1  # a larger static trip count is a `while` loop's "no limit"


@dataclasses.dataclass(frozen=True)
class _ScanPlan:
    walked: WalkedTensor | None  # the rows the body reads, or None: a Scan over Range(0, M)
    condition: ir.Node | None  # the Identity that makes the body's condition, removed with it


class LoopConditionPass(ir.passes.InPlacePass):
    """Each Loop body that makes its always-true condition output returns its condition input
    instead. Runs before lowering (so that the estimates of both forms of a region see it);
    after the pass, `bodies` are the bodies it changed (`still_loops` counts those that a
    Loop of the lowered model still holds)."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[ir.Graph] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        facts = Facts(model)
        self.bodies = [
            loop.attributes["body"].as_graph()
            for loop in _loops(model)
            if _return_condition_input(loop, facts)
        ]
        return ir.passes.PassResult(model, bool(self.bodies))

    def still_loops(self, model: ir.Model) -> int:
        """How many of the changed bodies are the body of a Loop of `model`."""
        changed = {id(body) for body in self.bodies}
        return sum(id(loop.attributes["body"].as_graph()) in changed for loop in _loops(model))


class LoopsToScansPass(ir.passes.InPlacePass):
    """Each Loop over a static, positive number of iterations that its body never ends, and
    whose tensors keep their shapes, becomes a Scan. Runs after lowering; after the pass,
    `count` says how many, and `made` maps every node it made to the Loop it came from."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.made: dict[ir.Node, ir.Node] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.count = 0
        self.made = {}
        facts = Facts(model)
        rewriter = Rewriter(model)
        for loop in _loops(model):  # outer loops first; a Scan's body is walked still
            plan = _scan_plan(loop, facts)
            if plan is not None:
                self._to_scan(loop, plan, rewriter)
                self.count += 1
        return ir.passes.PassResult(model, self.count > 0)

    def _to_scan(self, loop: ir.Node, plan: _ScanPlan, rewriter: Rewriter) -> None:
        graph = loop.graph
        assert isinstance(graph, ir.Graph)
        outputs = _scan(rewriter.before(loop), loop, plan)
        for old, new in zip(loop.outputs, outputs):
            new.type, new.shape = old.type, old.shape
            rewriter.replace(old, new)
        made, _ = rewriter.take_touched()
        for node in made:
            if node is not loop:
                self.made[node] = loop
        graph.remove(loop, safe=True)


def _loops(model: ir.Model) -> list[ir.Node]:
    """Every Loop of the model, outer ones first."""
    return [
        node
        for graph in iter_all_graphs(model)
        for node in graph
        if node.op_type == "Loop" and node.domain == ""
    ]


def _scan_plan(loop: ir.Node, facts: Facts) -> _ScanPlan | None:
    """How `loop` becomes a Scan, or None when it cannot (see the module docstring)."""
    body = loop.attributes["body"].as_graph()
    trip = loop.inputs[0] if loop.inputs else None
    if trip is None or not _always_runs_through(loop, body, facts):
        return None
    if any(is_sequence_value(v) for v in (*loop.inputs, *loop.outputs)):
        return None
    if any(is_sequence_op(node) for node in body.all_nodes()):
        return None  # a region kept as given: its sequence operators stay where they are
    cond_in = body.inputs[1]
    if body.outputs[0] is cond_in:  # returned as it came (`LoopConditionPass`)
        chain = None if not cond_in.uses() and body.outputs.count(cond_in) == 1 else "read"
    else:
        chain = condition_chain(body)
    if isinstance(chain, str) or unknown_output_rank(body):
        return None
    kept = set(LoopShapes(loop, facts.values, memo=facts.loops).invariant_carried())
    if any(value not in kept for value in body.inputs[2:]):
        return None  # a Scan's state keeps one shape
    walked = walked_tensor(loop, body, facts.values)
    walked = walked if isinstance(walked, WalkedTensor) else None
    count = facts.static_int(trip)
    if walked is not None and count is None:
        shape = walked.data.shape
        dim = shape[walked.axis] if shape is not None else None
        count = dim if isinstance(dim, int) else None
    if count is None or not 0 < count <= MAX_STATIC_COUNT:
        return None  # may run zero times, or a loop only its condition could end
    return _ScanPlan(walked, chain)


def _always_runs_through(loop: ir.Node, body: ir.Graph, facts: Facts) -> bool:
    """True when the loop's condition is true to begin with and the body keeps it true."""
    condition = loop.inputs[1] if len(loop.inputs) > 1 else None
    return static_bool(condition, facts.values) is True and always_continues(body, facts.values)


def _scan(builder: Builder, loop: ir.Node, plan: _ScanPlan) -> list[ir.Value]:
    """Emit the Scan `plan` makes of `loop` (whose body it takes) through `builder`."""
    body = loop.attributes["body"].as_graph()
    give_ranks(body)
    names = builder.rewriter.names
    trip = loop.inputs[0]
    assert trip is not None
    body.outputs.pop(0)
    if plan.condition is not None:
        body.remove(plan.condition, safe=True)
    iteration = body.inputs[0]
    attributes: dict[str, object] = {"num_scan_inputs": 1}
    if plan.walked is not None:
        data, axis = plan.walked.data, plan.walked.axis
        dims = list(data.shape or [])
        element = ir.Value(
            name=names.fresh(f"{data.name}_row"),
            type=data.type,
            shape=ir.Shape(dims[:axis] + dims[axis + 1 :]),
        )
        for gather in plan.walked.gathers:
            gather.outputs[0].replace_all_uses_with(element, replace_graph_outputs=True)
            body.remove(gather, safe=True)
        scanned = data
        if axis:
            attributes["scan_input_axes"] = [axis]
    else:
        if trip.shape is None or len(trip.shape) != 0:
            trip = builder.op("Reshape", [trip, builder.ints([], "scalar_shape")])
        zero = builder.constant(np.array(0, np.int64), "zero")
        one = builder.constant(np.array(1, np.int64), "one")
        scanned = builder.op("Range", [zero, trip, one], name="iterations")
        scanned.type, scanned.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([None])
        element = iteration
        element.type, element.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
    del body.inputs[:2]
    body.inputs.append(element)
    _copy_shared_outputs(body, names)
    attributes["body"] = body
    states = loop.inputs[2:]
    return builder.ops("Scan", [*states, scanned], attributes, num_outputs=len(loop.outputs))


def _copy_shared_outputs(body: ir.Graph, names) -> None:  # type: ignore[no-untyped-def]
    """Return as a copy each body output that is a body input, an outer value, or an output
    already returned (onnxruntime computes such Scan outputs wrong: see the module docstring)."""
    seen: set[int] = set()
    for index, value in enumerate(body.outputs):
        producer = value.producer()
        if producer is not None and producer.graph is body and id(value) not in seen:
            seen.add(id(value))
            continue
        copy = ir.Node("", "Identity", [value], name=names.fresh(f"{value.name}_copy"))
        copy.outputs[0].name = names.fresh(f"{value.name}_copy")
        copy.outputs[0].type, copy.outputs[0].shape = value.type, value.shape
        body.append(copy)
        body.outputs[index] = copy.outputs[0]
        seen.add(id(copy.outputs[0]))


def _return_condition_input(loop: ir.Node, facts: Facts) -> bool:
    """Loop(M, true, .., body: ..; cond_out = Identity(true or cond_in)) -> the body returns
    its condition input, which stays true. Returns whether it did."""
    body = loop.attributes["body"].as_graph()
    cond_in, cond_out = body.inputs[1], body.outputs[0]
    if cond_out is cond_in or not _always_runs_through(loop, body, facts):
        return False
    body.outputs[0] = cond_in
    producer = cond_out.producer()
    if producer is not None and producer.graph is body and _unused(producer):
        body.remove(producer, safe=True)
    return True


def _unused(node: ir.Node) -> bool:
    return not any(value.uses() or value.is_graph_output() for value in node.outputs)
